"""RL from scratch with the fast trainer, on held-out days: the table and answer of docs/learning-at-scale.md.

Three steps, so that the page regenerates from committed artefacts alone (as benchmarks/marl_stats.py):

0. ``publish`` copies each finished ``train fast-mappo`` run's ``fast.json``, ``curve.json`` and
   *best validation* ONNX actors from the ignored ``runs/fast`` to :data:`COMMITTED`
   (``policies/checkpoints/marl/fast/<run>/``), and each ``train fast-ppo`` run's ``best_model.onnx``
   / ``.json`` and curve to :data:`COMMITTED_FLAT`.
1. ``collect --episodes N`` grades every published run on the **held-out days** (grader seed
   :data:`HELDOUT_SEED`, episodes ``0..N-1`` of each scenario; checkpoint choice used the validation
   days, seed 1000) and grades ``team_heuristic`` (flat: ``heuristic``) on the same days. The
   planners' scores on those days, and BenchMARL's from-scratch MAPPO / IPPO (5 seeds x 384k
   frames), are read from ``docs/marl/benchmarl_runs.json`` (graded by ``marl_stats collect`` on
   the same grader seed; episode k is the same day at any episode count), *after* checking that the
   freshly graded heuristic equals the heuristic stored there day for day -- if the simulator moved,
   ``collect`` says so and stops instead of mixing days. Writes :data:`RESULTS`.
2. the default step reads that JSON only and writes the generated block of :data:`PAGE` (between
   the ``fast-stats`` markers; ``--write``, else prints it) and the sample-efficiency figure: rliable
   IQM with stratified-bootstrap 95 % CIs, per-scenario paired margins against ``team_heuristic`` with
   SPEC §7's "beats" (:func:`grading.common.beats`, headroom = team_planner − team_heuristic), the
   share of the heuristic → planner gap closed, frames, wall and CPU time per seed.

    python benchmarks/fast_stats.py publish --runs runs/fast
    python benchmarks/fast_stats.py collect --episodes 30
    python benchmarks/fast_stats.py --write

Ablations (``tools/fast_ablations.sh``): ``ablations --runs runs/fast_ablate`` reads each run's final
validation grading (no checkpoint choice) into :data:`ABLATIONS` and grades ``team_heuristic`` on the
same validation days; the default step then also writes the ``fast-ablations`` block.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import marl_stats as ms  # noqa: E402
from grading import stats  # noqa: E402
from grading.common import beats  # noqa: E402
from grading.tables import write_marked  # noqa: E402
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS  # noqa: E402

HELDOUT_SEED = 20261201
COMMITTED = ROOT / "policies" / "checkpoints" / "marl" / "fast"
COMMITTED_FLAT = ROOT / "policies" / "checkpoints" / "fast_ppo"
RESULTS = ROOT / "docs" / "fast" / "fast_runs.json"
FIGURE = ROOT / "docs" / "fast" / "sample_efficiency.png"
PAGE = ROOT / "docs" / "learning-at-scale.md"
STORED = ROOT / "docs" / "marl" / "benchmarl_runs.json"
ABLATIONS = ROOT / "docs" / "fast" / "ablations.json"
START, END = "<!-- BEGIN fast-stats -->", "<!-- END fast-stats -->"
ABL_START, ABL_END = "<!-- BEGIN fast-ablations -->", "<!-- END fast-ablations -->"
README = ROOT / "README.md"
ISSUE_40 = ROOT / "docs" / "fast" / "heldout_40_scale.json"
"""Issue 40's runs at the largest scale this box allowed, graded by ``benchmarks/heldout_groups.py``
on the held-out days: a README verdict bullet per group (its own file, as it has its own runs)."""
VERDICT_START, VERDICT_END = "<!-- BEGIN fast-verdict -->", "<!-- END fast-verdict -->"
LABELS = {
    "fast_mappo": "MAPPO, fast trainer",
    "fast_ippo": "IPPO, fast trainer",
    "benchmarl_mappo": "MAPPO, BenchMARL (384k frames)",
    "benchmarl_ippo": "IPPO, BenchMARL (384k frames)",
    "fast_ppo_flat": "flat PPO, fast trainer",
}


# ------------------------------------------------------------------ publish
def publish(runs_root: Path) -> list[Path]:
    """Copy the small artefacts of every finished run (best-validation actors only)."""
    from policies.fast import METADATA_FILE, load_fast_policy
    from policies.learned import load_path

    out = []
    for meta_file in sorted(runs_root.glob(f"*/{METADATA_FILE}")):
        run_dir, meta = meta_file.parent, json.loads(meta_file.read_text())
        dest = COMMITTED / run_dir.name
        shutil.rmtree(dest, ignore_errors=True)
        (dest / "best").mkdir(parents=True)
        for rel in meta["actors"]["best"].values():
            shutil.copy2(run_dir / rel, dest / rel)
        shutil.copy2(run_dir / "curve.json", dest / "curve.json")
        meta["actors"] = {"best": meta["actors"]["best"]}
        (dest / METADATA_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        load_fast_policy(dest)
        out.append(dest)
    for meta_file in sorted(runs_root.glob("*/best_model.json")):
        run_dir = meta_file.parent
        dest = COMMITTED_FLAT / run_dir.name
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for name in ("best_model.onnx", "best_model.json", "curve.json"):
            shutil.copy2(run_dir / name, dest / name)
        load_path(dest)
        out.append(dest)
    return out


# ------------------------------------------------------------------ collect
def _curve(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"frames": r["timesteps"], **{s: r[f"score_{s}"] for s in BUILTIN_SCENARIOS}} for r in rows]


def collect(episodes: int) -> dict[str, Any]:
    from grading import grade
    from policies.fast import METADATA_FILE, load_fast_policy
    from policies.learned import load_path

    def heldout(policy: Any, track: str = "team") -> dict[str, list[float]]:
        report = grade(policy, episodes=episodes, seed=HELDOUT_SEED, track=track)
        return {s: [round(v, 4) for v in report["scenarios"][s]["episode_scores"]] for s in BUILTIN_SCENARIOS}

    def first(scores: dict[str, list[float]]) -> dict[str, list[float]]:
        return {s: list(v[:episodes]) for s, v in scores.items()}

    stored = json.loads(STORED.read_text())
    if (
        stored["heldout"]["grader_seed"] != HELDOUT_SEED
        or stored["heldout"]["episodes_per_scenario"] < episodes
    ):
        raise SystemExit(f"{STORED} does not hold {episodes} held-out days of grader seed {HELDOUT_SEED}")
    reference = {"team_heuristic": heldout("team_heuristic")}
    if reference["team_heuristic"] != first(stored["reference"]["team_heuristic"]):
        raise SystemExit(
            f"team_heuristic's held-out scores differ from {STORED}: the simulator's days moved; "
            "re-run benchmarks/marl_stats.py collect first (the planner reference comes from it)"
        )
    reference["team_planner"] = first(stored["reference"]["team_planner"])

    algorithms: dict[str, list[dict[str, Any]]] = {}
    for meta_file in sorted(COMMITTED.glob(f"*/{METADATA_FILE}")):
        run_dir, meta = meta_file.parent, json.loads(meta_file.read_text())
        t0 = time.perf_counter()
        algorithms.setdefault(f"fast_{meta['algorithm']}", []).append(
            {
                "seed": meta["args"]["seed"],
                "run": run_dir.name,
                "frames": meta["frames"],
                "complete": meta.get("complete", True),
                "wall_time_s": meta["wall_time_s"],
                "cpu_time_s": meta["cpu_time_s"],
                "frames_per_s": meta["frames_per_s"],
                "best_validation": {"frames": meta["best"]["timesteps"], "score": meta["best"]["eval_score"]},
                "masked_actions_taken": meta["audit"]["masked_actions_taken"],
                "command": meta["command"],
                "heldout": heldout(load_fast_policy(run_dir)),
                "curve": _curve(json.loads((run_dir / "curve.json").read_text())),
            }
        )
        print(f"  graded {run_dir.name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    for algorithm in ("mappo", "ippo"):  # BenchMARL from scratch, the same days
        algorithms[f"benchmarl_{algorithm}"] = [
            {**{k: r[k] for k in ("seed", "run", "frames", "wall_time_s", "cpu_time_s", "command", "curve")},
             "heldout": first(r["heldout"])}
            for r in stored["algorithms"][algorithm]
        ]  # fmt: skip

    flat: dict[str, Any] = {}
    flat_runs = sorted(COMMITTED_FLAT.glob("*/best_model.json"))
    if flat_runs:
        # graded here, not read from STORED: the shipped ppo and the heuristic were replaced since
        # (issue 23), and a few minutes buy references that cannot be stale
        flat["note"] = "heuristic, planner and the shipped ppo graded here on the same days"
        for name in ("heuristic", "planner", "ppo"):
            flat[name] = heldout(name, track="flat")
        flat["runs"] = []
        for meta_file in flat_runs:
            meta = json.loads(meta_file.read_text())
            flat["runs"].append(
                {
                    "seed": meta["args"]["seed"],
                    "frames": meta["timesteps"],
                    "wall_time_s": meta["wall_time_s"],
                    "cpu_time_s": meta["cpu_time_s"],
                    "command": meta["command"],
                    "heldout": heldout(load_path(meta_file.parent), track="flat"),
                    "curve": _curve(json.loads((meta_file.parent / "curve.json").read_text())),
                }
            )
    return {
        "heldout": {"grader_seed": HELDOUT_SEED, "episodes_per_scenario": episodes, "track": "team"},
        "validation": {"grader_seed": 1000},
        "scenarios": list(BUILTIN_SCENARIOS),
        "reference": reference,
        "algorithms": algorithms,
        "flat": flat,
    }


# ------------------------------------------------------------------ ablations
def collect_ablations(runs_root: Path) -> dict[str, Any]:
    """Every ablation run's final validation grading, grouped by variant (run dir ``<variant>_s<seed>``)."""
    from grading import grade
    from policies.fast import METADATA_FILE

    variants: dict[str, list[dict[str, Any]]] = {}
    validation: dict[str, int] = {}
    for meta_file in sorted(runs_root.glob(f"*/{METADATA_FILE}")):
        meta = json.loads(meta_file.read_text())
        if not meta.get("complete", True) or not meta.get("final_eval"):
            print(f"  skipped {meta_file.parent.name}: not finished", file=sys.stderr)
            continue
        final = meta["final_eval"]
        args = meta["args"]
        validation = {"seed": args["eval_seed"], "episodes_per_scenario": args["eval_episodes"]}
        variants.setdefault(meta_file.parent.name.rsplit("_s", 1)[0], []).append(
            {
                "seed": meta["args"]["seed"],
                "frames": meta["frames"],
                "wall_time_s": meta["wall_time_s"],
                "cpu_time_s": meta["cpu_time_s"],
                "command": meta["command"],
                "validation": {s: final[f"score_{s}"] for s in BUILTIN_SCENARIOS},
            }
        )
    if not variants:
        raise SystemExit(f"no finished ablation run under {runs_root}")
    report = grade(
        "team_heuristic",
        episodes=validation["episodes_per_scenario"],
        seed=validation["seed"],
        track="team",
    )
    return {
        "validation": validation,
        "scenarios": list(BUILTIN_SCENARIOS),
        "team_heuristic": {s: report["scenario_scores"][s] for s in BUILTIN_SCENARIOS},
        "variants": variants,
    }


