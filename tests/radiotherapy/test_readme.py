"""docs/radiotherapy.md: generated tables fresh, the scoreboard block what its command wrote."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "radiotherapy.md").read_text()
sys.path.insert(0, str(ROOT / "tools"))
import readme as readme_tool  # noqa: E402
import rt_scoreboard  # noqa: E402


@pytest.mark.parametrize(
    "marker", ["rt-tasks", "rt-constraints", "rt-splits", "rt-actions", "rt-observations"]
)
def test_docs__rt_tables_are_generated_from_the_code(marker: str) -> None:
    make = readme_tool.DOCUMENTS[ROOT / "docs" / "radiotherapy.md"][marker]
    assert readme_tool.section(DOC, marker).strip() == make().strip()


def test_docs__every_constraint_cites_its_source() -> None:
    from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, TASKS

    for name in BUILTIN_TASKS:
        for oar in TASKS[name].oars:
            for c in oar.constraints:
                assert c.source and c.source in DOC, f"{name}/{oar.name}: {c.describe()} has no cited source"


def test_docs__scoreboard_is_the_saved_grades_rendered() -> None:
    """The block equals a re-render of docs/data/rt_scoreboard.json (written by the same command),
    with random, scripted, anatomy-aware, planner, learned and FMO rows on both test splits."""
    data = json.loads(rt_scoreboard.DATA.read_text())
    block = rt_scoreboard.markdown(data)
    assert block in DOC
    for split in ("test_id", "test_ood"):
        rows = data["splits"][split]
        for label in ("random", "six_full", "evenly_spaced", "anatomy_aware", "planner", "FMO reference"):
            assert label in rows
        assert any(label.startswith("ppo_seed") for label in rows)
