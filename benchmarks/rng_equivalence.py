"""Statistical equivalence of two ways of drawing the day's random numbers (SPEC §10).

A deliberate change to how random numbers are drawn cannot reproduce the old
trajectories bit for bit; what must hold is that the *distribution* of every
end-of-episode metric and counter is the same. This script plays N episodes per
built-in scenario (episode seeds from :func:`grading.common.episode_seed`, the
grader's own) with the heuristic and the masked-random policies, and records the
mean and standard error of every metric and counter.

    python benchmarks/rng_equivalence.py --write docs/rng/reference.json   # the scheme to compare with
    python benchmarks/rng_equivalence.py --compare docs/rng/reference.json --write docs/rng/counter.json

``--compare`` prints, for every (policy, scenario, quantity), the difference of the
means in units of their combined standard error, z = (a - b) / sqrt(se_a² + se_b²),
and the largest |z|. Under equivalence each z is roughly standard normal, so over
the ~300 quantities compared a few |z| near 3 are expected by chance (the largest
of 300 normals exceeds 3 about half the time); the check fails only if some
|z| > 4.5, or if more than 5 % of them exceed 2 (a true shift of one standard
error moves most of a metric's family together).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from grading.common import episode_seed, mean, stderr
from grading.grader import run_flat_episode
from hospital_marl import BUILTIN_SCENARIOS
from hospital_marl.core.scenarios import get_scenario
from policies.baselines import MaskedRandomPolicy
from policies.heuristic import HeuristicPolicy

POLICIES = {"heuristic": HeuristicPolicy, "masked_random": MaskedRandomPolicy}
BASE_SEED = 20_261_201
Z_MAX, Z2_SHARE = 4.5, 0.05


def measure(episodes: int) -> dict[str, Any]:
    out: dict[str, Any] = {"episodes": episodes, "base_seed": BASE_SEED, "results": {}}
    for name, make in POLICIES.items():
        for scenario in BUILTIN_SCENARIOS:
            rows: dict[str, list[float]] = {}
            for i in range(episodes):
                seed = episode_seed(BASE_SEED, scenario, i)
                result = run_flat_episode(make(), get_scenario(scenario), seed)
                values = {"score": result.score, **result.metrics, **result.counts}
                for key, value in values.items():
                    rows.setdefault(key, []).append(float(value))
            out["results"][f"{name}/{scenario}"] = {
                key: {"mean": mean(v), "se": stderr(v)} for key, v in sorted(rows.items())
            }
    return out


def compare(new: dict[str, Any], old: dict[str, Any]) -> tuple[bool, list[str]]:
    lines, zs = [], []
    for case, quantities in old["results"].items():
        for key, a in quantities.items():
            b = new["results"][case][key]
            se = math.hypot(a["se"], b["se"])
            z = (b["mean"] - a["mean"]) / se if se else (0.0 if a["mean"] == b["mean"] else math.inf)
            zs.append(abs(z))
            flag = " <--" if abs(z) > 2 else ""
            old_new = f"{a['mean']:10.4f} ± {a['se']:.4f}  {b['mean']:10.4f} ± {b['se']:.4f}"
            lines.append(f"{case:34s} {key:28s} {old_new}  z={z:+.2f}{flag}")
    share = sum(z > 2 for z in zs) / len(zs)
    ok = max(zs) <= Z_MAX and share <= Z2_SHARE
    lines.append(
        f"{len(zs)} quantities; max |z| = {max(zs):.2f} (limit {Z_MAX}); "
        f"|z| > 2: {share:.1%} (limit {Z2_SHARE:.0%}) -> {'EQUIVALENT' if ok else 'DIFFERENT'}"
    )
    return ok, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--write", type=Path, help="write the means and standard errors here (JSON)")
    parser.add_argument("--compare", type=Path, help="a JSON written earlier to compare with")
    args = parser.parse_args(argv)
    start = time.process_time()
    result = measure(args.episodes)
    print(
        f"{args.episodes} episodes x {len(BUILTIN_SCENARIOS)} scenarios x {len(POLICIES)} policies "
        f"in {time.process_time() - start:.0f} s CPU"
    )
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.write}")
    if args.compare:
        ok, lines = compare(result, json.loads(args.compare.read_text()))
        print("\n".join(lines))
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
