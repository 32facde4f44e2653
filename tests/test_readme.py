"""The README's promises: its two opening commands, its generated tables, its scoreboards."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from grading import grade
from grading.tables import comparison_markdown

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
sys.path.insert(0, str(ROOT / "tools"))
import readme as readme_tool  # noqa: E402


def opening_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert block, "README must open with a bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme__opens_with_exactly_two_commands_install_compare_and_install_test() -> None:
    first_heading = README.index("\n## ")
    assert README.index("```bash") < first_heading
    commands = opening_commands()
    assert len(commands) == 2
    assert commands[0].startswith("pip install") and commands[0].endswith("hospital-marl compare")
    assert commands[1].startswith("pip install") and "pytest" in commands[1]


def test_ci__runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert opening_commands()[1] in ci


def test_readme__generated_tables_are_fresh() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "readme.py"), "--check"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


def test_readme__shows_the_action_table_verbatim() -> None:
    from hospital_marl.core.actions import action_table_markdown

    assert action_table_markdown() in README


@pytest.mark.parametrize(("marker", "track"), [("scoreboard-flat", "flat"), ("scoreboard-team", "team")])
def test_readme__scoreboard_rows_match_what_the_command_prints(marker: str, track: str) -> None:
    """Re-grade the cheap agents of the documented command in full and compare their rows exactly;
    the planner's row is checked on one scenario (its full grade takes minutes)."""
    section = readme_tool.section(README, marker)
    command = readme_tool.SCOREBOARD_COMMANDS[marker]
    assert f"`{command}`" in section
    agents = command.split("--agents ")[1].split(" --")[0].split()
    cheap = [a for a in agents if a != "planner"]
    reports = [grade(a, episodes=10, seed=0, track=track) for a in cheap]
    for line in comparison_markdown(reports).splitlines():
        if line.startswith(("| agent", "|---")) or not line.strip():
            continue
        assert line in section, f"README {marker} row drifted: expected {line!r}"
    if "planner" in agents:
        planner = grade("planner", episodes=10, seed=0, scenarios=["night_shift"], track=track)
        night = planner["scenarios"]["night_shift"]
        cell = f"{night['score']:.2f} ± {night['score_stderr']:.2f}"
        planner_row = next(
            line for line in section.splitlines() if line.startswith("| planner |") and "±" in line
        )
        assert cell in planner_row.split(" | ")[4], f"planner night_shift cell drifted: expected {cell}"
