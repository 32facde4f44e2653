"""How fast the radiotherapy render modes are, over the states of played episodes.

For each built-in task, one episode of masked random actions is played on the core
``Plan`` (seed ``--seed``); its states are kept as snapshots. Prints frames/s for
``rgb_array`` and ``ansi`` over those states and, as a reference measured in the same run,
the plan's steps/s (``action_mask()`` + ``step()``) while playing them: a frame that costs
a few steps is nothing next to an episode when recording a video. No test asserts on these
figures. Run from the repository root::

    python -m benchmarks.rt_render_speed [--rounds 5] [--episodes 50] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from hospital_marl.radiotherapy import BUILTIN_TASKS, Plan
from hospital_marl.radiotherapy.envs.render import FRAME_SHAPE, render_ansi, render_rgb_array


def play(task: str, seed: int, episodes: int) -> tuple[Plan, list[tuple], float]:
    """The plan, one snapshot per state of its last masked random episode (of ``episodes``), and
    the steps/s over all of them (resets included, as in ``rt_throughput``)."""
    plan = Plan(task)
    rng = np.random.default_rng(seed)
    plan.reset(rng)  # the first reset may calibrate the task: not counted
    seconds, steps = 0.0, 0
    for _ in range(episodes):
        start = time.perf_counter()
        plan.reset(rng)
        seconds += time.perf_counter() - start
        states = [plan.snapshot()]
        while not plan.done:
            start = time.perf_counter()
            valid = np.flatnonzero(plan.action_mask())
            plan.step(int(valid[int(rng.random() * valid.size)]))
            seconds += time.perf_counter() - start
            steps += 1
            states.append(plan.snapshot())
    return plan, states, steps / seconds


def frames_per_second(
    render: Callable[[Plan], object], plan: Plan, states: list[tuple], rounds: int
) -> float:
    spent = 0.0
    for state in states * rounds:
        plan.restore(state)  # untimed: the frame is what is measured
        start = time.perf_counter()
        render(plan)
        spent += time.perf_counter() - start
    return rounds * len(states) / spent


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=5, help="passes over each episode's states")
    parser.add_argument("--episodes", type=int, default=50, help="episodes played for the reference")
    args = parser.parse_args()
    print(f"rgb_array frame {FRAME_SHAPE}; seed {args.seed}, {args.rounds} rounds")
    for task in BUILTIN_TASKS:
        plan, states, steps_per_s = play(task, args.seed, args.episodes)
        render_rgb_array(plan)  # warm any cache
        rgb = frames_per_second(render_rgb_array, plan, states, args.rounds)
        ansi = frames_per_second(render_ansi, plan, states, args.rounds)
        print(
            f"{task:16s} {len(states):3d} states | plan {steps_per_s:8,.0f} steps/s | rgb_array "
            f"{rgb:6,.0f} frames/s ({1e3 / rgb:5.2f} ms, {steps_per_s / rgb:5.1f} steps' time) | ansi "
            f"{ansi:6,.0f} frames/s ({1e3 / ansi:5.2f} ms)"
        )


if __name__ == "__main__":
    main()
