"""The README's promises (two opening commands, length, scoreboards) and the docs' generated tables."""

from __future__ import annotations

import copy
import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grading import grade
from grading.tables import comparison_markdown

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
RESULTS = (ROOT / "docs" / "results.md").read_text()
SB3_GUIDE = (ROOT / "docs" / "training" / "sb3.md").read_text()
sys.path.insert(0, str(ROOT / "tools"))
import readme as readme_tool  # noqa: E402


@functools.cache
def _graded(agent: str, track: str) -> dict:
    return grade(agent, episodes=10, seed=0, track=track)


def graded(agent: str, track: str = "flat") -> dict:
    """``grade(agent, episodes=10, seed=0, track=track)``, graded once per session: the scoreboard
    and the checkpoints README's tables show the same grades (deterministic: the same report)."""
    return copy.deepcopy(_graded(agent, track))


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
    assert "export PIP_CONSTRAINT" not in ci  # what users run is what CI runs: no hidden pins


def test_readme__test_command_carries_the_cpu_torch_constraint() -> None:
    """The constraints file the command names exists and pins torch exactly (a range admitting a
    newer release takes a multi-GB CUDA build on Linux), and never pins gymnasium (ray pins it)."""
    command = opening_commands()[1]
    path = command.split(" -c ")[1].split()[0]
    pins = [
        line.split("#")[0].strip()
        for line in (ROOT / path).read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    assert "torch==2.13.0" in pins
    assert not [p for p in pins if p.startswith("gymnasium")]


def test_readme__is_a_front_door_of_at_most_250_lines() -> None:
    assert len(README.splitlines()) <= 250


def test_user_facing_text__never_points_to_a_spec_file_users_do_not_have() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    pages = [p for p in pages if "notebooks" not in p.parts]
    offending = [str(p.relative_to(ROOT)) for p in pages if "SPEC" in p.read_text()]
    assert not offending, f"these pages mention SPEC: {offending}"


def test_readme__generated_tables_are_fresh() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "readme.py"), "--check"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


def test_rules_page__shows_the_action_table_verbatim() -> None:
    from hospital_marl.core.actions import action_table_markdown

    assert action_table_markdown() in (ROOT / "docs" / "simulation.md").read_text()


SLOW_AGENTS = ("planner", "team_planner")
"""Scoreboard rows re-graded on one scenario only (their full grades take minutes)."""


@pytest.mark.parametrize(("marker", "track"), [("scoreboard-flat", "flat"), ("scoreboard-team", "team")])
def test_readme__scoreboard_rows_match_what_the_command_prints(marker: str, track: str) -> None:
    """Re-grade the cheap agents of the documented command in full and compare their rows exactly;
    a planner's row is checked on one scenario (its full grade takes minutes)."""
    section = readme_tool.section(README, marker)
    assert readme_tool.section(RESULTS, marker) == section  # one command, shown on both pages
    command = readme_tool.SCOREBOARD_COMMANDS[marker]
    assert f"`{command}`" in section
    agents = command.split("--agents ")[1].split(" --")[0].split()
    cheap = [a for a in agents if a not in SLOW_AGENTS]
    reports = [graded(a, track) for a in cheap]
    for line in comparison_markdown(reports).splitlines():
        if line.startswith(("| agent", "|---")) or not line.strip():
            continue
        assert line in section, f"README {marker} row drifted: expected {line!r}"
    for planner in (a for a in agents if a in SLOW_AGENTS):
        report = grade(planner, episodes=10, seed=0, scenarios=["night_shift"], track=track)
        night = report["scenarios"]["night_shift"]
        cell = f"{night['score']:.2f} ± {night['score_stderr']:.2f}"
        planner_row = next(
            line for line in section.splitlines() if line.startswith(f"| {planner} |") and "±" in line
        )
        assert cell in planner_row.split(" | ")[4], f"{planner} night_shift cell drifted: expected {cell}"


