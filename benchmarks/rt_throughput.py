"""Steps per second of the radiotherapy planning env, next to CartPole (SPEC-RT §7: ≥ 5,000 on one core).

Measured in one process, one run, so the machine's speed cancels out of the ratios:

- **CartPole-v1** through ``gym.make`` with ``action_space.sample()``: the reference;
- **RT env** per task, through ``gym.make`` (Gymnasium's checker/order wrappers) and
  ``.unwrapped``: masked random actions (uniforms pre-drawn outside the timed region;
  ``valid[int(u * len(valid))]`` from ``info["action_mask"]``), observation and ``info``
  included, resets inside the timed loop (each reset draws a new phantom, whose beams
  are then computed on first use: that cost is in the figure);
- **bare core** (``Plan``): ``action_mask()`` + ``step()``, the floor the env adds to.

Each row is timed ``--repeats`` times round-robin and the best repeat is reported (a
shared machine's fastest run is the least disturbed; ``--clock process_time`` counts CPU
time instead, for a badly oversubscribed machine). This script prints figures; no test
asserts on them. Run from the repository root::

    python benchmarks/rt_throughput.py [--steps 20000] [--repeats 3] [--clock process_time]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hospital_marl  # noqa: F401  (registers the ids)
from hospital_marl.radiotherapy import BUILTIN_TASKS, Plan, task_env_id

TARGET = 5_000


def cartpole(steps: int) -> Callable[[np.ndarray], int]:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    env.action_space.seed(0)

    def run(_: np.ndarray) -> int:
        for _ in range(steps):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        return steps

    return run


def rt_env(task: str, steps: int, unwrapped: bool) -> Callable[[np.ndarray], int]:
    env = gym.make(task_env_id(task))
    if unwrapped:
        env = env.unwrapped
    _, info = env.reset(seed=0)
    state = {"info": info}

    def run(uniforms: np.ndarray) -> int:
        info = state["info"]
        for i in range(steps):
            valid = np.flatnonzero(info["action_mask"])
            _, _, terminated, truncated, info = env.step(int(valid[int(uniforms[i] * len(valid))]))
            if terminated or truncated:
                _, info = env.reset()
        state["info"] = info
        return steps

    return run


def core(task: str, steps: int) -> Callable[[np.ndarray], int]:
    plan = Plan(task)
    rng = np.random.default_rng(0)
    plan.reset(rng)

    def run(uniforms: np.ndarray) -> int:
        for i in range(steps):
            valid = np.flatnonzero(plan.action_mask())
            plan.step(int(valid[int(uniforms[i] * len(valid))]))
            if plan.done:
                plan.reset(rng)
        return steps

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="steps per timed repeat (default 20000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--clock",
        choices=("perf_counter", "process_time"),
        default="perf_counter",
        help="wall time (default) or this process's CPU time (for a badly oversubscribed machine)",
    )
    args = parser.parse_args()
    clock = getattr(time, args.clock)
    rows: dict[str, Callable[[np.ndarray], int]] = {"CartPole-v1 (gym.make)": cartpole(args.steps)}
    for task in BUILTIN_TASKS:
        rows[f"{task} (gym.make)"] = rt_env(task, args.steps, unwrapped=False)
        rows[f"{task} (unwrapped)"] = rt_env(task, args.steps, unwrapped=True)
        rows[f"{task} (core Plan)"] = core(task, args.steps)
    rng = np.random.default_rng(1)
    for run in rows.values():  # warm-up
        run(rng.random(args.steps))
    best = {name: 0.0 for name in rows}
    for _ in range(args.repeats):
        for name, run in rows.items():
            uniforms = rng.random(args.steps)
            gc.collect()
            t0 = clock()
            n = run(uniforms)
            best[name] = max(best[name], n / (clock() - t0))
    ref = best["CartPole-v1 (gym.make)"]
    print(f"clock: {args.clock}, {args.steps} steps per repeat, best of {args.repeats}")
    print(f"{'row':34s} {'steps/s':>10s} {'× CartPole':>11s}  target")
    for name, rate in best.items():
        target = (
            ""
            if name.startswith("CartPole")
            else ("met" if rate >= TARGET else "NOT met") + f" (≥ {TARGET:,})"
        )
        print(f"{name:34s} {rate:10,.0f} {rate / ref:11.3f}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
