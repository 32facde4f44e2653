"""Cache the FMO reference (hospital_marl/radiotherapy/core/fmo.py) for the scoreboard's patients.

    python tools/rt_fmo.py [--episodes 10] [--splits test_id test_ood]

One L-BFGS-B solve per patient (seconds to a minute each), so the results are kept in
``docs/data/rt_fmo.json`` keyed ``task/split/seed`` (the grader's episode seeds, seed 42):
``tools/rt_scoreboard.py`` reads them and solves only the patients that are missing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading.radiotherapy import split_seed  # noqa: E402
from hospital_marl.radiotherapy.core.fmo import optimise_fluence  # noqa: E402
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS  # noqa: E402
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv  # noqa: E402

CACHE = ROOT / "docs" / "data" / "rt_fmo.json"


def load_cache() -> dict[str, dict]:
    return json.loads(CACHE.read_text()) if CACHE.exists() else {}


def fmo_scores(episodes: int, splits: list[str], seed: int = 42, verbose: bool = True) -> dict[str, dict]:
    """The cache, with every (task, split, episode) of the scoreboard solved."""
    cache = load_cache()
    for split in splits:
        for task in BUILTIN_TASKS:
            env = RadiotherapyPlanningEnv(task, split=split)
            for i in range(episodes):
                episode = split_seed(seed, task, split, i)
                key = f"{task}/{split}/{episode}"
                if key in cache:
                    continue
                env.reset(seed=episode)
                started = time.process_time()
                result = asdict(optimise_fluence(env.plan))
                result["cpu_s"] = round(time.process_time() - started, 1)
                cache[key] = result
                CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
                if verbose:
                    print(key, round(result["score"], 3), result["cpu_s"], flush=True)
    return cache


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--splits", nargs="+", default=["test_id", "test_ood"])
    args = parser.parse_args()
    fmo_scores(args.episodes, args.splits)
