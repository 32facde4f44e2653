"""What tools/offline_baselines.py and tools/offline_ope.py share: their common arguments, the
scratch store of datasets (a behaviour's dataset recorded on first use, days from seed 1,000,000),
a trained learner as a graded policy, and the JSON they write after each row (with the command,
wall and CPU time, and an earlier run's rows when resumed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RECORD_SEED = 1_000_000
"""The recorded days start here; the grader's held-out days (seed 0) are not among them."""
SCENARIOS = ("normal_day", "surge", "mass_casualty", "night_shift", "ventilator_crisis", "train")


def parser(doc: str) -> argparse.ArgumentParser:
    """The arguments both scripts take: the store, the scenarios, the dataset size, the output."""
    out = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    out.add_argument("--dir", required=True, help="MINARI_DATASETS_PATH (missing datasets recorded)")
    out.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated (default: all, train)")
    out.add_argument("--episodes", type=int, default=100, help="episodes of a dataset recorded here")
    out.add_argument("--use-episodes", type=int, help="learn and estimate from the first N episodes only")
    out.add_argument("--resume", action="store_true", help="keep --out's rows, run the missing ones")
    out.add_argument("--out", required=True)
    return out


def setup(args: argparse.Namespace) -> None:
    """Point Minari at ``--dir`` and keep torch on one thread (the machine is shared)."""
    os.environ["MINARI_DATASETS_PATH"] = args.dir
    import torch

    torch.set_num_threads(1)


def dataset(spec: str, scenario: str, episodes: int, use: int | None = None) -> tuple[str, Any]:
    """The flat dataset of behaviour ``spec`` on ``scenario`` (recorded first if the store lacks it)
    and the :class:`~training.offline.datasets.Transitions` of its first ``use`` episodes (all: None)."""
    from minari.storage import get_dataset_path

    from training.offline import datasets as ds
    from training.offline.behaviours import parse_behaviour

    behaviour = parse_behaviour(spec)
    name = ds.dataset_id(scenario, "flat", behaviour)
    if not get_dataset_path(name).exists():
        ds.create(behaviour, scenario, episodes, RECORD_SEED, command="python " + " ".join(sys.argv))
    return name, ds.transitions(ds.load(name, scenario=scenario), use)


def graded(policy: Any, scenario: str, episodes: int) -> dict[str, Any]:
    """The grader's report of ``policy`` on ``scenario``'s held-out days (seed 0): score, its
    standard error, the per-episode scores and the mean episode return (the OPE ground truth)."""
    from grading import grade

    one = grade(policy, episodes=episodes, seed=0, scenarios=[scenario])["scenarios"][scenario]
    return {
        "score": one["score"],
        "stderr": one["score_stderr"],
        "episode_scores": one["episode_scores"],
        "return": one["mean_episode_reward"],
    }


def learner(method: str, tr: Any, steps: int, seed: int) -> Any:
    """A learner trained on ``tr`` as a flat-track package policy (masks respected)."""
    from training.offline.learners import OfflinePolicy, train

    return OfflinePolicy(train(method, tr, steps=steps, seed=seed), f"{method}_s{seed}", tr.keys)


class Output:
    """The JSON a script writes after each row (a run cut short keeps its rows): ``header``, the
    ``rows``, notes, the command, wall and CPU time (an earlier run's added when resumed)."""

    def __init__(self, args: argparse.Namespace, header: dict[str, Any]) -> None:
        self.path, self.header = Path(args.out), header
        self.rows: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        if args.resume and self.path.exists():
            earlier = json.loads(self.path.read_text())
            self.rows = earlier["rows"]
            self.notes = [*earlier.get("notes", []), f"rows before this run: {earlier['command']}"]
            self.wall -= earlier.get("wall_s", 0.0)
            self.cpu -= earlier.get("cpu_s", 0.0)

    def have(self, **keys: Any) -> bool:
        """Whether a row with these values is already there (a resumed run skips it)."""
        return any(all(row.get(k) == v for k, v in keys.items()) for row in self.rows)

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()
               if not isinstance(v, dict)}, flush=True)  # fmt: skip
        self.write()

    def write(self) -> None:
        out = {
            **self.header,
            "rows": self.rows,
            "notes": self.notes,
            "command": "python " + " ".join(sys.argv),
            "wall_s": time.perf_counter() - self.wall,
            "cpu_s": time.process_time() - self.cpu,
        }
        self.path.write_text(json.dumps(out, indent=1))
