"""Labels, fit and selection for the option selector (:mod:`policies.radiotherapy.options`; issue 25 item 6).

A label is what every variant of the family scores on one patient (each plays the whole episode), so a
patient costs K ``anatomy_aware`` episodes (~0.02 CPU-s each). Training patients come from the
``train`` split's anatomy with seeds from the stream of a training seed (never a validation or test
patient); validation patients are the trainer's (``eval_seed`` 1000, episode *i* of each task).

    python tools/rt_options.py headroom --episodes 10        # best-of-K oracle on validation
    python tools/rt_options.py label --seed 0 --patients 1000 --out runs/rt_opt/train_s0.npz

(A tool, not under ``training/``: it grades episodes with :mod:`grading.radiotherapy`, which the
trainers may not import.)
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading.common import stderr  # noqa: E402
from grading.radiotherapy import run_episode, split_seed  # noqa: E402
from hospital_marl.radiotherapy.core.plan import ADD  # noqa: E402
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, get_task  # noqa: E402
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv  # noqa: E402
from policies.radiotherapy.options import (  # noqa: E402
    DEFAULT,
    FEATURES,
    OptionSelectorPolicy,
    Variant,
    VariantPolicy,
    save,
    site_key,
    step0_features,
)
from training.rt_options import fit_sites, greedy_family  # noqa: E402

EVAL_SEED = 1000
"""The trainer's validation ``eval_seed`` (training/radiotherapy.py's default)."""


def grid(
    n_beams: Sequence[int] = (5, 6, 7),
    lows: Sequence[float] = (0.95, 0.97, 0.99),
    margins: Sequence[int] = (1, 2, 3),
    edits: Sequence[str] = ("aperture", "weight", "turn"),
) -> list[Variant]:
    """Every combination, the default variant first."""
    family = [Variant(n, lo, m, e) for n, lo, m, e in itertools.product(n_beams, lows, margins, edits)]
    return [DEFAULT, *[v for v in family if v != DEFAULT]]


def train_seed(seed: int, task: str, i: int) -> int:
    """Training patient ``i`` of ``task`` for training seed ``seed`` (the trainer's own stream per seed,
    disjoint from the validation stream by its name)."""
    return split_seed(seed, task, f"train/options/{seed}", i)


def patient_rows(
    task: str, split: str, seed: int, family: Sequence[Variant]
) -> tuple[np.ndarray, np.ndarray]:
    """(features of the step-0 observation, every variant's score) for one patient."""
    env = RadiotherapyPlanningEnv(task, split=split)
    observation, _ = env.reset(seed=seed)
    features = step0_features(observation)
    resolved = get_task(task)
    scores = np.array([run_episode(VariantPolicy(v), resolved, seed, split).score for v in family])
    return features, scores


def collect(
    task: str, split: str, seeds: Sequence[int], family: Sequence[Variant]
) -> tuple[np.ndarray, np.ndarray]:
    rows = [patient_rows(task, split, s, family) for s in seeds]
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


def headroom(episodes: int, family: Sequence[Variant], split: str = "validation") -> dict[str, Any]:
    """Per task: every variant's scores on the validation patients and the oracle's margin over the base."""
    out: dict[str, Any] = {"split": split, "eval_seed": EVAL_SEED, "family": [v.label() for v in family]}
    for task in BUILTIN_TASKS:
        start = time.process_time()
        seeds = [split_seed(EVAL_SEED, task, split, i) for i in range(episodes)]
        _, scores = collect(task, split, seeds, family)
        gain = scores.max(axis=1) - scores[:, 0]
        out[task] = {
            "scores": scores.tolist(),
            "oracle_gain": float(gain.mean()),
            "oracle_gain_se": stderr(gain),
            "best_single": family[int(np.argmax(scores.mean(axis=0)))].label(),
            "best_single_gain": float((scores.mean(axis=0) - scores[:, 0].mean()).max()),
            "cpu_s": time.process_time() - start,
        }
        print(
            task,
            f"base {scores[:, 0].mean():.4f} oracle {scores.max(axis=1).mean():.4f} "
            f"gain {gain.mean():+.4f} ± {out[task]['oracle_gain_se']:.4f} (min {gain.min():+.4f}); "
            f"best single {out[task]['best_single']} {out[task]['best_single_gain']:+.4f}; "
            f"{out[task]['cpu_s']:.0f} CPU-s",
            flush=True,
        )
    return out


def features_at(task: str, split: str, seeds: Sequence[int], decide_at: int) -> np.ndarray:
    """The selector's features for each patient at step ``decide_at`` (the family opens with ``ADD``)."""
    env = RadiotherapyPlanningEnv(task, split=split)
    rows = []
    for seed in seeds:
        observation, _ = env.reset(seed=int(seed))
        for _ in range(decide_at):
            observation, *_ = env.step(ADD)
        rows.append(FEATURES[decide_at](observation))
    return np.array(rows)


def validation_set(
    path: str,
    family: Sequence[Variant],
    episodes: int,
    decide_at: int = 0,
    extra: Sequence[str] = (),
) -> dict[str, Any]:
    """Per task: site key, features and the family's scores on the first ``episodes`` validation
    patients, read from ``headroom --json`` (run on the whole grid) so no episode is replayed; then
    the patients of ``extra`` label files (``label --split validation --seed 1000 --start <episodes>``:
    the same validation stream, continued, checked seed by seed)."""
    saved = json.loads(Path(path).read_text())
    labels = saved["family"]
    columns = [labels.index(v.label()) for v in family]
    files = [np.load(p) for p in extra]
    out = {}
    for task in BUILTIN_TASKS:
        scores = np.array(saved[task]["scores"])[:episodes][:, columns]
        more = [f for f in files if f"{task}_y" in f.files]
        if more:
            if any(json.loads(str(f["family"])) != [v.label() for v in family] for f in more):
                raise ValueError("the extra validation labels are of another family")
            scores = np.concatenate([scores, *[f[f"{task}_y"] for f in more]])
        seeds = [split_seed(EVAL_SEED, task, "validation", i) for i in range(len(scores))]
        if more and not np.array_equal(np.concatenate([f[f"{task}_seeds"] for f in more]), seeds[episodes:]):
            raise ValueError(f"the extra validation labels of {task} do not continue the validation stream")
        key = site_key(RadiotherapyPlanningEnv(task, split="validation").reset(seed=seeds[0])[0])
        out[task] = (key, features_at(task, "validation", seeds, decide_at), scores)
    return out


def training_set(
    paths: Sequence[str], decide_at: int, patients: int = 0
) -> dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]:
    """Per site key: (features at ``decide_at``, every variant's score) of the training patients in
    the label files ``paths`` (concatenated per task; a file may hold only some tasks), the first
    ``patients`` per task (0: all)."""
    files = [np.load(path) for path in paths]
    train: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
    for task in BUILTIN_TASKS:
        have = [f for f in files if f"{task}_y" in f.files]
        seeds = np.concatenate([f[f"{task}_seeds"] for f in have])
        scores = np.concatenate([f[f"{task}_y"] for f in have])
        n = patients or len(scores)
        key = site_key(RadiotherapyPlanningEnv(task).reset(seed=0)[0])
        train[key] = (features_at(task, "train", seeds[:n], decide_at), scores[:n])
    return train