def test_results__radiotherapy_scoreboard_is_what_its_command_prints_now() -> None:
    """docs/results.md's radiotherapy block is the output of the command it shows, run now (all
    its agents take ~20 s): the block once kept the first environment's scores for a day after the
    score changed, because nothing regenerated or checked it."""
    section = readme_tool.section(RESULTS, "scoreboard-rt")
    command = readme_tool.SCOREBOARD_DOCUMENTS[ROOT / "docs" / "results.md"]["scoreboard-rt"]
    assert section.startswith(f"`{command}`")
    argv = [sys.executable, "-m", "hospital_marl", *command.split()[1:]]
    printed = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip()
    assert section == f"`{command}`\n\n{printed}\n"


# ------------------------------------------------------------------ the checkpoints README's figures
CHECKPOINTS_README = (ROOT / "policies" / "checkpoints" / "README.md").read_text()


def _table_cells(lines: list[str]) -> dict[tuple[str, str], str]:
    """A Markdown table as {(first cell, column header): cell}."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]
    header, body = rows[0], rows[2:]
    return {(row[0], col): cell for row in body for col, cell in zip(header, row)}


def _readme_table(text: str, first_header: str) -> dict[tuple[str, str], str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_header))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return _table_cells(lines[start:end])


@pytest.fixture(scope="module")
def ppo_table_reports() -> dict[str, dict]:
    from benchmarks import ppo_table

    flat_agents = ("random", "masked_random", "greedy", "fifo_severity", "heuristic", "ppo", "ppo_pruned")
    flat = {a: graded(a) for a in (*flat_agents, "ppo_nomask")}
    team = {a: graded(a, "team") for a in ("masked_random", "team_heuristic", "team_ppo")}
    return {"module": ppo_table, "flat": flat, "team": team}


def test_checkpoints_readme__flat_table_cells_match_a_regrade(ppo_table_reports: dict) -> None:
    """Every cell that needs no planner is what `benchmarks/ppo_table.py` prints now ("beats?" reads
    the planner's headroom: checked by the planner-free cells it is derived from)."""
    ppo_table = ppo_table_reports["module"]
    regraded = _table_cells(ppo_table.flat_table(ppo_table_reports["flat"]))
    documented = _readme_table(CHECKPOINTS_README, "| scenario | random |")
    for (row, col), cell in regraded.items():
        if col != "beats?":
            assert documented[(row, col)] == cell, f"checkpoints README flat {row} / {col} drifted"


def test_checkpoints_readme__team_table_and_training_cost_are_what_the_script_prints(
    ppo_table_reports: dict,
) -> None:
    ppo_table = ppo_table_reports["module"]
    team = ppo_table.team_table(ppo_table_reports["team"], ppo_table_reports["flat"]["ppo"])
    assert "\n".join(team) in CHECKPOINTS_README
    assert "\n".join(ppo_table.cost_table()) in CHECKPOINTS_README


def test_sb3_guide__ppo_pruned_prose_quotes_the_tables() -> None:
    """The SB3 guide's prose figures are the generated tables' (overall, night_shift margin,
    and the recorded wall time of the 100k-step run)."""
    flat = _readme_table(CHECKPOINTS_README, "| scenario | random |")
    overall = flat[("**overall**", "ppo --prune")]
    night = flat[("`night_shift`", "pruned − heuristic")].replace("-", "−")
    assert f"({overall} overall, `night_shift` {night})" in SB3_GUIDE
    meta = json.loads((ROOT / "policies" / "checkpoints" / "ppo_flat_pruned.json").read_text())
    low, high = (int(x) for x in re.search(r"100k steps in (\d+)–(\d+) s\*\*", SB3_GUIDE).groups())
    assert low <= meta["run"]["wall_time_s"] <= high


@pytest.mark.parametrize("name", ["marl_ibr", "marl_shared", "rllib"])
def test_results__marl_table_rows_reproduce_from_the_committed_runs(name: str) -> None:
    """The multi-agent table's learned rows come from policies/checkpoints/marl/ (committed), not runs/."""
    from policies import load_run

    run = ROOT / "policies" / "checkpoints" / "marl" / name.removeprefix("marl_")
    report = grade(load_run(run), episodes=10, seed=0, track="team")
    row = next(
        line
        for line in readme_tool.section(RESULTS, "marl-table").splitlines()
        if line.startswith(f"| `{name}`")
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[7] == f"**{report['overall_score']:.1f}**"
    assert cells[2:7] == [f"{report['scenario_scores'][s]:.1f}" for s in report["scenario_scores"]]
