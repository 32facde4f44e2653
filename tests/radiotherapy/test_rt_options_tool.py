"""tools/rt_options.py test --start: grading patients the scoreboard never grades (issue 25 item 6)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grading.radiotherapy import grade_all
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import rt_options  # noqa: E402

CHECKPOINT = ROOT / "policies" / "radiotherapy" / "checkpoints" / "rt_option_selector_seed0.npz"


def test_start_grades_the_graders_later_episodes(tmp_path: Path) -> None:
    """``--start 2 --episodes 1`` is episode 2 of ``grade_all`` (seed 42), for every agent, task, split."""
    out = tmp_path / "t.json"
    rt_options.test_splits([str(CHECKPOINT)], 1, str(out), start=2)
    result = json.loads(out.read_text())
    assert result["start"] == 2
    for split in ("test_id", "test_ood"):
        rows = result["splits"][split]["rows"]
        for label, agent in (("anatomy_aware", "anatomy_aware"), (CHECKPOINT.stem, str(CHECKPOINT))):
            graded = grade_all(agent, n_episodes=3, seed=42, split=split)
            for task in BUILTIN_TASKS:
                assert rows[label][task] == [graded["tasks"][task]["episode_scores"][2]]
