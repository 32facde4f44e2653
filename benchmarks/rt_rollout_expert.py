"""Does one-step policy improvement by rollouts beat ``anatomy_aware``? (issue 25 item 6, step 1)

A DAgger expert must be better than ``anatomy_aware`` *and* label any state from what that state
shows. The candidate measured here: at a state, for each valid action, copy the plan, take the
action, finish the episode with a base policy that is re-entered from the state alone, and pick
the action whose finished plan scores highest (the return = the final score). Ties go to the base
policy's own action, so the expert departs from the base only for a strict gain.

The bases (``--bases``, training/rt_rollout.py): ``aa``, ``anatomy_aware`` re-entered from the
state (:func:`~training.rt_rollout.resume`; not sequentially consistent, so run it ``--fortified``:
the plain rollout over it cycles), or an RT agent that is a pure function of the observation (``ppo``,
a ``.npz``). ``--tolerance``: leave the base's action only for a larger gain.

    python -m benchmarks.rt_rollout_expert --episodes 10 --split validation

prints, per task, ``anatomy_aware`` and the rollout expert on the same patients (paired
difference ± s.e.) and the CPU seconds per episode of each.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from grading.radiotherapy import split_seed
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.radiotherapy.baselines import AnatomyAwarePolicy
from training.rt_rollout import RolloutExpert

ALIASES = {"aa": "anatomy_aware"}


def play(task: str, split: str, seed: int, expert: RolloutExpert | None) -> tuple[float, float, int]:
    """One episode (``anatomy_aware`` when ``expert`` is None); the score, CPU seconds, simulated steps."""
    env = RadiotherapyPlanningEnv(task, split=split)
    observation, _ = env.reset(seed=seed)
    start = time.process_time()
    policy = AnatomyAwarePolicy()
    policy.reset()
    if expert is not None:
        expert.sim_steps = 0
        expert.start(env, observation)
    while not env.plan.done:
        if expert is not None:
            action = expert.act(env, observation)
        else:
            action = policy.act(observation, env.plan.action_mask())
        observation, _, _, _, _ = env.step(action)
    return env.plan.score, time.process_time() - start, expert.sim_steps if expert else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--split", default="validation")
    parser.add_argument("--seed", type=int, default=1000, help="the training runs' validation eval_seed")
    parser.add_argument("--tasks", nargs="*", default=list(BUILTIN_TASKS))
    parser.add_argument("--json", default=None, help="write the per-episode figures here")
    parser.add_argument(
        "--tolerance", type=float, default=0.0, help="leave the base's action only above this gain"
    )
    parser.add_argument(
        "--bases", nargs="+", default=["aa"], help="aa (resumed anatomy_aware) and/or RT agent names (ppo)"
    )
    parser.add_argument(
        "--fortified", action="store_true", help="follow the best trajectory found so far unless beaten"
    )
    args = parser.parse_args()
    out: dict[str, Any] = {
        "split": args.split,
        "seed": args.seed,
        "bases": args.bases,
        "fortified": args.fortified,
        "tolerance": args.tolerance,
        "tasks": {},
    }
    for task in args.tasks:
        rows = []
        for i in range(args.episodes):
            seed = split_seed(args.seed, task, args.split, i)
            aa, aa_cpu, _ = play(task, args.split, seed, None)
            ro, ro_cpu, sim = play(
                task,
                args.split,
                seed,
                RolloutExpert([ALIASES.get(b, b) for b in args.bases], args.fortified, args.tolerance),
            )
            rows.append((aa, ro, aa_cpu, ro_cpu, sim))
            print(
                f"{task} {i}: anatomy_aware {aa:.4f}  rollout {ro:.4f}  ({ro_cpu:.1f} CPU-s, {sim} sim)",
                flush=True,
            )
        a = np.array(rows)
        diff = a[:, 1] - a[:, 0]
        se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else float("nan")
        out["tasks"][task] = {
            "anatomy_aware": float(a[:, 0].mean()),
            "rollout": float(a[:, 1].mean()),
            "difference": float(diff.mean()),
            "difference_se": se,
            "cpu_s_per_episode": {"anatomy_aware": float(a[:, 2].mean()), "rollout": float(a[:, 3].mean())},
            "sim_steps_per_episode": float(a[:, 4].mean()),
            "episodes": [list(map(float, r)) for r in rows],
        }
        t = out["tasks"][task]
        print(
            f"== {task}: anatomy_aware {t['anatomy_aware']:.4f} rollout {t['rollout']:.4f} "
            f"diff {t['difference']:+.4f} ± {se:.4f}; CPU-s/episode {t['cpu_s_per_episode']['rollout']:.1f}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
