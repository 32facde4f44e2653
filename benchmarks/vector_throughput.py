"""Batched throughput of the vector envs (SPEC §10), next to CartPole in the same run.

What is measured (one process, one run, so the machine's speed cancels out of the ratios):

- **CartPole-v1** through ``gym.make`` (one env, ``space.sample()``), and Gymnasium's own
  natively vectorised CartPole (``make_vec(..., vectorization_mode="vector_entry_point")``)
  at the same B: the references.
- **HospitalEDVectorEnv** (``gym.make_vec("hospital_marl/HospitalED-v0", num_envs=B)``):
  env-steps/s with observations and masks produced by the kernel every step, serial
  (one core: the per-core figure) and with ``threads=2``. Actions are masked-random,
  chosen with numpy outside the timed region (``argmax`` of pre-drawn noise times the
  mask), so the figure is the env's own cost; autoresets are inside it.
- **Team vector env** and the **multi-agent vector env** (ticks/s, three role actions each).
- **Memory per environment** at B = 4096: the bytes of the kernel state (random draws are
  not stored since the counter-based generator; ``latent`` holds only a user day's own
  uniforms) plus one step's observation and mask blocks.
- **Reset** (µs per env): ``Hospital.reset(seed)`` (scalar) and the vector env's
  ``reset(seed)`` at B (each env's day drawn in the kernel from its key).
- **MaskablePPO** (sb3-contrib, ``n_envs`` environments, a small MLP) env-steps/s of
  ``learn()`` on :class:`~hospital_marl.envs.sb3.HospitalSB3VecEnv` vs SB3's
  ``DummyVecEnv`` of ``gym.make`` envs (``--ppo-steps 0`` skips it).

This is a script, not a test: nothing asserts on timings. Run from the repository root::

    python benchmarks/vector_throughput.py [--envs 1024] [--steps 300] [--ppo-steps 8192]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hospital_marl
from hospital_marl import COMPOSED_ENV_ID, TEAM_ENV_ID
from hospital_marl.envs.vector import HospitalMARLVectorEnv

VECTOR_GOAL = 1_000_000.0
CLOCKS = {"perf_counter": time.perf_counter, "process_time": time.process_time}
_clock = time.perf_counter  # --clock


def best_of(repeats: int, once: Callable[[], float]) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        best = min(best, once())
    return best


def cartpole_single(steps: int, repeats: int) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    env.action_space.seed(0)

    def once() -> float:
        start = _clock()
        for _ in range(steps):
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            if term or trunc:
                env.reset()
        return (_clock() - start) / steps

    return 1 / best_of(repeats, once)


def cartpole_vector(n_envs: int, steps: int, repeats: int) -> float:
    env = gym.make_vec("CartPole-v1", num_envs=n_envs, vectorization_mode="vector_entry_point")
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(2, size=(steps, n_envs))

    def once() -> float:
        start = _clock()
        for t in range(steps):
            env.step(actions[t])
        return (_clock() - start) / (steps * n_envs)

    return 1 / best_of(repeats, once)


def masked_choice(noise: np.ndarray, masks: np.ndarray) -> np.ndarray:
    return (noise * masks).argmax(axis=1)


def hospital_vector(env_id: str, n_envs: int, steps: int, repeats: int, threads: int | None) -> float:
    env = gym.make_vec(env_id, num_envs=n_envs, scenario="normal_day", threads=threads)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    team = env_id == TEAM_ENV_ID
    width = 41 if team else 39
    splits = np.cumsum([hospital_marl.ROLE_ACTION_COUNTS[r] for r in hospital_marl.ROLES])[:-1]
    for _ in range(5):  # warm up (compiles or loads the cached kernel)
        env.step(np.zeros((n_envs, 3) if team else n_envs, np.int64))

    def once() -> float:
        noise = rng.random((steps, n_envs, width))
        elapsed = 0.0
        for t in range(steps):
            masks = env.action_masks()
            if team:
                parts = np.split(noise[t] * masks, splits, axis=1)
                actions = np.stack([p.argmax(axis=1) for p in parts], axis=1)
            else:
                actions = masked_choice(noise[t], masks)
            start = _clock()
            env.step(actions)
            elapsed += _clock() - start
        return elapsed / (steps * n_envs)

    return 1 / best_of(repeats, once)


def marl_vector(n_envs: int, steps: int, repeats: int) -> float:
    env = HospitalMARLVectorEnv(n_envs, "normal_day")
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)

    def once() -> float:
        nonlocal obs
        elapsed = 0.0
        for _ in range(steps):
            actions = {
                role: (rng.random(o["action_mask"].shape) * o["action_mask"]).argmax(axis=1)
                for role, o in obs.items()
            }
            start = _clock()
            obs = env.step(actions)[0]
            elapsed += _clock() - start
        return elapsed / (steps * n_envs)

    return 1 / best_of(repeats, once)


def memory_per_env(n_envs: int) -> dict[str, float]:
    env = gym.make_vec(COMPOSED_ENV_ID, num_envs=n_envs, scenario="normal_day")
    env.reset(seed=0)
    state = env.unwrapped._batch.state if hasattr(env, "unwrapped") else env._batch.state
    per_array = {name: a.nbytes / n_envs for name, a in zip(state._fields, state)}
    step_blocks = (env.state_vectors.nbytes + env.action_masks().nbytes) / n_envs
    return {"state_bytes": sum(per_array.values()), "latent_bytes": per_array["latent"],
            "step_output_bytes": step_blocks, "patient_slots": state.pat.shape[1]}  # fmt: skip


def reset_costs(n_envs: int, repeats: int) -> tuple[float, float]:
    """µs per env of a seeded reset: the scalar Hospital, and the vector env at B = n_envs."""
    h = hospital_marl.Hospital("normal_day")
    h.reset(seed=0)
    n = 2000

    def scalar() -> float:
        start = _clock()
        for i in range(n):
            h.reset(seed=i)
        return (_clock() - start) / n

    env = gym.make_vec(COMPOSED_ENV_ID, num_envs=n_envs, scenario="normal_day")
    env.reset(seed=0)

    def vector() -> float:
        start = _clock()
        for i in range(5):
            env.reset(seed=i * n_envs)
        return (_clock() - start) / (5 * n_envs)

    return 1e6 * best_of(repeats, scalar), 1e6 * best_of(repeats, vector)


def ppo_rates(n_envs: int, steps: int) -> tuple[float, float]:
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from hospital_marl.envs.sb3 import HospitalSB3VecEnv

    def rate(env: object) -> float:
        model = MaskablePPO("MultiInputPolicy", env, n_steps=256, batch_size=256, n_epochs=1, seed=0,
                            device="cpu", policy_kwargs={"net_arch": [64, 64]})  # fmt: skip
        model.learn(n_envs * 256)  # warm-up (first rollout, torch init)
        start = _clock()
        model.learn(steps, reset_num_timesteps=False)
        return steps / (_clock() - start)

    vector = rate(HospitalSB3VecEnv(n_envs, "normal_day", seed=0))
    dummy = rate(DummyVecEnv([lambda: gym.make(COMPOSED_ENV_ID, scenario="normal_day")] * n_envs))
    return vector, dummy


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", type=int, default=1024, help="B for the batched rows (default 1024)")
    parser.add_argument("--steps", type=int, default=300, help="batched steps per repeat (default 300)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory-envs", type=int, default=4096)
    parser.add_argument("--ppo-envs", type=int, default=8)
    parser.add_argument("--ppo-steps", type=int, default=8192, help="0 skips the MaskablePPO rows")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="perf_counter",
                        help="wall time (default) or this process's CPU time (on an oversubscribed "
                             "machine; with threads=2 CPU time sums both threads)")  # fmt: skip
    args = parser.parse_args(argv)
    global _clock
    _clock = CLOCKS[args.clock]
    b = args.envs
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),)
    print(f"python {platform.python_version()} · gymnasium {gym.__version__} · {os.cpu_count()} CPUs · "
          f"load {load[0]:.2f} at start · B = {b} · best of {args.repeats} · clock {args.clock}")  # fmt: skip

    cart = cartpole_single(20_000, args.repeats)
    rows = [
        ("CartPole-v1 (gym.make, 1 env)", cart),
        (f"CartPole-v1 native vector env (B={b})", cartpole_vector(b, args.steps, args.repeats)),
        (f"HospitalED vector env, serial = 1 core (B={b})", hospital_vector(COMPOSED_ENV_ID, b, args.steps,
                                                                            args.repeats, None)),
        (f"HospitalED vector env, threads=2 (B={b})", hospital_vector(COMPOSED_ENV_ID, b, args.steps,
                                                                      args.repeats, 2)),
        (f"HospitalEDTeam vector env, serial (B={b}, ticks)", hospital_vector(TEAM_ENV_ID, b, args.steps,
                                                                              args.repeats, None)),
        (f"multi-agent vector env, serial (B={b}, ticks)", marl_vector(b, args.steps, args.repeats)),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    print(f"{'':{width}}  {'env-steps/s':>14}  {'µs/env-step':>11}  {'x CartPole':>10}")
    for name, rate in rows:
        print(f"{name:{width}}  {rate:14,.0f}  {1e6 / rate:11.3f}  {rate / cart:10.2f}")
    serial, threaded = rows[2][1], rows[3][1]
    print(f"vector env >= 1M env-steps/s at B={b} on 2 threads: {threaded:,.0f}/s → "
          f"{'MET' if threaded >= VECTOR_GOAL else 'NOT MET'}; per core (serial): {serial:,.0f}/s → "
          f"{'MET' if serial >= VECTOR_GOAL else 'NOT MET'} (stretch)")  # fmt: skip

    mem = memory_per_env(args.memory_envs)
    print(f"memory per env at B={args.memory_envs}: state {mem['state_bytes'] / 1024:.1f} KiB "
          f"(stored latent uniforms {mem['latent_bytes'] / 1024:.1f} KiB, {mem['patient_slots']} patient "
          f"slots), step outputs {mem['step_output_bytes']:.0f} B")  # fmt: skip
    scalar_reset, vector_reset = reset_costs(b, args.repeats)
    print(f"reset(seed): Hospital {scalar_reset:.1f} µs; vector env {vector_reset:.2f} µs per env (B={b})")

    if args.ppo_steps:
        vector, dummy = ppo_rates(args.ppo_envs, args.ppo_steps)
        print(f"MaskablePPO learn() with n_envs={args.ppo_envs}: vector env {vector:,.0f} env-steps/s, "
              f"DummyVecEnv(gym.make) {dummy:,.0f} env-steps/s "
              f"({vector / dummy:.2f}x; the learner dominates)")  # fmt: skip


if __name__ == "__main__":
    main()
