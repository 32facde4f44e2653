"""How many steps per second each interface of ``hospital_marl`` runs, next to CartPole.

What is measured (all in one process, one run, so the machine's speed cancels
out of the ratios):

- **CartPole-v1** through ``gym.make`` with ``env.action_space.sample()``
  actions: the reference. A benchmark env is "cheap" if it is in the same
  league as the cheapest standard Gymnasium env; the learner, not the env,
  should dominate a training run.
- **Composed env** (``gym.make("hospital_marl/HospitalED-v0")``, i.e. with
  Gymnasium's ``PassiveEnvChecker`` / ``OrderEnforcing`` wrappers) and its
  ``.unwrapped`` env: one masked random ``Discrete(39)`` action + one tick per
  step. Actions are drawn cheaply so the policy costs next to nothing:
  uniforms are pre-drawn with numpy outside the timed region and the action is
  ``valid[int(u * len(valid))]`` with ``valid = np.flatnonzero(info["action_mask"])``.
  Observation building and the ``info`` dict are included (they are part of
  every step); rendering is not.
- **AEC env** (``hospital_marl.env`` with PettingZoo's wrappers, and
  ``hospital_marl.raw_env``): role-steps/s in the standard ``agent_iter`` /
  ``env.last()`` loop, actions drawn from the observation's ``action_mask``.
  Only live role-steps are counted; the three dead steps at an episode's end
  and the reset are in the timed region but not in the count (conservative).
- **Parallel env**: ticks/s (one joint action of the three roles + the tick);
  role-actions/s is 3x that.
- **Team env** (``gym.make("hospital_marl/HospitalEDTeam-v0")``): ticks/s with
  masked random ``MultiDiscrete([21, 16, 4])`` actions (one draw per role from
  its segment of the 41-long mask).
- **Bare core** (``hospital_marl.Hospital``): ticks/s of ``flat_mask()`` +
  ``act_flat`` (masked random) + ``tick()``, the floor every view adds to; and
  the planner primitives ``snapshot()``, ``restore()``, ``copy.deepcopy`` and
  ``imagine()`` in microseconds, on a mid-episode state.

Episodes are reset when they end, inside the timed loop (as in training), and
every env is seeded once, so runs are repeatable up to timing noise. Every row
is built and warmed up first, then timed ``--repeats`` times (default 3) with
``time.perf_counter``, round-robin over all rows (CartPole included) so that a
burst of load from other processes spoils one repeat of many rows rather than
every repeat of one; the best repeat is reported, because on a shared, noisy
machine the fastest run is the one least disturbed by others (``--clock
process_time`` times CPU time instead, for a badly oversubscribed machine).
Uniforms for the actions are drawn before each timed repeat, and
``gc.collect()`` runs between repeats (the collector stays on while timing, as
in real use).

Targets (printed with whether they are met; issue 12, the compiled kernel): the
composed env (``gym.make``) at least CartPole's steps/s (1.0x); the AEC env at least
100k role-steps/s (reported for both ``raw_env`` and the wrapped ``env``);
``imagine()`` at most 20 µs; ``snapshot()`` and ``restore()`` at most 2 µs each.
The batched envs have their own script, ``benchmarks/vector_throughput.py``. This is a script, not
a test: nothing here asserts on timings. ``--write`` puts the table and the goals in
docs/performance.md between the ``perf-envs`` markers. Run from the repository root::

    python benchmarks/env_throughput.py [--steps 20000] [--scenario surge] [--all-scenarios] [--json out.json]
    python benchmarks/env_throughput.py --clock process_time --write
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gc
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import compress
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pettingzoo
from rich.console import Console
from rich.markup import escape
from rich.table import Table

# Runnable as ``python benchmarks/env_throughput.py`` from a checkout without installing.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hospital_marl
from grading.tables import write_marked
from hospital_marl import BUILTIN_SCENARIOS, COMPOSED_ENV_ID, ROLE_ACTION_COUNTS, ROLES, TEAM_ENV_ID

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
README_START, README_END = "<!-- BEGIN perf-envs -->", "<!-- END perf-envs -->"

CLOCKS: dict[str, Callable[[], float]] = {
    "perf_counter": time.perf_counter,
    "process_time": time.process_time,
}
_clock = time.perf_counter  # set from --clock in main()

COMPOSED_TARGET_FRACTION = 1.0
PRIMITIVE_GOALS_US = {"core imagine(seed)": 20.0, "core snapshot()": 2.0, "core restore(snapshot)": 2.0}
AEC_TARGET_ROLE_STEPS = 100_000.0
COMPOSED_LABEL = "composed env (gym.make HospitalED-v0)"
AEC_LABEL = "AEC env (hospital_marl.env)"
RAW_AEC_LABEL = "AEC raw_env"
PARALLEL_LABEL = "parallel env (parallel_env)"


@dataclass
class Row:
    scenario: str  # "" for the reference
    interface: str
    unit: str
    rate: float  # units per second (best repeat)
    us_per_unit: float
    ratio: float | None  # rate / CartPole steps/s (None for planner primitives)


@dataclass
class Bench:
    """``run(u)`` performs one unit per ``draws`` consecutive uniforms in ``u`` and returns the units done."""

    interface: str
    unit: str
    run: Callable[[list[float]], int]
    draws: int = 1
    close: Callable[[], None] | None = None


@dataclass
class Timed:
    """One row to time: ``once()`` runs one timed repeat and returns seconds per unit."""

    scenario: str
    interface: str
    unit: str
    once: Callable[[], float]
    ratio: bool = True  # compare with CartPole (steps), or not (planner primitives)


def timed_bench(scenario: str, bench: Bench, n: int, warmup: int, rng: np.random.Generator) -> Timed:
    if warmup:
        bench.run(rng.random(warmup * bench.draws).tolist())

    def once() -> float:
        u = rng.random(n * bench.draws).tolist()  # drawn outside the timed region
        gc.collect()
        start = _clock()
        units = bench.run(u)
        return (_clock() - start) / units

    return Timed(scenario, bench.interface, bench.unit, once)


def timed_op(scenario: str, interface: str, unit: str, op: Callable[[int], None], iters: int) -> Timed:
    op(max(1, iters // 10))  # warm-up

    def once() -> float:
        gc.collect()
        start = _clock()
        op(iters)
        return (_clock() - start) / iters

    return Timed(scenario, interface, unit, once, ratio=False)


# --------------------------------------------------------------------- runners
def cartpole_bench(seed: int) -> Bench:
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    env.action_space.seed(seed)

    def run(u: list[float]) -> int:
        step, reset, sample = env.step, env.reset, env.action_space.sample
        for _ in u:
            _, _, term, trunc, _ = step(sample())
            if term or trunc:
                reset()
        return len(u)

    return Bench("CartPole-v1 (gym.make, space.sample)", "step", run, close=env.close)


def gym_masked_bench(env: gym.Env, label: str, seed: int) -> Bench:
    """One masked random Discrete action per step, mask from ``info["action_mask"]``."""
    info = env.reset(seed=seed)[1]

    def run(u: list[float]) -> int:
        nonlocal info
        step, reset, flatnonzero = env.step, env.reset, np.flatnonzero
        for x in u:
            valid = flatnonzero(info["action_mask"])
            _, _, term, trunc, info = step(valid[int(x * len(valid))])
            if term or trunc:
                info = reset()[1]
        return len(u)

    return Bench(label, "step", run, close=env.close)


def team_bench(scenario: str, seed: int) -> Bench:
    env = gym.make(TEAM_ENV_ID, scenario=scenario)
    info = env.reset(seed=seed)[1]
    bounds, start = [], 0
    for role in ROLES:
        bounds.append((start, start + ROLE_ACTION_COUNTS[role]))
        start += ROLE_ACTION_COUNTS[role]
    (a0, b0), (a1, b1), (a2, b2) = bounds

    def run(u: list[float]) -> int:
        nonlocal info
        step, reset, flatnonzero, array = env.step, env.reset, np.flatnonzero, np.array
        for i in range(0, len(u), 3):
            m = info["action_mask"]
            v0, v1, v2 = flatnonzero(m[a0:b0]), flatnonzero(m[a1:b1]), flatnonzero(m[a2:b2])
            action = array(
                [v0[int(u[i] * len(v0))], v1[int(u[i + 1] * len(v1))], v2[int(u[i + 2] * len(v2))]]
            )
            _, _, term, trunc, info = step(action)
            if term or trunc:
                info = reset()[1]
        return len(u) // 3

    return Bench("team env (gym.make ...Team-v0)", "tick", run, draws=3, close=env.close)


def aec_bench(env: Any, label: str, seed: int) -> Bench:
    """The standard ``agent_iter`` / ``last()`` loop; counts live role-steps."""
    env.reset(seed=seed)

    def run(u: list[float]) -> int:
        last, step, flatnonzero = env.last, env.step, np.flatnonzero
        n, i = len(u), 0
        while i < n:
            for _agent in env.agent_iter():
                obs, _, term, trunc, _ = last()
                if term or trunc:
                    action = None
                else:
                    valid = flatnonzero(obs["action_mask"])
                    action = valid[int(u[i] * len(valid))]
                    i += 1
                step(action)
                if i >= n:
                    break
            else:
                env.reset()
        return n

    return Bench(label, "role-step", run, close=env.close)


def parallel_bench(scenario: str, seed: int) -> Bench:
    env = hospital_marl.parallel_env(scenario=scenario)
    obs = env.reset(seed=seed)[0]

    def run(u: list[float]) -> int:
        nonlocal obs
        step, reset, flatnonzero = env.step, env.reset, np.flatnonzero
        for i in range(0, len(u), 3):
            actions = {}
            for k, role in enumerate(ROLES):
                valid = flatnonzero(obs[role]["action_mask"])
                actions[role] = valid[int(u[i + k] * len(valid))]
            obs = step(actions)[0]
            if not env.agents:
                obs = reset()[0]
        return len(u) // 3

    return Bench(PARALLEL_LABEL, "tick", run, draws=3, close=env.close)


def core_bench(scenario: str, seed: int) -> Bench:
    h = hospital_marl.Hospital(scenario)
    episode = seed
    h.reset(seed=episode)
    actions = range(hospital_marl.N_FLAT_ACTIONS)

    def run(u: list[float]) -> int:
        nonlocal episode
        flat_mask, act_flat, tick = h.flat_mask, h.act_flat, h.tick
        for x in u:
            valid = list(compress(actions, flat_mask()))
            act_flat(valid[int(x * len(valid))])
            tick()
            if h.done:
                episode += 1
                h.reset(seed=episode)
        return len(u)

    return Bench("core Hospital (mask+act_flat+tick)", "tick", run)


def mid_episode_hospital(scenario: str, seed: int) -> hospital_marl.Hospital:
    """A state about half-way through a randomly played episode (not ended)."""
    h = hospital_marl.Hospital(scenario)
    rng = np.random.default_rng(seed)
    for attempt in range(100):
        h.reset(seed=seed + attempt)
        for _ in range(h.max_ticks // 2):
            valid = list(compress(range(hospital_marl.N_FLAT_ACTIONS), h.flat_mask()))
            h.act_flat(valid[int(rng.random() * len(valid))])
            h.tick()
            if h.done:
                break
        if not h.done:
            return h
    raise RuntimeError("no episode survived half-way; cannot time the planner primitives")


def planner_items(scenario: str, seed: int, iters: int) -> list[Timed]:
    h = mid_episode_hospital(scenario, seed)
    snap = h.snapshot()
    unit = f"op @ tick {h.tick_count}"

    def snapshot(k: int) -> None:
        for _ in range(k):
            h.snapshot()

    def restore(k: int) -> None:
        for _ in range(k):
            h.restore(snap)

    def deepcopy(k: int) -> None:
        for _ in range(k):
            copy.deepcopy(h)

    def imagine(k: int) -> None:
        for i in range(k):
            h.imagine(i)

    return [
        timed_op(scenario, "core snapshot()", unit, snapshot, iters),
        timed_op(scenario, "core restore(snapshot)", unit, restore, iters),
        timed_op(scenario, "core copy.deepcopy(hospital)", unit, deepcopy, iters),
        timed_op(scenario, "core imagine(seed)", unit, imagine, max(20, iters // 20)),
    ]


# ------------------------------------------------------------------------ main
def scenario_items(scenario: str, args: argparse.Namespace, rng: np.random.Generator) -> list[Timed]:
    benches = [
        gym_masked_bench(gym.make(COMPOSED_ENV_ID, scenario=scenario), COMPOSED_LABEL, args.seed),
        gym_masked_bench(
            gym.make(COMPOSED_ENV_ID, scenario=scenario).unwrapped, "composed env, unwrapped", args.seed
        ),
        aec_bench(hospital_marl.env(scenario=scenario), AEC_LABEL, args.seed),
        aec_bench(hospital_marl.raw_env(scenario=scenario), RAW_AEC_LABEL, args.seed),
        parallel_bench(scenario, args.seed),
        team_bench(scenario, args.seed),
        core_bench(scenario, args.seed),
    ]
    items = [timed_bench(scenario, b, args.steps, args.warmup, rng) for b in benches]
    return items + planner_items(scenario, args.seed, max(100, args.steps // 10))


def targets(rows: list[Row], ref_rate: float) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        if row.interface == COMPOSED_LABEL:
            goal = ref_rate * COMPOSED_TARGET_FRACTION
            out.append(
                {
                    "scenario": row.scenario,
                    "target": "composed env >= 1.0x CartPole steps/s",
                    "interface": row.interface,
                    "value": row.rate,
                    "goal": goal,
                    "met": row.rate >= goal,
                }
            )
        elif row.interface in (AEC_LABEL, RAW_AEC_LABEL):
            out.append(
                {
                    "scenario": row.scenario,
                    "target": "AEC >= 100k role-steps/s",
                    "interface": row.interface,
                    "value": row.rate,
                    "goal": AEC_TARGET_ROLE_STEPS,
                    "met": row.rate >= AEC_TARGET_ROLE_STEPS,
                }
            )
        elif row.interface in PRIMITIVE_GOALS_US:
            goal_us = PRIMITIVE_GOALS_US[row.interface]
            out.append(
                {
                    "scenario": row.scenario,
                    "target": f"{row.interface} <= {goal_us:g} µs",
                    "interface": row.interface,
                    "value": row.rate,
                    "goal": 1e6 / goal_us,
                    "met": row.us_per_unit <= goal_us,
                }
            )
    return out


def markdown(rows: list[Row], goals: list[dict[str, Any]], header: str) -> str:
    """The performance page's ``perf-envs`` block: every row and goal of this run."""
    lines = [
        f"*Generated by `python benchmarks/env_throughput.py --write` ({header}).*",
        "",
        "| scenario | interface | unit | rate (/s) | µs per unit | × CartPole |",
        "|---|---|---|---:|---:|---:|",
    ]
    for row in rows:
        ratio = "—" if row.ratio is None else f"{row.ratio:.2f}"
        lines.append(
            f"| {row.scenario or '(reference)'} | {row.interface} | {row.unit} | {row.rate:,.0f} "
            f"| {row.us_per_unit:,.2f} | {ratio} |"
        )
    lines.append("")
    for goal in goals:
        lines.append(
            f"- {goal['scenario']}: {goal['target']}: {goal['interface']} {goal['value']:,.0f}/s "
            f"→ **{'met' if goal['met'] else 'not met'}**"
        )
    return "\n".join(lines)


