"""The hospital-marl command, run as users run it (a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hospital_marl", *args], capture_output=True, text=True, timeout=300
    )


def test_evaluate__prints_the_json_report_and_writes_it(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    run = cli(
        "--quiet",
        "evaluate",
        "--agent",
        "heuristic",
        "--episodes",
        "1",
        "--scenarios",
        "night_shift",
        "--output",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report == json.loads(out.read_text())
    assert report["track"] == "flat" and list(report["scenario_scores"]) == ["night_shift"]


def test_evaluate__team_track() -> None:
    run = cli(
        "-q",
        "evaluate",
        "--agent",
        "team_heuristic",
        "--track",
        "team",
        "--episodes",
        "1",
        "--scenarios",
        "surge",
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["track"] == "team"


def test_compare__prints_the_scoreboard_and_per_scenario_table() -> None:
    run = cli(
        "compare", "--agents", "random", "heuristic", "--episodes", "1", "--scenarios", "surge", "night_shift"
    )
    assert run.returncode == 0, run.stderr
    for text in ("agent comparison", "overall", "survival", "random", "heuristic", "night_shift", "█"):
        assert text in run.stdout


def test_compare__markdown_is_machine_readable() -> None:
    run = cli("-q", "compare", "--agents", "masked_random", "--episodes", "1", "--markdown")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("| agent | overall |")


def test_demo__plays_an_episode_with_frames() -> None:
    run = cli("demo", "--agent", "heuristic", "--scenario", "night_shift")
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("HOSPITAL ED") == 101
    assert '"score"' in run.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("evaluate", "--agent", "nope"), "unknown policy 'nope'; valid names: "),
        (("compare", "--scenarios", "bogus"), "unknown scenario 'bogus'; valid names: normal_day"),
        (("demo", "--scenario", "bogus"), "unknown scenario 'bogus'"),
        (("evaluate", "--agent", "team_heuristic"), "plays the team track, not 'flat'"),
    ],
)
def test_cli__unknown_names_fail_with_the_valid_ones_listed(args: tuple[str, ...], message: str) -> None:
    run = cli(*args)
    assert run.returncode == 2
    assert message in run.stderr


def test_cli__rejects_a_negative_seed() -> None:
    run = cli("evaluate", "--agent", "heuristic", "--seed", "-1")
    assert run.returncode == 2
    assert "must be >= 0" in run.stderr
