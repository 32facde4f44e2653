"""Offline baselines (issue #46, item 2): Tianshou's behaviour cloning, discrete BCQ and discrete CQL
trained on behaviour datasets and graded on held-out days (the grader, seed 0), masks respected.

For each dataset and method, ``--seeds`` training seeds; each trained policy is graded on the same
held-out days as its behaviour policy, and the table gives the score (mean over seeds ± standard
error over seeds, :func:`grading.stats.run_stderr`) and the paired margin over the behaviour
(:func:`grading.stats.paired_margin`). "Beats its behaviour" means the margin exceeds twice its
standard error (the same days for both, seeds as the replication unit).

    python tools/offline_baselines.py --dir /tmp/hm_datasets --scenario surge --episodes 100 \
        --steps 2000 --seeds 3 --grade-episodes 10 --out docs/offline/baselines.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATASETS = ("masked_random", "fifo_severity", "heuristic:eps=0.3")
RULE = "beats = paired margin over the behaviour on the same held-out days > 2 s.e. (over seeds)"
RECORD_SEED = 1_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="MINARI_DATASETS_PATH")
    parser.add_argument("--scenario", default="surge")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--grade-episodes", type=int, default=10)
    parser.add_argument("--methods", default="bc,bcq,cql")
    parser.add_argument("--datasets", default=";".join(DATASETS), help="';'-separated behaviours")
    parser.add_argument("--resume", action="store_true", help="keep --out's rows, run the missing ones")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.environ["MINARI_DATASETS_PATH"] = args.dir
    import torch
    from minari.storage import get_dataset_path

    from grading import grade
    from grading.stats import paired_margin, run_stderr
    from training.offline import datasets as ds
    from training.offline.behaviours import BehaviourPolicy, parse_behaviour
    from training.offline.learners import OfflinePolicy, train

    torch.set_num_threads(1)
    wall, cpu = time.perf_counter(), time.process_time()
    s = args.scenario
    rows: list[dict] = []
    notes: list[str] = []
    if args.resume and Path(args.out).exists():
        earlier = json.loads(Path(args.out).read_text())
        rows = earlier["rows"]
        notes = [*earlier.get("notes", []), f"rows before this run: {earlier['command']}"]
    have = {(r["dataset"], r["method"]) for r in rows}

    def write() -> None:
        out = {
            "scenario": s,
            "episodes": args.episodes,
            "steps": args.steps,
            "grade_episodes": args.grade_episodes,
            "rule": RULE,
            "rows": rows,
            "notes": notes,
            "command": "python " + " ".join(sys.argv),
            "wall_s": time.perf_counter() - wall,
            "cpu_s": time.process_time() - cpu,
        }
        Path(args.out).write_text(json.dumps(out, indent=1))  # after each row: a cut run keeps them

    for spec in args.datasets.split(";"):
        behaviour = parse_behaviour(spec)
        name = ds.dataset_id(s, "flat", behaviour)
        if not get_dataset_path(name).exists():
            ds.create(behaviour, s, args.episodes, RECORD_SEED, command=" ".join(sys.argv))
        tr = ds.transitions(ds.load(name, scenario=s))
        ref = grade(BehaviourPolicy(behaviour), episodes=args.grade_episodes, seed=0, scenarios=[s])
        ref_scores = {s: ref["scenarios"][s]["episode_scores"]}
        if (name, "behaviour") not in have:
            rows.append({"dataset": name, "method": "behaviour", "score": ref["overall_score"],
                         "stderr": ref["scenarios"][s]["score_stderr"]})  # fmt: skip
            print(rows[-1], flush=True)
        for method in args.methods.split(","):
            if (name, method) in have:
                continue
            runs = []
            for seed in range(args.seeds):
                scores = train(method, tr, steps=args.steps, seed=seed)
                learned = OfflinePolicy(scores, f"{method}_s{seed}")
                report = grade(learned, episodes=args.grade_episodes, seed=0, scenarios=[s])
                runs.append({s: report["scenarios"][s]["episode_scores"]})
            margin, margin_se = paired_margin(runs, ref_scores, s)
            mean = sum(sum(r[s]) / len(r[s]) for r in runs) / len(runs)
            rows.append({
                "dataset": name, "method": method, "score": mean, "stderr": run_stderr(runs, s),
                "margin": margin, "margin_stderr": margin_se, "beats_behaviour": margin > 2 * margin_se,
                "seeds": args.seeds,
            })  # fmt: skip
            print(rows[-1], flush=True)
            write()
    write()


if __name__ == "__main__":
    main()
