"""The team protocol's two ways of playing, measured (docs/grading.md, "The team protocol").

Grades ``team_heuristic`` and the registered from-scratch ``mappo`` (trained on the simultaneous
protocol before issue #40) on the same held-out days both ways: AEC (each role reads the mid-tick
state) and simultaneous (every role plans on the start-of-tick state; a conflict is the no-op).
Paired over the same days, so the difference's standard error is over the per-day differences.

    python benchmarks/team_protocol.py [--episodes 10] [--seed 20261201]
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from grading import grade
from hospital_marl.envs.protocol import AEC, SIMULTANEOUS
from policies import load
from policies.protocol import as_trained


def days(report: dict[str, Any]) -> list[float]:
    return [s for scenario in report["scenarios"].values() for s in scenario["episode_scores"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20261201)
    a = parser.parse_args()
    heuristic = load("team_heuristic")
    mappo = load("mappo")  # unrecorded protocol: played simultaneously, as trained
    learner = getattr(mappo, "inner", mappo)
    players = {
        "team_heuristic": {
            AEC: as_trained(heuristic, AEC),
            SIMULTANEOUS: as_trained(load("team_heuristic"), SIMULTANEOUS),
        },
        "mappo": {AEC: as_trained(learner, AEC), SIMULTANEOUS: mappo},
    }
    out = {}
    for name, ways in players.items():
        reports = {way: grade(p, episodes=a.episodes, seed=a.seed, track="team") for way, p in ways.items()}
        diff = [x - y for x, y in zip(days(reports[AEC]), days(reports[SIMULTANEOUS]))]
        out[name] = {
            **{way: round(r["overall_score"], 2) for way, r in reports.items()},
            "aec_minus_simultaneous": round(statistics.mean(diff), 2),
            "stderr": round(statistics.stdev(diff) / len(diff) ** 0.5, 2),
            "scenarios": {
                way: {k: round(v, 2) for k, v in r["scenario_scores"].items()} for way, r in reports.items()
            },
        }
        print(json.dumps({name: out[name]}), flush=True)
    print(json.dumps({"episodes": a.episodes, "seed": a.seed, "results": out}, indent=1))


if __name__ == "__main__":
    main()
