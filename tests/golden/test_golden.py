"""The golden trajectories: the simulator reproduces, bit for bit, what it did
when tools/record_golden.py recorded them (first from the pure-Python core, before
it became a compiled kernel; re-recorded once, at the deliberate change to
counter-based random draws, whose statistical equivalence is in docs/rng/).

A failure names the trajectory and the first step that differs; regenerate the
fixture only for a deliberate change to the dynamics or the random draws.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import record_golden  # noqa: E402

GOLDEN = json.loads(record_golden.FIXTURE.read_text())
CASES = dict(record_golden.cases())


def test_fixture_covers_every_case() -> None:
    assert sorted(GOLDEN) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_trajectory_is_reproduced_bit_for_bit(name: str) -> None:
    got, want = CASES[name](), GOLDEN[name]
    for step, (a, b) in enumerate(zip(got["steps"], want["steps"])):
        assert a == b, f"{name}: observation/mask differ first at step {step}"
    for step, (a, b) in enumerate(zip(got["rewards"], want["rewards"])):
        assert a == b, f"{name}: reward differs first at step {step}: {a!r} != {b!r}"
    assert len(got["steps"]) == len(want["steps"])
    assert got["metrics"] == want["metrics"]
    assert got["counters"] == want["counters"]
