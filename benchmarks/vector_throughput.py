"""Batched throughput of the vector envs (SPEC §10), next to CartPole in the same run.

What is measured (one process, one run, so the machine's speed cancels out of the ratios):

- **CartPole-v1** through ``gym.make`` (one env, ``space.sample()``), and Gymnasium's own
  natively vectorised CartPole (``make_vec(..., vectorization_mode="vector_entry_point")``)
  at the same B: the references.
- **HospitalEDVectorEnv** (``gym.make_vec("hospital_marl/HospitalED-v0", num_envs=B)``):
  env-steps/s with observations and masks produced by the kernel every step, serial
  (one core: the per-core figure) and with ``threads=2``. The same over the ``train`` scenario
  distribution (each env draws its hospital per episode: its own row of the kernel's parameter
  table, still one compiled call per step; ended envs restart from Python, where the next
  hospital is drawn), with its ratio to the named scenario in the same run. Actions are masked-random,
  chosen with numpy outside the timed region (``argmax`` of pre-drawn noise times the
  mask), so the figure is the env's own cost; autoresets are inside it.
- **Where a serial step's time goes**: the compiled batch loop (act + tick + observation +
  mask of every env, and the next day of every env whose episode ended: the kernel restarts
  it from a key drawn ahead), the days Python starts (``reset_rows``: an env's first restart
  after a seeded reset, which draws its next keys; user days), and the rest (Python: arrays,
  ``infos``, final metrics).
- **Team vector env** and the **multi-agent vector env** (ticks/s, three role actions each).
- **Memory per environment** at B = 4096: the bytes of the kernel state (random draws are
  not stored since the counter-based generator; ``latent`` holds only a user day's own
  uniforms) plus one step's observation and mask blocks.
- **Reset** (CPU µs per env): ``Hospital.reset(seed)`` (scalar) and the vector env's
  ``reset(seed)`` at B (each env's day drawn in the kernel from its key).
- **MaskablePPO** (sb3-contrib, ``n_envs`` environments, a small MLP) env-steps/s of
  ``learn()`` on :class:`~hospital_marl.envs.sb3.HospitalSB3VecEnv` vs SB3's
  ``DummyVecEnv`` of ``gym.make`` envs (``--ppo-steps 0`` skips it).

Every row is timed both in wall time and in this process's CPU time. On a shared machine
the CPU time is the per-core figure (with ``threads=2`` it sums both threads, so
"CPU per env-step" stays comparable with serial); the wall time of the threaded row only
shows the second core's help when that core is free (the load average is printed).

This is a script, not a test: nothing asserts on timings. ``--write`` puts the figures in
docs/performance.md between the ``perf-vector`` markers. Run from the repository root::

    python benchmarks/vector_throughput.py [--envs 1024] [--steps 300] [--ppo-steps 8192] [--write]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import hospital_marl  # noqa: E402
from grading.tables import write_marked  # noqa: E402
from hospital_marl import COMPOSED_ENV_ID, TEAM_ENV_ID  # noqa: E402
from hospital_marl.envs.vector import KEYS_AHEAD, HospitalMARLVectorEnv  # noqa: E402

VECTOR_GOAL = 1_000_000.0
DOC = ROOT / "docs" / "performance.md"
START, END = "<!-- BEGIN perf-vector -->", "<!-- END perf-vector -->"


@dataclass
class Rate:
    """Seconds per unit of the best repeat, in wall time and in this process's CPU time (the
    best of each clock separately), and the CPU seconds per unit spent in named parts."""

    wall: float = float("inf")
    cpu: float = float("inf")
    parts: dict[str, float] = field(default_factory=dict)

    def keep(self, wall: float, cpu: float, parts: dict[str, float] | None = None) -> None:
        self.wall = min(self.wall, wall)
        if cpu < self.cpu:
            self.cpu, self.parts = cpu, dict(parts or {})


def best_of(repeats: int, once: Callable[[], tuple[float, float, dict[str, float]]]) -> Rate:
    rate = Rate()
    for _ in range(repeats):
        gc.collect()
        rate.keep(*once())
    return rate


class PartTimer:
    """CPU time spent in some methods of one object (instance attributes shadow them)."""

    def __init__(self, obj: Any, names: tuple[str, ...]) -> None:
        self.cpu = dict.fromkeys(names, 0.0)
        for name in names:
            setattr(obj, name, self._timed(name, getattr(obj, name)))

    def _timed(self, name: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.cpu[name] += time.process_time() - start

        return call

    def clear(self) -> None:
        for name in self.cpu:
            self.cpu[name] = 0.0


def cartpole_single(steps: int, repeats: int) -> Rate:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    env.action_space.seed(0)

    def once() -> tuple[float, float, dict[str, float]]:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            if term or trunc:
                env.reset()
        return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps, {}

    return best_of(repeats, once)


def cartpole_vector(n_envs: int, steps: int, repeats: int) -> Rate:
    env = gym.make_vec("CartPole-v1", num_envs=n_envs, vectorization_mode="vector_entry_point")
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(2, size=(steps, n_envs))

    def once() -> tuple[float, float, dict[str, float]]:
        wall, cpu = time.perf_counter(), time.process_time()
        for t in range(steps):
            env.step(actions[t])
        units = steps * n_envs
        return (time.perf_counter() - wall) / units, (time.process_time() - cpu) / units, {}

    return best_of(repeats, once)


def masked_choice(noise: np.ndarray, masks: np.ndarray) -> np.ndarray:
    return (noise * masks).argmax(axis=1)


def hospital_vector(
    env_id: str, n_envs: int, steps: int, repeats: int, threads: int | None, scenario: str = "normal_day"
) -> Rate:
    env = gym.make_vec(env_id, num_envs=n_envs, scenario=scenario, threads=threads)
    env.reset(seed=0)
    batch = env.unwrapped._batch
    parts = PartTimer(batch, ("run", "reset_rows"))  # the batch loop; the days Python starts
    rng = np.random.default_rng(0)
    team = env_id == TEAM_ENV_ID
    width = 41 if team else 39
    splits = np.cumsum([hospital_marl.ROLE_ACTION_COUNTS[r] for r in hospital_marl.ROLES])[:-1]
    for _ in range(5):  # warm up (compiles or loads the cached kernel)
        env.step(np.zeros((n_envs, 3) if team else n_envs, np.int64))

    def once() -> tuple[float, float, dict[str, float]]:
        noise = rng.random((steps, n_envs, width))
        wall = cpu = 0.0
        parts.clear()
        for t in range(steps):
            masks = env.action_masks()
            if team:
                chunks = np.split(noise[t] * masks, splits, axis=1)
                actions = np.stack([c.argmax(axis=1) for c in chunks], axis=1)
            else:
                actions = masked_choice(noise[t], masks)
            w, c = time.perf_counter(), time.process_time()
            env.step(actions)
            wall += time.perf_counter() - w
            cpu += time.process_time() - c
        units = steps * n_envs
        return wall / units, cpu / units, {name: spent / units for name, spent in parts.cpu.items()}

    rate = best_of(repeats, once)
    env.close()
    return rate


def marl_vector(n_envs: int, steps: int, repeats: int) -> Rate:
    env = HospitalMARLVectorEnv(n_envs, "normal_day")
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)

    def once() -> tuple[float, float, dict[str, float]]:
        nonlocal obs
        wall = cpu = 0.0
        for _ in range(steps):
            actions = {
                role: (rng.random(o["action_mask"].shape) * o["action_mask"]).argmax(axis=1)
                for role, o in obs.items()
            }
            w, c = time.perf_counter(), time.process_time()
            obs = env.step(actions)[0]
            wall += time.perf_counter() - w
            cpu += time.process_time() - c
        return wall / (steps * n_envs), cpu / (steps * n_envs), {}

    return best_of(repeats, once)


def memory_per_env(n_envs: int) -> dict[str, float]:
    env = gym.make_vec(COMPOSED_ENV_ID, num_envs=n_envs, scenario="normal_day")
    env.reset(seed=0)
    state = env.unwrapped._batch.state
    per_array = {name: a.nbytes / n_envs for name, a in zip(state._fields, state)}
    step_blocks = (env.state_vectors.nbytes + env.action_masks().nbytes) / n_envs
    return {
        "state_bytes": sum(per_array.values()),
        "largest": max(per_array, key=per_array.__getitem__),
        "largest_bytes": max(per_array.values()),
        "step_output_bytes": step_blocks,
        "patient_slots": state.pat.shape[1],
    }


def ppo_rates(n_envs: int, steps: int) -> tuple[float, float]:
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from hospital_marl.envs.sb3 import HospitalSB3VecEnv

    def rate(env: object) -> float:
        model = MaskablePPO("MultiInputPolicy", env, n_steps=256, batch_size=256, n_epochs=1, seed=0,
                            device="cpu", policy_kwargs={"net_arch": [64, 64]})  # fmt: skip
        model.learn(n_envs * 256)  # warm-up (first rollout, torch init)
        start = time.perf_counter()
        model.learn(steps, reset_num_timesteps=False)
        return steps / (time.perf_counter() - start)

    vector = rate(HospitalSB3VecEnv(n_envs, "normal_day", seed=0))
    dummy = rate(DummyVecEnv([lambda: gym.make(COMPOSED_ENV_ID, scenario="normal_day")] * n_envs))
    return vector, dummy


def reset_costs(n_envs: int, repeats: int) -> tuple[float, float]:
    """CPU µs per env of a seeded reset: the scalar Hospital, and the vector env at B = n_envs."""
    h = hospital_marl.Hospital("normal_day")
    h.reset(seed=0)
    env = gym.make_vec(COMPOSED_ENV_ID, num_envs=n_envs, scenario="normal_day")
    env.reset(seed=0)

    def timed(run: Callable[[], None], units: int) -> float:
        best = float("inf")
        for _ in range(repeats):
            start = time.process_time()
            run()
            best = min(best, (time.process_time() - start) / units)
        return 1e6 * best

    def scalar() -> None:
        for i in range(2000):
            h.reset(seed=i)

    def vector() -> None:
        for i in range(5):
            env.reset(seed=i * n_envs)

    return timed(scalar, 2000), timed(vector, 5 * n_envs)


def breakdown(rate: Rate) -> tuple[float, float, float]:
    """(batch loop, days Python started, the rest) in CPU µs per env-step."""
    loop, days = rate.parts.get("run", 0.0), rate.parts.get("reset_rows", 0.0)
    return loop * 1e6, days * 1e6, (rate.cpu - loop - days) * 1e6


def report(args: argparse.Namespace) -> list[str]:
    """Measure everything; return the Markdown lines (printed, and written with --write)."""
    b = args.envs
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    header = (f"python {platform.python_version()} · gymnasium {gym.__version__} · {os.cpu_count()} CPUs · "
              f"load average {load:.1f} at start · B = {b} · best of {args.repeats} repeats")  # fmt: skip
    print(header, flush=True)
    cart = cartpole_single(20_000, args.repeats)
    serial = hospital_vector(COMPOSED_ENV_ID, b, args.steps, args.repeats, None)
    threaded = hospital_vector(COMPOSED_ENV_ID, b, args.steps, args.repeats, 2)
    drawn = hospital_vector(COMPOSED_ENV_ID, b, args.steps, args.repeats, None, "train")
    drawn_threaded = hospital_vector(COMPOSED_ENV_ID, b, args.steps, args.repeats, 2, "train")
    rows = [
        ("CartPole-v1 (`gym.make`, 1 env)", cart, "step"),
        (f"CartPole-v1 native vector env (B={b})", cartpole_vector(b, args.steps, args.repeats), "env-step"),
        (f"HospitalED vector env, serial (B={b})", serial, "env-step"),
        (f"HospitalED vector env, `threads=2` (B={b})", threaded, "env-step"),
        (f"HospitalED vector env, `train` distribution, serial (B={b})", drawn, "env-step"),
        (f"HospitalED vector env, `train` distribution, `threads=2` (B={b})", drawn_threaded, "env-step"),
        (f"HospitalEDTeam vector env, serial (B={b})", hospital_vector(TEAM_ENV_ID, b, args.steps,
                                                                      args.repeats, None), "tick"),
        (f"multi-agent vector env, serial (B={b})", marl_vector(b, args.steps, args.repeats), "tick"),
    ]  # fmt: skip
    lines = [
        f"*Generated by `python benchmarks/vector_throughput.py --write` "
        f"({datetime.date.today().isoformat()}; {header}). Rates per second; CPU = this process's CPU "
        "time (the per-core figure on a shared machine; with threads it sums both), ratios against "
        "CartPole on the same clock.*",
        "",
        "| what | unit | wall rate | CPU rate | CPU µs per unit | × CartPole (CPU) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, rate, unit in rows:
        lines.append(f"| {name} | {unit} | {1 / rate.wall:,.0f} | {1 / rate.cpu:,.0f} | "
                     f"{rate.cpu * 1e6:.3f} | {cart.cpu / rate.cpu:.2f} |")  # fmt: skip
    loop, days, rest = breakdown(serial)
    t_loop, t_days, t_rest = breakdown(threaded)
    projected = 1e6 / (loop / 2 + days + rest)
    lines += [
        "",
        f"- Serial step, CPU per env-step: compiled batch loop (act + tick + observation + mask, and "
        f"the next day of each env whose episode ended, drawn in the same call) {loop:.2f} µs, days "
        f"started by Python (an env's first restart after a seeded reset draws its next "
        f"{KEYS_AHEAD} days' keys) {days:.2f} µs, the rest (Python: arrays, `infos`, final metrics) "
        f"{rest:.2f} µs.",
        f"- `threads=2`: the step ran at {1 / threaded.wall / 1e6:.2f}M env-steps/s wall "
        f"(serial {1 / serial.wall / 1e6:.2f}M in the same run); its CPU per env-step "
        f"{t_loop:.2f} µs in the loop (serial {loop:.2f}), {t_days:.2f} µs days started by Python, "
        f"{t_rest:.2f} µs rest. With both cores free, the serial CPU figures give "
        f"{projected / 1e6:.2f}M env-steps/s — a projection, not a measurement.",
    ]
    d_loop, d_days, d_rest = breakdown(drawn)
    lines.append(
        f"- Scenario distribution (`train`, each env its own hospital per episode): serial "
        f"{1 / drawn.cpu:,.0f} env-steps/s CPU, {serial.cpu / drawn.cpu:.2f}× the named scenario's in the "
        f"same run; CPU per env-step {d_loop:.2f} µs in the batch loop (one call for every env), "
        f"{d_days:.2f} µs days started by Python (every ended env: its next hospital is drawn there), "
        f"{d_rest:.2f} µs rest (with the presence blocks of the `masked` observation). `threads=2`: "
        f"{1 / drawn_threaded.wall:,.0f} env-steps/s wall."
    )
    met, stretch = 1 / threaded.wall >= VECTOR_GOAL, 1 / serial.cpu >= VECTOR_GOAL
    lines.append(
        f"- Goal 1M env-steps/s at B = {b} on this 2-core box (wall, `threads=2`): "
        f"{1 / threaded.wall / 1e6:.2f}M → **{'met' if met else 'not met'}**; stretch 1M on one core "
        f"(CPU, serial): {1 / serial.cpu / 1e6:.2f}M → **{'met' if stretch else 'not met'}**."
    )
    mem = memory_per_env(args.memory_envs)
    lines.append(
        f"- Memory per env at B = {args.memory_envs}: kernel state {mem['state_bytes'] / 1024:.1f} KiB "
        f"(largest array `{mem['largest']}` {mem['largest_bytes'] / 1024:.1f} KiB, {mem['patient_slots']} "
        f"patient slots), one step's observation + mask {mem['step_output_bytes']:.0f} B."
    )
    scalar_reset, vector_reset = reset_costs(b, args.repeats)
    lines.append(
        f"- `reset(seed)` (CPU): `Hospital` {scalar_reset:.1f} µs; vector env {vector_reset:.2f} µs per env "
        f"(B = {b}); each day is drawn in the kernel from its key."
    )
    if args.ppo_steps:
        vector, dummy = ppo_rates(args.ppo_envs, args.ppo_steps)
        lines.append(
            f"- MaskablePPO `learn()` with `n_envs={args.ppo_envs}` (wall): `HospitalSB3VecEnv` "
            f"{vector:,.0f} env-steps/s, `DummyVecEnv` of `gym.make` envs {dummy:,.0f} "
            f"({vector / dummy:.2f}×): the learner dominates."
        )
    return lines


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
    parser.add_argument("--write", action="store_true", help="write the figures into docs/performance.md")
    args = parser.parse_args(argv)
    if args.envs < 2 or args.steps < 1 or args.repeats < 1:
        parser.error("--envs must be >= 2, --steps and --repeats >= 1")
    lines = report(args)
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_marked(DOC, START, END, f"{START}\n{text}\n{END}")
        print(f"wrote {DOC} ({START})")


if __name__ == "__main__":
    main()
