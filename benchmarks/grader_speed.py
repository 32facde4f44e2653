"""How long the full grade takes, per agent: wall time, decisions/s and ms per decision.

What is measured: ``grading.grade(agent, episodes=N, seed=0)`` over the five
built-in scenarios on the flat track (one decision per tick), exactly as the
grading CLI runs it. Decisions are the graded ticks (the report's
``counts.ticks``). CPU time (``time.process_time``) is printed next to wall
time because the machine may be shared: wall time includes other processes'
load, CPU time mostly does not.

Target (printed as met or not, never asserted): the heuristic's full grade
(5 scenarios x 10 episodes) in at most 5 s of wall time. The planner is
the reference upper bound: it simulates hundreds of imagined ticks per decision
(compiled rollouts on 12 imagined futures), about 20-30x the heuristic's time per
decision (measured 2.3 ms vs 0.1 ms of CPU; the same decisions with the rollouts
in Python took 14.5 ms).

This is a script, not a test. Run from the repository root::

    python benchmarks/grader_speed.py [--episodes 10] [--agents heuristic planner]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import policies
from grading.grader import grade

HEURISTIC_TARGET_S = 5.0
TARGET_EPISODES = 10


def time_grade(agent: str, episodes: int, seed: int) -> dict[str, Any]:
    """Grade once and time it (loading the policy, imports included, is not timed).

    Per-scenario wall time comes from the grader's ``progress`` callback (called after each episode).
    """
    policy = policies.load(agent)
    scenario_wall: dict[str, float] = {}
    last = [time.perf_counter()]

    def progress(scenario: str, episode: int) -> None:
        now = time.perf_counter()
        scenario_wall[scenario] = scenario_wall.get(scenario, 0.0) + now - last[0]
        last[0] = now

    wall, cpu = time.perf_counter(), time.process_time()
    last[0] = wall
    report = grade(policy, episodes=episodes, seed=seed, progress=progress)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    decisions = sum(s["counts"]["ticks"] for s in report["scenarios"].values())
    return {
        "scenario_ms_per_decision": {
            name: 1e3 * scenario_wall[name] / s["counts"]["ticks"] for name, s in report["scenarios"].items()
        },
        "wall_s": wall,
        "cpu_s": cpu,
        "decisions": decisions,
        "decisions_per_s": decisions / wall,
        "ms_per_decision": 1e3 * wall / decisions,
        "cpu_ms_per_decision": 1e3 * cpu / decisions,
        "overall_score": report["overall_score"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=TARGET_EPISODES, help="episodes per scenario")
    parser.add_argument("--agents", nargs="+", default=["heuristic", "planner"],
                        help="policy specs for policies.load, e.g. heuristic 'planner:rollouts=8'")
    parser.add_argument("--seed", type=int, default=0, help="the grader's base seed")
    args = parser.parse_args(argv)

    print(f"full grade: 5 scenarios x {args.episodes} episodes, seed {args.seed}, flat track")
    header = (f"{'agent':<28} {'score':>6} {'wall s':>8} {'cpu s':>8} {'decisions':>9} "
              f"{'dec/s':>9} {'ms/dec':>8} {'cpu ms/dec':>10}")
    print(header)
    print("-" * len(header))
    results = {}
    for agent in args.agents:
        r = results[agent] = time_grade(agent, args.episodes, args.seed)
        print(f"{agent:<28} {r['overall_score']:6.2f} {r['wall_s']:8.2f} {r['cpu_s']:8.2f} "
              f"{r['decisions']:9d} {r['decisions_per_s']:9.1f} {r['ms_per_decision']:8.3f} "
              f"{r['cpu_ms_per_decision']:10.3f}")
    print("\nms per decision (wall) by scenario:")
    names = list(next(iter(results.values()))["scenario_ms_per_decision"])
    print(f"{'agent':<28} " + " ".join(f"{name:>17}" for name in names))
    for agent, r in results.items():
        print(f"{agent:<28} " + " ".join(f"{r['scenario_ms_per_decision'][n]:17.3f}" for n in names))

    if "heuristic" in results:
        wall = results["heuristic"]["wall_s"]
        scaled = wall * TARGET_EPISODES / args.episodes
        met = "met" if scaled <= HEURISTIC_TARGET_S else "NOT met"
        note = "" if args.episodes == TARGET_EPISODES else f" (scaled to {TARGET_EPISODES} episodes)"
        print(f"\ntarget heuristic full grade <= {HEURISTIC_TARGET_S:g} s: {met} "
              f"({scaled:.2f} s{note})")
        for agent, r in results.items():
            if agent != "heuristic":
                ratio = r["ms_per_decision"] / results["heuristic"]["ms_per_decision"]
                print(f"{agent}: {ratio:,.0f}x the heuristic's time per decision")


if __name__ == "__main__":
    main()
