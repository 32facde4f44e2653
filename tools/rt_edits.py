"""Labels, selection and checkpoints for the edit ranker (:mod:`policies.radiotherapy.ranker`; issue 25).

The learner is ``ranked_selector``: training seed *S*'s option selector (``rt_option_selector_seedS.npz``)
chooses the variant, and a ranker fitted on seed *S*'s own training patients orders its edit phase's trials.

    python tools/rt_edits.py label --seed 0 --out runs/rt_edits/stats_s0.npz   # 400 patients x 3 rounds
    python tools/rt_edits.py sweep --stats 'runs/rt_edits/stats_s{seed}.npz' --out runs/rt_edits/sweep.json
    python tools/rt_edits.py save --seed 0 --stats runs/rt_edits/stats_s0.npz \\
        --config runs/rt_edits/sweep.json --out policies/radiotherapy/checkpoints/rt_ranked_selector_seed0.npz
    python tools/rt_options.py test \\
        policies/radiotherapy/checkpoints/rt_ranked_selector_seed{0,1,2,3,4}.npz --episodes 30 --out test.json

Selection (``sweep``) reads only validation patients (the trainer's ``eval_seed`` 1000 stream); test
patients are graded once, at the end, by ``tools/rt_options.py test``. (A tool, not under ``training/``:
it grades episodes with :mod:`grading.radiotherapy`, which the trainers may not import.)
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading.common import stderr  # noqa: E402
from grading.radiotherapy import run_episode, split_seed  # noqa: E402
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, get_task  # noqa: E402
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv  # noqa: E402
from policies.radiotherapy.baselines import AnatomyAwarePolicy  # noqa: E402
from policies.radiotherapy.learned import CHECKPOINT_DIR  # noqa: E402
from policies.radiotherapy.options import save, site_key  # noqa: E402
from policies.radiotherapy.ranker import RankedSelectorPolicy, load_selector  # noqa: E402
from training.rt_edits import Statistics, label  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from rt_options import EVAL_SEED  # noqa: E402  (the trainer's validation eval_seed)


def train_seeds(seed: int, task: str, start: int, n: int) -> list[int]:
    """Training patients of ``task`` for training seed ``seed`` (its own stream, no validation/test one)."""
    return [split_seed(seed, task, f"train/edits/{seed}", i) for i in range(start, start + n)]


def selector_path(seed: int) -> Path:
    return CHECKPOINT_DIR / f"rt_option_selector_seed{seed}.npz"


@functools.cache
def site_of(task: str) -> tuple[int, ...]:
    observation, _ = RadiotherapyPlanningEnv(task, split="train").reset(seed=0)
    return site_key(observation)


def do_label(args: argparse.Namespace) -> None:
    selector = load_selector(selector_path(args.seed))
    stats = Statistics()
    log: dict[str, Any] = {"seed": args.seed, "patients": args.patients, "rounds": args.rounds, "tasks": {}}
    for task in args.tasks:
        start = time.process_time()
        first = train_seeds(args.seed, task, 0, args.patients)
        rows = {mode: label(selector, task, first, mode, stats) for mode in ("base", "oracle")}
        for r in range(1, args.rounds):
            ranker = stats.fit(args.ridge)
            seeds = train_seeds(args.seed, task, r * args.patients, args.patients)
            rows[f"ranked{r}"] = label(selector, task, seeds, "ranked", stats, ranker)
        log["tasks"][task] = {k: float(np.mean(v)) for k, v in rows.items()} | {
            "cpu_s": time.process_time() - start
        }
        print(task, {k: round(v, 4) for k, v in log["tasks"][task].items()}, flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    stats.save(Path(args.out))
    Path(args.out).with_suffix(".json").write_text(
        json.dumps(log | {"command": " ".join(sys.argv)}, indent=1)
    )


def validation_scores(policy: Any, task: str, episodes: int) -> np.ndarray:
    return np.array(
        [
            run_episode(
                policy, get_task(task), split_seed(EVAL_SEED, task, "validation", i), "validation"
            ).score
            for i in range(episodes)
        ]
    )


def do_sweep(args: argparse.Namespace) -> None:
    """Per site: the (ridge, tau) with the largest mean over the seeds of the validation gain over
    ``anatomy_aware`` (the sites' models are fitted apart, so this also maximises the worst task)."""
    base = {t: validation_scores(AnatomyAwarePolicy(), t, args.episodes) for t in BUILTIN_TASKS}
    grid: dict[str, Any] = {t: {} for t in BUILTIN_TASKS}
    seeds: list[int] = []
    for part in args.merge:  # sweeps of other seeds (run in parallel), same grid and patients
        earlier = json.loads(Path(part).read_text())
        if earlier["episodes"] != args.episodes or set(earlier["seeds"]) & set(args.seeds):
            raise ValueError(f"{part}: another episode count, or seeds swept twice")
        seeds += earlier["seeds"]
        for task in BUILTIN_TASKS:
            for key, gains in earlier["grid"][task].items():
                grid[task].setdefault(key, []).extend(gains)
    for seed in args.seeds:
        stats = Statistics.load([args.stats.format(seed=seed)])
        selector = load_selector(selector_path(seed))
        for task in BUILTIN_TASKS:  # no ranker on this site: the selector's variant as it is
            gain = validation_scores(selector, task, args.episodes) - base[task]
            grid[task].setdefault("off", []).append(float(gain.mean()))
        for ridge in args.ridges:
            ranker = stats.fit(ridge)
            for tau, task in itertools.product(args.taus, BUILTIN_TASKS):
                taus = {site_of(task): tau}
                policy = RankedSelectorPolicy(
                    selector.family, selector.selector, ranker.with_taus(taus), decide_at=selector.decide_at
                )
                gain = validation_scores(policy, task, args.episodes) - base[task]
                grid[task].setdefault(f"{ridge}/{tau}", []).append(float(gain.mean()))
        print("seed", seed, "done", flush=True)
    seeds += args.seeds
    config: dict[str, Any] = {"episodes": args.episodes, "eval_seed": EVAL_SEED, "seeds": seeds, "grid": grid}
    config["chosen"] = {}
    for task in BUILTIN_TASKS:
        key = max(grid[task], key=lambda k: np.mean(grid[task][k]))
        ridge, tau = (None, None) if key == "off" else (float(v) for v in key.split("/"))
        config["chosen"][task] = {
            "site": list(site_of(task)),
            "ridge": ridge,  # None: no ranker on this site
            "tau": tau,
            "gain": float(np.mean(grid[task][key])),
            "gain_se_over_seeds": stderr(grid[task][key]),
        }
        print(task, config["chosen"][task], flush=True)
    config["command"] = " ".join(sys.argv)
    Path(args.out).write_text(json.dumps(config, indent=1) + "\n")


def do_save(args: argparse.Namespace) -> None:
    config = json.loads(Path(args.config).read_text())
    chosen = config["chosen"]
    stats = Statistics.load(args.stats)
    sites = {tuple(c["site"]): c for c in chosen.values() if c["ridge"] is not None}
    for group in [g for g in stats.sums if g[0] not in sites]:  # sites without a ranker
        del stats.sums[group]
    ranker = stats.fit({k: c["ridge"] for k, c in sites.items()}).with_taus(
        {k: c["tau"] for k, c in sites.items()}
    )
    source = selector_path(args.seed)
    selector = load_selector(source)
    meta = json.loads(source.with_suffix(".json").read_text())
    meta = {k: v for k, v in meta.items() if k not in ("options", "selector", "shipped")}
    meta |= {
        "name": "ranked_selector",
        "ranker": {
            "selector_checkpoint": source.name,
            "training_seed": args.seed,
            "labels": [str(p) for p in args.stats],
            "config": chosen,
            "command": " ".join(sys.argv),
        },
    }
    save(Path(args.out), selector.family, selector.selector, meta, extra=ranker.arrays())  # type: ignore[arg-type]
    print("saved", args.out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("label", help="simulate trials on training patients; save the fit's statistics")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--patients", type=int, default=400, help="per task and round")
    p.add_argument("--rounds", type=int, default=3, help="1: base + oracle; each further: the ranker so far")
    p.add_argument("--ridge", type=float, default=1.0, help="the ridge of the rounds' intermediate rankers")
    p.add_argument("--tasks", nargs="+", default=list(BUILTIN_TASKS))
    p.add_argument("--out", required=True)
    p = sub.add_parser("sweep", help="choose ridge and tau per site on validation patients")
    p.add_argument("--stats", required=True, help="a path with {seed}")
    p.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    p.add_argument("--merge", nargs="*", default=[], help="earlier sweeps' JSON (other seeds) to combine")
    p.add_argument("--ridges", type=float, nargs="+", default=[0.01, 0.03, 0.1, 0.3])
    p.add_argument("--taus", type=float, nargs="+", default=[-1.0, 0.05, 0.1, 0.15, 0.2, 0.3])
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--out", required=True)
    p = sub.add_parser("save", help="a ranked_selector checkpoint of one training seed")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--stats", nargs="+", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    args = parser.parse_args()
    {"label": do_label, "sweep": do_sweep, "save": do_save}[args.command](args)


if __name__ == "__main__":
    main()
