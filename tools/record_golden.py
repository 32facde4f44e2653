"""Record (or check) the golden trajectories: what the simulator does, kept as a
compact fixture every later change must reproduce bit for bit (SPEC §10 "Same
days, same trajectories"). Recorded from the pure-Python core before the kernel
rewrite; re-recorded at the one deliberate change to how random numbers are
drawn (the counter-based generator; equivalence: benchmarks/rng_equivalence.py).

    python tools/record_golden.py            # rewrite tests/golden/trajectories.json
    python tools/record_golden.py --check    # exit 1 if the current core differs

Per step: a short BLAKE2 digest of the observation bytes and the mask bytes,
and the reward (exact: JSON round-trips floats). Per episode: the metrics and
counters. Every scenario, three seeds, masked-random and heuristic actions
through the composed env (gym.make), the team env, the AEC env, and one
user-defined scenario with its own RewardTable and ClinicalParams.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import hospital_marl
from hospital_marl import BUILTIN_SCENARIOS, ROLES, ClinicalParams, RewardTable, Scenario

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "golden" / "trajectories.json"
SEEDS = (0, 1, 7)

USER_SCENARIO = Scenario(
    name="golden_user_ward",
    general_beds=7,
    icu_beds=3,
    ventilators=2,
    arrival_rate=1.3,
    amplitude=0.1,
    severity_mix=(0.1, 0.2, 0.3, 0.25, 0.15),
    condition_mix=(0.2, 0.4, 0.1, 0.2, 0.1),
)
USER_REWARDS = RewardTable(discharge=3.0, death=-11.0, waiting_per_tick=-0.3, icu_busy_threshold=0.3)
USER_CLINICAL = ClinicalParams(death_waiting=0.2, wean_ticks=2, bounce_back_per_severity=0.2)


def digest(*arrays: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=6)
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def obs_digest(obs: dict[str, np.ndarray], mask: np.ndarray) -> str:
    return digest(*(obs[k] for k in sorted(obs)), np.asarray(mask, dtype=np.int8))


def flat_policy(kind: str, seed: int) -> Callable[[dict, np.ndarray], int]:
    if kind == "heuristic":
        from policies.heuristic import flat_heuristic_action

        return lambda obs, mask: flat_heuristic_action(obs, mask)
    rng = np.random.default_rng(1000 + seed)
    if kind == "masked_random":
        return lambda obs, mask: int(rng.choice(np.flatnonzero(mask)))
    # "noisy": mostly masked-random, sometimes any action (invalid ones too)
    return lambda obs, mask: (
        int(rng.integers(39)) if rng.random() < 0.2 else int(rng.choice(np.flatnonzero(mask)))
    )


def record_gym(env_id: str, scenario: Any, seed: int, policy: str, **kwargs: Any) -> dict[str, Any]:
    env = gym.make(env_id, scenario=scenario, **kwargs)
    obs, info = env.reset(seed=seed)
    steps, rewards = [], []
    team = env_id == hospital_marl.TEAM_ENV_ID
    rng = np.random.default_rng(2000 + seed)
    act = flat_policy(policy, seed) if not team else None
    while True:
        mask = env.unwrapped.action_masks()
        steps.append(obs_digest(obs, mask))
        if team:
            parts, start = [], 0
            for role in ROLES:
                n = hospital_marl.ROLE_ACTION_COUNTS[role]
                parts.append(int(rng.choice(np.flatnonzero(mask[start : start + n]))))
                start += n
            action = np.array(parts)
        else:
            action = act(obs, mask)
        obs, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        if terminated or truncated:
            steps.append(obs_digest(obs, env.unwrapped.action_masks()))
            break
    return {"steps": steps, "rewards": rewards, "metrics": info["metrics"], "counters": info["counters"]}


def record_aec(scenario: Any, seed: int, reward_mode: str) -> dict[str, Any]:
    env = hospital_marl.env(scenario=scenario, reward_mode=reward_mode)
    env.reset(seed=seed)
    rng = np.random.default_rng(3000 + seed)
    steps, rewards = [], []
    for _agent in env.agent_iter():
        obs, reward, terminated, truncated, _info = env.last()
        steps.append(digest(obs["observation"], obs["action_mask"], env.state()))
        rewards.append(reward)
        if terminated or truncated:
            action = None
        elif rng.random() < 0.1:
            action = int(rng.integers(len(obs["action_mask"])))
        else:
            action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        env.step(action)
    h = env.unwrapped.hospital
    return {"steps": steps, "rewards": rewards, "metrics": h.metrics(), "counters": h.counters.as_dict()}


def cases() -> Iterator[tuple[str, Callable[[], dict[str, Any]]]]:
    composed = hospital_marl.COMPOSED_ENV_ID
    for scenario in BUILTIN_SCENARIOS:
        for seed in SEEDS:
            for policy in ("masked_random", "heuristic"):
                yield (
                    f"composed/{scenario}/{seed}/{policy}",
                    (lambda s=scenario, d=seed, p=policy: record_gym(composed, s, d, p)),
                )
        yield f"composed/{scenario}/5/noisy", lambda s=scenario: record_gym(composed, s, 5, "noisy")
        yield f"team/{scenario}/3", lambda s=scenario: record_gym(hospital_marl.TEAM_ENV_ID, s, 3, "")
    yield "aec/surge/4/team", lambda: record_aec("surge", 4, "team")
    yield "aec/mass_casualty/2/role", lambda: record_aec("mass_casualty", 2, "role")
    user = {"rewards": USER_REWARDS, "clinical": USER_CLINICAL}
    for seed in SEEDS:
        yield (
            f"composed/user/{seed}/noisy",
            (lambda d=seed: record_gym(composed, USER_SCENARIO, d, "noisy", **user)),
        )
    yield "aec/user/9/role", lambda: record_aec(USER_SCENARIO, 9, "role")


def record() -> dict[str, Any]:
    return {name: make() for name, make in cases()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the fixture instead of writing")
    args = parser.parse_args(argv)
    if args.check:
        golden = json.loads(FIXTURE.read_text())
        bad = [name for name, make in cases() if make() != golden[name]]
        print("golden trajectories:", "OK" if not bad else f"differ: {bad}")
        return 1 if bad else 0
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(record(), separators=(",", ":")) + "\n")
    print(f"wrote {FIXTURE.relative_to(ROOT)} ({FIXTURE.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
