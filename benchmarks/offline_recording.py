"""Recording throughput of the offline datasets (issue #46: >= 100k env-steps/s for the rule-based
behaviours, batched), next to the bare vector env in the same run.

What is measured (one process, one run, so the machine's speed cancels out of the ratio):

- **bare env**: ``HospitalEDVectorEnv`` at B envs stepped with masked-random actions drawn with
  numpy (the reference: what recording cannot beat);
- **recording** each rule-based behaviour with :func:`training.offline.datasets.record` at the same
  B: the behaviour's actions and logged probabilities, every observation, mask and numeric info
  copied into the episode buffers (the Minari ``EpisodeBuffer`` list, in memory; writing the HDF5
  file is timed separately by ``tools/offline_datasets.py``, whose table is in docs/offline.md).

Wall time and this process's CPU time (the per-core figure on a shared machine). A script, not a
test: nothing asserts on timings. Run from the repository root::

    python benchmarks/offline_recording.py [--envs 1024] [--episodes 2048] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import gymnasium as gym
import numpy as np

import hospital_marl  # noqa: F401  (registers the env ids)
from training.offline.behaviours import parse_behaviour
from training.offline.datasets import record

BEHAVIOURS = ("random", "masked_random", "greedy", "fifo_severity", "heuristic", "heuristic:eps=0.3")


def bare(envs: int, steps: int) -> dict[str, float]:
    env = gym.make_vec("hospital_marl/HospitalED-v0", num_envs=envs, observation_format="dict_1d")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    noise = rng.random((steps, envs, 39))
    wall, cpu = time.perf_counter(), time.process_time()
    for t in range(steps):
        env.step((noise[t] * env.unwrapped.action_masks()).argmax(axis=1))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    env.close()
    return {"env_steps": envs * steps, "wall_s": wall, "cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=1024)
    parser.add_argument("--episodes", type=int, default=2048, help="episodes per behaviour")
    parser.add_argument("--scenario", default="surge")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    record(parse_behaviour("heuristic"), args.scenario, 4, 0, num_envs=4)  # compile outside the timing
    rows = {"bare env (masked random, no recording)": bare(args.envs, 200)}
    for spec in BEHAVIOURS:
        cpu = time.process_time()
        rec = record(parse_behaviour(spec), args.scenario, args.episodes, 0, num_envs=args.envs)
        rows[f"record {spec}"] = {
            "env_steps": rec.env_steps,
            "kept_steps": rec.steps,
            "wall_s": rec.seconds,
            "cpu_s": time.process_time() - cpu,
        }
    print(f"B = {args.envs}, scenario {args.scenario}, load average {os.getloadavg()[0]:.2f}")
    print(f"{'':45s} {'env-steps/s (wall)':>20s} {'(CPU)':>12s}")
    for name, row in rows.items():
        row["steps_per_s_wall"] = row["env_steps"] / row["wall_s"]
        row["steps_per_s_cpu"] = row["env_steps"] / row["cpu_s"]
        print(f"{name:45s} {row['steps_per_s_wall']:20,.0f} {row['steps_per_s_cpu']:12,.0f}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"envs": args.envs, "scenario": args.scenario, "rows": rows}, file, indent=1)


if __name__ == "__main__":
    main()
