"""One team protocol (hospital_marl.envs.protocol): a team learner is graded on the protocol it was
trained on. Each test plays the same deterministic policy both ways on the batched multi-agent env
(the trainers' env: ``step`` is the simultaneous protocol, ``turn``/``end_tick`` the AEC one) and
checks that the grader's team track reproduces exactly the way the policy says it was trained."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import policies
from grading.common import episode_seed
from grading.grader import run_team_episode
from hospital_marl.core.actions import ROLES
from hospital_marl.core.scenarios import resolve_scenario
from hospital_marl.envs.protocol import AEC, PROTOCOLS, SIMULTANEOUS, TURN_ORDER, check_protocol
from hospital_marl.envs.vector import HospitalMARLVectorEnv
from policies.heuristic import HeuristicPolicy
from policies.protocol import SimultaneousTeamPolicy, as_trained

SCENARIO = "mass_casualty"  # crowded: earlier roles often change what later roles see


def trained_rollout(policy: Any, protocol: str, seed: int) -> tuple[float, dict[str, int]]:
    """One day of ``policy`` on the training env under ``protocol``: its graded score and counts."""
    env = HospitalMARLVectorEnv(1, SCENARIO)
    obs, _ = env.reset(seed=seed)
    policy.reset(seed=0)
    while True:
        if protocol == SIMULTANEOUS:
            actions = {
                role: [policy.act_role(role, obs[role]["observation"][0], obs[role]["action_mask"][0])]
                for role in ROLES
            }
            obs, _, term, trunc, info = env.step(actions)
        else:
            for role in TURN_ORDER:
                seen = env.observations()[role]
                env.turn(role, [policy.act_role(role, seen["observation"][0], seen["action_mask"][0])])
            obs, _, term, trunc, info = env.end_tick()
        if term[ROLES[0]][0] or trunc[ROLES[0]][0]:
            final = info["final_info"]
            return float(final["score"][0]), {k: int(v[0]) for k, v in final["counters"].items()}


def graded(policy: Any, seed: int) -> tuple[float, dict[str, Any]]:
    result = run_team_episode(policy, resolve_scenario(SCENARIO), seed)
    return result.score, result.counts


SEEDS = [episode_seed(0, SCENARIO, i) for i in range(2)]


@pytest.mark.parametrize("seed", SEEDS)
def test_grader__plays_each_protocol_as_the_policy_was_trained(seed: int) -> None:
    """The team heuristic as a stand-in learner: AEC-trained, the grader plays it on its AEC
    observations; simultaneous-trained, on the start-of-tick state with conflicts as the no-op.
    The two protocols give different days, so matching one is not matching the other."""
    aec = trained_rollout(HeuristicPolicy(), AEC, seed)
    simultaneous = trained_rollout(HeuristicPolicy(), SIMULTANEOUS, seed)
    assert aec[0] != simultaneous[0]

    as_aec = graded(as_trained(HeuristicPolicy(), AEC), seed)
    wrapped = as_trained(HeuristicPolicy(), SIMULTANEOUS)
    as_simultaneous = graded(wrapped, seed)
    assert isinstance(wrapped, SimultaneousTeamPolicy)
    assert as_aec[0] == aec[0]
    assert as_simultaneous[0] == simultaneous[0]
    for key in ("deaths", "discharges", "admissions", "invalid_actions", "critical_deaths"):
        assert as_aec[1][key] == aec[1][key]
        assert as_simultaneous[1][key] == simultaneous[1][key]
    # the parallel env's conflicts became the wrapper's no-ops, and the AEC env never saw one
    assert wrapped.conflicts == simultaneous[1]["conflicts"] > 0
    assert as_simultaneous[1]["conflicts"] == 0


@pytest.mark.parametrize("recorded", [None, SIMULTANEOUS, AEC])
def test_fast_run__loads_on_the_protocol_it_records(tmp_path: Path, recorded: str | None) -> None:
    """A fast-trainer run is played on the protocol in its ``fast.json``; one that records none was
    trained before the protocol was recorded, on the simultaneous one."""
    from tests.training.test_fast import mappo_run

    run = mappo_run(tmp_path, "run", frames=300)
    meta_file = run / "fast.json"
    meta = json.loads(meta_file.read_text())
    assert meta["protocol"] == AEC  # the trainer's default: the graded protocol
    if recorded is None:
        del meta["protocol"]
    else:
        meta["protocol"] = recorded
    meta_file.write_text(json.dumps(meta))
    policy = policies.load(str(run))
    expected = AEC if recorded == AEC else SIMULTANEOUS
    assert isinstance(policy, SimultaneousTeamPolicy) == (expected == SIMULTANEOUS)
    seed = SEEDS[0]
    learner = getattr(policy, "inner", policy)  # the actors themselves, as the trainer played them
    assert graded(policy, seed)[0] == trained_rollout(learner, expected, seed)[0]


def test_protocol_names__checked() -> None:
    assert PROTOCOLS == (AEC, SIMULTANEOUS) and tuple(ROLES) == TURN_ORDER
    with pytest.raises(ValueError, match="team protocol must be one of"):
        check_protocol("round_robin")
