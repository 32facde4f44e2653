"""The radiotherapy env's golden trajectories: observations, masks, ``info``, rewards,
the ``ansi`` render and ``Plan.evaluate`` reproduce, bit for bit, what the env did when
tools/record_rt_golden.py recorded them (before the step was made faster for SPEC-RT §7).

A failure names the trajectory and the first step that differs; regenerate the fixture
only for a deliberate change to the dynamics, the observation or the metrics.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import record_rt_golden  # noqa: E402

GOLDEN = json.loads(record_rt_golden.FIXTURE.read_text())
CASES = dict(record_rt_golden.cases())


def test_fixture_covers_every_case() -> None:
    assert sorted(GOLDEN) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_trajectory_is_reproduced_bit_for_bit(name: str) -> None:
    got, want = json.loads(json.dumps(CASES[name]())), GOLDEN[name]
    for step, (a, b) in enumerate(zip(got["steps"], want["steps"])):
        assert a == b, f"{name}: observation/mask/info differ first at step {step}"
    for step, (a, b) in enumerate(zip(got["rewards"], want["rewards"])):
        assert a == b, f"{name}: reward differs first at step {step}: {a!r} != {b!r}"
    assert len(got["steps"]) == len(want["steps"])
    assert got["flags"] == want["flags"]
    assert got["kept"] == want["kept"], f"{name}: an observation changed after it was returned"
    assert got["final_info"] == want["final_info"]
    assert got["ansi"] == want["ansi"]
    assert got["evaluate"] == want["evaluate"]
    assert got["dvhs"] == want["dvhs"]
