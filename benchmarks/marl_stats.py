"""MAPPO / IPPO over several training seeds, reported as the field reports them (rliable).

Three steps, so that the table and figures regenerate from committed artefacts alone:

0. ``publish`` copies each finished ``train benchmarl`` run's small artefacts (``benchmarl.json``,
   ``curve.json``, the *best validation* ONNX actors, a warm start's cloned actors) from the ignored
   ``runs/`` into the committed home :data:`COMMITTED` (``policies/checkpoints/marl/benchmarl/<run>/``,
   ~0.3 MB a run).
1. ``collect`` grades every run directory under ``--runs`` (default: the committed home; its
   *best validation* actors: checkpoint selection used grader seed 1000) on **held-out days**
   (grader base seed :data:`training.benchmarl.train.HELDOUT_SEED`, ``--episodes`` per
   scenario, never seen in training or selection), grades ``team_heuristic`` on the same
   days (and ``team_planner``, the team track's lookahead: its margin over ``team_heuristic`` is
   each scenario's headroom for the team verdicts and the size of the issue's
   "heuristic→planner gap"), and writes ``docs/marl/benchmarl_runs.json``: per-seed, per-episode held-out
   scores, each run's validation learning curve, its cost and command. Runs trained with
   ``--reward score`` are their own rows (``mappo_score``, ``ippo_score``) beside the dense-reward
   ones; runs warm-started from ``team_heuristic`` (``--warm-start``) too (``mappo_warm``), and their
   cloned actors before PPO as one more row (``mappo_clone``). It also grades the shipped flat
   ``ppo``, ``heuristic`` and ``planner`` on the same held-out
   days (flat track): the issue's flat target, and each scenario's headroom (planner − heuristic),
   which decides what "beats" means there (SPEC §7, :func:`grading.common.beats`). Nothing is cached:
   a change to the simulator (e.g. how it draws its random numbers) changes the concrete
   held-out days, and ``collect`` then re-grades everything on the new ones.
2. the default step reads that JSON only and prints (``--write``: writes into docs/results.md
   between the ``marl-stats`` markers) the table: per-scenario mean ± s.e. over seeds,
   paired margins against ``team_heuristic``, the IQM and mean over (seeds x scenarios)
   with stratified-bootstrap 95 % CIs, the probability of improvement over the heuristic,
   and each issue target's figures (met or not, computed here, never typed into the prose);
   and writes the figures (``docs/marl/*.png``) and marl-eval's JSON (``docs/marl/marl_eval.json``).

    python benchmarks/marl_stats.py publish --runs runs/benchmarl    # after training
    python benchmarks/marl_stats.py collect --episodes 100           # from a fresh clone
    python benchmarks/marl_stats.py --write
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading import stats  # noqa: E402
from grading.common import NO_HEADROOM, WITHIN, beats  # noqa: E402
from grading.tables import write_marked  # noqa: E402
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS  # noqa: E402
from policies.benchmarl import ALGORITHMS  # noqa: E402

OUT = ROOT / "docs" / "marl"
RESULTS = OUT / "benchmarl_runs.json"
DOC = ROOT / "docs" / "results.md"
COMMITTED = ROOT / "policies" / "checkpoints" / "marl" / "benchmarl"
"""The committed home of the runs in the table (what ``publish`` copies, what ``collect`` grades)."""
START, END = "<!-- BEGIN marl-stats -->", "<!-- END marl-stats -->"
REFERENCE = "team_heuristic"
PLANNER = "team_planner"
"""The team track's planner, graded on the same held-out days: the upper reference (headroom, gap)."""
ORDER = tuple(
    f"{algorithm}{reward}{warm}"
    for warm in ("", "_warm", "_clone", "_plan_warm", "_plan_clone", "_dagger_warm", "_dagger_clone")
    for reward in ("", "_score")
    for algorithm in ALGORITHMS
)
"""Row order: ``<algorithm>`` trained on the env's dense reward, ``<algorithm>_score`` on the score
(every algorithm ``train benchmarl`` offers, so any published run has a row); then the same
warm-started from ``team_heuristic`` (``--warm-start``), ``_warm`` appended; then those runs' cloned
actors before any PPO (their frame-0 checkpoint), ``_clone``; then the same two warm-started from
``team_planner`` (``--warm-start team_planner``), ``_plan`` before ``_warm`` / ``_clone``; then those
with DAgger rounds after the planner's demonstrations (``--dagger-rounds``): ``_dagger`` for ``_plan``."""
LABELS = {
    **{
        f"{algorithm}{suffix}{warm}": f"{algorithm.upper()}{started} (BenchMARL), {reward} reward"
        for suffix, reward in (("", "env"), ("_score", "score"))
        for warm, started in (
            ("", ""),
            ("_warm", ", warm-started from team_heuristic"),
            ("_clone", ": the warm start's clone of team_heuristic, before PPO"),
            ("_plan_warm", ", warm-started from team_planner"),
            ("_plan_clone", ": the warm start's clone of team_planner, before PPO"),
            ("_dagger_warm", ", DAgger from team_planner, then PPO"),
            ("_dagger_clone", ": DAgger from team_planner, before PPO"),
        )
        for algorithm in ALGORITHMS
    },
    REFERENCE: "team_heuristic (rules)",
    PLANNER: "team_planner (lookahead)",
}
PAIRS = {
    ("mappo", "ippo"): "MAPPO − IPPO (env reward)",
    ("mappo_score", "ippo_score"): "MAPPO − IPPO (score reward)",
    ("mappo_score", "mappo"): "MAPPO: score − env reward",
    ("ippo_score", "ippo"): "IPPO: score − env reward",
    ("mappo_warm", "mappo"): "MAPPO: warm-started − from scratch",
    ("ippo_warm", "ippo"): "IPPO: warm-started − from scratch",
    ("mappo_warm", "mappo_clone"): "MAPPO warm start: fine-tuned − clone",
    ("ippo_warm", "ippo_clone"): "IPPO warm start: fine-tuned − clone",
    ("mappo_plan_warm", "mappo_plan_clone"): "MAPPO planner warm start: fine-tuned − clone",
    ("mappo_plan_clone", "mappo_clone"): "MAPPO clone: team_planner − team_heuristic",
    ("mappo_dagger_warm", "mappo_plan_warm"): "MAPPO from team_planner: DAgger − demonstrations only",
    ("mappo_dagger_clone", "mappo_plan_clone"): "MAPPO clone of team_planner: DAgger − demonstrations only",
    ("mappo_dagger_warm", "ippo_dagger_warm"): "MAPPO − IPPO (DAgger from team_planner)",
}
"""Differences between rows (independent seeds, the same days) the margins table shows when both exist."""
FLAT = ("ppo", "heuristic", "planner")
"""The flat track's shipped learner, its reference, and the planner that measures each scenario's
headroom, graded on the same held-out days (the issue's flat target; SPEC §7's "beats")."""
GAP_SHARE = 0.5
"""The issue's share of the heuristic→planner gap a learned team should close overall."""
CPU_LIMIT_S = 20 * 60
"""The issue's training budget per seed on this 2-core box."""
EPISODE_SE_LIMIT = 1.0
"""The issue's "per-scenario standard errors ≤ 1 point": of one run's scenario score over its episodes."""
OVERALL = "overall"
"""The pseudo-scenario of :func:`_overall`: day k's score averaged over the scenarios."""


