"""CPU cost of the fast MAPPO actors per update minibatch (issue 40): the three roles' 64x64 tanh MLP
actors against the entity actors (training.fast.entity) at two widths, one forward + backward of a
4,096-row minibatch each, one thread, in the same run (so the ratio holds on a loaded box).

    python benchmarks/entity_actor_cost.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping

import torch

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from training.fast.args import ROLE_DIMS
from training.fast.common import mlp
from training.fast.entity import EntityActor


def cost(actors: Mapping[str, torch.nn.Module], repeats: int) -> float:
    """Mean CPU seconds of one forward + backward of every role's actor on 4,096 rows."""
    xs = {role: torch.rand(4096, ROLE_DIMS[role]) for role in ROLES}
    started = time.process_time()
    for _ in range(repeats):
        sum(actors[role](xs[role]).logsumexp(1).mean() for role in ROLES).backward()
    return (time.process_time() - started) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    a = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    mlps = {r: mlp([ROLE_DIMS[r], 64, 64, ROLE_ACTION_COUNTS[r]], 0.01) for r in ROLES}
    out = {"mlp_64x64": cost(mlps, a.repeats)}
    for width in (32, 64):
        out[f"entity_{width}"] = cost({r: EntityActor(r, width) for r in ROLES}, a.repeats)
    ratios = {f"{k}_over_mlp": round(v / out["mlp_64x64"], 1) for k, v in out.items()}
    print(json.dumps({k: round(v, 4) for k, v in out.items()} | ratios))


if __name__ == "__main__":
    main()
