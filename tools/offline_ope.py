"""Off-policy evaluation against the grader's ground truth (issue #46, item 3): docs/offline.md's table.

For one scenario: records (or reuses) a dataset of each behaviour, estimates every target policy's
value from each dataset with PDIS, WPDIS, DR and FQE (training/offline/ope.py), grades every target
on held-out days (the grader, seed 0: days no dataset holds) and reports, per dataset and estimator,
the mean absolute error, Spearman's rank correlation and regret@1 over the targets.

The value compared is the undiscounted episode return (the env's summed reward), estimated by the
estimators and measured by the grader as the scenario's ``mean_episode_reward``: like with like
(the 0-100 score is another quantity; it is printed beside the return for reference only).

    python tools/offline_ope.py --dir /tmp/hm_datasets [--scenario surge] [--episodes 200] \
        [--truth-episodes 50] --out docs/offline/ope.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BEHAVIOURS = (
    "random",
    "masked_random",
    "fifo_severity:eps=0.3",
    "heuristic:eps=0.3",
    "mix:heuristic=0.5,random=0.5",
)
TARGETS = (
    "random",
    "masked_random",
    "greedy",
    "fifo_severity",
    "heuristic",
    "fifo_severity:eps=0.3",
    "heuristic:eps=0.3",
)
RECORD_SEED = 1_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="MINARI_DATASETS_PATH")
    parser.add_argument("--scenario", default="surge")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--truth-episodes", type=int, default=50)
    parser.add_argument("--fqe-iterations", type=int, default=150)
    parser.add_argument("--fqe-steps", type=int, default=40, help="gradient steps per FQE iteration")
    parser.add_argument("--behaviours", default=";".join(BEHAVIOURS), help="';'-separated behaviours")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.environ["MINARI_DATASETS_PATH"] = args.dir
    import minari  # noqa: F401
    import torch
    from minari.storage import get_dataset_path

    from grading import grade
    from training.offline import datasets as ds
    from training.offline.behaviours import BehaviourPolicy, parse_behaviour
    from training.offline.ope import ESTIMATORS, estimate, ope_metrics

    torch.set_num_threads(1)
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    truth, score = {}, {}
    for name in TARGETS:
        report = grade(BehaviourPolicy(parse_behaviour(name)), episodes=args.truth_episodes, seed=0,
                       scenarios=[args.scenario])  # fmt: skip
        one = report["scenarios"][args.scenario]
        truth[name], score[name] = one["mean_episode_reward"], one["score"]
        print(f"truth {name}: return {truth[name]:.1f}, score {score[name]:.2f}", flush=True)
    results = {}

    def write() -> dict:
        out = {
            "scenario": args.scenario,
            "episodes": args.episodes,
            "truth_episodes": args.truth_episodes,
            "fqe": {"iterations": args.fqe_iterations, "steps_per_iteration": args.fqe_steps},
            "value": "undiscounted episode return (grader: mean_episode_reward on held-out days, seed 0)",
            "truth": truth,
            "score": score,
            "results": results,
            "command": "python " + " ".join(sys.argv),
            "wall_s": time.perf_counter() - start_wall,
            "cpu_s": time.process_time() - start_cpu,
        }
        Path(args.out).write_text(json.dumps(out, indent=1))  # after each dataset: a cut run keeps them
        return out

    for spec in args.behaviours.split(";"):
        behaviour = parse_behaviour(spec)
        name = ds.dataset_id(args.scenario, "flat", behaviour)
        if not get_dataset_path(name).exists():
            ds.create(behaviour, args.scenario, args.episodes, RECORD_SEED, command=" ".join(sys.argv),
                      num_envs=256)  # fmt: skip
        tr = ds.transitions(ds.load(name, scenario=args.scenario))
        logged_return = float(np.bincount(tr.episode, tr.rewards).mean())
        estimates = {}
        for target in TARGETS:
            probs = parse_behaviour(target).probabilities
            estimates[target] = estimate(
                tr, probs, iterations=args.fqe_iterations, steps_per_iteration=args.fqe_steps
            )
            print(spec, target, {k: round(v, 1) for k, v in estimates[target].items()}, flush=True)
        metrics = {est: ope_metrics({t: estimates[t][est] for t in TARGETS}, truth) for est in ESTIMATORS}
        results[spec] = {"dataset": name, "logged_return": logged_return, "estimates": estimates,
                         "metrics": metrics}  # fmt: skip
        out = write()
    print(markdown(out))


def markdown(out: dict) -> str:
    lines = [
        "| dataset (behaviour) | estimator | mean abs. error | Spearman | regret@1 |",
        "|---|---|---|---|---|",
    ]
    for spec, res in out["results"].items():
        for est, m in res["metrics"].items():
            lines.append(
                f"| {spec} | {est} | {m['abs_error']:.1f} | {m['spearman']:.2f} | {m['regret_at_1']:.1f} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
