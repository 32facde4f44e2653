"""Cache the FMO reference (hospital_marl/radiotherapy/core/fmo.py) for the scoreboard's patients.

    python tools/rt_fmo.py [--episodes 10] [--splits test_id test_ood]

One L-BFGS-B solve per patient (seconds to a minute each), so the results are kept in
``docs/data/rt_fmo.json`` keyed ``task/split/seed/digest`` (the grader's episode seeds, seed 42, and
the first 16 hex digits of the patient's :func:`phantom_digest`, so a change of the splits' patients
is a cache miss, never another patient's FMO): ``tools/rt_scoreboard.py`` reads them and solves only
the patients that are missing.
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
from hospital_marl.radiotherapy.core.phantoms import phantom_digest  # noqa: E402
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS  # noqa: E402
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv  # noqa: E402

CACHE = ROOT / "docs" / "data" / "rt_fmo.json"


def load_cache() -> dict[str, dict]:
    return json.loads(CACHE.read_text()) if CACHE.exists() else {}


def fmo_scores(episodes: int, splits: list[str], seed: int = 42, verbose: bool = True) -> dict[str, dict]:
    """Every (task, split, episode) of the scoreboard solved, keyed ``task/split/seed`` (the cache's
    entries for other patients under the same seed, left by earlier splits, are dropped)."""
    cache = load_cache()
    out = {}
    for split in splits:
        for task in BUILTIN_TASKS:
            env = RadiotherapyPlanningEnv(task, split=split)
            for i in range(episodes):
                episode = split_seed(seed, task, split, i)
                env.reset(seed=episode)
                if env.plan.phantom is None:
                    raise RuntimeError("reset drew no patient")
                base = f"{task}/{split}/{episode}"
                key = f"{base}/{phantom_digest(env.plan.phantom).hex()[:16]}"
                if key not in cache:
                    started = time.process_time()
                    result = asdict(optimise_fluence(env.plan))
                    result["cpu_s"] = round(time.process_time() - started, 1)
                    stale = [k for k in cache if k == base or k.startswith(base + "/")]
                    for k in stale:
                        del cache[k]
                    cache[key] = result
                    CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
                    if verbose:
                        print(key, round(result["score"], 3), result["cpu_s"], flush=True)
                out[base] = cache[key] | {"patient": key.rsplit("/", 1)[1]}
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--splits", nargs="+", default=["test_id", "test_ood"])
    args = parser.parse_args()
    fmo_scores(args.episodes, args.splits)
