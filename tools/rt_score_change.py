"""The RT score change (SPEC-RT §8) shown on the same plans: old score beside new score.

    python tools/rt_score_change.py record   # at the commit BEFORE the change: the plans and old scores
    python tools/rt_score_change.py compare  # at the change: the same beam sets, same patients, new score

``record`` plays each agent on the grader's patients (seed 42, ``--episodes`` per task) and keeps
every final beam set (grid angles, weights in tenths, aperture margins) with its old score and
tumour metrics in
``docs/data/rt_score_change.json``; ``compare`` re-evaluates those beam sets with
``Plan.evaluate`` on the same patients (same dose) and writes the side-by-side table to
``docs/data/rt_score_change.md``. The dose of a beam set did not change in that commit: only the score.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading.common import episode_seed, policy_seed  # noqa: E402
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS  # noqa: E402
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv  # noqa: E402

DATA = ROOT / "docs" / "data" / "rt_score_change.json"
TABLE = ROOT / "docs" / "data" / "rt_score_change.md"
AGENTS = ("evenly_spaced", "six_full", "anatomy_aware", "planner", "ppo", "ranked_selector")


def record(episodes: int) -> None:
    from policies.radiotherapy import load

    rows = []
    for name in AGENTS:
        agent = load(name)
        for task in BUILTIN_TASKS:
            for i in range(episodes):
                seed = episode_seed(42, task, i)
                env = RadiotherapyPlanningEnv(task)
                obs, info = env.reset(seed=seed)
                agent.reset(seed=policy_seed(seed), plan=env.plan)
                while not env.plan.done:
                    obs, _, _, _, info = env.step(agent.act(obs, info["action_mask"]))
                plan, m = env.plan, info["metrics"]
                rows.append(
                    {
                        "agent": name,
                        "task": task,
                        "seed": seed,
                        "angles": plan.angles[: plan.n_beams].tolist(),
                        "weights": plan.weights[: plan.n_beams].tolist(),
                        "margins": plan.margins[: plan.n_beams].tolist(),
                        "old_score": info["score"],
                        "d2": m["d2"],
                        "d98": m["d98"],
                        "v107": m["v107"],
                    }
                )
        print(name, flush=True)
    DATA.write_text(json.dumps(rows, indent=1) + "\n")


def compare() -> None:
    rows = json.loads(DATA.read_text())
    envs = {t: RadiotherapyPlanningEnv(t) for t in BUILTIN_TASKS}
    for row in rows:
        env = envs[row["task"]]
        env.reset(seed=row["seed"])
        metrics, score = env.plan.evaluate(
            np.array(row["angles"], np.int64),
            np.array(row["weights"], np.int64),
            np.array(row["margins"], np.int64),
        )
        row["new_score"] = score
        row["new_pass"] = bool(score >= 0.6)
        row["tier"] = metrics.tier
        row["body_near_max"] = metrics.body_near_max
        assert abs(metrics.d2 - row["d2"]) < 1e-12, "the dose changed: compare at the score-change commit"
    DATA.write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "| agent | task | old score (pass) | new score (pass) | clean / minor / major | tumour D98 | D2 | "
        "body D1% outside | V107 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in AGENTS:
        for task in BUILTIN_TASKS:
            sel = [r for r in rows if r["agent"] == name and r["task"] == task]
            if not sel:
                continue

            def avg(key: str, sel: list = sel) -> float:
                return float(np.mean([float(r[key]) for r in sel]))

            old_pass = np.mean([r["old_score"] >= 0.6 for r in sel])
            new_pass = np.mean([r["new_score"] >= 0.6 for r in sel])
            lines.append(
                f"| {name} | {task} | {avg('old_score'):.3f} ({100 * old_pass:.0f}%) | "
                f"{avg('new_score'):.3f} ({100 * new_pass:.0f}%) | "
                + " / ".join(str(sum(r["tier"] == t for r in sel)) for t in ("clean", "minor", "major"))
                + f" | {avg('d98'):.2f} | {avg('d2'):.2f} | {avg('body_near_max'):.2f} | "
                f"{100 * avg('v107'):.0f}% |"
            )
    TABLE.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("record", "compare"))
    parser.add_argument("--episodes", type=int, default=10)
    args = parser.parse_args()
    record(args.episodes) if args.mode == "record" else compare()
