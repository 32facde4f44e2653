"""``hospital-marl evaluate/compare --env radiotherapy``, run as users run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hospital_marl", *args], capture_output=True, text=True, timeout=300
    )


def test_evaluate__radiotherapy_report_with_spec_defaults(tmp_path: Path) -> None:
    out = tmp_path / "rt.json"
    run = cli("-q", "evaluate", "--env", "radiotherapy", "--agent", "six_full", "--tasks", "prostate",
              "--episodes", "2", "--output", str(out))  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report == json.loads(out.read_text())
    assert report["env"] == "radiotherapy" and report["seed"] == 42 and list(report["tasks"]) == ["prostate"]


def test_compare__radiotherapy_markdown_scoreboard() -> None:
    run = cli("-q", "compare", "--env", "radiotherapy", "--agents", "random", "evenly_spaced",
              "--episodes", "1", "--markdown")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert (
        "| random |" in run.stdout
        and "| evenly_spaced |" in run.stdout
        and "head_neck/parotid_l" in run.stdout
    )


def test_cli__unknown_rt_agent_or_task_is_a_one_line_error() -> None:
    run = cli("-q", "evaluate", "--env", "radiotherapy", "--agent", "nope", "--episodes", "1")
    assert run.returncode == 2 and "unknown radiotherapy agent 'nope'" in run.stderr
    run = cli("-q", "evaluate", "--env", "radiotherapy", "--agent", "random", "--tasks", "lung")
    assert run.returncode == 2 and "unknown task 'lung'" in run.stderr
