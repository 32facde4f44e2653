"""Record (or check) the radiotherapy env's golden trajectories: what the env does, kept as
a compact fixture every later change must reproduce bit for bit (SPEC-RT §3: same seed and
actions, same trajectory). Recorded before the step was made faster (SPEC-RT §7), so a
speed-up that changes an observation, a reward, a mask or an ``info`` value fails.

    python tools/record_rt_golden.py            # rewrite tests/radiotherapy/golden.json
    python tools/record_rt_golden.py --check    # exit 1 if the current env differs

Per step: a short BLAKE2 digest of the observation (every key, with its dtype and shape),
the mask and ``info`` (JSON, floats by their exact repr), and the reward (exact: JSON
round-trips floats) with the termination flags. Per episode: the final ``info`` in full,
the ``ansi`` render, and the metrics and score of a few fixed beam sets through
``Plan.evaluate`` (the planners' path). Every built-in task and a user-defined one, three
seeds, three action streams: masked random (three episodes in a row on one env), noisy
(invalid actions too) and masked random that never locks (so it runs to truncation with up
to seven beams).
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import hospital_marl  # noqa: E402, F401  (registers the ids)
from hospital_marl.radiotherapy import BUILTIN_TASKS, OAR, RT_ENV_ID, get_task, task_env_id  # noqa: E402
from hospital_marl.radiotherapy.core.plan import LOCK, N_ACTIONS  # noqa: E402
from hospital_marl.radiotherapy.core.tasks import Constraint  # noqa: E402

FIXTURE = ROOT / "tests" / "radiotherapy" / "golden.json"
SEEDS = (0, 1, 7)
POLICIES = ("masked_random", "noisy", "no_lock")
BEAM_SETS = (
    ((0,), (10,)),
    ((0, 9, 18, 27), (6, 6, 6, 6)),
    ((3, 8, 14, 20, 25, 31, 35), (1, 4, 7, 10, 5, 8, 2)),
)
"""Fixed beam sets (grid angle indices, weights in tenths) for ``Plan.evaluate``."""


def user_task() -> Any:
    """Prostate's phantom and step limit with a user's own constraints."""
    return get_task({"name": "prostate", "max_steps": 40}).with_overrides(
        name="golden_user_prostate",
        oars=(
            OAR("rectum", 1, (Constraint("mean", 27.0),)),
            OAR("bladder", 3, (Constraint("volume", 60.0, volume=0.3), Constraint("near_max", 80.0))),
        ),
        dose_scale=0.5,
    )


def digest(*arrays: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=6)
    for a in arrays:
        a = np.asarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def info_json(info: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in info.items() if k != "action_mask"}, sort_keys=True)


def step_digest(obs: dict[str, np.ndarray], info: dict[str, Any]) -> str:
    h = digest(*(obs[k] for k in sorted(obs)), info["action_mask"])
    return h + hashlib.blake2b(info_json(info).encode(), digest_size=6).hexdigest()


def policy(kind: str, seed: int) -> Callable[[np.ndarray], int]:
    rng = np.random.default_rng(2000 + seed)
    if kind == "masked_random":
        return lambda mask: int(rng.choice(np.flatnonzero(mask)))
    if kind == "noisy":  # mostly masked random, sometimes any action (invalid ones too)
        return lambda mask: (
            int(rng.integers(N_ACTIONS)) if rng.random() < 0.25 else int(rng.choice(np.flatnonzero(mask)))
        )

    def no_lock(mask: np.ndarray) -> int:
        valid = np.flatnonzero(mask)
        return int(rng.choice(valid[valid != LOCK]))

    return no_lock


def record(env: gym.Env, seed: int, kind: str, episodes: int = 1) -> dict[str, Any]:
    """``episodes`` in a row on one env: the first reset seeded, the next ones not."""
    choose = policy(kind, seed)
    steps, rewards, flags = [], [], []
    kept = []  # held to the end: an observation must not change after it was returned
    for episode in range(episodes):
        obs, info = env.reset(seed=seed if episode == 0 else None)
        steps.append(step_digest(obs, info))
        kept.append(obs)
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(choose(info["action_mask"]))
            steps.append(step_digest(obs, info))
            kept.append(obs)
            rewards.append(reward)
            flags.append(int(terminated) + 2 * int(truncated))
            done = terminated or truncated
    plan = env.unwrapped.plan
    evaluated = []
    for angles, weights in BEAM_SETS:
        metrics, score = plan.evaluate(np.array(angles), np.array(weights))
        evaluated.append([score, metrics.as_dict(plan.task)])
    return {
        "steps": steps,
        "rewards": rewards,
        "flags": flags,
        "kept": digest(*(o[k] for o in kept for k in sorted(o))),
        "final_info": json.loads(info_json(info)),
        "ansi": env.unwrapped.render() if env.unwrapped.render_mode == "ansi" else None,
        "evaluate": evaluated,
        "dvhs": digest(plan.dvhs()),
    }


def cases() -> Iterator[tuple[str, Callable[[], dict[str, Any]]]]:
    for task in BUILTIN_TASKS:
        for seed in SEEDS:
            for kind in POLICIES:
                yield (
                    f"{task}/{kind}/seed{seed}",
                    lambda t=task, s=seed, k=kind: record(
                        gym.make(task_env_id(t), render_mode="ansi"), s, k, 3 if k == "masked_random" else 1
                    ),
                )
    for seed in SEEDS:
        yield (
            f"user/masked_random/seed{seed}",
            lambda s=seed: record(
                gym.make(RT_ENV_ID, task=user_task(), render_mode="ansi"), s, "masked_random", 3
            ),
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the fixture instead of writing it")
    args = parser.parse_args()
    got = {name: run() for name, run in cases()}
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if args.check:
        want = json.loads(FIXTURE.read_text())
        bad = sorted(n for n in set(got) | set(want) if json.loads(json.dumps(got.get(n))) != want.get(n))
        print("\n".join(f"differs: {n}" for n in bad) or f"all {len(got)} trajectories reproduced")
        return 1 if bad else 0
    FIXTURE.write_text(text)
    print(f"wrote {FIXTURE} ({len(got)} trajectories, {len(text):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
