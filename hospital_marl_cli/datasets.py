"""``datasets create`` / ``datasets list``: Minari datasets of the hospital (training/offline/).

Recording is the training layer's (:mod:`training.offline.datasets`); grading each behaviour on
held-out days (the grader's days, seed 0 by default, never the recorded ones) is done here, at
the top layer, and written into the dataset's metadata.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from typing import Any

from hospital_marl_cli.common import CLIError, console, nonnegative_int, positive_int

FLAT_DEFAULT = (
    "random",
    "masked_random",
    "greedy",
    "fifo_severity",
    "heuristic",
    "heuristic:eps=0.3",
    "fifo_severity:eps=0.3",
    "mix:heuristic=0.5,random=0.5",
    "planner",
)
TEAM_DEFAULT = ("random", "masked_random", "team_heuristic", "team_heuristic:eps=0.3")
DEFAULT_SCENARIOS = ("normal_day", "surge", "mass_casualty", "night_shift", "ventilator_crisis", "train")
RECORD_SEED = 1_000_000
"""The recorded days' base seed: episode i of a dataset starts from ``reset(seed=RECORD_SEED + i)``
(the grader's held-out days derive from ``(0, scenario, i)`` by hashing, a different family)."""


def grade_behaviour(policy: Any, scenario: str, track: str, episodes: int, seed: int) -> dict[str, Any]:
    """The behaviour's grade on held-out days: the package's score and the mean episode return."""
    from grading import grade

    report = grade(policy, episodes=episodes, seed=seed, scenarios=[scenario], track=track)
    one = report["scenarios"][scenario]
    return {
        "score": one["score"],
        "score_stderr": one["score_stderr"],
        "mean_episode_reward": one["mean_episode_reward"],
        "episodes": episodes,
        "seed": seed,
    }


def cmd_create(args: Any) -> int:
    from training.offline import datasets as ds
    from training.offline.behaviours import BehaviourPolicy, parse_behaviour

    if args.dir:
        os.environ["MINARI_DATASETS_PATH"] = str(args.dir)
    import minari  # noqa: F401  (after MINARI_DATASETS_PATH is set)
    from minari.storage import get_dataset_path

    out = console(stderr=True)
    command = "hospital-marl " + shlex.join(sys.argv[1:] if args.command_line is None else args.command_line)
    tracks = ["flat", "team"] if args.track == "both" else [args.track]
    made = []
    for track in tracks:
        specs = args.behaviour or (FLAT_DEFAULT if track == "flat" else TEAM_DEFAULT)
        for spec in specs:
            policy = None
            if spec == "planner" and track == "flat":
                import policies

                behaviour: Any = "planner"
                policy = policies.load("planner")
                graded_policy = policy
                episodes = min(args.episodes, args.planner_episodes)
            else:
                try:
                    behaviour = parse_behaviour(spec, track)
                except ValueError as exc:
                    raise CLIError(str(exc)) from None
                graded_policy = BehaviourPolicy(behaviour)
                episodes = args.episodes
            for scenario in args.scenario or DEFAULT_SCENARIOS:
                name = ds.dataset_id(scenario, track, behaviour, args.version)
                path = get_dataset_path(name)
                if path.exists():
                    if not args.force:
                        raise CLIError(f"dataset {name} exists at {path} (--force replaces it)")
                    shutil.rmtree(path)
                graded = None
                if args.grade_episodes:
                    graded = grade_behaviour(
                        graded_policy, scenario, track, args.grade_episodes, args.grade_seed
                    )
                try:
                    dataset, rec = ds.create(
                        behaviour,
                        scenario,
                        episodes,
                        args.seed,
                        graded_score=graded["score"] if graded else None,
                        graded=graded,
                        command=command,
                        num_envs=args.num_envs,
                        version=args.version,
                        policy=policy,
                    )
                except ValueError as exc:
                    raise CLIError(str(exc)) from None
                size = ds.data_file(dataset).stat().st_size
                row = {
                    "id": name,
                    "episodes": rec.episodes.__len__(),
                    "steps": rec.steps,
                    "record_seconds": round(rec.seconds, 3),
                    "env_steps_per_second": round(rec.env_steps / rec.seconds),
                    "bytes": size,
                    "graded_score": graded["score"] if graded else None,
                }
                made.append(row)
                if not args.quiet:
                    out.print(f"{name}: {rec.steps} steps, {size / 1e6:.1f} MB, score {row['graded_score']}")
    if args.json:
        print(json.dumps(made, indent=1))
    return 0


def cmd_list(args: Any) -> int:
    if args.dir:
        os.environ["MINARI_DATASETS_PATH"] = str(args.dir)
    import minari

    from training.offline.datasets import META_KEY, NAMESPACE

    rows = []
    for name, meta in sorted(minari.list_local_datasets().items()):
        if not name.startswith(NAMESPACE + "/"):
            continue
        ours = meta.get(META_KEY, {})
        rows.append(
            {
                "id": name,
                "behaviour": ours.get("behaviour"),
                "scenario": ours.get("scenario"),
                "track": ours.get("track"),
                "episodes": meta.get("total_episodes"),
                "steps": meta.get("total_steps"),
                "graded_score": ours.get("graded_score"),
                "package_version": ours.get("package_version"),
            }
        )
    print(json.dumps(rows, indent=1))
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("datasets", help="offline RL: record and list Minari datasets of the hospital")
    dsub = p.add_subparsers(dest="datasets_command", required=True, metavar="ACTION")
    c = dsub.add_parser(
        "create",
        help="record Minari datasets locally (nothing is downloaded) from graded behaviours",
        description="Record datasets hospital_marl/<scenario>-<track>-<behaviour>-v<N> under "
        "MINARI_DATASETS_PATH (or ~/.minari/datasets; --dir sets it). Each behaviour is graded "
        "on held-out days first (--grade-episodes per scenario; 0 skips) and its score is stored.",
    )
    c.add_argument(
        "--behaviour",
        action="append",
        help="rule, rule:eps=E or mix:rule=w,...; rules: random, masked_random, greedy, fifo_severity, "
        "heuristic (flat), team_heuristic (team); 'planner' (flat, played episode by episode). "
        "Repeatable; default: a set of each track",
    )
    c.add_argument(
        "--scenario",
        action="append",
        help="a scenario or the 'train' split; repeatable (default: all + train)",
    )
    c.add_argument("--track", choices=("flat", "team", "both"), default="flat")
    c.add_argument("--episodes", type=positive_int, default=100, help="episodes per dataset (default 100)")
    c.add_argument(
        "--planner-episodes", type=positive_int, default=20, help="at most this many for the planner (slow)"
    )
    c.add_argument("--seed", type=nonnegative_int, default=RECORD_SEED, help="the recorded days' base seed")
    c.add_argument("--grade-episodes", type=nonnegative_int, default=10, help="grader episodes (0: skip)")
    c.add_argument("--grade-seed", type=nonnegative_int, default=0, help="the grader's seed (held-out days)")
    c.add_argument("--num-envs", type=positive_int, default=256, help="batched envs while recording")
    c.add_argument("--version", type=nonnegative_int, default=0, help="the id's -vN")
    c.add_argument("--dir", help="where datasets live (sets MINARI_DATASETS_PATH)")
    c.add_argument("--force", action="store_true", help="replace a dataset of the same id")
    c.add_argument("--json", action="store_true", help="print what was made (JSON) on stdout")
    c.set_defaults(func=cmd_create, command_line=None)
    lst = dsub.add_parser("list", help="the hospital_marl datasets found locally (JSON)")
    lst.add_argument("--dir", help="where datasets live (sets MINARI_DATASETS_PATH)")
    lst.set_defaults(func=cmd_list)
