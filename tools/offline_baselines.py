"""Offline baselines (issue #46, item 2): Tianshou's behaviour cloning, discrete BCQ, CQL and CRR
trained on behaviour datasets of every scenario and graded on held-out days (the grader, seed 0),
masks respected.

For each scenario, dataset and method (a spec, e.g. ``cql:alpha=0.1``: training/offline/learners.py),
``--seeds`` training seeds; each trained policy is graded on the same held-out days as its behaviour
policy, and the table gives the score (mean over seeds ± standard error over seeds,
:func:`grading.stats.run_stderr`) and the paired margin over the behaviour
(:func:`grading.stats.paired_margin`). "Beats its behaviour" means the margin exceeds twice its
standard error (the same days for both, seeds as the replication unit).

    python tools/offline_baselines.py --dir /tmp/hm_full --steps 1000 --seeds 3 \
        --grade-episodes 10 --out docs/offline/baselines.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from offline_common import Output, dataset, graded, learner, parser, setup

DATASETS = ("masked_random", "fifo_severity")
RULE = "beats = paired margin over the behaviour on the same held-out days > 2 s.e. (over seeds)"


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--steps", type=int, default=1000, help="gradient updates per training run")
    cli.add_argument("--seeds", type=int, default=3)
    cli.add_argument("--grade-episodes", type=int, default=10)
    cli.add_argument("--methods", default="bc,bcq,cql", help="';'- or ','-separated method specs")
    cli.add_argument("--datasets", default=";".join(DATASETS), help="';'-separated behaviours")
    args = cli.parse_args()
    setup(args)
    from grading.stats import paired_margin, run_stderr
    from training.offline.behaviours import BehaviourPolicy, parse_behaviour

    header = {"episodes": args.episodes, "use_episodes": args.use_episodes, "steps": args.steps,
              "grade_episodes": args.grade_episodes, "rule": RULE}  # fmt: skip
    out = Output(args, header)
    methods = args.methods.split(";") if ";" in args.methods else args.methods.split(",")
    for s in args.scenarios.split(","):
        for spec in args.datasets.split(";"):
            name, tr = dataset(spec, s, args.episodes, args.use_episodes)
            ref = graded(BehaviourPolicy(parse_behaviour(spec)), s, args.grade_episodes)
            if not out.have(dataset=name, method="behaviour"):
                out.add({"scenario": s, "dataset": name, "behaviour": spec, "method": "behaviour",
                         "score": ref["score"], "stderr": ref["stderr"],
                         "return": ref["return"]})  # fmt: skip
            for method in methods:
                if out.have(dataset=name, method=method):
                    continue
                runs = [graded(learner(method, tr, args.steps, seed), s, args.grade_episodes)
                        for seed in range(args.seeds)]  # fmt: skip
                per_seed = [{s: run["episode_scores"]} for run in runs]
                margin, margin_se = paired_margin(per_seed, {s: ref["episode_scores"]}, s)
                scores = [sum(run["episode_scores"]) / len(run["episode_scores"]) for run in runs]
                out.add({
                    "scenario": s, "dataset": name, "behaviour": spec, "method": method,
                    "score": sum(scores) / len(scores), "stderr": run_stderr(per_seed, s),
                    "margin": margin, "margin_stderr": margin_se,
                    "beats_behaviour": bool(margin > 2 * margin_se), "seeds": args.seeds,
                    "seed_scores": scores, "seed_returns": [run["return"] for run in runs],
                })  # fmt: skip
    out.write()


if __name__ == "__main__":
    main()
