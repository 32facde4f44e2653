"""The heuristic's and the planner's decisions on fixed days, reproduced action for action.

``tools/record_decisions.py`` recorded them from the pure-Python rules and rollouts
before both moved into compiled code (``policies/heuristic_kernel.py``); the compiled
rules must choose exactly the same actions (and so score exactly the same). A failure
names the case and the first decision that differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import record_decisions  # noqa: E402

RECORDED = json.loads(record_decisions.FIXTURE.read_text())
CASES = dict(record_decisions.cases())


def test_fixture_covers_every_case() -> None:
    assert sorted(RECORDED) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_decisions_are_reproduced(name: str) -> None:
    got, want = CASES[name](), RECORDED[name]
    for i, (a, b) in enumerate(zip(got["actions"], want["actions"])):
        assert a == b, f"{name}: decision {i} differs: {a} != {b} (recorded)"
    assert len(got["actions"]) == len(want["actions"])
    assert got["score"] == want["score"]