def heldout_groups_summary(data: dict[str, Any]) -> list[str]:
    """One verdict bullet per group of a ``benchmarks/heldout_groups.py`` file: the grader's rule per
    scenario, the IQM with its CI against ``team_heuristic``'s, the overall margin, every seed."""
    bullets = []
    th = float(data["team_heuristic_mean"])
    for name, g in data["groups"].items():
        seeds = [s["overall"] for s in g["seeds"]]
        frames = sorted({s.get("frames") or 0 for s in g["seeds"]})
        frames_txt = f"{frames[0]:,}" if len(frames) == 1 else f"{frames[0]:,}–{frames[-1]:,}"
        won, n = len(g.get("beats_team_heuristic_on", [])), len(g["margin_to_team_heuristic"])
        lo, hi = g["iqm_ci"]
        bullets.append(
            f"- {name} ({len(seeds)} seeds, {frames_txt} frames each; issue 40): "
            + ("**yes**" if won == n else f"**no** — it beats it on {won} of {n}")
            + f"; IQM {g['iqm']:.2f} [{lo:.2f}, {hi:.2f}] against `team_heuristic`'s "
            f"{data['team_heuristic_iqm']:.2f}, "
            f"overall {float(np.mean(seeds)) - th:+.1f} ± {_se(seeds):.1f} "
            f"(seeds: {', '.join(f'{x:.2f}' for x in seeds)}; {data['episodes']} days per scenario)."
        )
    return bullets


