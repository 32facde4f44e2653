"""The PPO results table of ``policies/checkpoints/README.md``, regenerated from the shipped checkpoints.

Grades, with the project's grader (10 episodes per scenario, seed 0 by default):

- flat track: ``random``, ``masked_random``, the trivial rules ``greedy`` and ``fifo_severity``,
  ``heuristic``, ``ppo`` (masked MaskablePPO),
  ``ppo_pruned`` (trained and acting with ``--prune``: the mask minus dominated actions),
  ``ppo_nomask`` (the ``ppo`` recipe trained with ``--no-mask``, graded as is) and
  ``planner`` when it is available;
- team track: ``masked_random``, ``team_heuristic``, ``team_ppo``.

Margins are *paired*: every policy plays the same days (episode seeds), so
the margin's standard error is that of the per-episode differences. A scenario
"beats" the reference when the margin is positive, or -- where the planner
finds no headroom (planner - heuristic < 2 points, SPEC §7) -- when it is
within 1 point. Training cost comes from each checkpoint's metadata.

    python benchmarks/ppo_table.py                 # print the Markdown
    python benchmarks/ppo_table.py --write         # also replace the table in policies/checkpoints/README.md
    python benchmarks/ppo_table.py --no-planner    # skip the (slow) planner
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import policies
from grading import grade
from grading.common import NO_HEADROOM, beats
from grading.tables import write_marked
from policies.learned import CHECKPOINT_DIR, SHIPPED, read_metadata

README = CHECKPOINT_DIR / "README.md"
TRIVIAL = ("random", "masked_random", "greedy", "fifo_severity")
"""The flat floor: what every reference and learner must clear (issue #23)."""
START, END = "<!-- ppo-table:start -->", "<!-- ppo-table:end -->"


def paired(a: dict[str, Any], b: dict[str, Any], scenario: str) -> tuple[float, float]:
    """Mean and standard error of a - b over the scenario's shared episode seeds."""
    sa, sb = a["scenarios"][scenario], b["scenarios"][scenario]
    assert sa["episode_seeds"] == sb["episode_seeds"], "reports must be graded on the same days"
    diffs = [x - y for x, y in zip(sa["episode_scores"], sb["episode_scores"])]
    mean = math.fsum(diffs) / len(diffs)
    if len(diffs) < 2:
        return mean, 0.0
    var = math.fsum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
    return mean, math.sqrt(var / len(diffs))


def overall_paired(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, float]:
    """Paired margin of the overall score (mean over scenarios of per-episode differences)."""
    names = list(a["scenario_scores"])
    n = len(a["scenarios"][names[0]]["episode_scores"])
    diffs = [
        math.fsum(
            a["scenarios"][s]["episode_scores"][i] - b["scenarios"][s]["episode_scores"][i] for s in names
        )
        / len(names)
        for i in range(n)
    ]
    mean = math.fsum(diffs) / n
    var = math.fsum((d - mean) ** 2 for d in diffs) / max(n - 1, 1)
    return mean, math.sqrt(var / n)


def grade_timed(agent: str, track: str, episodes: int, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    report = grade(agent, episodes=episodes, seed=seed, track=track)
    report["wall_time_s"] = time.perf_counter() - t0
    print(
        f"  graded {agent} ({track}): {report['overall_score']:.2f} in {report['wall_time_s']:.1f} s",
        file=sys.stderr,
    )
    return report


def verdict(margin: float, headroom: float | None) -> str:
    if not beats(margin, headroom):
        return "**no**"
    return "yes (within 1)" if headroom is not None and headroom < NO_HEADROOM else "yes"


def margin_cells(a: dict[str, Any], b: dict[str, Any], scenario: str, headroom: float | None) -> list[str]:
    """``a − b (± s.e.)`` and whether ``a`` beats ``b`` there (SPEC §7's rule; overall: ahead)."""
    m, se = overall_paired(a, b) if scenario == "overall" else paired(a, b, scenario)
    beats = verdict(m, headroom) if scenario != "overall" else ("yes" if m > 0 else "no")
    return [f"{m:+.1f} ± {se:.1f}", beats]


def flat_table(reports: dict[str, dict[str, Any]]) -> list[str]:
    ppo, heur, nomask = reports["ppo"], reports["heuristic"], reports.get("ppo_nomask")
    pruned, planner = reports.get("ppo_pruned"), reports.get("planner")
    head = [
        "scenario",
        *TRIVIAL,
        "heuristic",
        "**ppo**",
        "ppo − heuristic (± s.e.)",
        "beats?",
    ]
    if pruned:
        head += ["ppo --prune", "pruned − heuristic", "beats?"]
    if nomask:
        head += ["ppo --no-mask", "no-mask − heuristic", "no-mask invalid rate"]
    if planner:
        head += ["planner", "planner − heuristic"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in [*ppo["scenario_scores"], "overall"]:
        row = [f"`{s}`" if s != "overall" else "**overall**"]
        for agent in (*TRIVIAL, "heuristic", "ppo"):
            r = reports[agent]
            score = r["overall_score"] if s == "overall" else r["scenario_scores"][s]
            row.append(f"{score:.1f}" if agent != "ppo" else f"**{score:.1f}**")
        headroom = None
        if planner and s != "overall":
            headroom = planner["scenario_scores"][s] - heur["scenario_scores"][s]
        row += margin_cells(ppo, heur, s, headroom)
        if pruned:
            score = pruned["overall_score"] if s == "overall" else pruned["scenario_scores"][s]
            row += [f"{score:.1f}", *margin_cells(pruned, heur, s, headroom)]
        if nomask:
            nm, nse = overall_paired(nomask, heur) if s == "overall" else paired(nomask, heur, s)
            score = nomask["overall_score"] if s == "overall" else nomask["scenario_scores"][s]
            rate = (
                nomask["invalid_action_rate"]
                if s == "overall"
                else nomask["scenarios"][s]["metrics"]["invalid_action_rate"]
            )
            row += [f"{score:.1f}", f"{nm:+.1f} ± {nse:.1f}", f"{100 * rate:.1f} %"]
        if planner:
            score = planner["overall_score"] if s == "overall" else planner["scenario_scores"][s]
            pm, pse = overall_paired(planner, heur) if s == "overall" else paired(planner, heur, s)
            row += [f"{score:.1f}", f"{pm:+.1f} ± {pse:.1f}"]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def team_table(reports: dict[str, dict[str, Any]], flat_ppo: dict[str, Any]) -> list[str]:
    tp, th = reports["team_ppo"], reports["team_heuristic"]
    head = [
        "scenario",
        "masked_random",
        "team_heuristic",
        "**team_ppo**",
        "team_ppo − team_heuristic (± s.e.)",
        "flat ppo (other track)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in [*tp["scenario_scores"], "overall"]:
        row = [f"`{s}`" if s != "overall" else "**overall**"]
        for agent in ("masked_random", "team_heuristic", "team_ppo"):
            r = reports[agent]
            score = r["overall_score"] if s == "overall" else r["scenario_scores"][s]
            row.append(f"{score:.1f}" if agent != "team_ppo" else f"**{score:.1f}**")
        m, se = overall_paired(tp, th) if s == "overall" else paired(tp, th, s)
        row.append(f"{m:+.1f} ± {se:.1f}")
        row.append(f"{flat_ppo['overall_score'] if s == 'overall' else flat_ppo['scenario_scores'][s]:.1f}")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def cost_table() -> list[str]:
    lines = [
        "| checkpoint | name | track | trained for | wall time | CPU time | shipped model from step "
        "| command |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, file in SHIPPED.items():
        meta = read_metadata(CHECKPOINT_DIR / file)
        if not meta:
            continue
        run = meta.get("run", meta)
        lines.append(
            f"| `{file}` | `{name}` | {meta['track']} | {run['timesteps']:,} steps "
            f"| {run['wall_time_s']:.0f} s | {run['cpu_time_s']:.0f} s | {meta['timesteps']:,} "
            f"| `{meta['command']}` |"
        )
    return lines


def build(episodes: int, seed: int, with_planner: bool) -> tuple[str, dict[str, Any]]:
    names = set(policies.names())
    flat_agents = [*TRIVIAL, "heuristic", "ppo"]
    flat_agents += [name for name in ("ppo_pruned", "ppo_nomask") if name in names]
    if with_planner and "planner" in names:
        flat_agents.append("planner")
    flat = {a: grade_timed(a, "flat", episodes, seed) for a in flat_agents}
    team = {
        a: grade_timed(a, "team", episodes, seed) for a in ("masked_random", "team_heuristic", "team_ppo")
    }
    parts = [
        START,
        "*Generated by `python benchmarks/ppo_table.py --write` "
        f"({episodes} episodes per scenario, seed {seed}; "
        "margins are paired over the same days, ± one standard error).*",
        "",
        "**Flat track** (one `Discrete(39)` action per tick):",
        "",
        *flat_table(flat),
        "",
        "**Team track** (one action per role per tick; never rank against the flat track, except as asked: "
        "team PPO vs flat PPO overall):",
        "",
        *team_table(team, flat["ppo"]),
        "",
        "**Training cost** (this machine: 2 shared cores; wall time includes the periodic evaluations):",
        "",
        *cost_table(),
        END,
    ]
    data = {"episodes": episodes, "seed": seed, "flat": flat, "team": team}
    return "\n".join(parts), data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-planner", action="store_true", help="skip the planner column")
    parser.add_argument("--write", action="store_true", help=f"replace the table in {README}")
    parser.add_argument("--json", metavar="FILE", help="also write every report as JSON")
    args = parser.parse_args(argv)
    table, data = build(args.episodes, args.seed, not args.no_planner)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
    if args.write:
        write_marked(README, START, END, table)
        print(f"wrote {README}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
