"""How fast the render modes are, over the states of one played episode.

Prints frames/s for ``rgb_array`` and ``ansi`` and, as a reference measured in
the same run, simulator steps/s (one masked random action + one tick): a
render mode that is cheap next to a step costs nothing noticeable when
recording videos. Run from the repository root::

    python -m benchmarks.render_speed [--scenario surge] [--rounds 50]
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable

import numpy as np

from hospital_marl.core import Hospital
from hospital_marl.envs.render import FRAME_SHAPE, render_ansi, render_rgb_array


def play_episode(scenario: str, seed: int) -> tuple[list[Hospital], float]:
    """The episode's states (one copy per tick) and the simulator's steps/s while playing it."""
    h = Hospital(scenario)
    h.reset(seed=seed)
    rng = np.random.default_rng(seed)
    states = [copy.deepcopy(h)]
    step_seconds, steps = 0.0, 0
    while not h.done:
        start = time.perf_counter()
        valid = [a for a, ok in enumerate(h.flat_mask()) if ok]
        h.act_flat(int(rng.choice(valid)))
        h.tick()
        step_seconds += time.perf_counter() - start
        steps += 1
        states.append(copy.deepcopy(h))
    return states, steps / step_seconds


def frames_per_second(render: Callable[[Hospital], object], states: list[Hospital], rounds: int) -> float:
    render(states[0])  # warm the background cache
    start = time.perf_counter()
    for _ in range(rounds):
        for state in states:
            render(state)
    return rounds * len(states) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", default="normal_day")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=50, help="passes over the episode's states")
    args = parser.parse_args()

    states, steps_per_s = play_episode(args.scenario, args.seed)
    rgb = frames_per_second(render_rgb_array, states, args.rounds)
    ansi = frames_per_second(render_ansi, states, args.rounds)
    print(f"scenario {args.scenario}, seed {args.seed}: {len(states)} states x {args.rounds} rounds")
    print(f"simulator (reference)  {steps_per_s:10,.0f} steps/s")
    print(
        f"rgb_array {FRAME_SHAPE}  {rgb:10,.0f} frames/s  ({1e6 / rgb:6.1f} us/frame, "
        f"{rgb / steps_per_s:5.2f}x the step rate)"
    )
    print(
        f"ansi                   {ansi:10,.0f} frames/s  ({1e6 / ansi:6.1f} us/frame, "
        f"{ansi / steps_per_s:5.2f}x the step rate)"
    )


if __name__ == "__main__":
    main()
