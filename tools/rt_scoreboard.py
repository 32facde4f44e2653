"""The radiotherapy scoreboard (SPEC-RT §8) on both test splits, written into docs/radiotherapy.md.

    python tools/rt_scoreboard.py [--episodes 10] [--write]

Rows: ``random``, the scripted ``six_full`` and ``evenly_spaced``, ``anatomy_aware``, the
local-search ``planner``, every learned seed of each learner (:data:`LEARNERS`:
``policies/radiotherapy/checkpoints/rt_ppo_seed*.npz``, ``rt_residual_seed*.npz``,
``rt_option_selector_seed*.npz``, ``rt_ranked_selector_seed*.npz``) and their mean ± standard error
over seeds, the shipped ``ppo``, ``rt_residual``, ``option_selector`` and ``ranked_selector``, and the
FMO reference
(``tools/rt_fmo.py``, cached in ``docs/data/rt_fmo.json``). Each cell is the task's mean score ±
its standard error over the patients; "gap closed" is the fraction of the way from ``random``
to FMO: ``(agent − random) / (FMO − random)`` of the task means. The patients are the grader's
(seed 42, episode *i* of each task and split), the same for every row (paired).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from rt_fmo import fmo_scores  # noqa: E402

from grading.common import stderr  # noqa: E402
from grading.radiotherapy import grade_all, split_seed  # noqa: E402
from hospital_marl.radiotherapy.core.metrics import PASS_THRESHOLD  # noqa: E402
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS  # noqa: E402
from policies.radiotherapy.learned import CHECKPOINT_DIR, load_path  # noqa: E402

DOC = ROOT / "docs" / "radiotherapy.md"
DATA = ROOT / "docs" / "data" / "rt_scoreboard.json"
SPLITS = ("test_id", "test_ood")
BASELINES = ("random", "six_full", "evenly_spaced", "anatomy_aware", "planner")
START, END = "<!-- rt-scoreboard:start -->", "<!-- rt-scoreboard:end -->"
LEARNERS = {
    "ppo": "rt_ppo",
    "rt_residual": "rt_residual",
    "option_selector": "rt_option_selector",
    "ranked_selector": "rt_ranked_selector",
}
"""Registered name -> checkpoint stem: ``<stem>_seed*.npz`` are its seeds, ``<stem>.npz`` the shipped one."""


def seed_checkpoints(stem: str = "rt_ppo") -> list[Path]:
    return sorted(CHECKPOINT_DIR.glob(f"{stem}_seed*.npz"))


def _seeds(rows: Any, name: str) -> list[str]:
    return [label for label in rows if label.startswith(f"{name}_seed")]


def grade(
    episodes: int, reuse: bool = False, learners: bool = True, part: tuple[int, int] = (0, 1)
) -> dict[str, Any]:
    """Every row's per-task scores on both splits (JSON-able); ``reuse``: keep the rows already
    saved in docs/data/rt_scoreboard.json for the same episode count and patients (the planner takes
    minutes). ``part = (k, n)``: grade only every n-th (split, row) from the k-th (one process of n;
    ``--merge`` joins their files)."""
    saved = json.loads(DATA.read_text()) if reuse and DATA.exists() else {}
    index = -1
    fmo = fmo_scores(episodes, list(SPLITS), verbose=False)
    patients = {  # the graded patients' digests: rows saved for other patients are never reused
        split: {
            t: [fmo[f"{t}/{split}/{split_seed(42, t, split, i)}"]["patient"] for i in range(episodes)]
            for t in BUILTIN_TASKS
        }
        for split in SPLITS
    }
    if saved.get("episodes") != episodes or saved.get("patients") != patients:
        saved = {}
    out: dict[str, Any] = {"episodes": episodes, "seed": 42, "patients": patients, "splits": {}}
    for split in SPLITS:
        rows: dict[str, dict[str, list[float]]] = {}
        agents: list[tuple[str, Any]] = [(name, name) for name in BASELINES]
        for name, stem in LEARNERS.items() if learners else ():
            agents += [(path.stem.replace(stem, name), load_path(path)) for path in seed_checkpoints(stem)]
            if (CHECKPOINT_DIR / f"{stem}.npz").exists():
                agents.append((f"{name} (shipped)", name))
        for label, agent in agents:
            index += 1
            if index % part[1] != part[0]:
                continue
            if label in saved.get("splits", {}).get(split, {}) and label in BASELINES:
                rows[label] = saved["splits"][split][label]
                continue
            report = grade_all(agent, n_episodes=episodes, seed=42, split=split)
            rows[label] = {t: report["tasks"][t]["episode_scores"] for t in BUILTIN_TASKS}
            print(split, label, {t: round(float(np.mean(v)), 3) for t, v in rows[label].items()}, flush=True)
        keys = {
            t: [f"{t}/{split}/{split_seed(42, t, split, i)}" for i in range(episodes)] for t in BUILTIN_TASKS
        }
        rows["FMO reference"] = {t: [fmo[k]["score"] for k in keys[t]] for t in BUILTIN_TASKS}
        out.setdefault("fmo_constraints_met", {})[split] = {
            t: sum(bool(fmo[k].get("constraints_met")) for k in keys[t]) for t in BUILTIN_TASKS
        }
        out["splits"][split] = rows
    return out


def paired_differences(rows: Any, seed_labels: list[str], task: str) -> list[float]:
    """Per test patient: the seeds' mean score minus ``anatomy_aware``'s on the same patient.

    Its standard error is the verdict's second bar. The seeds share the test patients, so the s.e.
    over seeds measures only how the seeds differ (it is 0 when every seed plays the same plan);
    a learner beats the baseline only by more than both."""
    per_seed = np.array([rows[s][task] for s in seed_labels], dtype=float)
    return (per_seed.mean(axis=0) - np.asarray(rows["anatomy_aware"][task], dtype=float)).tolist()


def markdown(data: dict[str, Any]) -> str:
    """The tables and the verdicts, one section per split."""
    parts = []
    for split, rows in data["splits"].items():
        means = {label: {t: float(np.mean(v)) for t, v in r.items()} for label, r in rows.items()}
        seeds = {name: _seeds(rows, name) for name in LEARNERS}
        for name in LEARNERS:  # each learner over seeds: mean of the seed means ± their standard error
            if seeds[name]:
                means[f"{name}, mean over seeds"] = {
                    t: float(np.mean([means[s][t] for s in seeds[name]])) for t in BUILTIN_TASKS
                }
        lo, hi = means["random"], means["FMO reference"]
        title = "in-distribution" if split == "test_id" else "out-of-distribution"
        lines = [
            f"**{split}** ({title} test patients, {data['episodes']} per task): score ± s.e. (gap closed "
            "from random to FMO, i.e. the fraction of FMO's headroom over random on the same patients; "
            "pass rate)",
            "",
            "| agent | " + " | ".join(BUILTIN_TASKS) + " | mean gap closed |",
            "|---|" + "---|" * (len(BUILTIN_TASKS) + 1),
        ]
        order = [*BASELINES]
        for name in LEARNERS:
            order += [*seeds[name], f"{name}, mean over seeds", f"{name} (shipped)"]
        order.append("FMO reference")
        for label in [o for o in order if o in means]:
            cells, gaps = [], []
            for t in BUILTIN_TASKS:
                if label.endswith(", mean over seeds"):
                    se = stderr([means[s][t] for s in seeds[label.split(",")[0]]])
                else:
                    se = stderr(rows[label][t])
                gap = (means[label][t] - lo[t]) / (hi[t] - lo[t]) if hi[t] > lo[t] else float("nan")
                gaps.append(gap)
                passed = (
                    100 * float(np.mean(np.asarray(rows[label][t]) >= PASS_THRESHOLD))
                    if label in rows
                    else None
                )
                shown = "" if passed is None else f"; pass {passed:.0f} %"
                cells.append(f"{means[label][t]:.3f} ± {se:.3f} ({100 * gap:.0f} %{shown})")
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {100 * float(np.mean(gaps)):.0f} % |")
        for name in LEARNERS:
            if not seeds[name]:
                continue
            verdict = []
            for t in BUILTIN_TASKS:
                margin = means[f"{name}, mean over seeds"][t] - means["anatomy_aware"][t]
                over_seeds = stderr([means[s][t] for s in seeds[name]])
                over_patients = stderr(paired_differences(rows, seeds[name], t))
                beats = margin > max(over_seeds, over_patients)
                verdict.append(
                    f"{t} {margin:+.4f} (s.e. over seeds {over_seeds:.4f}, over patients "
                    f"{over_patients:.4f}: {'beats' if beats else 'does not beat'})"
                )
            lines += ["", f"`{name}` (mean over seeds) minus anatomy_aware: " + "; ".join(verdict) + "."]
        met = data.get("fmo_constraints_met", {}).get(split)
        if met:
            lines += [
                "",
                "FMO constraints met (every constraint of every priority): "
                + ", ".join(f"{t} {met[t]}/{data['episodes']}" for t in BUILTIN_TASKS)
                + ".",
            ]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def write(block: str) -> None:
    text = DOC.read_text()
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    command = "`python tools/rt_scoreboard.py --episodes N --write`"
    DOC.write_text(
        pattern.sub(lambda _: f"{START}\n<!-- generated by {command} -->\n\n{block}\n\n{END}", text)
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--write", action="store_true", help="into docs/radiotherapy.md and docs/data")
    parser.add_argument("--from-data", action="store_true", help="re-render the saved scores, grade nothing")
    parser.add_argument("--reuse", action="store_true", help="keep the saved baseline rows, grade the rest")
    parser.add_argument(
        "--baselines-only", action="store_true", help="grade no learner (then --reuse grades only them)"
    )
    parser.add_argument(
        "--part", default="0/1", help="k/n: grade every n-th row from the k-th, into a part file"
    )
    parser.add_argument("--merge", nargs="*", default=None, help="join these part files (then render)")
    args = parser.parse_args()
    k, n = (int(v) for v in args.part.split("/"))
    if args.merge is not None:
        parts = [json.loads(Path(p).read_text()) for p in args.merge]
        data = parts[0]
        for other in parts[1:]:
            if (other["episodes"], other["patients"]) != (data["episodes"], data["patients"]):
                raise SystemExit("the parts graded different patients")
            for split, rows in other["splits"].items():
                data["splits"][split] |= rows
        for split, rows in data["splits"].items():  # one process's order: baselines, learners, FMO
            rank = {label: i for i, label in enumerate(BASELINES)}
            data["splits"][split] = dict(
                sorted(rows.items(), key=lambda r: (r[0] == "FMO reference", rank.get(r[0], 99), r[0]))
            )
    elif args.from_data:
        data = json.loads(DATA.read_text())
    else:
        data = grade(args.episodes, args.reuse, learners=not args.baselines_only, part=(k, n))
        if n > 1:
            Path(f"{DATA}.part{k}").write_text(json.dumps(data) + "\n")
            sys.exit(0)
    block = markdown(data)
    print(block)
    if args.write:
        DATA.write_text(json.dumps(data, indent=1) + "\n")
        write(block)