def row_name(meta: dict[str, Any]) -> str:
    """A run's row: its algorithm, ``_score`` appended when trained with ``--reward score``, ``_warm``
    when warm-started (``--warm-start``: its credit is partly the policy it cloned), preceded by
    ``_plan`` when the cloned policy was ``team_planner`` (its clone row: ``_plan_clone``), or by
    ``_dagger`` when DAgger rounds followed the planner's demonstrations (``--dagger-rounds``)."""
    args = meta["args"]
    warm = args.get("warm_start", "none")
    planner = "_dagger" if args.get("dagger_rounds", 0) else "_plan"
    return (
        meta["algorithm"]
        + ("_score" if args.get("reward", "env") == "score" else "")
        + (planner if warm == "team_planner" else "")
        + ("_warm" if warm != "none" else "")
    )


# ------------------------------------------------------------------ collect
def collect(runs_root: Path, episodes: int, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Grade every run and the heuristic on the held-out days; the JSON the table is built from."""
    from policies.benchmarl import METADATA_FILE, load_benchmarl_policy
    from training.benchmarl.train import HELDOUT_SEED

    def heldout(policy: Any) -> dict[str, list[float]]:
        return heldout_scores(policy, episodes)

    algorithms: dict[str, list[dict[str, Any]]] = {}
    for meta_file in sorted(runs_root.glob(f"*/{METADATA_FILE}")):
        run_dir = meta_file.parent
        if only and run_dir.name not in only:
            continue
        meta = json.loads(meta_file.read_text())
        t0 = time.perf_counter()
        scores = heldout(load_benchmarl_policy(run_dir))
        curve = json.loads((run_dir / "curve.json").read_text())
        algorithms.setdefault(row_name(meta), []).append(
            {
                "seed": meta["args"]["seed"],
                "run": run_dir.name,
                "reward": meta["args"].get("reward", "env"),
                "frames": meta["frames"],
                "role_decisions": meta["role_decisions"],
                "wall_time_s": meta["wall_time_s"],
                "cpu_time_s": meta["cpu_time_s"],
                "best_validation": {"frames": meta["best"]["frames"], "score": meta["best"]["eval_score"]},
                "masked_actions_taken": meta["audit"]["masked_actions_taken"],
                "command": meta["command"],
                "heldout": scores,
                "curve": [
                    {"frames": row["frames"], **{s: row[f"score_{s}"] for s in BUILTIN_SCENARIOS}}
                    for row in curve
                ],
            }
        )
        if "clone" in meta["actors"]:  # a warm start: its cloned actors alone, before PPO (frame 0)
            (start,) = (row for row in curve if row["frames"] == 0)  # cost: demonstrations, cloning, grading
            clone = {**algorithms[row_name(meta)][-1], "best_validation": None, "frames": 0}
            clone.update(role_decisions=0, wall_time_s=start["wall_time_s"], cpu_time_s=start["cpu_time_s"])
            clone["heldout"] = heldout(load_benchmarl_policy(run_dir, which="clone"))
            clone["curve"] = [row for row in clone["curve"] if row["frames"] == 0]
            algorithms.setdefault(row_name(meta).replace("_warm", "_clone"), []).append(clone)
        print(f"  graded {run_dir.name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    for runs in algorithms.values():
        runs.sort(key=lambda r: r["seed"])
    algorithms = dict(sorted(algorithms.items(), key=lambda item: ORDER.index(item[0])))
    return {
        "heldout": {"grader_seed": HELDOUT_SEED, "episodes_per_scenario": episodes, "track": "team"},
        "validation": {"grader_seed": 1000, "note": "checkpoint selection and the learning curves"},
        "scenarios": list(BUILTIN_SCENARIOS),
        **references(episodes),
        "algorithms": algorithms,
    }


def references(episodes: int) -> dict[str, Any]:
    """The reference policies' held-out scores (team: heuristic and planner; flat: ``FLAT``), the
    part of the collected JSON to redo alone when only a reference policy changed
    (``collect --references``)."""
    team = {name: heldout_scores(name, episodes) for name in (REFERENCE, PLANNER)}
    flat = {name: heldout_scores(name, episodes, track="flat") for name in FLAT}
    return {"reference": team, "flat": {"track": "flat", "policies": flat}}


def heldout_scores(policy: Any, episodes: int, track: str = "team") -> dict[str, list[float]]:
    """A policy's per-episode scores on the held-out days, by scenario (4 decimals, as stored)."""
    from grading import grade
    from training.benchmarl.train import HELDOUT_SEED

    report = grade(policy, episodes=episodes, seed=HELDOUT_SEED, track=track)
    return {s: [round(v, 4) for v in report["scenarios"][s]["episode_scores"]] for s in BUILTIN_SCENARIOS}


# ------------------------------------------------------------------ publish
def publish(runs_root: Path, dest: Path = COMMITTED, only: tuple[str, ...] = ()) -> list[Path]:
    """Copy each finished run's metadata, curve and best-validation actors to ``dest/<run>/``.

    The final actors and BenchMARL's own experiment folder (checkpoints, logs) stay behind in
    ``runs/``: grading uses the best-validation actors only, and the metadata says so.
    """
    import shutil

    from policies.benchmarl import METADATA_FILE, load_benchmarl_policy

    published = []
    for meta_file in sorted(runs_root.glob(f"*/{METADATA_FILE}")):
        run_dir = meta_file.parent
        if only and run_dir.name not in only:
            continue
        meta = json.loads(meta_file.read_text())
        out = dest / run_dir.name
        if out.exists():
            shutil.rmtree(out)
        (out / "best").mkdir(parents=True)
        for rel in meta["actors"]["best"].values():
            shutil.copy2(run_dir / rel, out / rel)
        shutil.copy2(run_dir / "curve.json", out / "curve.json")
        kept = {k: v for k, v in meta["actors"].items() if k in ("best", "clone")}
        for rel in kept.get("clone", {}).values():  # a warm start's clone: graded as its own row
            (out / rel).parent.mkdir(exist_ok=True)
            shutil.copy2(run_dir / rel, out / rel)
        meta["actors"] = kept  # what was copied
        meta.pop("experiment_folder", None)
        (out / METADATA_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        load_benchmarl_policy(out)  # the published run must load as collect will grade it
        published.append(out)
    return published


# ------------------------------------------------------------------ analysis
def analyse(data: dict[str, Any], reps: int) -> dict[str, Any]:
    scenarios = data["scenarios"]
    matrices = {
        name: stats.score_matrix([r["heldout"] for r in runs], scenarios)
        for name, runs in data["algorithms"].items()
    }
    for name, scores in data["reference"].items():  # team_heuristic, team_planner: one "run" each
        matrices[name] = stats.score_matrix([scores], scenarios)
    curves = {}
    for name, runs in data["algorithms"].items():
        points = min(len(r["curve"]) for r in runs)
        if points < 2:  # a clone row: one point (frame 0), no curve
            continue
        curves[name] = {
            "frames": [row["frames"] for row in runs[0]["curve"][:points]],
            "scores": [[[r["curve"][k][s] for k in range(points)] for s in scenarios] for r in runs],
        }
    return {
        "aggregates": stats.aggregate_estimates(matrices, reps=reps),
        "improvement": stats.probability_of_improvement(matrices, REFERENCE, reps=reps),
        "curves": {
            name: {"frames": c["frames"], **stats.sample_efficiency({name: np.array(c["scores"])})[name]}
            for name, c in curves.items()
        },
    }


def markdown(data: dict[str, Any], result: dict[str, Any]) -> str:
    scenarios = data["scenarios"]
    held = data["heldout"]
    lines = [
        START,
        "*Generated by `python benchmarks/marl_stats.py --write` from `docs/marl/benchmarl_runs.json` "
        "(written by `python benchmarks/marl_stats.py collect`). "
        f"Held-out days: grader seed {held['grader_seed']}, {held['episodes_per_scenario']} episodes per "
        "scenario, team track, never used in training or checkpoint selection (validation: grader seed "
        "1000). Learned rows: mean over training seeds ± one standard error between seeds; margins are "
        "paired over the same days.*",
        "",
        "| policy | seeds | "
        + " | ".join(f"`{s}`" for s in scenarios)
        + " | **IQM** [95 % CI] | mean [95 % CI] "
        "| P(better than team_heuristic) [95 % CI] | frames (role decisions) per seed "
        "| wall (CPU) time per seed |",
        "|" + "---|" * (len(scenarios) + 7),
    ]
    agg = result["aggregates"]
    for name, scores in data["reference"].items():
        a = agg[name]
        lines.append(
            f"| `{name}` | — | "
            + " | ".join(f"{np.mean(scores[s]):.1f}" for s in scenarios)
            + f" | **{a['iqm']:.1f}** | {a['mean']:.1f} | — | — | — |"
        )
    for name, runs in data["algorithms"].items():
        held_runs = [r["heldout"] for r in runs]
        cells = [
            f"{np.mean([np.mean(h[s]) for h in held_runs]):.1f} ± {stats.run_stderr(held_runs, s):.1f}"
            for s in scenarios
        ]
        a, p = agg[name], result["improvement"][name]
        frames = runs[0]["frames"]
        wall = np.mean([r["wall_time_s"] for r in runs])
        cpu = np.mean([r.get("cpu_time_s", np.nan) for r in runs])
        lines.append(
            f"| {LABELS.get(name, name)} | {len(runs)} | "
            + " | ".join(cells)
            + f" | **{a['iqm']:.1f}** [{a['iqm_ci'][0]:.1f}, {a['iqm_ci'][1]:.1f}]"
            + f" | {a['mean']:.1f} [{a['mean_ci'][0]:.1f}, {a['mean_ci'][1]:.1f}]"
            + f" | {p['p']:.2f} [{p['ci'][0]:.2f}, {p['ci'][1]:.2f}]"
            + f" | {frames:,} ({3 * frames:,}) | {wall:.0f} s ({cpu:.0f} s) |"
        )
    lines += margin_tables(data)
    lines += ["", episode_se_line(data)]
    lines.append(
        "- Command per seed (`--seed K`; the clone rows are the same runs as their warm-started row, "
        "graded before PPO), and masked actions taken in training over all seeds:"
    )
    for n in trained_rows(data):
        runs = data["algorithms"][n]
        taken = sum(r["masked_actions_taken"] for r in runs)
        lines.append(f"  - {LABELS.get(n, n)}: `{_seedless(runs[0]['command'])}` ({taken} masked)")
    lines += [
        "",
        "![IQM and mean with 95 % CIs](marl/aggregates.png) "  # relative to docs/results.md
        "![validation IQM vs frames, 95 % CI bands](marl/sample_efficiency.png)",
        "",
        "marl-eval's JSON of the same runs: `docs/marl/marl_eval.json`.",
        "",
        *targets(data, result),
        END,
    ]
    return "\n".join(lines)


def margins(data: dict[str, Any], name: str) -> tuple[list[tuple[float, float]], int]:
    """A row's paired margin over ``team_heuristic`` (± s.e. between seeds) per scenario, and on how
    many scenarios it beats it (SPEC §7, :func:`grading.common.beats`, with the team headroom)."""
    ref, room = data["reference"][REFERENCE], headroom(data)
    held_runs = [r["heldout"] for r in data["algorithms"][name]]
    per = [stats.paired_margin(held_runs, ref, s) for s in data["scenarios"]]
    return per, sum(beats(m, room[s]) for s, (m, _) in zip(data["scenarios"], per))


def margin_tables(data: dict[str, Any]) -> list[str]:
    """One row per learned row: its margins over ``team_heuristic`` per scenario and overall, the
    share of the heuristic→planner gap it closes and how many scenarios it beats; then one row per
    comparison in :data:`PAIRS` (both rows present)."""
    scenarios = data["scenarios"]
    lines = [
        "",
        "Per-scenario margins against `team_heuristic` on the held-out days (paired; ± s.e. between seeds; "
        "overall: the mean over scenarios; gap closed: the overall margin / `team_planner`'s; "
        "beats: as defined below; a row that beats it on every scenario shows two decimals):",
        "",
    ]
    head = [*(f"`{s}`" for s in scenarios), "overall", "gap closed", "beats on"]
    lines += ["| policy | " + " | ".join(head) + " |", "|" + "---|" * (len(head) + 1)]
    for n in data["algorithms"]:
        per, wins = margins(data, n)
        digits = 2 if wins == len(scenarios) else 1
        overall = overall_margin(data, n)
        share = gap_closed(data, n)
        cells = [f"{m:+.{digits}f} ± {se:.{digits}f}" for m, se in (*per, overall)]
        cells += ["—" if share is None else f"{share:+.0%}", f"{wins} of {len(scenarios)}"]
        lines.append(f"| {LABELS.get(n, n)} | " + " | ".join(cells) + " |")
    pairs = {pair: label for pair, label in PAIRS.items() if set(pair) <= set(data["algorithms"])}
    if pairs:
        lines += [
            "",
            "Differences between rows (same days, independent training seeds: the two between-seed "
            "errors add in quadrature):",
            "",
            "| comparison | " + " | ".join(f"`{s}`" for s in scenarios) + " | overall |",
            "|" + "---|" * (len(scenarios) + 2),
        ]
    for pair, label in pairs.items():
        a, b = ([r["heldout"] for r in data["algorithms"][k]] for k in pair)
        a_all, b_all = ([_overall(h, scenarios) for h in side] for side in (a, b))
        cells = []
        for s, x, y in (*((s, a, b) for s in scenarios), (OVERALL, a_all, b_all)):
            diff = np.mean([np.mean(h[s]) for h in x]) - np.mean([np.mean(h[s]) for h in y])
            cells.append(f"{diff:+.1f} ± {np.hypot(stats.run_stderr(x, s), stats.run_stderr(y, s)):.1f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def overall_margin(data: dict[str, Any], name: str) -> tuple[float, float]:
    """A row's overall paired margin over ``team_heuristic`` (day k averaged over the scenarios) and
    its standard error between seeds: the one overall figure the table, the gap share and the
    targets read."""
    scenarios, ref = data["scenarios"], data["reference"][REFERENCE]
    runs = data["algorithms"][name]
    return stats.paired_margin(
        [_overall(r["heldout"], scenarios) for r in runs], _overall(ref, scenarios), OVERALL
    )


def _overall(scores: dict[str, list[float]], scenarios: list[str]) -> dict[str, list[float]]:
    """One run's scores as the pseudo-scenario :data:`OVERALL` (day k averaged over the scenarios,
    which share their days): its mean is the overall score, so ``stats.paired_margin`` and
    ``stats.run_stderr`` give the overall margin and difference with their between-seed errors."""
    return {OVERALL: [float(v) for v in np.mean([scores[s] for s in scenarios], axis=0)]}


def _episode_se(scores: list[float]) -> float:
    return float(np.std(scores, ddof=1) / np.sqrt(len(scores)))


def episode_se_line(data: dict[str, Any]) -> str:
    """The issue's "per-scenario standard errors ≤ 1 point", checkable in one line: the episode-level
    standard error of one run's scenario score (averaged over a row's seeds), its largest over the
    learned rows and scenarios, the rows above the limit, and ``team_heuristic``'s largest."""
    scenarios, ref = data["scenarios"], data["reference"][REFERENCE]
    per_row = {
        n: {s: float(np.mean([_episode_se(r["heldout"][s]) for r in runs])) for s in scenarios}
        for n, runs in data["algorithms"].items()
    }
    worst_row, worst_s = max(((n, s) for n in per_row for s in scenarios), key=lambda k: per_row[k[0]][k[1]])
    above = [LABELS.get(n, n) for n, ses in per_row.items() if max(ses.values()) > EPISODE_SE_LIMIT]
    ref_s = max(scenarios, key=lambda s: _episode_se(ref[s]))
    return (
        "- Episode-level standard error of one run's scenario score on these days (the issue asks ≤ "
        f"{EPISODE_SE_LIMIT:g} point): largest {per_row[worst_row][worst_s]:.2f} "
        f"({LABELS.get(worst_row, worst_row)}, `{worst_s}`); `{REFERENCE}` "
        f"{_episode_se(ref[ref_s]):.2f} (`{ref_s}`); "
        + (
            f"above {EPISODE_SE_LIMIT:g} point on some scenario: {len(above)} of {len(per_row)} learned rows "
            f"({'; '.join(above)})."
            if above
            else f"every learned row is within {EPISODE_SE_LIMIT:g} point on every scenario."
        )
    )


def headroom(data: dict[str, Any], track: str = "team") -> dict[str, float | None]:
    """Each scenario's planner − heuristic on the held-out days, on one track (team:
    ``team_planner`` − ``team_heuristic``; flat: ``planner`` − ``heuristic``): SPEC §7's input to
    "beats". ``None`` everywhere when the JSON lacks them (an older ``collect``): strictly ahead then."""
    if track == "team":
        group, planner, heuristic = data["reference"], PLANNER, REFERENCE
    else:
        group, planner, heuristic = data.get("flat", {}).get("policies", {}), "planner", "heuristic"
    if planner not in group:
        return {s: None for s in data["scenarios"]}
    return {s: float(np.mean(group[planner][s]) - np.mean(group[heuristic][s])) for s in data["scenarios"]}


def gap_closed(data: dict[str, Any], name: str) -> float | None:
    """The share of the overall heuristic→planner gap (team track, held-out days) a row closes: its
    overall margin over ``team_heuristic`` (mean over seeds) / ``team_planner``'s (None without it)."""
    room = headroom(data)
    if any(v is None for v in room.values()):
        return None
    return overall_margin(data, name)[0] / float(np.mean(list(room.values())))


def targets(data: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """The issue's targets against the figures above, each verdict computed from the same JSON."""
    scenarios = data["scenarios"]
    room, flat_room = headroom(data), headroom(data, "flat")
    level = [s for s in scenarios if room[s] is not None and room[s] < NO_HEADROOM]
    meets, misses = [], []
    for n in trained_rows(data):
        _, won = margins(data, n)
        if won == len(scenarios):
            meets.append(
                f"{LABELS.get(n, n)} (overall {overall_margin(data, n)[0]:+.2f}, "
                f"P(improvement) {result['improvement'][n]['p']:.2f})"
            )
        else:
            misses.append(f"{LABELS.get(n, n)} {won}")
    every = [r for runs in data["algorithms"].values() for r in runs]
    cpu, wall = max(r["cpu_time_s"] for r in every), max(r["wall_time_s"] for r in every)
    rule = (
        '"beats": ahead, or within '
        f"{WITHIN:g} point where the planner's headroom over the heuristic on these days "
        f"is below {NO_HEADROOM:g} points; on the team track, `{PLANNER}` − `{REFERENCE}`"
        + (
            " (" + ", ".join(f"`{s}` {room[s]:+.1f}" for s in level) + ")"
            if level
            else " (no such scenario on these days)"
            if room[scenarios[0]] is not None
            else " (not measured)"
        )
    )
    out = [
        "**Against the issue's targets** (held-out days as above; verdicts computed by the same command; "
        + rule
        + "):",
        "",
        f"- **A MAPPO or IPPO team beats `team_heuristic` on every scenario: {_verdict(bool(meets))}.** "
        + (f"Met by {'; '.join(meets)}; per-scenario margins in the table above. " if meets else "")
        + (f"Not the others (scenarios beaten, of {len(scenarios)}): {'; '.join(misses)}. " if misses else "")
        + "(The clone rows, behaviour cloning before any PPO, are not counted here.)",
        gap_line(data),
        f"- **Trained in ≤ 20 minutes per seed: {_verdict(cpu <= CPU_LIMIT_S)}.** The costliest seed above "
        f"took {cpu / 60:.1f} min of CPU ({wall / 60:.1f} min of wall time on this shared 2-core box).",
    ]
    flat = data.get("flat")
    if flat:
        learner, base = flat["policies"]["ppo"], flat["policies"]["heuristic"]
        cells, won, close = [], 0, []
        for s in scenarios:
            diff = np.asarray(learner[s], np.float64) - np.asarray(base[s], np.float64)
            won += beats(diff.mean(), flat_room[s])
            close += [f"`{s}`"] if -WITHIN <= diff.mean() <= 0 and beats(diff.mean(), flat_room[s]) else []
            cells.append(f"`{s}` {diff.mean():+.1f} ± {np.std(diff, ddof=1) / np.sqrt(len(diff)):.1f}")
        overall = np.mean([np.mean(learner[s]) for s in scenarios])
        out.append(
            "- **The shipped flat `ppo` beats `heuristic` on every scenario on held-out days: "
            f"{_verdict(won == len(scenarios))}.** Paired margins over `heuristic` on the same days "
            f"(flat track, ± s.e. over episodes): {', '.join(cells)}; `ppo` {overall:.1f} overall, "
            f"beats it on {won} of {len(scenarios)}"
            + (f"; within {WITHIN:g} point, no headroom: {', '.join(close)}." if close else ".")
        )
    return out


def trained_rows(data: dict[str, Any]) -> list[str]:
    """The rows the issue's targets count: MAPPO / IPPO (QMIX, VDN) runs, not the ``*_clone`` rows
    (a warm start's cloned actors before any PPO, shown in the table for what fine-tuning adds)."""
    return [n for n in data["algorithms"] if not n.endswith("_clone")]


def gap_line(data: dict[str, Any]) -> str:
    """The issue's "closes ≥ 50 % of the heuristic→planner gap overall", per row, on the team track."""
    target = "- **A MAPPO or IPPO team closes ≥ 50 % of the heuristic→planner gap overall: "
    shares = {n: gap_closed(data, n) for n in trained_rows(data)}
    if not shares or any(v is None for v in shares.values()):
        return target + "not measured.** This JSON has no `team_planner` grades (re-run `collect`)."
    room = headroom(data)
    gap = float(np.mean(list(room.values())))
    met = {n: v for n, v in shares.items() if v >= GAP_SHARE}
    short = [n for n, v in shares.items() if v < GAP_SHARE]
    return (
        target
        + f"{_verdict(max(shares.values()) >= GAP_SHARE)}.** `{PLANNER}` is {gap:+.1f} over `{REFERENCE}` "
        "overall on these days; share of it closed (overall margin over the seeds' mean / the planner's): "
        + (f"{'; '.join(f'{LABELS.get(n, n)} {v:+.0%}' for n, v in met.items())}. " if met else "")
        + (f"Below {GAP_SHARE:.0%} (the margins table has their shares): " if short else "")
        + "; ".join(LABELS.get(n, n) for n in short)
        + ("." if short else "")
    )


def _verdict(met: bool) -> str:
    return "met" if met else "not met"


def _seedless(command: str) -> str:
    return re.sub(r"--seed \d+", "--seed K", re.sub(r" --save \S+", "", command))


def figures(data: dict[str, Any], result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rliable import plot_utils

    agg = result["aggregates"]
    names = [n for n in (REFERENCE, PLANNER, *data["algorithms"]) if n in agg]
    points = {n: np.array([agg[n]["iqm"], agg[n]["mean"]]) for n in names}
    intervals = {
        n: np.array(
            [[agg[n]["iqm_ci"][0], agg[n]["mean_ci"][0]], [agg[n]["iqm_ci"][1], agg[n]["mean_ci"][1]]]
        )
        for n in names
    }
    fig, _ = plot_utils.plot_interval_estimates(
        points,
        intervals,
        metric_names=["IQM", "Mean"],
        algorithms=names,
        xlabel="held-out team-track score",
        xlabel_y_coordinate=-0.45,
    )
    fig.savefig(OUT / "aggregates.png", dpi=110, bbox_inches="tight")
    plt.close(fig)

    curves = result["curves"]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for name, c in curves.items():
        frames = np.array(c["frames"], float)
        ax.plot(frames, c["iqm"], label=LABELS.get(name, name))
        ax.fill_between(frames, c["low"], c["high"], alpha=0.25)
    ref = data["reference"][REFERENCE]
    ax.axhline(
        np.mean([np.mean(v) for v in ref.values()]),
        color="k",
        ls="--",
        lw=1,
        label="team_heuristic (held-out)",
    )
    ax.set_xlabel("training frames (ticks over the batch; x3 = role decisions)")
    ax.set_ylabel("validation score, IQM over seeds x scenarios")
    ax.set_title("Sample efficiency (95 % stratified-bootstrap CI bands)")
    ax.legend()
    fig.savefig(OUT / "sample_efficiency.png", bbox_inches="tight")
    plt.close(fig)


def marl_eval(data: dict[str, Any]) -> dict[str, Any]:
    """marl-eval's layout, one task per scenario: validation curve steps, held-out absolute metrics."""
    out: dict[str, Any] = {"hospital_marl": {}}
    for s in data["scenarios"]:
        algos = {
            name: [
                {
                    "seed": r["seed"],
                    "curve": [(row["frames"], [row[s]]) for row in r["curve"]],
                    "final": r["heldout"][s],
                }
                for r in runs
            ]
            for name, runs in data["algorithms"].items()
        }
        out["hospital_marl"].update(stats.marl_eval_json("hospital_marl", s, algos)["hospital_marl"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", nargs="?", choices=("publish", "collect", "table"), default="table")
    parser.add_argument(
        "--runs",
        default=None,
        help="publish: folder of fresh train benchmarl runs (default runs/benchmarl); "
        f"collect: folder of run directories (default {COMMITTED.relative_to(ROOT)})",
    )
    parser.add_argument("--episodes", type=int, default=100, help="collect: held-out episodes per scenario")
    parser.add_argument("--only", nargs="*", default=(), help="publish/collect: only these run directories")
    parser.add_argument(
        "--references",
        action="store_true",
        help="collect: re-grade only the reference policies (team and flat) into the existing JSON, "
        "after a reference policy changed; the runs' scores are kept",
    )
    parser.add_argument("--results", default=str(RESULTS), help="the collected JSON")
    parser.add_argument("--reps", type=int, default=stats.DEFAULT_REPS, help="bootstrap resamples")
    parser.add_argument(
        "--write", action="store_true", help="write docs/results.md's section, the figures, marl_eval.json"
    )
    args = parser.parse_args()
    results = Path(args.results)
    if args.step == "publish":
        for out in publish(ROOT / (args.runs or "runs/benchmarl"), only=tuple(args.only)):
            print(out.relative_to(ROOT))
        return 0
    if args.step == "collect":
        runs_root = ROOT / args.runs if args.runs else COMMITTED
        if not any(runs_root.glob("*/benchmarl.json")):
            parser.error(f"no train benchmarl run directories under {runs_root}")
        results.parent.mkdir(parents=True, exist_ok=True)
        if args.references:
            collected = json.loads(results.read_text())
            collected.update(references(collected["heldout"]["episodes_per_scenario"]))
        else:
            collected = collect(runs_root, args.episodes, tuple(args.only))
        results.write_text(json.dumps(collected, indent=1) + "\n")
        print(results)
        return 0
    data = json.loads(results.read_text())
    result = analyse(data, args.reps)
    text = markdown(data, result)
    print(text)
    if args.write:
        OUT.mkdir(parents=True, exist_ok=True)
        figures(data, result)
        (OUT / "marl_eval.json").write_text(json.dumps(marl_eval(data)) + "\n")
        (OUT / "stats.json").write_text(json.dumps(result, indent=1) + "\n")
        write_marked(DOC, START, END, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
