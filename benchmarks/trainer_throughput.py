"""Frames per second of whole trainers, learner included, side by side in one run (issue 26).

- **CartPole-v1** (``gym.make``, random actions): the box's reference steps/s, measured in the same
  run so that figures taken on a loaded machine can be compared by ratio.
- **fast MAPPO** (``hospital-marl train fast-mappo``, :mod:`training.fast.mappo`): B departments
  (``--num-envs``, default 1000, the runs' setting, and each of ``--fast-envs``, default 2000) x 64
  ticks per rollout, 2 epochs of 4096-frame minibatches, 2 x 64 MLPs; the target (>= 50,000
  frames/s wall) is printed with its verdict for each B.
- **BenchMARL MAPPO** (``hospital-marl train benchmarl``): its own collector and PPO loss on the
  batched TorchRL env, at the same batch shape (B x 64 frames per batch) and at its default (64 x 100).
- **SB3 MaskablePPO** on the team track's SB3 ``VecEnv`` adapter (B = 64, n_steps 256, 2 x 64 MLP).

Team track: a frame is one tick of one department (three role decisions); SB3's team env takes
the three role actions of a tick as one ``MultiDiscrete`` action, so its steps are frames too.
Grading is not timed: every trainer gets an evaluation function that returns a constant report.
Nor is start-up: every trainer first runs one untimed batch (imports, compiles, torch's first calls).
Each figure is frames / wall seconds *and* frames / CPU seconds of this process (the box is shared:
the load average is printed beside them). A script, not a test: nothing asserts on timings.

    python benchmarks/trainer_throughput.py [--frames 256000] [--num-envs 1000] [--fast-envs 2000]
        [--torch-threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hospital_marl.core.scenarios import BUILTIN_SCENARIOS  # noqa: E402

TARGET_FPS = 50_000
"""Issue 26: the fast trainer's frames per second end to end on this box."""


def constant_report(policy: Any, *, episodes: int, seed: int, scenarios: Any, track: str) -> dict[str, Any]:
    """A stand-in for :func:`grading.grade`: grading is not what this script times."""
    names = tuple(scenarios)
    return {
        "overall_score": 0.0,
        "invalid_action_rate": 0.0,
        "scenario_scores": dict.fromkeys(names, 0.0),
        "scenarios": {name: {"score_stderr": 0.0} for name in names},
    }


def timed(run: Callable[[], int]) -> dict[str, float]:
    """``run()`` returns the frames it trained on; frames per wall and per CPU second."""
    wall, cpu = time.perf_counter(), time.process_time()
    frames = run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "frames": frames,
        "wall_s": wall,
        "cpu_s": cpu,
        "fps_wall": frames / wall,
        "fps_cpu": frames / cpu,
    }


def cartpole(steps: int) -> int:
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    return steps


