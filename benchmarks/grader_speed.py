"""How long the full grade takes, per agent: wall time, decisions/s and ms per decision.

What is measured: ``grading.grade(agent, episodes=N, seed=0)`` over the five
built-in scenarios, exactly as the grading CLI runs it: on the flat track (default)
a decision is a graded tick (the report's ``counts.ticks``); on the team track
(``--track team``: ``team_heuristic`` and ``team_planner`` by default) a decision is
one role's action (``counts.actions``: three a tick). CPU time (``time.process_time``) is printed next to wall
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
    python benchmarks/grader_speed.py --track team [--episodes 4]
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
DECISION_COUNT = {"flat": "ticks", "team": "actions"}
"""The report count that is one decision: a tick on the flat track, a role's action on the team track."""
DEFAULT_AGENTS = {"flat": ["heuristic", "planner"], "team": ["team_heuristic", "team_planner"]}


def time_grade(agent: str, episodes: int, seed: int, track: str = "flat") -> dict[str, Any]:
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
    report = grade(policy, episodes=episodes, seed=seed, progress=progress, track=track)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    unit = DECISION_COUNT[track]
    decisions = sum(s["counts"][unit] for s in report["scenarios"].values())
    return {
        "scenario_ms_per_decision": {
            name: 1e3 * scenario_wall[name] / s["counts"][unit] for name, s in report["scenarios"].items()
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
    parser.add_argument(
        "--agents",
        nargs="+",
        default=None,
        help="policy specs for policies.load, e.g. heuristic 'planner:rollouts=8' "
        "(default: heuristic planner; on the team track team_heuristic team_planner)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the grader's base seed")
    parser.add_argument("--track", choices=sorted(DECISION_COUNT), default="flat")
    args = parser.parse_args(argv)
    agents = args.agents or DEFAULT_AGENTS[args.track]

    print(
        f"full grade: 5 scenarios x {args.episodes} episodes, seed {args.seed}, {args.track} track"
        + (" (a decision: one role's action)" if args.track == "team" else "")
    )
    header = (
        f"{'agent':<28} {'score':>6} {'wall s':>8} {'cpu s':>8} {'decisions':>9} "
        f"{'dec/s':>9} {'ms/dec':>8} {'cpu ms/dec':>10}"
    )
    print(header)
    print("-" * len(header))
    results = {}
    for agent in agents:
        r = results[agent] = time_grade(agent, args.episodes, args.seed, args.track)
        print(
            f"{agent:<28} {r['overall_score']:6.2f} {r['wall_s']:8.2f} {r['cpu_s']:8.2f} "
            f"{r['decisions']:9d} {r['decisions_per_s']:9.1f} {r['ms_per_decision']:8.3f} "
            f"{r['cpu_ms_per_decision']:10.3f}"
        )
    print("\nms per decision (wall) by scenario:")
    names = list(next(iter(results.values()))["scenario_ms_per_decision"])
    print(f"{'agent':<28} " + " ".join(f"{name:>17}" for name in names))
    for agent, r in results.items():
        print(f"{agent:<28} " + " ".join(f"{r['scenario_ms_per_decision'][n]:17.3f}" for n in names))

    reference = "heuristic" if args.track == "flat" else "team_heuristic"
    if args.track == "flat" and reference in results:
        wall = results[reference]["wall_s"]
        scaled = wall * TARGET_EPISODES / args.episodes
        met = "met" if scaled <= HEURISTIC_TARGET_S else "NOT met"
        note = "" if args.episodes == TARGET_EPISODES else f" (scaled to {TARGET_EPISODES} episodes)"
        print(f"\ntarget heuristic full grade <= {HEURISTIC_TARGET_S:g} s: {met} ({scaled:.2f} s{note})")
    if reference in results:
        for agent, r in results.items():
            if agent != reference:
                ratio = r["ms_per_decision"] / results[reference]["ms_per_decision"]
                print(f"{agent}: {ratio:,.0f}x the {reference}'s time per decision")


if __name__ == "__main__":
    main()