def _se(values: list[float]) -> float:
    return float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


def ablation_report(data: dict[str, Any]) -> str:
    """The ablation table: each variant's validation score (mean ± s.e. over its seeds) and its
    difference from the baseline row (± the two s.e. combined; seeds are not paired across rows)."""
    scenarios, variants = data["scenarios"], data["variants"]
    overall = {
        n: [float(np.mean([r["validation"][s] for s in scenarios])) for r in runs]
        for n, runs in variants.items()
    }
    base = overall.get("baseline")
    v = data["validation"]
    lines = [
        f"Validation days (grader seed {v['seed']}, {v['episodes_per_scenario']} episodes per scenario), "
        "each run graded once at its end (no checkpoint choice). `team_heuristic` on the same days: "
        + ", ".join(f"`{s}` {data['team_heuristic'][s]:.1f}" for s in scenarios)
        + f"; overall {np.mean(list(data['team_heuristic'].values())):.1f}.",
        "",
        "| variant | options | seeds | frames | "
        + " | ".join(f"`{s}`" for s in scenarios)
        + " | overall | − baseline |",
        "|" + "---|" * (len(scenarios) + 6),
    ]
    order = sorted(variants, key=lambda n: (n != "baseline", -np.mean(overall[n])))
    for name in order:
        runs = variants[name]
        options = " ".join(_variant_options(runs[0]["command"].split("fast-mappo", 1)[1])) or "(defaults)"
        cells = [_mean_se([r["validation"][s] for r in runs]) for s in scenarios]
        delta = "—"
        if base is not None and name != "baseline":
            d = np.mean(overall[name]) - np.mean(base)
            delta = f"{d:+.1f} ± {np.hypot(_se(overall[name]), _se(base)):.1f}"
        lines.append(
            f"| {name} | {options} | {len(runs)} | {_frames(runs)} | "
            + " | ".join(cells)
            + f" | {_mean_se(overall[name])} | {delta} |"
        )
    return "\n".join(lines)