def choices(policy: OptionSelectorPolicy, x: np.ndarray, key: tuple[int, ...]) -> np.ndarray:
    """The variant the policy picks for each row of step-0 features of one site."""
    selector = policy.selector.selectors.get(key) if policy.selector is not None else None  # type: ignore[union-attr]
    if selector is None:
        return np.zeros(len(x), dtype=int)
    return np.argmax(selector.predict(x), axis=1)


def gains(
    policy: OptionSelectorPolicy, data: dict[str, Any], first: int | None = None
) -> dict[str, np.ndarray]:
    """Per task, each patient's score under the policy's pick minus the default's (a table lookup)."""
    out = {}
    for task, (key, x, scores) in data.items():
        pick = choices(policy, x[:first], key)
        rows = scores[:first]
        out[task] = rows[np.arange(len(rows)), pick] - rows[:, 0]
    return out


def sweep(args: argparse.Namespace, family: Sequence[Variant]) -> None:
    """Per site, every (ridge, threshold, clip) fitted on each training seed's labels and graded on
    the validation patients (a table lookup); per site the setting with the largest mean over the
    seeds of the site's validation gain (the sites' selectors are fitted apart, so this also maximises
    the worst task). Ties (to 1e-5) go to the larger ridge, then clipping, then the smaller threshold:
    the more conservative fit. Written to ``--out`` for ``select --config``."""
    val = validation_set(args.validation, family, args.val_episodes, args.decide_at, args.val_labels)
    by_key = {key: task for task, (key, _, _) in val.items()}
    settings = list(itertools.product(args.ridges, args.thresholds, args.clips))
    per_seed: dict[str, dict[tuple[float, float, int], list[float]]] = {t: {} for t in BUILTIN_TASKS}
    for seed in args.seeds:
        train = training_set([p.format(seed=seed) for p in args.labels], args.decide_at, args.patients)
        for ridge, threshold, clip in settings:
            selector = fit_sites(train, ridge, threshold, clip=bool(clip))
            for task, g in gains(OptionSelectorPolicy(family, selector), val).items():
                per_seed[task].setdefault((ridge, threshold, clip), []).append(float(g.mean()))
        print("seed", seed, "done", flush=True)
    out: dict[str, Any] = {"seeds": args.seeds, "validation_patients": {}, "sites": {}, "grid": {}}
    for task, rows in per_seed.items():
        out["validation_patients"][task] = len(val[task][2])
        best = max(rows, key=lambda c: (round(float(np.mean(rows[c])), 5), c[0], c[2], -c[1]))
        out["sites"][task] = {
            "key": list(next(k for k, t in by_key.items() if t == task)),
            "ridge": best[0],
            "threshold": best[1],
            "clip": bool(best[2]),
            "mean_gain": float(np.mean(rows[best])),
            "per_seed_gain": rows[best],
        }
        out["grid"][task] = [
            {
                "ridge": c[0],
                "threshold": c[1],
                "clip": bool(c[2]),
                "mean_gain": float(np.mean(v)),
                "per_seed": v,
            }
            for c, v in rows.items()
        ]
        print(task, "best", out["sites"][task], flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


def select(args: argparse.Namespace, family: Sequence[Variant]) -> None:
    """Fit on one training seed's labels, every hyperparameter setting graded on the validation
    patients (a lookup in the headroom table), the best worst-task mean gain kept and saved. With
    ``--config`` (``sweep``'s output): that one per-site setting."""
    train = training_set(args.labels, args.decide_at, args.patients)
    val = validation_set(args.validation, family, args.val_episodes, args.decide_at, args.val_labels)
    if args.config:
        sites = json.loads(Path(args.config).read_text())["sites"]
        keyed = {tuple(v["key"]): v for v in sites.values()}
        candidates = [
            (
                {k: float(v["ridge"]) for k, v in keyed.items()},
                {k: float(v["threshold"]) for k, v in keyed.items()},
                0,
                {k: bool(v["clip"]) for k, v in keyed.items()},
            )
        ]
    else:
        candidates = [
            (r, t, h, False) for r, t, h in itertools.product(args.ridges, args.thresholds, args.hidden)
        ]
    rows = []
    for ridge, threshold, hidden, clip in candidates:
        selector = fit_sites(train, ridge, threshold, hidden, args.seed, clip)
        policy = OptionSelectorPolicy(family, selector)
        g = gains(policy, val)
        g10 = gains(policy, val, 10)
        g30 = gains(policy, val, 30)
        row = {
            "ridge": {t: sites[t]["ridge"] for t in sites} if args.config else ridge,
            "threshold": {t: sites[t]["threshold"] for t in sites} if args.config else threshold,
            "clip": {t: sites[t]["clip"] for t in sites} if args.config else False,
            "hidden": hidden,
            "gain": {t: float(v.mean()) for t, v in g.items()},
            "gain_se": {t: stderr(v) for t, v in g.items()},
            "worst": min(float(v.mean()) for v in g.values()),
            "gain10": {t: float(v.mean()) for t, v in g10.items()},
            "worst10": min(float(v.mean()) for v in g10.values()),
            "gain30": {t: float(v.mean()) for t, v in g30.items()},
            "gain30_se": {t: stderr(v) for t, v in g30.items()},
            "worst30": min(float(v.mean()) for v in g30.values()),
        }
        rows.append((row, selector))
        print(
            f"ridge {row['ridge']} thr {row['threshold']} clip {row['clip']}: worst {row['worst']:+.4f} "
            + " ".join(f"{t[:4]} {row['gain'][t]:+.4f}±{row['gain_se'][t]:.4f}" for t in BUILTIN_TASKS)
            + f" | first10 worst {row['worst10']:+.4f}",
            flush=True,
        )
    best, selector = max(rows, key=lambda r: (r[0]["worst"], -r[0]["threshold"] if not args.config else 0))
    print("selected", json.dumps(best), flush=True)
    meta = {
        "name": "option_selector",
        "seed": args.seed,
        "decide_at": args.decide_at,
        "labels": args.labels,
        "train_patients_per_task": {t: len(v[0]) for t, v in zip(BUILTIN_TASKS, train.values())},
        "validation": {
            "eval_seed": EVAL_SEED,
            "episodes": {t: len(v[2]) for t, v in val.items()},
            "extra_labels": args.val_labels,
            "config": args.config,
            "selected": best,
        },
        "grid": [r[0] for r in rows],
        "command": " ".join(sys.argv),
    }
    save(Path(args.out), family, selector, meta)


def test_splits(paths: Sequence[str], episodes: int, out: str, start: int = 0) -> None:
    """Grade every seed's checkpoint and ``anatomy_aware`` on both test splits, as
    ``tools/rt_scoreboard.py`` does (seed 42, episode *i* of each task and split; with ``start``,
    episodes ``start`` .. ``start + episodes - 1``, patients the scoreboard never grades): run ONCE,
    at the end."""
    from grading.radiotherapy import as_agent, grade_all
    from policies.radiotherapy.learned import load_path

    result: dict[str, Any] = {"episodes": episodes, "start": start, "seed": 42, "splits": {}}
    for split in ("test_id", "test_ood"):
        rows: dict[str, dict[str, list[float]]] = {}
        agents: list[tuple[str, Any]] = [("anatomy_aware", "anatomy_aware")]
        agents += [(Path(p).stem, load_path(Path(p))) for p in paths]
        for label, agent in agents:
            if start == 0:
                report = grade_all(agent, n_episodes=episodes, seed=42, split=split)
                rows[label] = {t: report["tasks"][t]["episode_scores"] for t in BUILTIN_TASKS}
                continue
            policy = as_agent(agent)
            rows[label] = {
                t: [
                    run_episode(policy, get_task(t), split_seed(42, t, split, i), split).score
                    for i in range(start, start + episodes)
                ]
                for t in BUILTIN_TASKS
            }
        seeds = [label for label in rows if label != "anatomy_aware"]
        summary: dict[str, Any] = {}
        for n in sorted({min(10, episodes), episodes}):  # the scoreboard's 10, and all graded
            summary[str(n)] = {}
            for t in BUILTIN_TASKS:
                base = np.array(rows["anatomy_aware"][t][:n])
                paired = np.array([np.array(rows[label][t][:n]) - base for label in seeds])  # (seeds, n)
                per_seed = paired.mean(axis=1)
                summary[str(n)][t] = {
                    "anatomy_aware": float(base.mean()),
                    "per_seed_margin": per_seed.tolist(),
                    "margin": float(per_seed.mean()),
                    "margin_se_over_seeds": stderr(per_seed),
                    "margin_se_over_patients": stderr(paired.mean(axis=0)),
                }
                print(
                    split,
                    n,
                    t,
                    f"aa {base.mean():.4f} margin {per_seed.mean():+.4f} ± {stderr(per_seed):.4f} (seeds) "
                    f"± {stderr(paired.mean(axis=0)):.4f} (patients); per seed "
                    + " ".join(f"{m:+.4f}" for m in per_seed),
                    flush=True,
                )
        result["splits"][split] = {"rows": rows, "summary": summary}
    Path(out).write_text(json.dumps(result, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    h = sub.add_parser("headroom")
    h.add_argument("--episodes", type=int, default=10)
    h.add_argument("--json", default=None)
    h.add_argument("--family", default=None, help="a JSON list of Variant fields (default: the grid)")
    lab = sub.add_parser("label")
    lab.add_argument("--seed", type=int, required=True)
    lab.add_argument("--patients", type=int, default=1000, help="per task")
    lab.add_argument("--start", type=int, default=0, help="first patient index (to extend a label set)")
    lab.add_argument("--split", default="train")
    lab.add_argument("--out", required=True)
    lab.add_argument("--tasks", nargs="*", default=list(BUILTIN_TASKS))
    lab.add_argument("--family", default=None, help="a JSON list of Variant fields (default: the grid)")
    fam = sub.add_parser("family")
    fam.add_argument("--labels", nargs="+", required=True)
    fam.add_argument("-k", type=int, default=12)
    fam.add_argument("--out", required=True)
    sel = sub.add_parser("select")
    sel.add_argument("--seed", type=int, required=True)
    sel.add_argument("--labels", nargs="+", required=True, help="label files (concatenated per task)")
    sel.add_argument("--patients", type=int, default=0, help="per task (0: all in the file)")
    sel.add_argument("--family", required=True)
    sel.add_argument("--validation", default="runs/rt_opt/headroom30.json")
    sel.add_argument("--val-episodes", type=int, default=30)
    sel.add_argument("--ridges", type=float, nargs="+", default=[0.01, 0.1, 1.0, 10.0, float("inf")])
    sel.add_argument("--thresholds", type=float, nargs="+", default=[0.0, 0.005, 0.01, 0.02])
    sel.add_argument("--hidden", type=int, nargs="+", default=[0])
    sel.add_argument("--decide-at", type=int, default=1, choices=sorted(FEATURES))
    sel.add_argument("--config", default=None, help="per-site ridge, threshold and clip (sweep's --out)")
    sel.add_argument("--out", required=True)
    swp = sub.add_parser("sweep")
    swp.add_argument("--seeds", type=int, nargs="+", required=True)
    swp.add_argument("--labels", nargs="+", required=True, help="label files, '{seed}' for the seed")
    swp.add_argument("--patients", type=int, default=0, help="per task (0: all in the files)")
    swp.add_argument("--family", required=True)
    swp.add_argument("--validation", default="runs/rt_opt/headroom30.json")
    swp.add_argument("--val-episodes", type=int, default=30)
    swp.add_argument(
        "--ridges", type=float, nargs="+", default=[0.03, 0.1, 0.3, 1.0, 3.0, 10.0, float("inf")]
    )
    swp.add_argument("--thresholds", type=float, nargs="+", default=[0.0, 0.0025, 0.005])
    swp.add_argument("--clips", type=int, nargs="+", default=[0, 1])
    swp.add_argument("--decide-at", type=int, default=1, choices=sorted(FEATURES))
    swp.add_argument("--out", required=True)
    for p in (sel, swp):
        p.add_argument(
            "--val-labels", nargs="*", default=[], help="more validation labels (label --split validation)"
        )
    tst = sub.add_parser("test")
    tst.add_argument("checkpoints", nargs="+")
    tst.add_argument("--episodes", type=int, default=10)
    tst.add_argument("--start", type=int, default=0, help="first episode (30: patients never graded before)")
    tst.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.command == "test":
        test_splits(args.checkpoints, args.episodes, args.out, args.start)
        return
    family = grid()
    if args.command == "family":
        scores = {}
        for path in args.labels:
            with np.load(path) as data:
                scores |= {t: data[f"{t}_y"] for t in BUILTIN_TASKS if f"{t}_y" in data.files}
        chosen = greedy_family([scores[t] for t in BUILTIN_TASKS], args.k)
        for t in BUILTIN_TASKS:
            s = scores[t]
            print(
                t,
                f"base {s[:, 0].mean():.4f} all {s.max(1).mean():.4f}",
                f"family {s[:, chosen].max(1).mean():.4f}",
            )
        picked = [family[j] for j in chosen]
        print([v.label() for v in picked])
        Path(args.out).write_text(json.dumps([dataclasses.asdict(v) for v in picked], indent=1) + "\n")
        return
    if args.command in ("select", "sweep"):
        chosen = [Variant(**v) for v in json.loads(Path(args.family).read_text())]
        (select if args.command == "select" else sweep)(args, chosen)
        return
    if getattr(args, "family", None):
        family = [Variant(**v) for v in json.loads(Path(args.family).read_text())]
    if args.command == "headroom":
        out = headroom(args.episodes, family)
        if args.json:
            Path(args.json).write_text(json.dumps(out) + "\n")
        return
    arrays: dict[str, np.ndarray] = {}
    for task in args.tasks:
        if args.split == "train":
            seeds = [train_seed(args.seed, task, i) for i in range(args.start, args.start + args.patients)]
        else:
            seeds = [
                split_seed(args.seed, task, args.split, i)
                for i in range(args.start, args.start + args.patients)
            ]
        start = time.process_time()
        arrays[f"{task}_x"], arrays[f"{task}_y"] = collect(task, args.split, seeds, family)
        arrays[f"{task}_seeds"] = np.array(seeds)
        print(task, f"{args.patients} patients, {time.process_time() - start:.0f} CPU-s", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, family=json.dumps([v.label() for v in family]), **arrays)


if __name__ == "__main__":
    main()
