"""The generalisation table (issue #28): every reference agent graded in distribution
(``validation``: train's ranges, unseen draws) and out of distribution (``test``: outside
train's ranges), the gap between them, difficulty tiers set by a measured reference score, and
the night-shift tiers.

    python -m benchmarks.generalisation --write   # fills docs/generalisation.md's block

Tiers: each ``test`` episode is put in a tier by the *heuristic's* score on that episode's seed
(terciles of its measured scores: ``hard`` is the third of the days where the heuristic did
worst), and every agent's mean is reported per tier. Episodes are seeded by (seed, split, index)
for every agent, so an agent meets the same hospitals and patients as the reference (common
random numbers) and the tiers hold the same days for every agent.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from grading.common import mean, stderr
from grading.grader import grade
from grading.tables import markdown_table, write_marked

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "generalisation.md"
MARKER = "generalisation"
AGENTS = (
    "random",
    "masked_random",
    "greedy",
    "fifo_severity",
    "heuristic",
    "planner",
    "team_heuristic",
    "team_planner",
)
SLOW = ("planner", "team_planner")
SPLITS = ("validation", "test")
NIGHT = ("night_shift", "night_shift_lean")
REFERENCE = "heuristic"
COMMAND = "python -m benchmarks.generalisation --write"
LEARNERS = {  # track -> (marker, trainer, run prefix)
    "flat": ("generalisation-learners", "fast-ppo", "generalisation5m_ppo"),
    "team": ("generalisation-learners-team", "fast-mappo", "generalisation5m_mappo"),
}


def learners_command(track: str) -> str:
    """The documented commands that train the learners of ``track`` and write their table."""
    _, trainer, prefix = LEARNERS[track]
    return (
        f"for s in 0 1 2 3 4; do hospital-marl train {trainer} --scenario train --frames 5000000 "
        f"--num-envs 1000 --eval-interval 1000000 --seed $s --save runs/{prefix}_s$s; done; "
        "python -m benchmarks.generalisation "
        f"--learners runs/{prefix}_s* --track {track} --write"
    )


def _grade(agent: str, episodes: int, seed: int) -> dict[str, Any]:
    from hospital_marl_cli.play import load_policy

    track = "team" if agent.startswith("team_") else "flat"
    return grade(load_policy(agent), episodes=episodes, seed=seed, scenarios=[*SPLITS, *NIGHT], track=track)


def _cell(values: list[float]) -> str:
    return f"{mean(values):.1f} ± {stderr(values):.1f}" if values else "—"


def tiers(reference: list[float]) -> tuple[float, float]:
    """The terciles of the reference agent's test scores: (hard below, easy from)."""
    low, high = np.quantile(np.asarray(reference), [1 / 3, 2 / 3])
    return float(low), float(high)


def tier_of(score: float, cuts: tuple[float, float]) -> str:
    return "hard" if score < cuts[0] else "easy" if score >= cuts[1] else "medium"


def tables(reports: dict[str, dict[str, Any]]) -> str:
    """The page's Markdown: the split table, the tiers and the night-shift table."""
    ref = reports[REFERENCE]["scenarios"]["test"]
    cuts = tiers(ref["episode_scores"])
    tier_by_seed = {s: tier_of(v, cuts) for s, v in zip(ref["episode_seeds"], ref["episode_scores"])}
    split_rows, tier_rows, night_rows = [], [], []
    for agent, report in reports.items():
        val, test = (report["scenarios"][name] for name in SPLITS)
        gap = val["score"] - test["score"]
        gap_se = math.hypot(val["score_stderr"], test["score_stderr"])
        n = len(test["episode_scores"])
        split_rows.append([agent, report["track"], str(n), _cell(val["episode_scores"]),
                           _cell(test["episode_scores"]), f"{gap:+.1f} ± {gap_se:.1f}"])  # fmt: skip
        by_tier: dict[str, list[float]] = {"easy": [], "medium": [], "hard": []}
        for seed, score in zip(test["episode_seeds"], test["episode_scores"]):
            by_tier[tier_by_seed[seed]].append(score)
        tier_rows.append([agent, *(_cell(by_tier[t]) for t in ("easy", "medium", "hard"))])
        night_rows.append([agent, *(_cell(report["scenarios"][s]["episode_scores"]) for s in NIGHT)])
    split = markdown_table(
        ["agent", "track", "episodes", "validation (in-distribution)", "test (out-of-distribution)", "gap"],
        split_rows,
    )
    tier = markdown_table(["agent", "easy", "medium", "hard"], tier_rows)
    night = markdown_table(["agent", *NIGHT], night_rows)
    return (
        f"**Splits** (score 0–100, mean ± standard error over episodes; gap = validation − test, "
        f"its standard error from both):\n\n{split}\n\n"
        f"**Difficulty tiers of `test`** by the `{REFERENCE}`'s measured score on each day "
        f"(hard < {cuts[0]:.1f} ≤ medium < {cuts[1]:.1f} ≤ easy):\n\n{tier}\n\n"
        f"**Night shift** (`night_shift` saturates: every agent above masked_random scores about 90; "
        f"`night_shift_lean` is a night in a lean night-time department):\n\n{night}"
    )