def ablation_summary(data: dict[str, Any]) -> str:
    """The README's one bullet on the ablations: how many variants, the best and the worst row
    against the baseline, and where the best stands against ``team_heuristic``."""
    scenarios, variants = data["scenarios"], data["variants"]
    overall = {
        n: [float(np.mean([r["validation"][s] for s in scenarios])) for r in runs]
        for n, runs in variants.items()
    }
    base = overall["baseline"]
    delta = {n: (float(np.mean(v) - np.mean(base)), float(np.hypot(_se(v), _se(base))))
             for n, v in overall.items() if n != "baseline"}  # fmt: skip
    best, worst = max(delta, key=lambda n: delta[n][0]), min(delta, key=lambda n: delta[n][0])
    heuristic = float(np.mean(list(data["team_heuristic"].values())))
    seeds = sorted({len(runs) for runs in variants.values()})
    return (
        f"- Why not — {len(delta)} one-option ablations of fast MAPPO ({'–'.join(map(str, seeds))} seeds "
        f"each, {_frames([r for runs in variants.values() for r in runs])} frames, validation days): "
        f"the best, `{best}`, {delta[best][0]:+.1f} ± {delta[best][1]:.1f} over the baseline; the worst, "
        f"`{worst}`, {delta[worst][0]:+.1f} ± {delta[worst][1]:.1f}; the best row is still "
        f"{np.mean(overall[best]) - heuristic:+.1f} against `team_heuristic` on the same days."
    )


