"""The original document's anchor (issue #40, item 4): SB3 MaskablePPO trained from scratch by
``hospital-marl train ppo`` against ``greedy``, ``fifo_severity`` and ``heuristic`` on the flat
track, on the held-out days (grader seed 20261201, ``--episodes`` per scenario).

    hospital-marl train ppo --all-scenarios --timesteps 50000 --seed 0 --eval-freq 0 --save runs/sb3_50k
    python benchmarks/sb3_anchor.py runs/sb3_50k [--episodes 10]
"""

from __future__ import annotations

import argparse
import json

from grading import grade

HELDOUT_SEED = 20261201


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="train ppo run directories (their final model)")
    parser.add_argument("--episodes", type=int, default=10)
    a = parser.parse_args()
    out = {}
    for policy in (*a.runs, "greedy", "fifo_severity", "heuristic"):
        report = grade(policy, episodes=a.episodes, seed=HELDOUT_SEED, track="flat")
        out[policy] = {"overall": round(report["overall_score"], 2),
                       **{k: round(v, 2) for k, v in report["scenario_scores"].items()}}  # fmt: skip
        print(json.dumps({policy: out[policy]}), flush=True)
    print(json.dumps({"seed": HELDOUT_SEED, "episodes": a.episodes, "scores": out}, indent=1))


if __name__ == "__main__":
    main()
