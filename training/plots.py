"""Learning-curve plots of ``hospital-marl train ...`` runs (matplotlib, Agg backend, PNG)."""

from __future__ import annotations

import json
from pathlib import Path

X_KEYS = ("timesteps", "frames", "env_steps")
"""What the trainers count along a curve: SB3 and the per-role trainers timesteps, the fast and
BenchMARL trainers frames, RLlib env steps (the first one a curve has is its x axis)."""


def plot_curve(run_dir: str | Path, output: str | Path | None = None, per_scenario: bool = True) -> Path:
    """Draw ``RUN_DIR/curve.json`` (evaluation score vs timesteps, frames or env steps) to a PNG;
    returns its path. Any trainer's run directory (``train ppo``, ``marl``, ``fast-*``,
    ``benchmarl``, ``rllib``, ``radiotherapy``).

    The overall evaluation score carries its mean per-scenario standard error
    as a band; per-scenario (radiotherapy: per-task) scores are thin lines; the mean raw
    training episode return is on a second axis.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    path = run_dir / "curve.json"
    if not path.exists():
        raise FileNotFoundError(
            f"no curve.json in {run_dir} (is it a `hospital-marl train ...` run directory?)"
        )
    rows = json.loads(path.read_text())
    if not rows:
        raise FileNotFoundError(f"{path} has no evaluations yet")
    meta_path = run_dir / "model.json"
    if not meta_path.exists():
        meta_path = run_dir / "best_model.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}

    x_key = next((k for k in X_KEYS if k in rows[0]), None)
    y_key = "aggregate" if "aggregate" in rows[0] else "eval_score"  # radiotherapy: the plan score
    rows = [r for r in rows if r.get(y_key) is not None]  # RLlib logs iterations between gradings
    if x_key is None or not rows:
        raise FileNotFoundError(f"{path} has no graded rows with one of {', '.join(X_KEYS)}")
    steps = [r[x_key] for r in rows]
    score = [r[y_key] for r in rows]
    err = [r.get("eval_stderr", 0.0) for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ax.plot(steps, score, "o-", color="black", lw=2, label="eval score (all)")
    ax.fill_between(
        steps,
        [s - e for s, e in zip(score, err)],
        [s + e for s, e in zip(score, err)],
        color="black",
        alpha=0.12,
    )
    if per_scenario:
        for key in [k for k in rows[0] if k.startswith("score_")]:
            ax.plot(steps, [r.get(key) for r in rows], lw=1, alpha=0.8, label=key[len("score_") :])
        for task in rows[0].get("task_scores", {}):
            ax.plot(steps, [r["task_scores"].get(task) for r in rows], lw=1, alpha=0.8, label=task)
    ax.set_xlabel(x_key.replace("_", " "))
    ax.set_ylabel("plan score (0–1)" if y_key == "aggregate" else "graded score (0–100)")
    ax.grid(alpha=0.3)
    rewards = [r.get("train_episode_reward") for r in rows]
    if any(v is not None for v in rewards):
        ax2 = ax.twinx()
        ax2.plot(steps, rewards, "--", color="grey", lw=1, label="train episode return")
        ax2.set_ylabel("mean training episode return (raw)", color="grey")
        lines, labels = ax.get_legend_handles_labels()
        lines2, labels2 = ax2.get_legend_handles_labels()
        ax.legend(lines + lines2, labels + labels2, fontsize=7, loc="lower right")
    else:
        ax.legend(fontsize=7, loc="lower right")
    args = meta.get("args", {})
    title = run_dir.name
    if args:
        where = "all scenarios" if args.get("all_scenarios") else args.get("scenario")
        title += f": {args.get('track')} track, {where}, seed {args.get('seed')}"
        title += "" if args.get("mask", True) else ", no mask"
        title += f" (eval: {args.get('eval_episodes')} episodes/scenario from seed {args.get('eval_seed')})"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    out = Path(output) if output else run_dir / "curve.png"
    fig.savefig(out)
    plt.close(fig)
    return out