_COMMON_OPTIONS = ("--frames", "--seed", "--save", "--eval-interval", "--eval-episodes", "--all-scenarios")


def _variant_options(command_tail: str) -> list[str]:
    """The options of an ablation command that are the variant's own (not frames, seed, paths)."""
    tokens, out, skip = command_tail.split(), [], False
    for i, t in enumerate(tokens):
        if skip:
            skip = False
            continue
        if t == "--algorithm" and tokens[i + 1 : i + 2] == ["mappo"]:  # the default, always recorded
            skip = True
            continue
        if t in _COMMON_OPTIONS:
            skip = t != "--all-scenarios" and i + 1 < len(tokens) and not tokens[i + 1].startswith("--")
            continue
        out.append(f"`{t}`" if t.startswith("--") else t)
    return out


# ------------------------------------------------------------------ report
def _frames(runs: list[dict[str, Any]]) -> str:
    low, high = min(r["frames"] for r in runs), max(r["frames"] for r in runs)
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def _mean_se(values: list[float]) -> str:
    return f"{np.mean(values):.1f} ± {_se(values):.1f}"


def report(data: dict[str, Any], reps: int) -> tuple[str, list[str]]:
    """The page's block, and its answer's bullets (the README carries those too)."""
    scenarios, rows = data["scenarios"], data["algorithms"]
    result = ms.analyse(data, reps)
    agg, room = result["aggregates"], ms.headroom(data)
    gap = float(np.mean(list(room.values())))
    n_ep = data["heldout"]["episodes_per_scenario"]
    lines = [
        f"Held-out days: grader seed {data['heldout']['grader_seed']}, {n_ep} episodes per scenario "
        "(never used in training or checkpoint choice; checkpoints chosen on validation days, seed "
        f"{data['validation']['grader_seed']}). Team track. `team_planner` is {gap:+.1f} over "
        "`team_heuristic` overall on these days (the heuristic → planner gap).",
        "",
        "| policy | seeds | frames per seed | overall (mean ± s.e. over seeds) | IQM [95 % CI] | "
        "wall s per seed | CPU s per seed |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ("team_heuristic", "team_planner"):
        a = agg[name]
        lines.append(f"| `{name}` | — | — | {a['mean']:.1f} | {a['iqm']:.1f} [{a['iqm_ci'][0]:.1f}, "
                     f"{a['iqm_ci'][1]:.1f}] | — | — |")  # fmt: skip
    for name, runs in rows.items():
        a = agg[name]
        overall = [float(np.mean([np.mean(r["heldout"][s]) for s in scenarios])) for r in runs]
        frames = sorted({r["frames"] for r in runs})
        frames_txt = f"{frames[0]:,}" if len(frames) == 1 else f"{frames[0]:,}–{frames[-1]:,}"
        lines.append(
            f"| {LABELS.get(name, name)} | {len(runs)} | {frames_txt} | {_mean_se(overall)} | "
            f"{a['iqm']:.1f} [{a['iqm_ci'][0]:.1f}, {a['iqm_ci'][1]:.1f}] | "
            f"{np.mean([r['wall_time_s'] for r in runs]):,.0f} | {np.mean([r['cpu_time_s'] for r in runs]):,.0f} |"  # noqa: E501
        )
    head = [*(f"`{s}`" for s in scenarios), "overall", "gap closed", "beats on"]
    lines += [
        "",
        'Paired margins against `team_heuristic` on the same days (± s.e. between seeds); "beats" is '
        "[the grader's](grading.md#beats-the-heuristic) (ahead, or within 1 point where "
        "`team_planner` − `team_heuristic` < 2); gap closed = "
        "overall margin / the planner's:",
        "",
        "| policy | " + " | ".join(head) + " |",
        "|" + "---|" * (len(head) + 1),
    ]
    verdicts = {}
    for name in rows:
        per, wins = ms.margins(data, name)
        overall = ms.overall_margin(data, name)
        share = ms.gap_closed(data, name)
        verdicts[name] = (wins, share, overall)
        cells = [f"{m:+.1f} ± {se:.1f}" for m, se in (*per, overall)]
        cells += [f"{share:+.0%}", f"{wins} of {len(scenarios)}"]
        lines.append(f"| {LABELS.get(name, name)} | " + " | ".join(cells) + " |")
    fast = {n: v for n, v in verdicts.items() if n.startswith("fast_")}
    verdict = []
    for name, (wins, share, (m, se)) in fast.items():
        runs = rows[name]
        verdict.append(
            f"- {LABELS[name]} ({len(runs)} seeds, {_frames(runs)} frames each): "
            + ("**yes**" if wins == len(scenarios) else f"**no** — it beats it on {wins} of {len(scenarios)}")
            + f"; overall {m:+.1f} ± {se:.1f} against it, i.e. {share:+.0%} of the heuristic → planner gap."
        )
    short = [
        n
        for n, runs in rows.items()
        if n.startswith("fast_") and (len(runs) < 5 or any(r["frames"] < 20_000_000 for r in runs))
    ]
    if short:
        verdict.append(
            "- **Budget: short of the issue's 5 seeds × 20M frames** for "
            + "; ".join(
                f"{LABELS[n]} ({len(rows[n])} seeds, {np.mean([r['frames'] for r in rows[n]]) / 1e6:.1f}M frames per seed on average)"  # noqa: E501
                for n in short
            )
            + ": the time this shared machine had (see the cost columns)."
        )
    lines += [
        "",
        "**Does RL from scratch beat `team_heuristic` on every scenario, and how much of the gap does it close?**",  # noqa: E501
        "",
        *verdict,
    ]
    curves = result["curves"]
    if curves:
        lines += [
            "",
            f"Sample efficiency on validation days: ![IQM over seeds x scenarios]({FIGURE.relative_to(PAGE.parent).as_posix()})",  # noqa: E501
        ]
    flat = data.get("flat") or {}
    if flat.get("runs"):
        lines += ["", "Flat track (one action per tick), same held-out days: " + flat["note"] + ".", ""]
        lines += ["| policy | seeds | frames | " + " | ".join(f"`{s}`" for s in scenarios)
                  + " | overall | IQM [95 % CI] |", "|" + "---|" * (len(scenarios) + 5)]  # fmt: skip
        refs = {k: v for k, v in flat.items() if k in ("heuristic", "planner", "ppo")}
        runs = flat["runs"]
        matrices = {name: stats.score_matrix([scores], scenarios) for name, scores in refs.items()}
        matrices["fast_ppo_flat"] = stats.score_matrix([r["heldout"] for r in runs], scenarios)
        flat_agg = stats.aggregate_estimates(matrices, reps=reps)

        def iqm(name: str) -> str:
            a = flat_agg[name]
            return f"{a['iqm']:.1f} [{a['iqm_ci'][0]:.1f}, {a['iqm_ci'][1]:.1f}]"

        for name, scores in refs.items():
            cells = [f"{np.mean(scores[s]):.1f}" for s in scenarios]
            lines.append(
                f"| `{name}` | — | — | "
                + " | ".join(cells)
                + f" | {np.mean([np.mean(scores[s]) for s in scenarios]):.1f} | {iqm(name)} |"
            )
        cells = [_mean_se([float(np.mean(r["heldout"][s])) for r in runs]) for s in scenarios]
        overall = [float(np.mean([np.mean(r["heldout"][s]) for s in scenarios])) for r in runs]
        lines.append(
            f"| flat PPO, fast trainer | {len(runs)} | {_frames(runs)} | "
            + " | ".join(cells)
            + f" | {_mean_se(overall)} | {iqm('fast_ppo_flat')} |"
        )
        if all(len(r.get("curve", [])) > 1 for r in runs):  # the figure's flat line, as analyse() makes them
            points = min(len(r["curve"]) for r in runs)
            scores = np.array([[[r["curve"][k][s] for k in range(points)] for s in scenarios] for r in runs])
            curves["fast_ppo_flat"] = {
                "frames": [row["frames"] for row in runs[0]["curve"][:points]],
                **stats.sample_efficiency({"fast_ppo_flat": scores})["fast_ppo_flat"],
            }
        flat_room = ms.headroom({"scenarios": scenarios, "flat": {"policies": flat}}, "flat")
        won = sum(
            beats(float(np.mean([np.mean(r["heldout"][s]) for r in runs]) - np.mean(flat["heuristic"][s])), flat_room[s])  # noqa: E501
            for s in scenarios
        )  # fmt: skip
        mean_of = {k: float(np.mean([np.mean(v[s]) for s in scenarios])) for k, v in refs.items()}
        margin = float(np.mean(overall)) - mean_of["heuristic"]
        share = ""
        if "planner" in mean_of:
            span = mean_of["planner"] - mean_of["heuristic"]
            share = f", i.e. {margin / span:+.0%} of the heuristic → planner gap ({span:+.1f})"
        yes = won == len(scenarios)
        answer = (
            f"- Flat PPO from scratch ({len(runs)} seeds, {_frames(runs)} frames each): "
            + ("**yes**" if yes else f"**no** — it beats `heuristic` on {won} of {len(scenarios)}")
            + " (the grader's rule); "
            + f"overall {margin:+.1f} ± {_se(overall):.1f} against it{share}."
        )
        lines += ["", answer]
        verdict.append(answer)
    _figure(curves)
    return "\n".join(lines), verdict


def _figure(curves: dict[str, dict[str, list[float]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, c in curves.items():
        x = np.array(c["frames"]) / 1e6
        ax.plot(x, c["iqm"], marker="o", label=LABELS.get(name, name))
        ax.fill_between(x, c["low"], c["high"], alpha=0.2)
    ax.set_xlabel("frames (millions; a frame is one tick of one department)")
    ax.set_ylabel("validation score, IQM (95 % CI)")
    ax.set_xscale("symlog", linthresh=0.5)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(FIGURE, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "step", nargs="?", choices=("publish", "collect", "ablations", "report"), default="report"
    )
    parser.add_argument("--runs", type=Path, help="default runs/fast (publish), runs/fast_ablate (ablations)")
    parser.add_argument("--episodes", type=int, default=30, help="held-out episodes per scenario")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap replicates")
    parser.add_argument("--write", action="store_true", help=f"write the block into {PAGE.name}")
    opts = parser.parse_args(argv)
    if opts.step == "publish":
        for path in publish(opts.runs or ROOT / "runs" / "fast"):
            print(path.relative_to(ROOT))
        return 0
    if opts.step == "collect":
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(collect(opts.episodes), indent=1) + "\n")
        print(RESULTS.relative_to(ROOT))
        return 0
    if opts.step == "ablations":
        data = collect_ablations(opts.runs or ROOT / "runs" / "fast_ablate")
        ABLATIONS.write_text(json.dumps(data, indent=1) + "\n")
        print(ABLATIONS.relative_to(ROOT))
        return 0
    block, verdict = report(json.loads(RESULTS.read_text()), opts.reps)
    if ABLATIONS.exists():
        verdict.append(ablation_summary(json.loads(ABLATIONS.read_text())))
    if ISSUE_40.exists():
        verdict += heldout_groups_summary(json.loads(ISSUE_40.read_text()))
    if opts.write:
        write_marked(PAGE, START, END, f"{START}\n{block}\n{END}")
        answer = "\n".join(
            ["**Can MARL learn this hospital from scratch?** Held-out days, against `team_heuristic` "
             "([learning at scale](docs/learning-at-scale.md)):", "", *verdict]
        )  # fmt: skip
        write_marked(README, VERDICT_START, VERDICT_END, f"{VERDICT_START}\n{answer}\n{VERDICT_END}")
    print(block)
    if ABLATIONS.exists():
        ablations = ablation_report(json.loads(ABLATIONS.read_text()))
        if opts.write:
            write_marked(PAGE, ABL_START, ABL_END, f"{ABL_START}\n{ablations}\n{ABL_END}")
        print(ablations)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
