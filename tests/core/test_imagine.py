"""No future for policies (SPEC §10): ``imagine()`` redraws every unrevealed draw, pending
bounce-backs included, and policies get a read-only handle on the present.

Statistical checks use fixed seeds and 6-sigma binomial bounds: they cannot flake.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from hospital_marl import ClinicalParams, Hospital
from hospital_marl.core.hospital import AWAY, SimulatorHandle
from policies.base import BasePolicy
from tests.helpers import ADMIT_GENERAL_0, EARLY_DISCHARGE_0, clinical_state, play_flat, scripted_hospital

INFECTION = 4
LOW, HIGH = ClinicalParams().bounce_back_delay  # (4, 24): SPEC's "a later tick of the shift"
SPAN = HIGH - LOW + 1


def six_sigma(p: float, n: int) -> float:
    return 6 * math.sqrt(p * (1 - p) / n)


def sent_home_at_tick_1(severity: int = 3, seed: int = 0) -> Hospital:
    """One patient admitted at tick 0 and early-discharged at tick 1 (away since tick 1)."""
    h = scripted_hospital([{"tick": 0, "severity": severity, "condition": INFECTION}], episode_length=100)
    h.reset(seed)
    h.act_flat(ADMIT_GENERAL_0)
    h.tick()
    assert h.act_flat(EARLY_DISCHARGE_0).value == "done"
    assert h.location[0] == AWAY
    return h


def imagined_returns(h: Hospital, n: int) -> list[int | None]:
    """For each of n imagined futures: the tick patient 0 is scheduled to bounce back, or None."""
    out: list[int | None] = []
    for seed in range(n):
        future = h.imagine(seed)
        ticks = [t for t, pids in future.bounce_schedule.items() if 0 in pids]
        out.append(ticks[0] if ticks else None)
    return out


def test_imagine__redraws_a_fresh_early_discharge_with_the_spec_probability_and_delay() -> None:
    h = sent_home_at_tick_1(severity=3)
    n = 3000
    returns = imagined_returns(h, n)
    back = [t for t in returns if t is not None]
    p = 0.1 * 3  # SPEC §2: probability 0.1 x severity
    assert abs(len(back) / n - p) <= six_sigma(p, n)
    assert set(back) == set(range(1 + LOW, 1 + HIGH + 1)), "every delay 4..24 ticks, and only those"


def test_imagine__conditions_on_the_patient_not_being_back_yet() -> None:
    """Thirteen ticks after the discharge, delays 4..13 are revealed not to have happened."""
    for seed in range(50):
        h = sent_home_at_tick_1(severity=3, seed=seed)
        for _ in range(13):
            h.tick()
        if h.location[0] == AWAY:
            break
    else:  # pragma: no cover - P(back by then) is about 0.14 per seed
        pytest.fail("no seed left the patient away")
    first = h.tick_count + 1 - 1 - LOW  # delays revealed so far
    p = 0.3
    q = p * (SPAN - first) / SPAN / (1 - p * first / SPAN)  # P(returns later | not back by now)
    n = 3000
    returns = imagined_returns(h, n)
    back = [t for t in returns if t is not None]
    assert abs(len(back) / n - q) <= six_sigma(q, n)
    assert min(back) == h.tick_count + 1 and max(back) == 1 + HIGH


def test_imagine__never_copies_the_real_bounce_back_schedule() -> None:
    """Whatever the episode drew for the patient, imagined futures disagree among themselves."""
    h = sent_home_at_tick_1(severity=3)
    returns = imagined_returns(h, 200)
    assert None in returns and len({t for t in returns if t is not None}) > 5


def test_imagine__keeps_the_present_and_leaves_the_episode_untouched() -> None:
    h = Hospital("surge")
    h.reset(4)
    play_flat(h, 30, np.random.default_rng(0))
    before = clinical_state(h)
    arrived = h.arrived
    futures = [h.imagine(seed) for seed in range(3)]
    assert clinical_state(h) == before
    for future in futures:
        for name in ("severity", "location", "wait", "remaining", "was_critical"):
            assert getattr(future, name)[:arrived] == getattr(h, name)[:arrived], name
        for name in ("queue", "general", "icu", "vents"):
            assert getattr(future, name) == getattr(h, name), name
        assert future.counters == h.counters
    later = [tuple(f.day_arrays.arrival[arrived:]) for f in futures]
    assert len(set(later)) == 3, "later arrivals are redrawn per seed"


def test_handle__shows_the_present_only_and_is_read_only() -> None:
    h = Hospital("normal_day")
    h.reset(1)
    play_flat(h, 20, np.random.default_rng(1))
    handle = h.handle()
    assert handle.tick_count == h.tick_count and handle.queue == h.queue
    assert handle.flat_mask() == h.flat_mask()
    assert len(handle.severity) == h.arrived < len(h.severity), "not-yet-arrived patients are the future"
    hidden = ("day", "day_arrays", "state", "_stream", "act_flat", "tick", "reset", "restore")
    for future_or_internal in hidden:
        with pytest.raises(AttributeError):
            getattr(handle, future_or_internal)
    with pytest.raises(AttributeError):
        handle.scenario = "surge"
    assert copy.deepcopy(handle) is handle
    from hospital_marl.envs.observations import ObservationBuilder  # a centralised policy's state()

    np.testing.assert_array_equal(ObservationBuilder(handle).state(), ObservationBuilder(h).state())
    assert isinstance(handle.imagine(0), Hospital)


def test_policy_reset__receives_a_handle_not_the_simulator() -> None:
    h = Hospital("normal_day")
    h.reset(0)
    policy = BasePolicy()
    policy.reset(seed=0, hospital=h)
    assert isinstance(policy.hospital, SimulatorHandle)
