"""Record (or check) the decisions of the heuristic and the planner on fixed days: a
compact fixture that a rewrite of either policy must reproduce action for action
(tests/policies/test_decisions.py).

    python tools/record_decisions.py            # rewrite tests/policies/decisions.json
    python tools/record_decisions.py --check    # exit 1 if the current policies differ

Cases: the heuristic on the flat track (composed env, every scenario, the grader's first
two episode seeds, plus a user scenario with its own ClinicalParams and RewardTable), the
team heuristic on the team track (AEC env, every scenario), and the planner with its
default budget on the grader's first episode of every scenario, plus two other budgets
on shorter days (horizon 16; a tiny budget). Per case: every action, and the episode's
score. The fixture depends on the day's draws and ``imagine()``'s: re-record it (and say
so) only with a deliberate change to how random numbers are drawn.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading.common import episode_seed, policy_seed  # noqa: E402
from hospital_marl import BUILTIN_SCENARIOS, ClinicalParams, RewardTable, Scenario  # noqa: E402
from hospital_marl.envs.aec import HospitalAECEnv  # noqa: E402
from hospital_marl.envs.composed import HospitalEDEnv  # noqa: E402

FIXTURE = ROOT / "tests" / "policies" / "decisions.json"

USER_SCENARIO = Scenario(
    name="decisions_user_ward",
    general_beds=6,
    icu_beds=2,
    ventilators=1,
    arrival_rate=1.6,
    amplitude=0.2,
    severity_mix=(0.1, 0.15, 0.25, 0.3, 0.2),
    condition_mix=(0.2, 0.4, 0.1, 0.2, 0.1),
)
USER_REWARDS = RewardTable(discharge=3.0, death=-11.0, waiting_per_tick=-0.3, survival_bonus=20.0)
USER_CLINICAL = ClinicalParams(death_waiting=0.2, wean_ticks=2, bounce_back_per_severity=0.2)


def play_flat(policy: Any, scenario: Any, seed: int, max_cycles: int | None = None, **kwargs: Any) -> dict:
    """One flat-track episode as the grader plays it (policy seeded with ``policy_seed``)."""
    env = HospitalEDEnv(scenario=scenario, max_cycles=max_cycles, **kwargs)
    obs, info = env.reset(seed=seed)
    policy.reset(seed=policy_seed(seed), hospital=env.hospital)
    actions, done = [], False
    while not done:
        action = int(policy.act(obs, info["action_mask"]))
        actions.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    return {"actions": actions, "score": env.hospital.score()}


def play_team(policy: Any, scenario: Any, seed: int) -> dict:
    """One team-track episode as the grader plays it (AEC env, role actions in turn)."""
    env = HospitalAECEnv(scenario=scenario)
    env.reset(seed=seed)
    policy.reset(seed=policy_seed(seed), hospital=env.hospital)
    actions = []
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        action = (
            None
            if terminated or truncated
            else int(policy.act_role(agent, obs["observation"], obs["action_mask"]))
        )
        if action is not None:
            actions.append(action)
        env.step(action)
    return {"actions": actions, "score": env.hospital.score()}


def cases() -> Iterator[tuple[str, Callable[[], dict]]]:
    from policies.heuristic import HeuristicPolicy, TeamHeuristicPolicy
    from policies.planner import PlannerPolicy

    for name in BUILTIN_SCENARIOS:
        for i in (0, 1):
            seed = episode_seed(0, name, i)
            yield f"heuristic/{name}/{i}", lambda n=name, s=seed: play_flat(HeuristicPolicy(), n, s)
        seed = episode_seed(0, name, 0)
        yield f"team_heuristic/{name}/0", lambda n=name, s=seed: play_team(TeamHeuristicPolicy(), n, s)
        yield f"planner/{name}/0", lambda n=name, s=seed: play_flat(PlannerPolicy(), n, s)
    user = {"clinical": USER_CLINICAL, "rewards": USER_REWARDS}
    yield "heuristic/user/3", lambda: play_flat(HeuristicPolicy(), USER_SCENARIO, 3, **user)
    yield "planner/user/3", lambda: play_flat(PlannerPolicy(), USER_SCENARIO, 3, max_cycles=40, **user)
    yield (
        "planner:horizon=16/surge/5",
        lambda: play_flat(PlannerPolicy(horizon=16), "surge", 5, max_cycles=30),
    )
    yield (
        "planner:tiny/mass_casualty/6",
        lambda: play_flat(
            PlannerPolicy(rollouts=3, horizon=2, first=1, keep=0.34, bonus=0.0), "mass_casualty", 6
        ),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the fixture instead of writing it")
    args = parser.parse_args(argv)
    got = {name: run() for name, run in cases()}
    if args.check:
        want = json.loads(FIXTURE.read_text())
        bad = sorted(name for name in set(got) | set(want) if got.get(name) != want.get(name))
        print("differ:", ", ".join(bad) if bad else "none")
        return 1 if bad else 0
    FIXTURE.write_text(json.dumps(got, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"wrote {len(got)} cases to {FIXTURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
