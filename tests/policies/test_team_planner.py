"""The team track's lookahead planner: plans only on imagined copies, never on the episode itself.

Tiny budgets and short episodes (``max_cycles``) keep these tests fast; what they check does
not depend on the budget (the flat planner's tests, ``test_planner.py``, do the same).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import policies
from grading.grader import grade
from hospital_marl.core.actions import FLAT_OF, NOOP, ROLE_FLAT, ROLES, Kind
from hospital_marl.core.hospital import Hospital
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS
from hospital_marl.envs.aec import HospitalAECEnv
from hospital_marl.envs.observations import ObservationBuilder
from policies.base import flat_mask_from_role, role_blocks
from policies.heuristic import TeamHeuristicPolicy
from policies.planner import TeamPlannerPolicy, candidate_actions
from tests.helpers import scripted_hospital

TINY_BUDGET: dict[str, Any] = {"rollouts": 2, "horizon": 3, "first": 1}
TINY_SPEC = "team_planner:rollouts=2,horizon=3,first=1"
TICKS = 12
SCENARIO = "surge"  # busy from the start: most roles' turns have several candidates

PLANNER_TOUCHED_THE_EPISODE = "act_role changed the episode's hospital: plan on imagine() copies only"
PLANNER_CHANGED_THE_DAY = "the day's arrivals differ with the planner: it drew from the episode's streams"


def _play(
    policy: policies.Policy, seed: int, ticks: int = TICKS
) -> tuple[HospitalAECEnv, list[int], list[int]]:
    """One short team-track episode (AEC, as the grader plays it); returns the env, the role
    actions in turn and ``counters.arrivals`` after every tick."""
    env = HospitalAECEnv(scenario=SCENARIO, max_cycles=ticks)
    env.reset(seed=seed)
    policy.reset(seed=seed + 1, hospital=env.hospital)
    actions, arrivals = [], [env.hospital.counters.arrivals]
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        action = None
        if not (terminated or truncated):
            action = int(policy.act_role(agent, obs["observation"], obs["action_mask"]))
            assert obs["action_mask"][action], f"{agent}: invalid action {action} chosen"
            actions.append(action)
        env.step(action)
        if agent == ROLES[-1] and action is not None:
            arrivals.append(env.hospital.counters.arrivals)
    return env, actions, arrivals


def _state(h: Hospital) -> dict[str, Any]:
    """Everything a snapshot holds, made comparable by value."""
    snap = h.snapshot()
    return {
        "state": tuple(array.tobytes() for array in snap["state"]),
        "counters": h.counters.as_dict(),
        "day": id(snap["day_arrays"]),
        "version": h.version,
    }


def test_team_planner__never_acts_invalid_over_a_graded_episode_of_every_scenario() -> None:
    report = grade(TINY_SPEC, episodes=1, seed=0, track="team")
    assert sorted(report["scenarios"]) == sorted(BUILTIN_SCENARIOS)
    for name, scenario in report["scenarios"].items():
        counts = scenario["counts"]
        assert counts["ticks"] > 0, name
        assert counts["invalid_actions"] == 0, f"{name}: {counts['invalid_actions']} invalid actions"
        assert counts["conflicts"] == 0, f"{name}: an action made impossible by an earlier role"


def test_team_planner__does_not_change_the_days_arrivals() -> None:
    planned, planned_actions, planned_arrivals = _play(TeamPlannerPolicy(**TINY_BUDGET), seed=3)
    heuristic, heuristic_actions, heuristic_arrivals = _play(TeamHeuristicPolicy(), seed=3)
    assert planned_actions != heuristic_actions, "the planner never deviated: the test shows nothing"
    assert planned.hospital.day == heuristic.hospital.day, PLANNER_CHANGED_THE_DAY
    assert planned_arrivals == heuristic_arrivals, PLANNER_CHANGED_THE_DAY


def test_team_planner__act_role_leaves_the_episode_hospital_exactly_as_it_was() -> None:
    env = HospitalAECEnv(scenario=SCENARIO, max_cycles=TICKS)
    env.reset(seed=5)
    planner = TeamPlannerPolicy(**TINY_BUDGET)
    planner.reset(seed=0, hospital=env.hospital)
    planned = set()
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        action = None
        if not (terminated or truncated):
            before = _state(env.hospital)  # the random key is part of the state
            action = planner.act_role(agent, obs["observation"], obs["action_mask"])
            assert _state(env.hospital) == before, PLANNER_TOUCHED_THE_EPISODE
            if obs["action_mask"].sum() > 1:
                planned.add(agent)
        env.step(action)
    assert planned, "no role ever had a choice: the test planned nothing"


def test_team_planner__same_seed_same_decisions() -> None:
    _, first, _ = _play(TeamPlannerPolicy(**TINY_BUDGET), seed=11)
    _, second, _ = _play(TeamPlannerPolicy(**TINY_BUDGET), seed=11)
    assert first == second


def test_team_planner__without_a_simulator_plays_the_team_heuristic() -> None:
    env = HospitalAECEnv(scenario=SCENARIO, max_cycles=4)
    env.reset(seed=2)
    planner, heuristic = TeamPlannerPolicy(**TINY_BUDGET), TeamHeuristicPolicy()
    planner.reset(seed=0)  # no hospital: nothing to imagine with
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        action = None
        if not (terminated or truncated):
            action = planner.act_role(agent, obs["observation"], obs["action_mask"])
            assert action == heuristic.act_role(agent, obs["observation"], obs["action_mask"])
        env.step(action)


def test_team_planner__frees_the_icu_for_a_critical_patient_where_the_team_heuristic_waits() -> None:
    """SPEC §2's numbers make waiting clearly worse: a severity-5 patient in a general bed dies
    with probability 0.11 a tick (0.01 in the ICU on a ventilator), a death costs 15, while the
    only ICU bed holds a severity-1 patient with up to 8 ticks of treatment left, whom an early
    discharge costs 3 x 1 = 3 (and a bounce-back risk). The team heuristic's bed manager steps
    down only *ready* ICU patients, so it waits; the planner must free the bed (the triage
    admits the critical patient to it on the next tick)."""
    h = scripted_hospital(
        [
            {"tick": 0, "severity": 1, "condition": 1, "q": 1.0},  # the longest ICU treatment
            {"tick": 1, "severity": 5, "condition": 1},
        ],
        general_beds=1,
        icu_beds=1,
        ventilators=1,
    )
    h.act("triage", ROLE_FLAT["triage"].index(FLAT_OF[(Kind.ADMIT_ICU, 0)]))  # the ICU is now full
    h.act("bed_manager", 0)
    h.act("ventilator_officer", 0)
    h.tick()
    h.act("triage", ROLE_FLAT["triage"].index(FLAT_OF[(Kind.ADMIT_GENERAL, 0)]))  # the team heuristic's own
    builder = ObservationBuilder(h)
    obs, mask = builder.role("bed_manager"), h.role_mask_array("bed_manager")
    step_down_early = ROLE_FLAT["bed_manager"].index(FLAT_OF[(Kind.DISCHARGE_ICU, 0)])
    assert mask[step_down_early], "the scripted state lost its point: no ICU discharge is valid"
    assert TeamHeuristicPolicy().act_role("bed_manager", obs, mask) == 0, "the heuristic no longer waits here"

    planner = TeamPlannerPolicy()
    planner.reset(seed=0, hospital=h)
    assert planner.act_role("bed_manager", obs, mask) == step_down_early


def test_team_planner__only_the_no_op_valid_returns_it() -> None:
    env = HospitalAECEnv(scenario=SCENARIO, max_cycles=TICKS)
    env.reset(seed=2)
    planner = TeamPlannerPolicy(**TINY_BUDGET)
    planner.reset(seed=0, hospital=env.hospital)
    obs = env.observe("triage")["observation"]
    only_noop = np.zeros(len(ROLE_FLAT["triage"]), np.int8)
    only_noop[0] = 1
    assert planner.act_role("triage", obs, only_noop) == 0


def test_team_planner__loads_by_name_plays_only_the_team_track() -> None:
    planner = policies.load("team_planner:rollouts=2,horizon=4")
    assert isinstance(planner, TeamPlannerPolicy)
    assert (planner.rollouts, planner.horizon) == (2, 4)
    assert planner.tracks == ("team",)
    with pytest.raises(NotImplementedError):
        planner.act({}, np.ones(39, bool))
    with pytest.raises(ValueError, match="unknown role"):
        planner.act_role("surgeon", np.zeros(3, np.float32), np.ones(3, np.int8))


@pytest.mark.parametrize("kwargs", [{"rollouts": 0}, {"horizon": 0}, {"keep": 1.5}])
def test_team_planner__rejects_a_bad_budget(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        TeamPlannerPolicy(**kwargs)


@pytest.mark.parametrize("role", ROLES)
def test_team_planner__rollout_plays_the_team_heuristic_in_aec_order(role: str) -> None:
    """The compiled rollout is the team track played on the imagined future: the candidate, the
    later roles' rules this tick (each after the one before acted), the tick, then every role's
    rule a tick: the same patients end in the same places as when the AEC rhythm is played
    through the simulator's own API with :class:`TeamHeuristicPolicy` on each role's observation."""
    env = HospitalAECEnv(scenario=SCENARIO)
    env.reset(seed=4)
    heuristic = TeamHeuristicPolicy()
    for _ in range(20):  # a busy ward
        for agent in ROLES:
            obs = env.observe(agent)
            env.step(heuristic.act_role(agent, obs["observation"], obs["action_mask"]))
    for agent in ROLES[: ROLES.index(role)]:  # the roles before ``role`` have acted this tick
        obs = env.observe(agent)
        env.step(heuristic.act_role(agent, obs["observation"], obs["action_mask"]))
    handle, horizon = env.hospital.handle(), 6
    planner = TeamPlannerPolicy(horizon=horizon)
    candidate = ROLE_FLAT[role][0]  # the no-op: valid for every role

    compiled = handle.imagine(123)
    planner.evaluate_role(role, compiled, [candidate])

    played = handle.imagine(123)
    played.act(role, 0)
    for tick in range(horizon):
        for agent in ROLES[ROLES.index(role) + 1 :] if tick == 0 else ROLES:
            observation = ObservationBuilder(played).role(agent)
            played.act(agent, heuristic.act_role(agent, observation, played.role_mask_array(agent)))
        played.tick()
    assert played.tick_count == env.hospital.tick_count + horizon
    assert compiled.counters.as_dict() == played.counters.as_dict()
    assert compiled.census() == played.census()


def test_candidate_actions__per_role_are_the_flat_candidates_of_that_role_from_its_own_blocks() -> None:
    """A role's candidates are its own actions (and the no-op) among the flat planner's, read from
    the role's AEC observation alone: together the roles propose exactly the flat candidates."""
    env = HospitalAECEnv(scenario=SCENARIO)
    env.reset(seed=6)
    heuristic = TeamHeuristicPolicy()
    checked = 0
    for _ in range(30):
        h = env.hospital
        composed, flat_mask = ObservationBuilder(h).composed(), h.flat_mask_array()
        union = {NOOP}
        for role in ROLES:
            role_mask = flat_mask_from_role(role, h.role_mask_array(role))
            own = candidate_actions(
                role_blocks(role, env.observe(role)["observation"]), role_mask, NOOP, (role,)
            )
            assert set(own) <= set(ROLE_FLAT[role]), f"{role} proposed another role's action: {own}"
            union |= set(own)
        assert union == set(candidate_actions(composed, flat_mask, NOOP))
        checked += len(union) > 2
        for agent in ROLES:
            obs = env.observe(agent)
            env.step(heuristic.act_role(agent, obs["observation"], obs["action_mask"]))
    assert checked, "no state had candidates of two roles: the test compared nothing"
    with pytest.raises(ValueError, match="unknown roles"):
        candidate_actions(composed, flat_mask, NOOP, ("surgeon",))
