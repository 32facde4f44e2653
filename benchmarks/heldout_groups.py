"""Groups of team runs (one per training seed) graded on the held-out days, with rliable IQMs (issue #40).

Each group is ``name=run_dir,run_dir,...``; every run (its best-validation actors, as
``policies.load`` plays them, on the protocol it records) and ``team_heuristic`` are graded on the
same held-out days (grader seed 20261201, ``--episodes`` per scenario: never used to pick a
checkpoint, which used validation seed 1000). Prints, and with ``--out`` writes, every seed's
overall and per-scenario scores, each group's IQM and mean with stratified-bootstrap 95 % CIs over
seeds x scenarios, and the paired margin to ``team_heuristic`` per scenario with SPEC §7's "beats".

    python benchmarks/heldout_groups.py "mappo_aec=runs/a,runs/b" --episodes 10 --out docs/fast/x.json

``--jobs N`` grades N runs at once (one process each; the scores do not depend on it). Each group
also records every run's frames (its ``fast.json``) and on how many scenarios it beats
``team_heuristic`` by SPEC §7's rule, the planner's headroom read from :data:`HEADROOM_FROM`
(``team_planner`` − ``team_heuristic`` on the same held-out days).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading import grade, stats  # noqa: E402
from grading.common import beats  # noqa: E402
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS  # noqa: E402
from policies import load  # noqa: E402

HELDOUT_SEED = 20261201
HEADROOM_FROM = ROOT / "docs" / "fast" / "fast_runs.json"
"""``benchmarks/fast_stats.py collect``'s held-out grading, which holds ``team_planner``'s and
``team_heuristic``'s scores on these days (its episode k is the same day at any episode count)."""


def headroom() -> dict[str, float | None]:
    """Each scenario's ``team_planner`` − ``team_heuristic`` on the held-out days (None: unknown)."""
    from benchmarks.marl_stats import headroom as of

    return of(json.loads(HEADROOM_FROM.read_text())) if HEADROOM_FROM.exists() else {}


def _graded(run: str, episodes: int) -> dict[str, list[float]]:
    return per_scenario(load(run), episodes)


def _frames(run: str) -> int | None:
    meta = Path(run) / "fast.json"
    return json.loads(meta.read_text()).get("frames") if meta.exists() else None


def per_scenario(policy: Any, episodes: int) -> dict[str, list[float]]:
    report = grade(policy, episodes=episodes, seed=HELDOUT_SEED, track="team")
    return {name: s["episode_scores"] for name, s in report["scenarios"].items()}


def table(paths: list[str]) -> str:
    """The groups of one or more ``--out`` files as a markdown table, ``team_heuristic`` first."""
    lines = [
        "| policy | seeds: overall | mean | IQM [95 % CI] "
        "| margin to `team_heuristic` per scenario (mean ± s.e. over seeds) |",
        "|---|---|---:|---:|---|",
    ]
    for i, path in enumerate(paths):
        data = json.loads(Path(path).read_text())
        if i == 0:
            th = data["team_heuristic"]
            lines.append(
                f"| `team_heuristic` | — | {data['team_heuristic_mean']:.2f} "
                f"| {data['team_heuristic_iqm']:.2f} | "
                + ", ".join(f"{s} {v:.1f}" for s, v in th.items())
                + " (its scores) |"
            )
        for name, g in data["groups"].items():
            seeds = ", ".join(f"{s['overall']:.2f}" for s in g["seeds"])
            margins = ", ".join(
                f"{s} {m:+.1f} ± {se:.1f}" for s, (m, se) in g["margin_to_team_heuristic"].items()
            )
            ci = g["iqm_ci"]
            lines.append(
                f"| {name} | {seeds} | {g['mean']:.2f} "
                f"| {g['iqm']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] | {margins} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups", nargs="*", help="name=run_dir,run_dir,...")
    parser.add_argument("--table", nargs="+", help="print the table of these --out files and stop")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--jobs", type=int, default=1, help="runs graded at once (processes)")
    a = parser.parse_args()
    if a.table:
        print(table(a.table))
        return
    scenarios = list(BUILTIN_SCENARIOS)
    groups: dict[str, list[dict[str, Any]]] = {}
    todo = [(name, run) for name, dirs in (g.split("=", 1) for g in a.groups) for run in dirs.split(",")]
    runs = ["team_heuristic", *(run for _, run in todo)]
    with ProcessPoolExecutor(a.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        heuristic, *graded = pool.map(_graded, runs, [a.episodes] * len(runs))
    for (name, run), scores in zip(todo, graded):
        groups.setdefault(name, []).append({"run": run, "scores": scores, "frames": _frames(run)})
        overall = sum(sum(v) / len(v) for v in scores.values()) / len(scores)
        print(json.dumps({"group": name, "run": run, "overall": round(overall, 3)}), flush=True)
    room = headroom()
    matrices = {
        name: stats.score_matrix([r["scores"] for r in runs], scenarios) for name, runs in groups.items()
    }
    matrices["team_heuristic"] = stats.score_matrix([heuristic], scenarios)
    estimates = stats.aggregate_estimates(matrices, reps=a.reps)
    out: dict[str, Any] = {
        "seed": HELDOUT_SEED,
        "episodes": a.episodes,
        "command": "python benchmarks/heldout_groups.py "
        + " ".join(f'"{g}"' for g in a.groups)
        + f" --episodes {a.episodes} --reps {a.reps}",
        "team_heuristic": {s: round(sum(v) / len(v), 3) for s, v in heuristic.items()},
        "groups": {},
    }
    for name, runs in groups.items():
        margins = {s: stats.paired_margin([r["scores"] for r in runs], heuristic, s) for s in scenarios}
        out["groups"][name] = {
            "seeds": [
                {
                    "run": r["run"],
                    "frames": r["frames"],
                    "overall": round(float(m.mean()), 3),
                    "scenarios": dict(zip(scenarios, m.round(3).tolist())),
                }
                for r, m in zip(runs, matrices[name])
            ],
            "iqm": round(estimates[name]["iqm"], 3),
            "iqm_ci": [round(x, 3) for x in estimates[name]["iqm_ci"]],
            "mean": round(estimates[name]["mean"], 3),
            "mean_ci": [round(x, 3) for x in estimates[name]["mean_ci"]],
            "margin_to_team_heuristic": {s: [round(m, 3), round(se, 3)] for s, (m, se) in margins.items()},
            "beats_team_heuristic_on": [s for s in scenarios if beats(margins[s][0], room.get(s))],
        }
    out["team_heuristic_iqm"] = round(estimates["team_heuristic"]["iqm"], 3)
    out["team_heuristic_mean"] = round(estimates["team_heuristic"]["mean"], 3)
    print(json.dumps(out, indent=1))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