def print_table(console: Console, rows: list[Row], multi: bool, repeats: int) -> None:
    table = Table(title=f"Environment throughput (best of {repeats}; higher rate is better)")
    if multi:
        table.add_column("scenario")
    table.add_column("interface")
    table.add_column("unit")
    table.add_column("rate (/s)", justify="right")
    table.add_column("µs per step", justify="right")
    table.add_column("ratio to CartPole", justify="right")
    previous = None
    for row in rows:
        if multi and previous is not None and row.scenario != previous:
            table.add_section()
        previous = row.scenario
        cells = [
            row.interface,
            row.unit,
            f"{row.rate:,.0f}",
            f"{row.us_per_unit:,.2f}",
            "—" if row.ratio is None else f"{row.ratio:.2f}",
        ]
        table.add_row(*([row.scenario or "(reference)"] if multi else []), *cells)
    console.print(table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=20_000, help="units timed per repeat (default 20000)")
    parser.add_argument("--scenario", default="normal_day", help="scenario name (default normal_day)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--all-scenarios", action="store_true", help="every built-in scenario")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per row; the best is kept")
    parser.add_argument("--warmup", type=int, default=500, help="untimed units before each row")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--write", action="store_true", help="write the figures into docs/performance.md")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="perf_counter",
        help="perf_counter (wall time, default) or process_time (this process's CPU "
        "time: steadier when other processes compete for the CPUs)",
    )
    args = parser.parse_args(argv)
    global _clock
    _clock = CLOCKS[args.clock]
    if args.steps < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("--steps and --repeats must be >= 1, --warmup >= 0")

    scenarios = list(BUILTIN_SCENARIOS) if args.all_scenarios else [args.scenario]
    for name in scenarios:
        try:
            hospital_marl.get_scenario(name)  # fail early on a bad name
        except ValueError as exc:
            parser.error(str(exc))
    console = Console()
    if not console.is_terminal:  # piped output defaults to 80 columns: keep rows on one line
        console = Console(width=150)
    rng = np.random.default_rng(args.seed)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    console.print(
        f"python {platform.python_version()} · gymnasium {gym.__version__} · "
        f"pettingzoo {pettingzoo.__version__} · {os.cpu_count()} CPUs"
        + (f" · load {load[0]:.2f}" if load else "")
        + f" · {args.steps} units per repeat, best of {args.repeats} · clock {args.clock}",
        highlight=False,
    )

    cart = cartpole_bench(args.seed)
    with console.status("building and warming up ..."):
        items = [timed_bench("", cart, args.steps, args.warmup, rng)]
        for scenario in scenarios:
            items += scenario_items(scenario, args, rng)
    # Round-robin over the rows, CartPole included, rather than one row's repeats back
    # to back: a burst of load from other processes then spoils one repeat of many
    # rows (each keeps its best) instead of every repeat of a few.
    best = [float("inf")] * len(items)
    for r in range(args.repeats):
        for i, item in enumerate(items):
            where = f"{item.scenario or 'reference'} · {item.interface}"
            with console.status(f"repeat {r + 1}/{args.repeats}: {where}"):
                best[i] = min(best[i], item.once())
    if cart.close:
        cart.close()

    ref_rate = 1 / best[0]
    rows = []
    for item, sec in zip(items, best):
        rows.append(
            Row(
                item.scenario,
                item.interface,
                item.unit,
                1 / sec,
                sec * 1e6,
                (1 / sec) / ref_rate if item.ratio else None,
            )
        )
        if item.interface == PARALLEL_LABEL:
            rows.append(
                Row(
                    item.scenario,
                    "parallel env, role-actions (3/tick)",
                    "role-action",
                    3 / sec,
                    sec * 1e6 / 3,
                    (3 / sec) / ref_rate,
                )
            )

    multi = len(scenarios) > 1
    print_table(console, rows, multi, args.repeats)
    goals = targets(rows, ref_rate)
    for goal in goals:
        mark = "[green]MET[/green]" if goal["met"] else "[red]NOT MET[/red]"
        scen = escape(f"[{goal['scenario']}] ") if multi else ""
        console.print(
            f"{scen}{goal['target']}: {escape(goal['interface'])} {goal['value']:,.0f}/s "
            f"vs goal {goal['goal']:,.0f}/s → {mark}",
            highlight=False,
        )

    if args.write:
        header = (
            f"{datetime.date.today().isoformat()}; python {platform.python_version()}, gymnasium "
            f"{gym.__version__}, {os.cpu_count()} CPUs, load average "
            f"{load[0] if load else float('nan'):.1f} at start, clock {args.clock}, "
            f"{args.steps} units per repeat, best of {args.repeats}"
        )
        block = markdown(rows, goals, header)
        write_marked(DOC, README_START, README_END, f"{README_START}\n{block}\n{README_END}")
        console.print(f"wrote {DOC} ({README_START})", highlight=False)

    if args.json:
        payload = {
            "python": platform.python_version(),
            "gymnasium": gym.__version__,
            "pettingzoo": pettingzoo.__version__,
            "hospital_marl": hospital_marl.__version__,
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "loadavg_at_start": load,
            "steps": args.steps,
            "repeats": args.repeats,
            "warmup": args.warmup,
            "seed": args.seed,
            "clock": args.clock,
            "scenarios": scenarios,
            "cartpole_steps_per_s": ref_rate,
            "rows": [asdict(r) for r in rows],
            "targets": goals,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2))
        console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