def learners_table(runs: list[str], episodes: int, seed: int, track: str = "flat") -> str:
    """Each trained run graded on both splits (the main table's days), and the mean over runs
    with its standard error across training seeds."""
    from grading import grade_generalisation

    rows, sides = [], {"validation": [], "test": [], "gap": []}
    for run in runs:
        model = str(Path(run) / "model.onnx") if track == "flat" else run  # a MAPPO run: its directory
        report = grade_generalisation(model, episodes=episodes, seed=seed, track=track)
        g = report["generalisation"]
        ind, ood = g["in_distribution"], g["out_of_distribution"]
        cells = [(ind["score"], ind["score_stderr"]), (ood["score"], ood["score_stderr"])]
        rows.append([f"`{Path(run).name}`", *(f"{m:.1f} ± {e:.1f}" for m, e in cells),
                     f"{g['gap']:+.1f} ± {g['gap_stderr']:.1f}"])  # fmt: skip
        sides["validation"].append(ind["score"])
        sides["test"].append(ood["score"])
        sides["gap"].append(g["gap"])
    gap = f"{mean(sides['gap']):+.1f} ± {stderr(sides['gap']):.1f}"
    mean_row = [f"**mean of {len(runs)} seeds**", _cell(sides["validation"]), _cell(sides["test"]), gap]
    rows.append(mean_row)
    return markdown_table(["run", "validation (in-distribution)", "test (out-of-distribution)", "gap"], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=40, help="episodes per split (default 40)")
    parser.add_argument("--slow-episodes", type=int, default=20, help="episodes per split for the planners")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--agents", nargs="+", default=list(AGENTS))
    parser.add_argument("--learners", nargs="+", metavar="RUN", help="grade these trained runs instead")
    parser.add_argument("--track", choices=tuple(LEARNERS), default="flat", help="the learners' track")
    parser.add_argument(
        "--write", action="store_true", help=f"write the tables into {PAGE.relative_to(ROOT)}"
    )
    args = parser.parse_args(argv)
    if args.learners:
        body = learners_table(args.learners, args.episodes, args.seed, args.track)
        print(body)
        if args.write:
            marker = LEARNERS[args.track][0]
            start, end = f"<!-- BEGIN {marker} -->", f"<!-- END {marker} -->"
            text = f"`{learners_command(args.track)}` (seed {args.seed}, {args.episodes} episodes per split)"
            write_marked(PAGE, start, end, f"{start}\n{text}\n\n{body}\n{end}")
        return 0
    if REFERENCE not in args.agents:
        parser.error(f"the tiers need the reference agent {REFERENCE!r}")
    reports = {}
    for agent in args.agents:
        t0 = time.perf_counter()
        reports[agent] = _grade(agent, args.slow_episodes if agent in SLOW else args.episodes, args.seed)
        print(f"{agent}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    body = tables(reports)
    print(body)
    if args.write:
        text = (
            f"`{COMMAND}` (seed {args.seed}; {args.episodes} episodes per split, "
            f"{args.slow_episodes} for the planners)"
        )
        write_marked(PAGE, f"<!-- BEGIN {MARKER} -->", f"<!-- END {MARKER} -->",
                     f"<!-- BEGIN {MARKER} -->\n{text}\n\n{body}\n<!-- END {MARKER} -->")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
