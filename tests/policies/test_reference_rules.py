"""The trivial rules a reviewer tries (``greedy``, ``fifo_severity``) and the flat ``heuristic``
that must clear them (issue #23 item 4): each rule as documented, and the ordering on held-out days."""

from __future__ import annotations

import numpy as np
import pytest

import policies
from grading.grader import grade
from hospital_marl import BUILTIN_SCENARIOS
from hospital_marl.core.actions import FLAT_OF, N_FLAT_ACTIONS, NOOP, Kind
from hospital_marl.envs.observations import BLOCK_BY_KEY

HELD_OUT_SEED = 20261201  # the grader's held-out days (never a training or validation seed)


def _observation(queue: list[tuple[int, int, int]], free_general: int = 5, free_icu: int = 1) -> dict:
    obs = {key: np.zeros(block.shape, np.float32) for key, block in BLOCK_BY_KEY.items()}
    for slot, row in enumerate(queue):
        obs["waiting_queue"][slot] = row
    obs["capacity"][:2] = free_general, free_icu
    return obs


def _mask(*valid: int) -> np.ndarray:
    mask = np.zeros(N_FLAT_ACTIONS, bool)
    mask[[NOOP, *valid]] = True
    return mask


def _admit(kind: Kind, slot: int) -> int:
    return FLAT_OF[(kind, slot)]


def test_greedy__takes_the_first_valid_action_that_is_not_the_no_op() -> None:
    greedy = policies.load("greedy")
    obs = _observation([])
    assert greedy.act(obs, _mask(30, 22)) == 22
    assert greedy.act(obs, _mask()) == NOOP


@pytest.mark.parametrize("free_icu", [0, 1])
def test_fifo_severity__most_severe_first_to_the_adequate_bed_kind(free_icu: int) -> None:
    fifo = policies.load("fifo_severity")
    queue = [(2, 1, 9), (4, 2, 3), (4, 3, 3), (3, 4, 8)]  # two severity-4 patients, equal waits
    admissions = [_admit(k, s) for s in range(4) for k in (Kind.ADMIT_GENERAL, Kind.ADMIT_ICU)]
    mask = _mask(*[a for a in admissions if free_icu or a < FLAT_OF[(Kind.ADMIT_ICU, 0)]])
    chosen = fifo.act(_observation(queue, free_icu=free_icu), mask)
    # the first of the two severity-4 patients in the queue (slot 1), to ICU when one is free
    assert chosen == _admit(Kind.ADMIT_ICU if free_icu else Kind.ADMIT_GENERAL, 1)


def test_fifo_severity__a_non_critical_patient_goes_to_icu_only_when_the_ward_is_full() -> None:
    fifo = policies.load("fifo_severity")
    obs = _observation([(3, 1, 2)], free_general=0)
    assert fifo.act(obs, _mask(_admit(Kind.ADMIT_ICU, 0))) == _admit(Kind.ADMIT_ICU, 0)
    both = _mask(_admit(Kind.ADMIT_ICU, 0), _admit(Kind.ADMIT_GENERAL, 0))
    assert fifo.act(_observation([(3, 1, 2)]), both) == _admit(Kind.ADMIT_GENERAL, 0)


def test_fifo_severity__admits_only() -> None:
    """Nothing waiting: the no-op, even with a ventilator, a transfer and a step-down valid."""
    assert policies.load("fifo_severity").act(_observation([]), _mask(21, 24, 34)) == NOOP


def test_flat_heuristic__parks_a_critical_patient_in_a_general_bed_only_if_nobody_else_could() -> None:
    heuristic = policies.load("heuristic")
    general = [_admit(Kind.ADMIT_GENERAL, s) for s in range(2)]
    obs = _observation([(5, 1, 4), (2, 3, 1)], free_icu=0)
    assert heuristic.act(obs, _mask(*general)) == general[1]
    assert heuristic.act(_observation([(5, 1, 4)], free_icu=0), _mask(general[0])) == general[0]


def test_heuristic__beats_every_trivial_rule_on_every_scenario_on_held_out_days() -> None:
    """Issue #23: the reference the flat learners are measured against clears the one-line rules,
    per scenario, on paired held-out days (10 episodes each; the README's scoreboard has 100)."""
    reports = {
        name: grade(name, episodes=10, seed=HELD_OUT_SEED)
        for name in ("heuristic", "greedy", "fifo_severity")
    }
    for rule in ("greedy", "fifo_severity"):
        for scenario in BUILTIN_SCENARIOS:
            margin = np.mean(reports["heuristic"]["scenarios"][scenario]["episode_scores"]) - np.mean(
                reports[rule]["scenarios"][scenario]["episode_scores"]
            )
            assert margin > 0, (rule, scenario, margin)
