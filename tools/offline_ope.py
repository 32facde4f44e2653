"""Off-policy evaluation against the grader's ground truth (issue #46, item 3): docs/offline.md's table.

For each scenario: reuses (or records) a dataset of each behaviour, estimates every target policy's
value from each dataset with PDIS, WPDIS, DR and FQE (training/offline/ope.py), grades every target
on held-out days (the grader, seed 0: days no dataset holds) and reports, per dataset and estimator,
the mean absolute error, Spearman's rank correlation and regret@1 over the targets.

The targets are the shipped rules and mixtures and offline learners (``--learners``: ``method@behaviour``,
trained, seed 0, on that behaviour's dataset of the same scenario; their action probabilities are
one-hot on the best action the mask allows), each with its ground truth from the grader.

The value compared is the undiscounted episode return (the env's summed reward), estimated by the
estimators and measured by the grader as the scenario's ``mean_episode_reward``: like with like
(the 0-100 score is another quantity; it is kept beside the return for reference only).

    python tools/offline_ope.py --dir /tmp/hm_full --truth-episodes 10 --fqe-iterations 110 \
        --fqe-steps 8 --out docs/offline/ope.json
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from offline_common import Output, dataset, graded, learner, parser, setup

BEHAVIOURS = ("masked_random", "heuristic:eps=0.3", "mix:heuristic=0.5,random=0.5")
TARGETS = (
    "random",
    "masked_random",
    "greedy",
    "fifo_severity",
    "heuristic",
    "fifo_severity:eps=0.3",
    "heuristic:eps=0.3",
)
LEARNERS = ("bc@fifo_severity", "cql@masked_random", "bcq@heuristic:eps=0.3")
VALUE = "undiscounted episode return (grader: mean_episode_reward on held-out days, seed 0)"


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--truth-episodes", type=int, default=10)
    cli.add_argument("--fqe-iterations", type=int, default=110)
    cli.add_argument("--fqe-steps", type=int, default=8, help="gradient steps per FQE iteration")
    cli.add_argument("--behaviours", default=";".join(BEHAVIOURS), help="';'-separated behaviours")
    cli.add_argument("--learners", default=";".join(LEARNERS), help="';'-separated method@behaviour")
    cli.add_argument("--learner-steps", type=int, default=1000)
    args = cli.parse_args()
    setup(args)
    from training.offline.behaviours import BehaviourPolicy, parse_behaviour
    from training.offline.ope import ESTIMATORS, estimate, ope_metrics

    header = {
        "episodes": args.episodes,
        "use_episodes": args.use_episodes,
        "truth_episodes": args.truth_episodes,
        "fqe": {"iterations": args.fqe_iterations, "steps_per_iteration": args.fqe_steps},
        "learner_steps": args.learner_steps,
        "value": VALUE,
    }
    out = Output(args, header)
    for s in args.scenarios.split(","):
        targets: dict[str, Any] = {t: BehaviourPolicy(parse_behaviour(t)) for t in TARGETS}
        for item in filter(None, args.learners.split(";")):
            method, _, behaviour = item.partition("@")
            targets[item] = learner(
                method, dataset(behaviour, s, args.episodes, args.use_episodes)[1], args.learner_steps, 0
            )
        truth = {}
        for name, policy in targets.items():
            truth[name] = graded(policy, s, args.truth_episodes)
            print(s, f"truth {name}: return {truth[name]['return']:.1f}, score {truth[name]['score']:.2f}")
        for spec in args.behaviours.split(";"):
            if out.have(scenario=s, behaviour=spec):
                continue
            name, tr = dataset(spec, s, args.episodes, args.use_episodes)
            estimates = {}
            for target, policy in targets.items():
                # a shipped rule or mixture: its behaviour's probabilities; a learner: one-hot
                shipped = isinstance(policy, BehaviourPolicy)
                probs = policy.behaviour.probabilities if shipped else policy.probabilities
                estimates[target] = estimate(
                    tr, probs, iterations=args.fqe_iterations, steps_per_iteration=args.fqe_steps
                )
                print(s, spec, target, {k: round(v, 1) for k, v in estimates[target].items()}, flush=True)
            true_return = {t: truth[t]["return"] for t in targets}
            metrics = {e: ope_metrics({t: estimates[t][e] for t in targets}, true_return) for e in ESTIMATORS}
            out.add({
                "scenario": s, "behaviour": spec, "dataset": name,
                "logged_return": float(np.bincount(tr.episode, tr.rewards).mean()),
                "truth": true_return, "score": {t: truth[t]["score"] for t in targets},
                "estimates": estimates, "metrics": metrics,
            })  # fmt: skip
    out.write()


if __name__ == "__main__":
    main()
