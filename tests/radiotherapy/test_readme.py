"""The docs site's radiotherapy tables: generated from the code, scoreboard rows what the command prints."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grading.radiotherapy import comparison_markdown, grade_all

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import readme as readme_tool  # noqa: E402

RESULTS = (ROOT / "docs" / "results.md").read_text()


@pytest.mark.parametrize("marker", ["rt-tasks", "rt-actions", "rt-observations"])
def test_readme__rt_tables_are_generated_from_the_code(marker: str) -> None:
    page = readme_tool.page_of(marker).read_text()
    assert readme_tool.section(page, marker).strip() == readme_tool.STATIC_SECTIONS[marker]().strip()


def test_readme__rt_scoreboard_rows_match_a_regrade_of_the_cheap_agents() -> None:
    """The scripted agents and ppo are regraded in full (seconds); the planner's row is trusted to the
    same command (its full grade takes a minute)."""
    section = readme_tool.section(RESULTS, "scoreboard-rt")
    command = readme_tool.SCOREBOARD_COMMANDS["scoreboard-rt"]
    assert f"`{command}`" in section
    agents = ["random", "masked_random", "six_full", "evenly_spaced", "ppo"]
    assert command.split("--agents ")[1].split(" --")[0].split() == [*agents, "planner"]
    table = comparison_markdown([grade_all(a, n_episodes=20, seed=42) for a in agents])
    lines = {line for line in section.splitlines() if line.startswith("| ")}
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith("| agent"):
            assert line in lines, f"stale docs/results.md row: {line}"
