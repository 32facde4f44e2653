"""The lookahead planner: plans only on imagined copies, never on the episode itself.

Tiny budgets and short episodes (``max_cycles``) keep these tests fast; what they
check does not depend on the budget.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import policies
from hospital_marl.core.hospital import Hospital
from hospital_marl.envs.composed import HospitalEDEnv
from policies.heuristic import HeuristicPolicy
from policies.planner import PlannerPolicy, candidate_actions

TINY_BUDGET: dict[str, Any] = {"rollouts": 2, "horizon": 3, "first": 1}
TICKS = 12
SCENARIO = "surge"  # busy from the start: most decisions have several candidates

PLANNER_TOUCHED_THE_EPISODE = "planner.act changed the episode's hospital: plan on imagine() copies only"
PLANNER_CHANGED_THE_DAY = "the day's arrivals differ with the planner: it drew from the episode's streams"


def _play(
    policy: policies.Policy, seed: int, ticks: int = TICKS
) -> tuple[HospitalEDEnv, list[int], list[int]]:
    """One short flat-track episode; returns the env, the actions and ``counters.arrivals`` per tick."""
    env = HospitalEDEnv(scenario=SCENARIO, max_cycles=ticks)
    obs, info = env.reset(seed=seed)
    policy.reset(seed=seed + 1, hospital=env.hospital)
    actions, arrivals = [], [env.hospital.counters.arrivals]
    done = False
    while not done:
        action = policy.act(obs, info["action_mask"])
        assert info["action_mask"][action], f"invalid action {action} chosen"
        actions.append(int(action))
        obs, _, terminated, truncated, info = env.step(action)
        arrivals.append(env.hospital.counters.arrivals)
        done = terminated or truncated
    return env, actions, arrivals


def _state(h: Hospital) -> dict[str, Any]:
    """Everything a snapshot holds, made comparable by value."""
    snap = h.snapshot()
    return {
        "state": tuple(array.tobytes() for array in snap["state"]),  # every state array, by value
        "counters": h.counters.as_dict(),
        "day": id(snap["day_arrays"]),
        "version": h.version,
    }


def test_planner__does_not_change_the_days_arrivals() -> None:
    planned, _, planned_arrivals = _play(PlannerPolicy(**TINY_BUDGET), seed=3)
    heuristic, _, heuristic_arrivals = _play(HeuristicPolicy(), seed=3)
    a, b = planned.hospital.day, heuristic.hospital.day
    assert a.arrival_tick == b.arrival_tick, PLANNER_CHANGED_THE_DAY
    assert a.severity == b.severity, PLANNER_CHANGED_THE_DAY
    assert a.condition == b.condition, PLANNER_CHANGED_THE_DAY
    assert a == b, PLANNER_CHANGED_THE_DAY
    assert planned_arrivals == heuristic_arrivals, PLANNER_CHANGED_THE_DAY


def test_planner__act_leaves_the_episode_hospital_exactly_as_it_was() -> None:
    env = HospitalEDEnv(scenario=SCENARIO, max_cycles=TICKS)
    obs, info = env.reset(seed=5)
    planner = PlannerPolicy(**TINY_BUDGET)
    planner.reset(seed=0, hospital=env.hospital)
    planned = 0
    done = False
    while not done:
        before = _state(env.hospital)
        action = planner.act(obs, info["action_mask"])
        assert _state(env.hospital) == before, PLANNER_TOUCHED_THE_EPISODE
        mask = np.asarray(info["action_mask"], dtype=bool)
        planned += len(candidate_actions(obs, mask, action)) > 1
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    assert planned > 0, "no decision had more than one candidate: the test planned nothing"


def test_planner__never_chooses_an_invalid_action() -> None:
    env, actions, _ = _play(PlannerPolicy(**TINY_BUDGET), seed=7, ticks=20)
    assert env.hospital.counters.invalid_actions == 0
    assert len(actions) == env.hospital.counters.actions


def test_planner__same_seed_same_decisions() -> None:
    _, first, _ = _play(PlannerPolicy(**TINY_BUDGET), seed=11)
    _, second, _ = _play(PlannerPolicy(**TINY_BUDGET), seed=11)
    assert first == second


def test_planner__without_a_simulator_falls_back_to_the_heuristic() -> None:
    env = HospitalEDEnv(scenario=SCENARIO, max_cycles=TICKS)
    obs, info = env.reset(seed=2)
    planner = PlannerPolicy(**TINY_BUDGET)
    planner.reset(seed=0)
    assert planner.act(obs, info["action_mask"]) == HeuristicPolicy().act(obs, info["action_mask"])


def test_planner__only_the_no_op_valid_returns_it_without_planning() -> None:
    env = HospitalEDEnv(scenario=SCENARIO, max_cycles=TICKS)
    obs, _ = env.reset(seed=2)
    planner = PlannerPolicy(**TINY_BUDGET)
    planner.reset(seed=0, hospital=env.hospital)
    only_noop = np.zeros(39, dtype=bool)
    only_noop[0] = True
    assert planner.act(obs, only_noop) == 0


def test_planner__loads_by_name_with_kwargs() -> None:
    planner = policies.load("planner:rollouts=2,horizon=4")
    assert isinstance(planner, PlannerPolicy)
    assert (planner.rollouts, planner.horizon) == (2, 4)
    assert planner.tracks == ("flat",)


@pytest.mark.parametrize("kwargs", [{"rollouts": 0}, {"horizon": 0}, {"rollouts": 2.5}])
def test_planner__rejects_a_bad_budget(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        PlannerPolicy(**kwargs)
