"""Ticks per second of the TorchRL envs of ``train benchmarl``, next to CartPole (same process, one run).

- **CartPole-v1** (``gym.make``, ``action_space.sample()``): the reference steps/s.
- **HospitalTorchEnv** at batch B (``--batch``, default 64 and 256; the five scenarios): ticks/s over
  the batch with masked random actions drawn in torch (the policy costs next to nothing); a tick is
  three role decisions.
- **PettingZooWrapper** over the parallel env (one env): ticks/s -- the per-env path the batched env replaces.
- **Training** (``--runs``): frames/s of finished ``train benchmarl`` runs (frames / wall time,
  learner included).

Best of ``--repeats`` CPU-time measurements (``time.process_time``: the box is shared). A script, not a
test: nothing asserts on timings.

    python benchmarks/marl_throughput.py [--ticks 200] [--runs runs/benchmarl]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cartpole(steps: int) -> float:
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    t0 = time.process_time()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    return steps / (time.process_time() - t0)


def masked_actions(td, gen) -> None:
    import torch

    for role in ("triage", "bed_manager", "ventilator_officer"):
        mask = td.get((role, "action_mask")).float()
        flat = mask.reshape(-1, mask.shape[-1])
        td.set((role, "action"), torch.multinomial(flat, 1, generator=gen).reshape(mask.shape[:-1]))


def torch_env(batch: int, ticks: int) -> float:
    import torch

    from hospital_marl.core.scenarios import BUILTIN_SCENARIOS
    from training.benchmarl.env import HospitalTorchEnv

    env = HospitalTorchEnv(num_envs=batch, scenarios=BUILTIN_SCENARIOS, seed=0)
    gen = torch.Generator().manual_seed(0)
    td = env.reset()
    t0 = time.process_time()
    for _ in range(ticks):
        masked_actions(td, gen)
        td, td_next = env.step_and_maybe_reset(td)
        td = td_next
    return batch * ticks / (time.process_time() - t0)


def wrapper_env(ticks: int) -> float:
    import torch

    from training.benchmarl.env import pettingzoo_env

    env = pettingzoo_env("surge", seed=0)
    gen = torch.Generator().manual_seed(0)
    td = env.reset()
    t0 = time.process_time()
    for _ in range(ticks):
        for role in ("triage", "bed_manager", "ventilator_officer"):
            mask = td.get((role, "action_mask")).float()
            td.set((role, "action"), torch.multinomial(mask, 1, generator=gen).reshape(-1))
        td, td_next = env.step_and_maybe_reset(td)
        td = td_next
    return ticks / (time.process_time() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=200, help="batched steps per measurement")
    parser.add_argument("--batch", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", default="runs/benchmarl", help="folder of train benchmarl runs (optional)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    rows = {"CartPole-v1 (gym.make)": max(cartpole(20_000) for _ in range(args.repeats))}
    for b in args.batch:
        rows[f"HospitalTorchEnv B={b} (ticks/s)"] = max(torch_env(b, args.ticks) for _ in range(args.repeats))
    rows["PettingZooWrapper, 1 env (ticks/s)"] = max(wrapper_env(args.ticks) for _ in range(args.repeats))
    ref = rows["CartPole-v1 (gym.make)"]
    for name, rate in rows.items():
        print(f"{name:<40} {rate:>12,.0f} /s   {rate / ref:6.2f}x CartPole")
    runs = sorted((ROOT / args.runs).glob("*/benchmarl.json"))
    for meta_file in runs:
        meta = json.loads(meta_file.read_text())
        rate = meta["frames"] / meta["wall_time_s"]
        print(f"training {meta_file.parent.name:<31} {rate:>12,.0f} frames/s (wall; learner, grading incl.)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
