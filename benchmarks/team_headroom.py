"""The team track's headroom: ``team_planner`` against ``team_heuristic`` on the same days.

What is measured: ``grading.grade(agent, track="team", episodes=N, seed=S)`` for both agents
(the grader's days depend only on the seed, scenario and episode, so episode ``i`` is the same
day for both: the comparison is paired). Per scenario: each agent's mean score, the paired
difference (planner − heuristic) with its standard error, and whether it reaches SPEC §7's
headroom (:data:`grading.common.NO_HEADROOM` points: below it, "beats" the heuristic means
within :data:`grading.common.WITHIN` point). Overall: the mean over scenarios (the grader's
overall score). ``--flat`` also grades ``planner`` against ``heuristic`` on the same days (the
flat track's headroom, for comparison). Wall and CPU time per agent and per role decision.

Validation days are grader seed 1000 (tune there); held-out reporting uses the seed of
``benchmarks/marl_stats.py`` (``training.benchmarl.train.HELDOUT_SEED``). Not a test. Run::

    python benchmarks/team_headroom.py [--episodes 20] [--seed 0] [--flat] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.grader_speed import DECISION_COUNT
from grading.common import NO_HEADROOM, WITHIN, stderr
from grading.grader import grade

PAIRS = {"team": ("team_planner", "team_heuristic"), "flat": ("planner", "heuristic")}


def graded(agent: str, track: str, episodes: int, seed: int) -> dict[str, Any]:
    """One grade, timed: per-scenario episode scores and the cost per decision."""
    wall, cpu = time.perf_counter(), time.process_time()
    report = grade(agent, episodes=episodes, seed=seed, track=track)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    decisions = sum(s["counts"][DECISION_COUNT[track]] for s in report["scenarios"].values())
    invalid = sum(s["counts"]["invalid_actions"] for s in report["scenarios"].values())
    return {
        "scores": {name: s["episode_scores"] for name, s in report["scenarios"].items()},
        "seeds": {name: s["episode_seeds"] for name, s in report["scenarios"].items()},
        "overall": report["overall_score"],
        "wall_s": wall,
        "cpu_s": cpu,
        "decisions": decisions,
        "invalid_actions": invalid,
    }


def compare(track: str, episodes: int, seed: int) -> dict[str, Any]:
    """The planner and its heuristic on the same days of ``track``, paired per scenario."""
    planner, heuristic = PAIRS[track]
    runs = {agent: graded(agent, track, episodes, seed) for agent in (planner, heuristic)}
    assert runs[planner]["seeds"] == runs[heuristic]["seeds"], "the two grades played different days"
    scenarios = {}
    for name, ours in runs[planner]["scores"].items():
        diff = np.array(ours) - np.array(runs[heuristic]["scores"][name])
        scenarios[name] = {
            planner: float(np.mean(ours)),
            heuristic: float(np.mean(runs[heuristic]["scores"][name])),
            "headroom": float(diff.mean()),
            "headroom_stderr": stderr(diff.tolist()),
        }
    return {"track": track, "episodes": episodes, "seed": seed, "runs": runs, "scenarios": scenarios}


def show(result: dict[str, Any]) -> None:
    track, (planner, heuristic) = result["track"], PAIRS[result["track"]]
    print(
        f"\n{track} track: {planner} vs {heuristic}, {result['episodes']} paired episodes per scenario, "
        f"grader seed {result['seed']}"
    )
    header = f"{'scenario':<18} {planner:>13} {heuristic:>15} {'headroom ± s.e.':>17}"
    header += f"  headroom >= {NO_HEADROOM:g}?"
    print(header)
    print("-" * len(header))
    for name, s in result["scenarios"].items():
        verdict = "yes" if s["headroom"] >= NO_HEADROOM else f"no (beats = within {WITHIN:g})"
        print(
            f"{name:<18} {s[planner]:13.2f} {s[heuristic]:15.2f} "
            f"{s['headroom']:+9.2f} ± {s['headroom_stderr']:4.2f}  {verdict}"
        )
    runs = result["runs"]
    gap = runs[planner]["overall"] - runs[heuristic]["overall"]
    print(f"{'overall':<18} {runs[planner]['overall']:13.2f} {runs[heuristic]['overall']:15.2f} {gap:+9.2f}")
    for agent in (planner, heuristic):
        r = runs[agent]
        print(
            f"  {agent}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, "
            f"{1e3 * r['wall_s'] / r['decisions']:.3f} ms wall / "
            f"{1e3 * r['cpu_s'] / r['decisions']:.3f} ms CPU "
            f"per decision ({r['decisions']} decisions), {r['invalid_actions']} invalid actions"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20, help="episodes per scenario")
    parser.add_argument("--seed", type=int, default=0, help="the grader's base seed (1000: validation days)")
    parser.add_argument("--flat", action="store_true", help="also the flat track's planner vs heuristic")
    parser.add_argument("--json", type=Path, help="write the per-episode scores and figures here")
    args = parser.parse_args(argv)
    results = [
        compare(track, args.episodes, args.seed) for track in (("team", "flat") if args.flat else ("team",))
    ]
    for result in results:
        show(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
