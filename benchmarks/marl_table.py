"""The multi-agent table of docs/results.md (``## Multi-agent experiments``) and ``docs/marl_curves.png``.

Grades, with the project's grader (10 episodes per scenario, seed 0 by default), per
scenario and overall:

- flat track (one ``Discrete(39)`` action per tick): ``heuristic``, ``ppo`` and ``ppo_pruned``
  (shipped), ``planner``;
- team track (one action per role per tick): ``team_heuristic``, ``team_ppo`` (shipped), per-role
  iterated best response (``train marl --method ibr``), parameter-shared PPO
  (``train marl --method shared``) and RLlib multi-agent PPO (``train rllib``).

The learned multi-agent variants are read from run directories (``--ibr-run``, ``--shared-run``,
``--rllib-run``), by default the committed ones in ``policies/checkpoints/marl/`` (each made by
its recorded command, then ``hospital-marl train export RUN_DIR policies/checkpoints/marl/<kind>``:
models without optimizer state, metadata, learning curve), so the table reproduces from the
repository alone. With ``--train`` a missing run is trained first through the CLI
(``hospital-marl train marl ... --all-scenarios`` / ``hospital-marl train rllib --iterations K
--all-scenarios``). Training steps and wall time come from each run's JSON. Margins against
``team_heuristic`` are paired over the same days (± one standard error).

    python benchmarks/marl_table.py                       # print the Markdown
    python benchmarks/marl_table.py --train --write       # train what is missing, write the table + plot
    python benchmarks/marl_table.py --no-planner          # skip the (slow) planner
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ppo_table import overall_paired, paired  # noqa: E402
from grading.tables import write_marked  # noqa: E402
from hospital_marl.core.actions import ROLES  # noqa: E402
from policies.learned import CHECKPOINT_DIR, SHIPPED, read_metadata  # noqa: E402

DOC = ROOT / "docs" / "results.md"
RUNS = ROOT / "policies" / "checkpoints" / "marl"
PLOT = ROOT / "docs" / "marl_curves.png"
START, END = "<!-- BEGIN marl-table -->", "<!-- END marl-table -->"


def grade_timed(
    label: str, policy: Any, track: str, episodes: int, seed: int, scenarios: Any = None
) -> dict[str, Any]:
    from grading import grade

    t0 = time.perf_counter()
    report = grade(policy, episodes=episodes, seed=seed, track=track, scenarios=scenarios)
    report["wall_time_s"] = time.perf_counter() - t0
    print(
        f"  graded {label} ({track}): {report['overall_score']:.2f} in {report['wall_time_s']:.1f} s",
        file=sys.stderr,
    )
    return report


def ensure_run(kind: str, run_dir: Path, train: bool, iterations: int) -> bool:
    """True if ``run_dir`` holds a finished run of ``kind`` (training it first with ``train``)."""
    marker = run_dir / ("rllib.json" if kind == "rllib" else "model.json")
    if marker.exists():
        return True
    if not train:
        print(f"  no {kind} run in {run_dir} (use --train): skipped", file=sys.stderr)
        return False
    base = [sys.executable, "-m", "hospital_marl", "train"]
    if kind == "rllib":
        cmd = [*base, "rllib", "--iterations", str(iterations), "--all-scenarios", "--no-progress"]
    else:
        cmd = [*base, "marl", "--method", kind, "--all-scenarios"]
    cmd += ["--save", str(run_dir)]
    print("  training: " + " ".join(cmd[2:]), file=sys.stderr)
    subprocess.run(cmd, check=True, cwd=ROOT)
    return marker.exists()


def run_cost(kind: str, run_dir: Path) -> dict[str, Any]:
    """Training steps (role decisions), wall time and command from a run's JSON."""
    if kind == "rllib":
        meta = json.loads((run_dir / "rllib.json").read_text())
        # A resumed run (`train rllib --resume`) is its first command, then each resuming one.
        command = " && ".join([meta["command"], *(r["command"] for r in meta.get("resumed", []))])
        return {"steps": meta["env_steps"], "wall": meta["wall_time_s"], "command": command}
    meta = json.loads((run_dir / "model.json").read_text())
    return {"steps": meta["timesteps"], "wall": meta["wall_time_s"], "command": meta["command"]}


