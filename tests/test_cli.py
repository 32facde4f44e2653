"""The hospital-marl command, run as users run it (a subprocess). The one-line error checks run
``main()`` in this process (:func:`in_process`): ``python -m hospital_marl`` exits with what
``main()`` returns or raises, and a process start (~3 s) per error message bought nothing more."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hospital_marl", *args], capture_output=True, text=True, timeout=300
    )


def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    """``hospital-marl *args`` through ``main()`` here: its status (argparse's exit included) and output."""
    from hospital_marl_cli import main

    try:
        status = main(list(args))
    except SystemExit as exc:  # argparse's usage errors
        status = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["hospital-marl", *args], status, out.out, out.err)


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
def test_cli__unknown_names_fail_with_the_valid_ones_listed(
    args: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = in_process(capsys, *args)
    assert run.returncode == 2
    assert message in run.stderr


def test_cli__rejects_a_negative_seed() -> None:
    run = cli("evaluate", "--agent", "heuristic", "--seed", "-1")
    assert run.returncode == 2
    assert "argument --seed: expected an integer >= 0, got '-1'" in run.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("evaluate", "--agent", "heuristic", "--episodes", "two"), "argument --episodes: expected a posi"),
        (("evaluate", "--agent", "heuristic", "--episodes", "0"), "argument --episodes: expected a posi"),
        (("demo", "--delay", "-1"), "argument --delay: expected a number of seconds >= 0, got '-1'"),
        (("train", "ppo", "--timesteps", "lots"), "argument --timesteps: expected an int, got 'lots'"),
    ],
)
def test_cli__a_bad_value_names_its_flag_and_what_was_expected(
    args: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = in_process(capsys, *args)
    assert run.returncode == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr


def _one_line_error(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hospital-marl: error: "), run.stderr
    return lines[0]


def test_evaluate__a_missing_path_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _one_line_error(in_process(capsys, "evaluate", "--agent", str(tmp_path / "runs" / "nothing_here")))
    assert "no policy file or run directory" in line and "nothing_here" in line


def test_evaluate__a_directory_without_a_model_says_what_was_looked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _one_line_error(in_process(capsys, "evaluate", "--agent", str(tmp_path)))
    assert f"no model in directory {tmp_path}" in line
    for looked_for in ("best_model.zip", "model.zip", "model.onnx", "model.json", "rllib.json"):
        assert looked_for in line


@pytest.mark.parametrize("filename", ["notes.txt", "fake.zip", "fake.onnx"])
def test_evaluate__a_file_that_is_not_a_model_says_so(
    tmp_path: Path, filename: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / filename
    path.write_text("not a model")
    line = _one_line_error(in_process(capsys, "evaluate", "--agent", str(path)))
    assert str(path) in line and "model" in line


def test_compare__runs_loaded_by_path_are_named_by_path_and_rows_never_share_a_name(tmp_path: Path) -> None:
    from policies.learned import CHECKPOINT_DIR

    flat = str(CHECKPOINT_DIR / "ppo_flat.onnx")
    out = tmp_path / "compare.json"
    run = cli(
        "-q", "compare", "--agents", "heuristic", flat, "heuristic", flat,
        "--episodes", "1", "--scenarios", "night_shift", "--output", str(out),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    names = [r["agent"] for r in json.loads(out.read_text())["reports"]]
    assert names == ["heuristic", flat, "heuristic #2", f"{flat} #2"]
    for name in names:
        assert name in run.stdout


def test_evaluate__module_attribute_grades_a_users_own_policy(tmp_path: Path) -> None:
    (tmp_path / "my_ed_policy.py").write_text(
        "import numpy as np\n"
        "def last_valid(observation, action_mask):\n"
        "    return int(np.flatnonzero(action_mask)[-1])\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "hospital_marl", "-q", "evaluate", "--agent", "my_ed_policy:last_valid",
         "--episodes", "1", "--scenarios", "surge"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["agent"] == "my_ed_policy:last_valid" and report["invalid_action_rate"] == 0.0
    bad = subprocess.run(
        [sys.executable, "-m", "hospital_marl", "evaluate", "--agent", "my_ed_policy:nothing"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert "has no attribute 'nothing'" in _one_line_error(bad)


def test_compare__piped_progress_is_one_line_per_agent_without_blank_lines() -> None:
    run = cli("compare", "--agents", "random", "heuristic", "--episodes", "1", "--scenarios", "night_shift")
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert lines == ["random (flat): 1 episodes, " + lines[0].rsplit(", ", 1)[1],
                     "heuristic (flat): 1 episodes, " + lines[1].rsplit(", ", 1)[1]]  # fmt: skip
    assert all(line.strip() for line in lines) and "\r" not in run.stderr and "\x1b" not in run.stderr


def test_help__every_subcommand_is_in_the_docs_command_table() -> None:
    """docs/cli.md's command table names every subcommand the parser has (train ppo, train export, ...)."""
    import argparse

    from hospital_marl_cli import build_parser

    def commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    deeper = commands(sub, f"{prefix}{name} ")
                    found += deeper or [f"{prefix}{name}"]
        return found

    table = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    missing = [c for c in commands(build_parser()) if f"`{c}" not in table]
    assert not missing, f"docs/cli.md's command table lacks {missing}"


@pytest.mark.parametrize(
    ("audit", "failure"),
    [
        ({"masked_actions_taken": 0, "env_invalid_actions": 0}, None),
        ({"masked_actions_taken": 3, "env_invalid_actions": 0}, "3 masked actions taken, 0 invalid"),
        ({"masked_actions_taken": 0, "env_invalid_actions": 2}, "0 masked actions taken, 2 invalid"),
    ],
)
def test_train__a_failed_masked_action_audit_exits_nonzero_after_the_summary(
    audit: dict[str, int],
    failure: str | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Either count above 0 fails the run (RLlib's audit: actions its masks forbade, and the env's
    # own count of invalid actions); the summary is printed first, whatever the verdict.
    from hospital_marl_cli import main
    from training.rllib import train as rllib

    monkeypatch.setattr(rllib, "train", lambda values, evaluate: Path("run"))
    monkeypatch.setattr(rllib, "summary", lambda run_dir: {"run_dir": str(run_dir), "audit": audit})
    if failure is None:
        assert main(["train", "rllib", "--quiet"]) == 0
    else:
        with pytest.raises(SystemExit, match=f"audit FAILED: {failure}"):
            main(["train", "rllib", "--quiet"])
    assert json.loads(capsys.readouterr().out)["audit"] == audit
