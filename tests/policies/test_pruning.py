"""Dominated-action pruning: each rule exactly, never beyond the env's mask, never what the rules play."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from hospital_marl import BUILTIN_SCENARIOS, Hospital
from hospital_marl.core.actions import FLAT_OF, N_FLAT_ACTIONS, NOOP, Kind
from hospital_marl.envs.observations import ObservationBuilder
from policies.heuristic import flat_heuristic_action
from policies.pruning import prune_dominated


def _obs(
    *,
    queue: Sequence[tuple[int, int]] = (),
    board: Sequence[int] = (),
    icu: Sequence[tuple[int, int, int, int]] = (),
    free_general: int = 0,
    free_icu: int = 0,
) -> dict[str, np.ndarray]:
    """A composed observation with what pruning reads: queue (severity, condition), board severities,
    ICU beds (severity, needs a ventilator, on one, ready), free general / ICU beds."""
    waiting = np.zeros((10, 3), np.int64)
    for slot, (sev, cond) in enumerate(queue):
        waiting[slot] = (sev, cond, 1)
    occupancy = np.zeros(20, np.int64)
    occupancy[: len(board)] = board
    beds = np.zeros((5, 4), np.int64)
    for bed, row in enumerate(icu):
        beds[bed] = row
    return {
        "waiting_queue": waiting,
        "bed_occupancy": occupancy,
        "icu_occupancy": beds[:, 0],
        "icu_needs_vent": beds[:, 1],
        "icu_on_vent": beds[:, 2],
        "icu_ready": beds[:, 3],
        "capacity": np.array([free_general, free_icu, 3, len(queue)]),
    }


ALL = np.ones(N_FLAT_ACTIONS, bool)


def _pruned(obs: dict[str, np.ndarray], mask: np.ndarray = ALL) -> set[int]:
    return set(np.flatnonzero(mask & ~prune_dominated(obs, mask)).tolist())


def _all(kind: Kind, n: int) -> set[int]:
    return {FLAT_OF[(kind, i)] for i in range(n)}


def test_ventilators__are_pruned_unless_an_icu_patient_needs_one_and_lacks_it() -> None:
    vents = _all(Kind.VENTILATE, 3)
    assert vents <= _pruned(_obs(icu=[(3, 0, 0, 0), (5, 1, 1, 0)], free_icu=3))  # the needer has one
    assert not vents & _pruned(_obs(icu=[(3, 0, 0, 0), (4, 1, 0, 0)], free_icu=3))


def test_non_critical_patients__go_to_the_icu_only_when_no_general_bed_is_free() -> None:
    obs = dict(queue=[(3, 1), (4, 1), (1, 2)], board=[5, 4, 3, 2, 2, 1], free_icu=2)
    admit = _all(Kind.ADMIT_ICU, 10) - {FLAT_OF[(Kind.ADMIT_ICU, 1)]}  # slots 0, 2 and the empty ones
    transfer = {FLAT_OF[(Kind.TRANSFER_ICU, k)] for k in (2, 3, 4)}
    with_bed = _pruned(_obs(**obs, free_general=1))
    assert admit | transfer <= with_bed
    assert FLAT_OF[(Kind.ADMIT_ICU, 1)] not in with_bed  # critical
    assert not {FLAT_OF[(Kind.TRANSFER_ICU, k)] for k in (0, 1)} & with_bed  # critical
    assert not (admit | transfer) & _pruned(_obs(**obs, free_general=0))


def test_critical_patients__go_to_a_general_bed_only_when_no_icu_bed_is_free() -> None:
    obs = dict(queue=[(4, 1), (2, 1), (5, 3)], free_general=4)
    general = {FLAT_OF[(Kind.ADMIT_GENERAL, slot)] for slot in (0, 2)}
    with_icu = _pruned(_obs(**obs, free_icu=1))
    assert general <= with_icu and FLAT_OF[(Kind.ADMIT_GENERAL, 1)] not in with_icu
    assert not {FLAT_OF[(Kind.ADMIT_ICU, slot)] for slot in (0, 2)} & with_icu  # their ICU admissions stay
    assert not general & _pruned(_obs(**obs, free_icu=0))


def test_bed_freeing_actions__are_pruned_while_the_bed_they_free_is_not_needed() -> None:
    early, step_down = _all(Kind.EARLY_DISCHARGE, 5), _all(Kind.DISCHARGE_ICU, 5)
    icu = [(3, 0, 0, 1), (4, 0, 0, 0), (2, 0, 0, 0)]  # bed 0 is ready
    unready = step_down - {FLAT_OF[(Kind.DISCHARGE_ICU, 0)]}
    assert early | unready <= _pruned(_obs(board=[3, 1], icu=icu, free_general=2, free_icu=1))
    full = _pruned(_obs(board=[3, 1], icu=icu, free_general=0, free_icu=0))
    assert not (early | step_down) & full
    assert FLAT_OF[(Kind.DISCHARGE_ICU, 0)] not in _pruned(_obs(icu=icu, free_icu=1))  # ready: a step-down


def test_pruning__never_adds_an_action_and_keeps_the_noop() -> None:
    rng = np.random.default_rng(0)
    obs = _obs(queue=[(1, 1)], board=[1], icu=[(2, 0, 0, 0)], free_general=3, free_icu=4)
    for _ in range(50):
        mask = rng.random(N_FLAT_ACTIONS) < 0.5
        mask[NOOP] = True
        pruned = prune_dominated(obs, mask)
        assert pruned.dtype == bool and not (pruned & ~mask).any() and pruned[NOOP]
    assert prune_dominated(obs, np.eye(N_FLAT_ACTIONS, dtype=bool)[NOOP]).tolist() == [True] + [False] * 38


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_pruning__never_removes_what_the_heuristic_plays_and_removes_something(scenario: str) -> None:
    """The pruned actions are ones the project's rules never take: the pruning adds no new judgement."""
    h = Hospital(scenario)
    h.reset(1000)
    builder = ObservationBuilder(h)
    removed = 0
    while not h.done:
        obs, mask = builder.composed(), np.array(h.flat_mask())
        action, pruned = flat_heuristic_action(obs, mask), prune_dominated(obs, mask)
        assert pruned[action], (h.tick_count, action)
        removed += int(mask.sum() - pruned.sum())
        h.act_flat(action)
        h.tick()
    assert removed > 0