def shipped_cost(name: str) -> dict[str, Any]:
    meta = read_metadata(CHECKPOINT_DIR / SHIPPED[name])
    run = meta.get("run", meta)
    per_tick = 3 if meta.get("track") == "team" else 1  # team env: one tick = 3 role decisions
    return {"steps": run["timesteps"] * per_tick, "wall": run["wall_time_s"], "command": meta["command"]}


def _score(report: dict[str, Any], scenario: str) -> float:
    return report["overall_score"] if scenario == "overall" else report["scenario_scores"][scenario]


def table(
    rows: list[tuple[str, str, dict[str, Any], dict[str, Any] | None]],
    ref: dict[str, Any] | None,
    ref_name: str,
) -> list[str]:
    scenarios = list(rows[0][2]["scenario_scores"])
    head = ["policy", "kind", *[f"`{s}`" for s in scenarios], "**overall**"]
    if ref is not None:
        head.append(f"overall − {ref_name} (± s.e.)")
    head += ["invalid rate", "training (role decisions)", "training wall time"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, kind, report, cost in rows:
        cells = [f"`{name}`", kind, *[f"{_score(report, s):.1f}" for s in scenarios]]
        cells.append(f"**{report['overall_score']:.1f}**")
        if ref is not None:
            if report is ref:
                cells.append("—")
            else:
                m, se = overall_paired(report, ref)
                cells.append(f"{m:+.1f} ± {se:.1f}")
        cells.append(f"{100 * report['invalid_action_rate']:.1f} %")
        cells += [f"{cost['steps']:,}", f"{cost['wall']:.0f} s"] if cost else ["—", "—"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def per_scenario_margins(reports: dict[str, dict[str, Any]], ref: str) -> list[str]:
    scenarios = list(reports[ref]["scenario_scores"])
    others = [n for n in reports if n != ref]
    head = ["scenario", *[f"`{n}` − `{ref}`" for n in others]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in scenarios:
        cells = [f"`{s}`"]
        for n in others:
            m, se = paired(reports[n], reports[ref], s)
            cells.append(f"{m:+.1f} ± {se:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def plot(runs: dict[str, Path], team_reports: dict[str, dict[str, Any]], out: Path) -> Path:
    """Graded evaluation score vs role decisions of IBR, shared, team PPO and RLlib; on a second
    panel RLlib's validation gradings with their standard errors, the shipped modules' table grade,
    and its training team return."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=110)
    team_meta = read_metadata(CHECKPOINT_DIR / SHIPPED["team_ppo"])
    curve = team_meta.get("curve", [])
    if curve:
        ax.plot(
            [3 * r["timesteps"] for r in curve],
            [r["eval_score"] for r in curve],
            "o-",
            ms=3,
            label="team PPO (shipped; joint action)",
        )
    for label, key in (("per-role IBR", "ibr"), ("parameter-shared", "shared")):
        path = runs.get(key)
        if path and (path / "curve.json").exists():
            rows = json.loads((path / "curve.json").read_text())
            ax.plot([r["timesteps"] for r in rows], [r["eval_score"] for r in rows], "o-", ms=3, label=label)
    rllib = runs.get("rllib")
    if rllib and (rllib / "curve.json").exists():
        rows = json.loads((rllib / "curve.json").read_text())
        graded = [r for r in rows if "eval_score" in r]
        if graded:  # validation gradings (runs before session 6 logged training returns only)
            ax.plot(
                [r["env_steps"] for r in graded], [r["eval_score"] for r in graded], "o-", ms=3, label="RLlib"
            )
            x = [r["env_steps"] for r in graded]
            y = np.array([r["eval_score"] for r in graded])
            band = np.array([r["eval_stderr"] for r in graded])
            ax2.plot(x, y, "o-", ms=3, color="tab:red", label="validation score")
            ax2.fill_between(
                x, y - band, y + band, color="tab:red", alpha=0.15, label="± mean per-scenario s.e."
            )
            ax2.axhline(
                validation_heuristic(rllib),
                color="grey",
                ls="--",
                lw=1,
                label="team_heuristic, same validation days",
            )
            _plot_convergence(ax2, rllib, graded)
        if "rllib" in team_reports:
            ax2.plot(
                [_rllib_shipped_steps(rllib, rows)],
                [team_reports["rllib"]["overall_score"]],
                "*",
                ms=12,
                color="black",
                label="shipped modules, graded seed 0 (table)",
            )
        twin = ax2.twinx()
        twin.plot(
            [r["env_steps"] for r in rows],
            [r["team_return_mean"] for r in rows],
            "-",
            lw=0.8,
            color="tab:grey",
            alpha=0.6,
        )
        twin.set_ylabel("mean training episode team return (raw, grey)")
    if "team_heuristic" in team_reports:
        ax.axhline(
            team_reports["team_heuristic"]["overall_score"],
            color="grey",
            ls="--",
            lw=1,
            label="team_heuristic (seed 0)",
        )
    ax.set_xlabel("training role decisions (team PPO: 3 per tick)")
    ax.set_ylabel("graded team-track score (0–100)")
    ax.set_title("periodic evaluations (eval seed 1000, all scenarios)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax2.set_xlabel("training role decisions (env steps: role turns)")
    ax2.set_ylabel("graded team-track score (0–100)")
    ax2.set_title("RLlib run: validation gradings (eval seed 1000) and training return")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def _resumed(resumed: list[dict[str, Any]]) -> str:
    """``; resumed from iterations 250, 700 and 850`` (``train rllib --resume``), or nothing."""
    at = [str(r["from_iteration"]) for r in resumed]
    if not at:
        return ""
    listed = at[0] if len(at) == 1 else ", ".join(at[:-1]) + " and " + at[-1]
    return f"; resumed from iteration{'s' if len(at) > 1 else ''} {listed} (`--resume`)"


def _plot_convergence(ax: Any, run_dir: Path, graded: list[dict[str, Any]]) -> None:
    """What :func:`convergence` compares, on the gradings' panel: the middle and last thirds'
    means, the last third's least-squares line, and where the run was resumed."""
    import numpy as np

    try:
        c = convergence(graded)
    except ValueError:
        return
    k = c["k"]
    middle, last = graded[-2 * k : -k], graded[-k:]
    ax.hlines(
        [c["middle"], c["last"]],
        [middle[0]["env_steps"], last[0]["env_steps"]],
        [middle[-1]["env_steps"], last[-1]["env_steps"]],
        colors="black",
        lw=2,
        label="middle / last third of the gradings: means",
    )
    x = np.array([last[0]["env_steps"], last[-1]["env_steps"]], float)
    fit = c["last"] + c["slope"] * (x / 1e5 - np.mean([r["env_steps"] for r in last]) / 1e5)
    ax.plot(x, fit, ":", color="black", lw=1.5, label=f"last third's slope ({c['slope']:+.2f} per 100k)")
    steps = {r["iteration"]: r["env_steps"] for r in graded}  # a run resumes from a graded iteration
    for i, r in enumerate(json.loads((run_dir / "rllib.json").read_text()).get("resumed", [])):
        ax.axvline(
            steps[r["from_iteration"]],
            color="tab:blue",
            ls="-.",
            lw=0.8,
            label="resumed from the checkpoint (--resume)" if i == 0 else None,
        )


def _rllib_shipped_steps(run_dir: Path, rows: list[dict[str, Any]]) -> int:
    """Role decisions behind the modules a run plays: its best grading's, else its last iteration's."""
    best = json.loads((run_dir / "rllib.json").read_text()).get("best")
    return best["env_steps"] if best else rows[-1]["env_steps"]


def days(run_dir: Path) -> dict[str, Any]:
    """The grader arguments of a run's validation days (its seed, episodes and scenarios)."""
    meta = json.loads((run_dir / "rllib.json").read_text())
    args = meta["args"]
    scenarios = None if args["all_scenarios"] else [args["scenario"]]
    return {
        "episodes": meta["validation"]["episodes_per_scenario"],
        "seed": meta["validation"]["seed"],
        "scenarios": scenarios,
    }


@functools.cache
def validation_heuristic(run_dir: Path) -> float:
    """``team_heuristic``'s overall score on a run's validation days (what its curve is read
    against): graded once, for the figure and the prose."""
    return grade_timed("team_heuristic (validation days)", "team_heuristic", "team", **days(run_dir))[
        "overall_score"
    ]


def convergence(graded: list[dict[str, Any]]) -> dict[str, float]:
    """The last third of a run's validation gradings against the middle third (means, their
    difference ± its standard error from the gradings' spread), and the last third's least-squares
    slope per 100k role decisions ± its standard error: a curve that has levelled off shows a
    difference and a slope within about two standard errors of 0."""
    import numpy as np

    k = len(graded) // 3
    if k < 3:
        raise ValueError(f"{len(graded)} validation gradings: too few to judge convergence (need 9)")
    middle = np.array([r["eval_score"] for r in graded[-2 * k : -k]])
    last = np.array([r["eval_score"] for r in graded[-k:]])
    x = np.array([r["env_steps"] for r in graded[-k:]], float) / 1e5
    slope, intercept = np.polyfit(x, last, 1)
    resid = last - (slope * x + intercept)
    slope_se = float(np.sqrt(resid @ resid / (k - 2) / ((x - x.mean()) @ (x - x.mean()))))
    return {
        "k": k,
        "from_steps": int(graded[-k]["env_steps"]),
        "middle": float(middle.mean()),
        "last": float(last.mean()),
        "diff": float(last.mean() - middle.mean()),
        "diff_se": float(np.sqrt(last.var(ddof=1) / k + middle.var(ddof=1) / k)),
        "slope": float(slope),
        "slope_se": slope_se,
    }


def rllib_prose(run_dir: Path, report: dict[str, Any], ref: dict[str, Any]) -> list[str]:
    """What the RLlib run's validation curve shows: its peak, its end, whether it levelled off."""
    meta = json.loads((run_dir / "rllib.json").read_text())
    graded = [r for r in json.loads((run_dir / "curve.json").read_text()) if "eval_score" in r]
    if not meta.get("best") or not graded:
        return ["`rllib`'s run predates validation grading: it ships its final modules."]
    best, validation = meta["best"], meta["validation"]
    episodes, every = validation["episodes_per_scenario"], meta["args"]["eval_interval"]
    batch = meta["args"]["train_batch_size"]
    minutes = f"{meta['wall_time_s'] / 60:.0f} min wall, {meta['cpu_time_s'] / 60:.0f} min CPU"
    lines = [
        f"`rllib`'s validation grading (eval seed {validation['seed']}, {episodes} episodes per scenario, "
        f"every {every} iterations of {batch:,} role decisions) peaked at {best['eval_score']:.1f} "
        f"(iteration {best['iteration']}, {best['env_steps']:,} role decisions) and ended at "
        f"{graded[-1]['eval_score']:.1f} after {meta['iterations']} iterations "
        f"({meta['env_steps']:,} role decisions, {minutes} of the training process"
        + _resumed(meta.get("resumed", []))
        + "); the run ships (and the table grades) the modules of that best grading."
    ]
    try:
        c = convergence(graded)
    except ValueError as exc:
        return [*lines, f"Convergence not judged: {exc}."]
    levelled = abs(c["diff"]) <= 2 * c["diff_se"] and abs(c["slope"]) <= 2 * c["slope_se"]
    if levelled:
        verdict = (
            "the curve has levelled off: the last third is within two standard errors of the middle third "
            "and its slope within two standard errors of 0"
        )
    elif abs(c["slope"]) <= 2 * c["slope_se"]:
        verdict = (
            "the curve is flattening (the last third's slope is within two standard errors of 0) but has "
            "not levelled off (the last third still sits more than two standard errors above the middle "
            "third)"
        )
    else:
        span = (graded[-1]["env_steps"] - c["from_steps"]) / 1e5
        verdict = (
            "the curve has not levelled off: it is still rising through the last third, by "
            f"{c['slope'] * span:+.1f} points over its {span / 10:.1f}M role decisions at that slope"
        )
    lines.append(
        f"Over the last third of the run ({c['k']} gradings from {c['from_steps']:,} role decisions) the "
        f"validation score averaged {c['last']:.1f}, against {c['middle']:.1f} over the middle third "
        f"({c['diff']:+.1f} ± {c['diff_se']:.1f}), with a slope of {c['slope']:+.2f} ± {c['slope_se']:.2f} "
        f"points per 100k role decisions: {verdict}."
    )
    # team_heuristic on the run's own validation days: the gap the curve would have to close.
    heuristic = validation_heuristic(run_dir)
    gap = heuristic - c["last"]
    m, se = overall_paired(report, ref)
    closing = ""
    if not levelled and c["slope"] > 0 and gap > 0:
        more = round(gap / c["slope"] * 1e5, -4)
        weak = "" if c["slope"] > 2 * c["slope_se"] else "; that slope is within two standard errors of 0"
        closing = (
            f"; at the last third's slope the curve would reach it after about {more:,.0f} more role "
            f"decisions, {more / batch:,.0f} more iterations (a straight-line extrapolation: a curve that "
            f"keeps flattening takes longer{weak})"
        )
    elif gap > 0:
        closing = "; the last third's slope is not positive: this curve shows no sign of closing that gap"
    side = "above" if gap > 0 else "below"
    lines.append(
        f"On the same validation days `team_heuristic` scores {heuristic:.1f}, "
        f"{abs(gap):.1f} {side} the last third's mean{closing}. On the reported days the shipped modules are "
        f"{m:+.1f} ± {se:.1f} from `team_heuristic`."
    )
    return lines


def prose(
    team: dict[str, dict[str, Any]],
    missing: list[str],
    runs: dict[str, Path],
    costs: dict[str, dict[str, Any] | None],
) -> list[str]:
    ref = team["team_heuristic"]
    ranked = sorted(team.items(), key=lambda kv: -kv[1]["overall_score"])
    best_name, best = ranked[0]
    lines = []
    learned = [n for n in ("marl_ibr", "marl_shared", "rllib") if n in team]
    parts = []
    for n in learned:
        m, se = overall_paired(team[n], ref)
        parts.append(f"`{n}` {m:+.1f} ± {se:.1f}")
    m_tp, se_tp = overall_paired(team["team_ppo"], ref)
    steps = sorted(c["steps"] for n in learned if (c := costs.get(n)))
    team_ppo_steps = costs["team_ppo"]["steps"] if costs.get("team_ppo") else None
    budget = ""
    if steps and team_ppo_steps:
        span = f"{steps[0]:,}" if steps[0] == steps[-1] else f"{steps[0]:,}–{steps[-1]:,}"
        lo, hi = team_ppo_steps / steps[0], team_ppo_steps / steps[-1]
        ratio = (
            f"{hi:.1f}× as many" if lo == hi else f"{lo:.1f}× the smallest of those, {hi:.1f}× the largest"
        )
        budget = (
            f"The per-role learners trained on {span} role decisions each (wall times above, this 2-core "
            f"machine); `team_ppo` (joint action from the composed observation) on {team_ppo_steps:,} "
            f"({ratio}). "
        )
    lines.append(
        f"On the team track `{best_name}` scores highest overall ({best['overall_score']:.1f}). "
        f"Against `team_heuristic` ({ref['overall_score']:.1f}), paired over the same days: "
        f"`team_ppo` {m_tp:+.1f} ± {se_tp:.1f}"
        + ("; " + ", ".join(parts) if parts else "")
        + ". "
        + budget
        + "A margin within about two standard errors is not a win."
    )
    for name, key in (("marl_ibr", "ibr"), ("marl_shared", "shared")):
        curve_file = runs[key] / "curve.json" if name in team else None
        if curve_file and curve_file.exists():
            curve = json.loads(curve_file.read_text())
            peak = max(curve, key=lambda r: r["eval_score"])
            where = f"round {peak['round']}, after {peak['role']}, step" if "round" in peak else "step"
            meta = json.loads((runs[key] / "model.json").read_text())
            best = meta.get("best")
            if best:
                shipped = "the run ships (and the table grades) the models of that best evaluation"
                untrained = [role for role in ROLES if key == "ibr" and role not in best["models"]]
                if untrained:
                    shipped += f" (then untrained, {' and '.join(untrained)} play the heuristic's rules)"
            else:
                shipped = "this run predates best-model tracking: it ships its final models"
            lines.append(
                f"`{name}`'s periodic evaluation (eval seed 1000) peaked at {peak['eval_score']:.1f} "
                f"({where} {peak['timesteps']:,}) and ended at {curve[-1]['eval_score']:.1f}; {shipped}."
            )
    if "rllib" in team:
        lines += rllib_prose(runs["rllib"], team["rllib"], ref)
    if missing:
        lines.append("Missing from this table: " + ", ".join(missing) + ".")
    return lines


def build(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    import policies
    from policies.marl import load_marl_policy

    runs = {"ibr": Path(args.ibr_run), "shared": Path(args.shared_run), "rllib": Path(args.rllib_run)}
    available = {k: ensure_run(k, p, args.train, args.rllib_iterations) for k, p in runs.items()}
    missing: list[str] = []

    flat_names = ["heuristic", "ppo", "ppo_pruned"] + (["planner"] if not args.no_planner else [])
    if args.no_planner:
        missing.append("planner (run without --no-planner)")
    cache = json.loads(Path(args.cache).read_text()) if args.cache and Path(args.cache).exists() else {}

    def cached_flat(n: str) -> dict[str, Any]:
        key = f"flat:{n}:{args.episodes}:{args.seed}"
        if key not in cache:
            cache[key] = grade_timed(n, policies.load(n), "flat", args.episodes, args.seed)
            if args.cache:
                Path(args.cache).write_text(json.dumps(cache) + "\n")
        return cache[key]

    flat = {n: cached_flat(n) for n in flat_names}
    team: dict[str, dict[str, Any]] = {}
    costs: dict[str, dict[str, Any] | None] = {"team_heuristic": None, "team_ppo": shipped_cost("team_ppo")}
    for n in ("team_heuristic", "team_ppo"):
        team[n] = grade_timed(n, policies.load(n), "team", args.episodes, args.seed)
    for key, name in (("ibr", "marl_ibr"), ("shared", "marl_shared")):
        if available[key]:
            team[name] = grade_timed(name, load_marl_policy(runs[key]), "team", args.episodes, args.seed)
            costs[name] = run_cost(key, runs[key])
        else:
            missing.append(f"{name} (no run in {runs[key]})")
    if available["rllib"]:
        from policies.rllib import load_rllib_policy

        team["rllib"] = grade_timed(
            "rllib", load_rllib_policy(runs["rllib"]), "team", args.episodes, args.seed
        )
        costs["rllib"] = run_cost("rllib", runs["rllib"])
    else:
        missing.append(f"rllib (no run in {runs['rllib']})")

    kinds = {
        "heuristic": "rules",
        "ppo": "MaskablePPO, one agent",
        "ppo_pruned": "MaskablePPO, one agent, dominated actions pruned",
        "planner": "rollout planner",
        "team_heuristic": "per-role rules",
        "team_ppo": "MaskablePPO, joint MultiDiscrete action",
        "marl_ibr": "per-role MaskablePPO, iterated best response",
        "marl_shared": "one MaskablePPO shared by the roles",
        "rllib": "RLlib multi-agent PPO, one module per role",
    }
    flat_rows = [(n, kinds[n], r, shipped_cost(n) if n in SHIPPED else None) for n, r in flat.items()]
    team_rows = [(n, kinds[n], r, costs.get(n)) for n, r in team.items()]
    commands = [f"- `{n}`: `{c['command']}`" for n, c in costs.items() if c]
    parts = [
        START,
        f"*Generated by `python benchmarks/marl_table.py --write` ({args.episodes} episodes per scenario, "
        f"seed {args.seed}; margins are paired over the same days, ± one standard error). "
        "Training steps are role decisions (a tick of the team env counts 3).*",
        "",
        "**Flat track** (one `Discrete(39)` action per tick; not comparable with the team track):",
        "",
        *table(flat_rows, flat["heuristic"], "heuristic"),
        "",
        "**Team track** (one action per role per tick, graded through the AEC env):",
        "",
        *table(team_rows, team["team_heuristic"], "team_heuristic"),
        "",
        "Per-scenario margins on the team track (paired, vs `team_heuristic`):",
        "",
        *per_scenario_margins(team, "team_heuristic"),
        "",
        *prose(team, missing, runs, costs),
        "",
        "Commands of the learned runs:",
        "",
        *commands,
        "",
        "![Learning curves of the multi-agent variants](marl_curves.png)",  # relative to docs/results.md
        END,
    ]
    data = {"episodes": args.episodes, "seed": args.seed, "flat": flat, "team": team, "missing": missing}
    if args.write:
        plot({k: p for k, p in runs.items() if available[k]}, team, PLOT)
        print(f"wrote {PLOT}", file=sys.stderr)
    return "\n".join(parts), data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-planner", action="store_true", help="skip the (slow) planner row")
    parser.add_argument(
        "--ibr-run", default=str(RUNS / "ibr"), metavar="DIR", help="a `train marl --method ibr` run"
    )
    parser.add_argument(
        "--shared-run", default=str(RUNS / "shared"), metavar="DIR", help="a `train marl --method shared` run"
    )
    parser.add_argument("--rllib-run", default=str(RUNS / "rllib"), metavar="DIR", help="a `train rllib` run")
    parser.add_argument(
        "--train", action="store_true", help="train the runs that are missing (through the CLI)"
    )
    committed = RUNS / "rllib" / "rllib.json"
    iterations = json.loads(committed.read_text())["iterations"] if committed.exists() else 250
    parser.add_argument(
        "--rllib-iterations",
        type=int,
        default=iterations,
        metavar="K",
        help=f"`train rllib --iterations K` when --train trains RLlib (default {iterations}, as committed)",
    )
    parser.add_argument("--write", action="store_true", help=f"replace the table in {DOC} and write {PLOT}")
    parser.add_argument("--json", metavar="FILE", help="also write every report as JSON")
    parser.add_argument(
        "--cache",
        metavar="FILE",
        help="reuse/store the flat-track reports (their policies never change) in this JSON file",
    )
    args = parser.parse_args(argv)
    text, data = build(args)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
    if args.write:
        write_marked(DOC, START, END, text)
        print(f"wrote {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
