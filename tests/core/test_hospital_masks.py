"""The mask is exact (SPEC §3): valid exactly when the simulator would carry the action out.

From many reachable states (random masked play plus some unmasked actions to
reach odd states), every one of the 39 flat actions and every role action is
tried on a deep copy: the mask must say valid iff the copy carries it out.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from hospital_marl import ROLE_ACTION_COUNTS, ROLES, Hospital
from hospital_marl.core.actions import ACTION_TABLE, N_FLAT_ACTIONS, ROLE_KIND_INDEX, Kind
from hospital_marl.core.hospital import EMPTY, Outcome
from tests.helpers import (
    ADMIT_GENERAL_0,
    EARLY_DISCHARGE_0,
    SCENARIOS_AND_TINY,
    TINY,
    TRANSFER_0,
    clinical_state,
    reachable_states,
    scenario_id,
)

SEEDS = (0, 1)
DISCHARGE_KINDS = (Kind.EARLY_DISCHARGE, Kind.DISCHARGE_ICU)


def leaving_patient(before: Hospital, after: Hospital) -> int | None:
    """The patient who went home (discharged or early) between two states, if any."""
    gone = [p for p, (a, b) in enumerate(zip(before.location, after.location)) if a != b]
    return gone[0] if len(gone) == 1 else None


def assert_action_matches_mask(h: Hospital, valid: bool, act, is_noop: bool, label: str) -> None:
    """Carry ``act`` out on a deep copy of ``h`` and check it against the mask bit ``valid``."""
    probe = copy.deepcopy(h)
    state, invalid_before = clinical_state(probe), probe.counters.invalid_actions
    outcome = act(probe)
    carried_out = outcome is Outcome.DONE or (is_noop and outcome is Outcome.NOOP)
    assert valid == carried_out, f"{label}: mask says {valid}, simulator says {outcome}"
    if valid:
        assert probe.counters.invalid_actions == invalid_before, label
    else:
        assert outcome is Outcome.INVALID, label
        assert probe.counters.invalid_actions == invalid_before + 1, label
        assert clinical_state(probe) == state, f"{label}: an invalid action changed the state"


def assert_flat_mask_exact(h: Hospital) -> None:
    mask = h.flat_mask()
    assert len(mask) == N_FLAT_ACTIONS and mask[0] is True
    for a in range(N_FLAT_ACTIONS):
        spec = ACTION_TABLE[a]
        assert h.is_valid(spec.kind, spec.index) == mask[a], f"is_valid disagrees with the mask on {a}"
        assert_action_matches_mask(h, mask[a], lambda p, a=a: p.act_flat(a), a == 0, f"flat {a}")


def assert_role_mask_exact(h: Hospital, role: str) -> None:
    mask = h.role_mask(role)
    assert len(mask) == ROLE_ACTION_COUNTS[role] and mask[0] is True
    for ra in range(len(mask)):
        label = f"{role} {ra}"
        assert_action_matches_mask(h, mask[ra], lambda p, ra=ra: p.act(role, ra), ra == 0, label)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_flat_mask__is_exact_at_every_tick_of_random_play(scenario, seed: int) -> None:
    for h, _ in reachable_states(scenario, seed):
        assert_flat_mask_exact(h)


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_role_and_flat_masks__are_exact_mid_tick_in_aec_order(scenario) -> None:
    """In the AEC rhythm each role acts on the state the previous roles left: masks must stay exact.

    The full flat mask is checked at the ventilator officer's turn, after both other roles acted.
    """
    for h, role in reachable_states(scenario, seed=3, per_role=True):
        assert_role_mask_exact(h, role)
        if role == ROLES[-1]:
            assert_flat_mask_exact(h)


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_role_mask__equals_flat_mask_restricted_to_the_role(scenario) -> None:
    for h, _ in reachable_states(scenario, seed=4):
        flat = h.flat_mask()
        for role in ROLES:
            expected = [True] + [flat[spec.flat] for spec in ACTION_TABLE if spec.role == role]
            assert h.role_mask(role) == expected


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_discharges__only_ever_send_home_non_critical_patients(scenario) -> None:
    """Every carried-out early discharge or ICU discharge, from every reachable state, had severity <= 3."""
    for h, _ in reachable_states(scenario, seed=5):
        for a in range(N_FLAT_ACTIONS):
            if ACTION_TABLE[a].kind not in DISCHARGE_KINDS or not h.flat_mask()[a]:
                continue
            probe = copy.deepcopy(h)
            assert probe.act_flat(a) is Outcome.DONE
            pid = leaving_patient(h, probe)
            assert pid is not None and h.severity[pid] <= 3, (a, pid)


def test_tiny_scenario__slots_beyond_its_resources_are_never_valid() -> None:
    for h, _ in reachable_states(TINY, seed=0):
        mask = h.flat_mask()
        for spec in ACTION_TABLE:
            if spec.kind is Kind.VENTILATE and spec.index >= TINY.ventilators:
                assert not mask[spec.flat]
            if spec.kind is Kind.DISCHARGE_ICU and spec.index >= TINY.icu_beds:
                assert not mask[spec.flat]


def test_masks__never_count_as_actions() -> None:
    h = Hospital("surge")
    h.reset(0)
    for role in ROLES:
        h.role_mask(role)
    h.flat_mask()
    assert h.counters.actions == 0 and h.counters.invalid_actions == 0


def test_flat_mask__returns_a_copy_safe_to_mutate() -> None:
    h = Hospital("surge")
    h.reset(0)
    mask = h.flat_mask()
    mask[:] = [False] * len(mask)
    assert h.flat_mask()[0] is True


def test_board__is_current_right_after_a_transfer_in_the_same_tick() -> None:
    """Regression (stale board cache): after a transfer the next action must see the new board."""
    h = Hospital("normal_day")
    h.reset(0)
    while len(h.queue) < 2:
        h.tick()
    assert h.act_flat(ADMIT_GENERAL_0) is Outcome.DONE
    assert h.act_flat(ADMIT_GENERAL_0) is Outcome.DONE
    h.tick()
    assert h.act_flat(TRANSFER_0) is Outcome.DONE
    in_general = [p for p in h.general if p != EMPTY]
    assert sorted(h.board()) == sorted(in_general)
    assert_flat_mask_exact(h)
    # A second bed-manager action in the same tick addresses the new board.
    assert h.act_flat(EARLY_DISCHARGE_0) in (Outcome.DONE, Outcome.INVALID)
    assert sorted(h.board()) == sorted(p for p in h.general if p != EMPTY)


@pytest.mark.parametrize("scenario", ("surge", TINY), ids=scenario_id)
def test_masks__stay_exact_under_many_actions_per_tick(scenario) -> None:
    """The core allows any number of actions before a tick: every intermediate mask is exact."""
    h = Hospital(scenario)
    h.reset(11)
    rng = np.random.default_rng(11)
    for _ in range(30):
        for _ in range(4):
            assert_flat_mask_exact(h)
            valid = [a for a, ok in enumerate(h.flat_mask()) if ok]
            h.act_flat(int(rng.choice(valid)))
        h.tick()
        if h.done:
            break


def test_role_kind_index__covers_each_role_action() -> None:
    for role in ROLES:
        assert len(ROLE_KIND_INDEX[role]) == ROLE_ACTION_COUNTS[role]