def fast_mappo(frames: int, num_envs: int, threads: int, out: Path) -> int:
    from training.fast.args import MappoArgs
    from training.fast.mappo import train

    args = MappoArgs(
        frames=frames, num_envs=num_envs, all_scenarios=True, eval_interval=0, torch_threads=threads,
        save=str(out / "fast"), progress=False,
    )  # fmt: skip
    train(args, constant_report)
    return -(-frames // (num_envs * args.steps)) * num_envs * args.steps


def benchmarl_mappo(frames: int, n_envs: int, steps: int, threads: int, out: Path) -> int:
    import logging

    from training.benchmarl.train import Args, train

    logging.getLogger("torchrl").setLevel(logging.WARNING)  # its INFO lines go to stdout, the table's stream

    args = Args(
        algorithm="mappo", frames=frames, all_scenarios=True, n_envs=n_envs, steps_per_batch=steps,
        minibatch_size=4096, epochs=2, hidden=(64, 64), eval_interval=frames, eval_episodes=1,
        torch_threads=threads, save=str(out / f"benchmarl_{n_envs}"), progress=False,
    )  # fmt: skip
    train(args, constant_report)
    return frames


def sb3_maskable_ppo(frames: int, n_envs: int, threads: int) -> int:
    import torch
    from sb3_contrib import MaskablePPO

    from hospital_marl.envs.sb3 import HospitalSB3VecEnv

    torch.set_num_threads(threads)
    env = HospitalSB3VecEnv(n_envs, "normal_day", team=True, seed=0)
    model = MaskablePPO(
        "MultiInputPolicy", env, n_steps=256, batch_size=4096, n_epochs=2, seed=0, device="cpu",
        policy_kwargs={"net_arch": [64, 64]},
    )  # fmt: skip
    model.learn(frames)
    return model.num_timesteps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=256_000, help="frames per trainer (default 256000)")
    parser.add_argument("--num-envs", type=int, default=1000, help="departments stepped together")
    parser.add_argument(
        "--fast-envs", type=int, nargs="*", default=[2000],
        help="more batch sizes to time fast MAPPO at, beside --num-envs (default 2000)",
    )  # fmt: skip
    parser.add_argument("--torch-threads", type=int, default=1, help="torch threads of every trainer")
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=("benchmarl", "sb3"), help="trainers to leave out"
    )
    opts = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(opts.torch_threads))
    load_before = os.getloadavg()
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        # The same untimed warm-up for every trainer: one batch of each, so that first imports,
        # numba compiles and torch's first calls are paid before any clock starts.
        cartpole(1_000)
        fast_mappo(opts.num_envs * 64, opts.num_envs, opts.torch_threads, out / "warm")
        if "benchmarl" not in opts.skip:
            benchmarl_mappo(6400, 64, 100, opts.torch_threads, out / "warm")
        if "sb3" not in opts.skip:
            sb3_maskable_ppo(64 * 256, 64, opts.torch_threads)
        rows["CartPole-v1 random steps (reference)"] = timed(lambda: cartpole(20_000))
        for b in dict.fromkeys([opts.num_envs, *opts.fast_envs]):
            rows[f"fast MAPPO (B={b})"] = timed(
                lambda b=b: fast_mappo(max(opts.frames, 2 * b * 64), b, opts.torch_threads, out / f"fast_{b}")
            )
        if "benchmarl" not in opts.skip:
            big = opts.num_envs * 64
            rows[f"BenchMARL MAPPO (B={opts.num_envs} x 64)"] = timed(
                lambda: benchmarl_mappo(
                    max(opts.frames // big, 1) * big, opts.num_envs, 64, opts.torch_threads, out
                )
            )
            rows["BenchMARL MAPPO (B=64 x 100, its default)"] = timed(
                lambda: benchmarl_mappo(
                    opts.frames // 4 // 6400 * 6400 or 6400, 64, 100, opts.torch_threads, out
                )
            )
        if "sb3" not in opts.skip:
            rows["SB3 MaskablePPO, team VecEnv adapter (B=64)"] = timed(
                lambda: sb3_maskable_ppo(opts.frames // 4, 64, opts.torch_threads)
            )
    load_after = os.getloadavg()
    fast_rows = {name: r for name, r in rows.items() if name.startswith("fast MAPPO")}
    best = max(fast_rows, key=lambda name: fast_rows[name]["fps_wall"])
    fast = rows[best]
    load = f"load average {load_before[0]:.1f} before / {load_after[0]:.1f} after"
    print(f"# trainer throughput: {len(BUILTIN_SCENARIOS)} scenarios, torch threads {opts.torch_threads}, "
          f"{os.cpu_count()} CPUs, {load}")  # fmt: skip
    print(f"| trainer | frames | wall s | CPU s | frames/s (wall) | frames/CPU-s | {best} is x (CPU) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        ratio = fast["fps_cpu"] / r["fps_cpu"]
        print(f"| {name} | {r['frames']:,} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['fps_wall']:,.0f} | "
              f"{r['fps_cpu']:,.0f} | {ratio:.2f} |")  # fmt: skip
    ref = rows["CartPole-v1 random steps (reference)"]
    print(f"\n{best} frames per CPU-second / CartPole random steps per CPU-second: "
          f"{fast['fps_cpu'] / ref['fps_cpu']:.3f}")  # fmt: skip
    for name, r in fast_rows.items():
        verdict = "met" if r["fps_wall"] >= TARGET_FPS else "NOT met"
        print(f"target >= {TARGET_FPS:,} frames/s end to end (wall): {name} {r['fps_wall']:,.0f}: {verdict}")


if __name__ == "__main__":
    main()
