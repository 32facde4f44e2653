"""A small Optuna search over the fast MAPPO trainer's options that issue #40's diagnosis points at.

Objective of a trial: the mean, over ``--seeds`` training seeds, of the validation score (the
grader, team track, validation seed 1000, ``--eval-episodes`` days per scenario: never the held-out
days) of MAPPO on the AEC protocol after ``--frames`` frames. Searched: the discount and GAE
horizon (``gamma``, ``gae_lambda``: the ICU actions' value arrives many ticks later), the entropy
bonus over actions and over action types (``--type-entropy``: keeps rare valid types alive),
return normalisation (``--norm-reward``), the learning rate and the actor (``--actor``: the MLP over
the whole observation, or the entity actor of :mod:`training.fast.entity`). The trainer's defaults are
enqueued as trial 0, so the study's best is measured against them on the same seeds.

Every trial's runs keep their behaviour diagnostic (``behaviour.jsonl``); ``--out`` gets the study
(each trial's parameters, per-seed scores, the last update's ICU-triage / step-down probabilities)
and its best configuration.

    python tools/fast_search.py --trials 6 --frames 1500000 --seeds 0 1 --out docs/fast/search_40.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import optuna

from grading import grade
from training.fast.args import MappoArgs
from training.fast.mappo import train

DEFAULTS = {"gamma": 0.97, "gae_lambda": 0.95, "entropy": 0.003, "type_entropy": 0.0, "norm_reward": False,
            "learning_rate": 3e-4, "actor": "mlp"}  # fmt: skip
"""The trainer's defaults (training.args / training.fast.args), enqueued as trial 0."""
WATCHED = ("icu_triage", "icu_discharge", "ventilate")


def _train(args: MappoArgs) -> Path:
    return train(args, grade)


def space(trial: optuna.Trial) -> dict[str, Any]:
    return {
        "gamma": trial.suggest_float("gamma", 0.96, 0.995),
        "gae_lambda": trial.suggest_float("gae_lambda", 0.9, 0.99),
        "entropy": trial.suggest_float("entropy", 1e-3, 3e-2, log=True),
        "type_entropy": trial.suggest_float("type_entropy", 0.0, 0.05),
        "norm_reward": trial.suggest_categorical("norm_reward", [False, True]),
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-3, log=True),
        "actor": trial.suggest_categorical("actor", ["mlp", "entity"]),
    }


def report(paths: list[str]) -> str:
    """The trials of one or more workers' ``--out`` files as one markdown table (best first)."""
    rows = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        rows += [{**t, "worker": data["sampler"].split(")")[0] + ")"} for t in data["trials"]]
    rows.sort(key=lambda r: -r["objective"])
    lines = [
        "| options (changed from the defaults) | seeds' validation scores | mean ± s.e. | "
        "p(ICU triage) at the end | p(step-down) at the end |",
        "|---|---|---:|---:|---:|",
    ]
    for r in rows:
        changed = {k: v for k, v in r["params"].items() if DEFAULTS.get(k) != v}
        options = ", ".join(
            f"`{k}` {v:.4g}" if isinstance(v, float) else f"`{k}` {v}" for k, v in changed.items()
        )
        scores = r["scores"]
        se = statistics.stdev(scores) / len(scores) ** 0.5 if len(scores) > 1 else 0.0
        ends = r["p_where_valid_at_end"]
        icu = ", ".join(f"{e['icu_triage']:.3f}" for e in ends)
        down = ", ".join(f"{e['icu_discharge']:.3f}" for e in ends)
        lines.append(
            f"| {options or '(defaults)'} | {', '.join(f'{x:.2f}' for x in scores)} | "
            f"{r['objective']:.2f} ± {se:.2f} | {icu} | {down} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", nargs="+", help="print the table of these --out files and stop")
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=None, help="stop starting trials after this many s")
    parser.add_argument("--frames", type=int, default=1_500_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--eval-episodes", type=int, default=4)
    parser.add_argument("--runs", default="runs/search_40")
    parser.add_argument("--out", default="docs/fast/search_40.json")
    parser.add_argument("--enqueue", default="", help="JSON list of extra configurations to try first")
    parser.add_argument("--parallel", action="store_true", help="train a trial's seeds in parallel processes")
    parser.add_argument("--sampler-seed", type=int, default=0)
    parser.add_argument(
        "--skip-defaults", action="store_true", help="a second worker: the first one tries the defaults"
    )
    a = parser.parse_args()
    if a.report:
        print(report(a.report))
        return
    runs, records = Path(a.runs), []

    def objective(trial: optuna.Trial) -> float:
        params = space(trial)
        scores, behaviour, started = [], [], time.time()
        every = [
            MappoArgs(
                algorithm="mappo",
                all_scenarios=True,
                frames=a.frames,
                seed=seed,
                eval_interval=a.frames,
                eval_episodes=a.eval_episodes,
                torch_threads=1,
                progress=False,
                save=str(runs / f"w{a.sampler_seed}_t{trial.number}_s{seed}"),
                **params,
            )
            for seed in a.seeds
        ]
        if a.parallel:  # one process per seed (each trains on one thread, as sequentially)
            with ProcessPoolExecutor(len(every), mp_context=multiprocessing.get_context("spawn")) as pool:
                done = list(pool.map(_train, every))
        else:
            done = [_train(args) for args in every]
        for run in done:
            meta = json.loads((run / "fast.json").read_text())
            scores.append(meta["final_eval"]["eval_score"])
            types = meta["behaviour"]["types"]
            behaviour.append(
                {k: types[k]["p_where_valid"] for k in ("icu_triage", "icu_discharge", "ventilate")}
            )
        value = sum(scores) / len(scores)
        records.append(
            {"trial": trial.number, "params": params, "scores": scores, "objective": value,
             "p_where_valid_at_end": behaviour, "wall_s": round(time.time() - started)}
        )  # fmt: skip
        write(study, records, a)
        return value

    sampler = optuna.samplers.TPESampler(seed=a.sampler_seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    if not a.skip_defaults:
        study.enqueue_trial(DEFAULTS)
    for extra in json.loads(a.enqueue or "[]"):
        study.enqueue_trial({**DEFAULTS, **extra})
    study.optimize(objective, n_trials=a.trials, timeout=a.timeout)
    write(study, records, a)


def write(study: optuna.Study, records: list[dict[str, Any]], a: argparse.Namespace) -> None:
    done = [r for r in records if r["objective"] is not None]
    flags = [
        f"--{k.replace('_', '-')} " + (" ".join(map(str, v)) if isinstance(v, list) else f"'{v}'")
        for k, v in vars(a).items()
        if v not in (None, "")
    ]
    best = max(done, key=lambda r: r["objective"]) if done else None
    out = {
        "command": "python tools/fast_search.py " + " ".join(flags),
        "objective": f"mean over seeds {a.seeds} of the validation score (seed 1000, {a.eval_episodes} days "
        f"per scenario, team track) after {a.frames:,} frames of MAPPO on the AEC protocol",
        "sampler": f"optuna TPESampler(seed={a.sampler_seed})"
        + ("" if a.skip_defaults else "; trial 0 = the trainer's defaults"),
        "optuna": optuna.__version__,
        "trials": records,
        "best": best,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
