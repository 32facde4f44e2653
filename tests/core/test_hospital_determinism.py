"""Randomness (SPEC §2): a seed defines the day; same seed and actions give identical
trajectories; the arrival stream does not depend on the actions; the state copies."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from hospital_marl import BUILTIN_SCENARIOS, Hospital
from hospital_marl.core.hospital import NOT_ARRIVED, WAITING
from tests.helpers import (
    SCENARIOS_AND_TINY,
    admit_and_wait,
    admit_then_discharge_early,
    always_noop,
    clinical_state,
    masked_random_flat,
    scenario_id,
)


def trajectory(scenario, seed: int, policy_seed: int = 0, p_unmasked: float = 0.2) -> list:
    h = Hospital(scenario)
    h.reset(seed)
    rng = np.random.default_rng(policy_seed)
    out = [clinical_state(h)]
    while not h.done:
        h.act_flat(masked_random_flat(h.flat_mask(), rng, p_unmasked))
        result = h.tick()
        out.append((clinical_state(h), result, h.counters.as_dict()))
    return out


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_same_seed_and_actions__give_identical_trajectories(scenario) -> None:
    assert trajectory(scenario, 21) == trajectory(scenario, 21)


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_different_seeds__give_different_days(scenario) -> None:
    days = []
    for seed in (0, 1):
        h = Hospital(scenario)
        h.reset(seed)
        days.append(h.day)
    assert days[0] != days[1]
    assert trajectory(scenario, 0) != trajectory(scenario, 1)


def test_seed__accepts_numpy_integers() -> None:
    a, b = Hospital("surge"), Hospital("surge")
    a.reset(5)
    b.reset(np.int64(5))
    assert a.day == b.day


@pytest.mark.parametrize("bad", [-1, 1.5, "7"])
def test_seed__rejects_non_integers_and_negatives_with_value_error(bad) -> None:
    with pytest.raises(ValueError, match="seed"):
        Hospital("surge").reset(bad)


def test_reset_without_seed__draws_a_fresh_day() -> None:
    a, b = Hospital("surge"), Hospital("surge")
    a.reset()
    b.reset()
    assert a.day != b.day


def test_reset__same_seed_twice_on_one_instance_gives_the_same_day() -> None:
    h = Hospital("mass_casualty")
    h.reset(9)
    first = (h.day, clinical_state(h))
    h.act_flat(1)
    h.tick()
    h.reset(9)
    assert (h.day, clinical_state(h)) == first


POLICIES = {
    "noop": lambda h, rng: always_noop(h),
    "admit_and_wait": lambda h, rng: admit_and_wait(h),
    "discharge_loop": lambda h, rng: admit_then_discharge_early(h),  # bounce-backs draw too
    "random": lambda h, rng: masked_random_flat(h.flat_mask(), rng, 0.3),
}


def arrivals_seen(scenario, seed: int, policy) -> tuple:
    """The day, and per tick the arrival count and the newcomers as they join the queue."""
    h = Hospital(scenario)
    h.reset(seed)
    rng = np.random.default_rng(seed + 1)
    seen = []
    while not h.done:
        t = h.tick_count
        newcomers = h.day.arrivals_at[t]
        if newcomers:
            assert tuple(h.queue[-len(newcomers) :]) == newcomers, "arrivals join the back of the queue"
        for pid in newcomers:
            assert h.location[pid] == WAITING
            assert (h.severity[pid], h.wait[pid]) == (h.day.severity[pid], 0)
        assert all(h.location[p] == NOT_ARRIVED for p in range(h.day.n_patients) if h.day.arrival_tick[p] > t)
        seen.append(
            (t, h.counters.arrivals, tuple((pid, h.severity[pid], h.day.condition[pid]) for pid in newcomers))
        )
        h.act_flat(policy(h, rng))
        h.tick()
    return h.day, seen


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_arrival_stream__does_not_depend_on_the_actions(scenario) -> None:
    """Every policy meets the same patients: same arrival ticks, severities and conditions on arrival."""
    runs = {name: arrivals_seen(scenario, 13, policy) for name, policy in POLICIES.items()}
    for name, (day, _) in runs.items():
        assert day == runs["noop"][0], f"{name} drew a different day"
    shortest = min(len(run[1]) for run in runs.values())  # an episode may terminate early
    reference = runs["noop"][1][:shortest]
    for name, (_, seen) in runs.items():
        assert seen[:shortest] == reference, f"{name} saw different arrivals"


# ------------------------------------------------------------ copy / restore
def continue_randomly(h: Hospital, seed: int, n: int = 40) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        if h.done:
            break
        h.act_flat(masked_random_flat(h.flat_mask(), rng, 0.2))
        out.append((h.tick(), clinical_state(h), h.counters.as_dict()))
    return out


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_deepcopy__continues_exactly_like_the_original(scenario) -> None:
    h = Hospital(scenario)
    h.reset(2)
    continue_randomly(h, 0, 30)
    clone = copy.deepcopy(h)
    assert clinical_state(clone) == clinical_state(h) and clone.flat_mask() == h.flat_mask()
    assert continue_randomly(clone, 1) == continue_randomly(h, 1)


def test_deepcopy__is_independent_of_the_original() -> None:
    h = Hospital("surge")
    h.reset(2)
    continue_randomly(h, 0, 20)
    before = (clinical_state(h), h.counters.as_dict())
    clone = copy.deepcopy(h)
    continue_randomly(clone, 5, 30)
    assert (clinical_state(h), h.counters.as_dict()) == before


def test_restore__returns_to_the_snapshot_and_replays_identically() -> None:
    h = Hospital("ventilator_crisis")
    h.reset(8)
    continue_randomly(h, 0, 25)
    snap = h.snapshot()
    first = continue_randomly(h, 3)
    h.restore(snap)
    second = continue_randomly(h, 3)
    h.restore(snap)
    assert first == second == continue_randomly(h, 3)


def test_restore__after_a_reset_or_into_another_hospital_replays_identically() -> None:
    h = Hospital("surge")
    h.reset(4)
    continue_randomly(h, 0, 30)
    snap = h.snapshot()
    first = continue_randomly(h, 7)
    h.reset(5)  # a new day: the snapshot must bring the old one back whole
    continue_randomly(h, 1, 10)
    h.restore(snap)
    assert continue_randomly(h, 7) == first
    other = Hospital("surge")
    other.restore(snap)
    assert continue_randomly(other, 7) == first
    h.restore(snap)  # the restored copies never alias the snapshot
    assert continue_randomly(h, 7) == first


def test_snapshot__is_not_changed_by_later_steps_of_a_copy() -> None:
    h = Hospital("mass_casualty")
    h.reset(1)
    continue_randomly(h, 0, 20)
    snap = h.snapshot()
    before = (clinical_state(h), h.counters.as_dict())
    clone = copy.deepcopy(h)
    continue_randomly(clone, 2, 30)
    continue_randomly(h, 3, 30)
    h.restore(snap)
    assert (clinical_state(h), h.counters.as_dict()) == before
