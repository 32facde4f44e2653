"""Team-track policies trained by the fast trainer (``hospital-marl train fast-mappo``: MAPPO, IPPO).

A run directory holds ``fast.json`` (``format: hospital_marl.fast/1``: algorithm, the ONNX actor of
each role for the best validation evaluation and for the end of training, the curve's rows, wall and
CPU time, args, command) and the actors (``best/<role>.onnx``, ``final/<role>.onnx``: the role's
observation encoded by :func:`policies.marl.encode_role` -> logits). :func:`load_fast_policy` plays
them with onnxruntime (no torch) as a :class:`~policies.marl.MarlTeamPolicy`: each role takes the most
probable action its mask allows, exactly as BenchMARL-trained teams play (:mod:`policies.benchmarl`).
"""

from __future__ import annotations

import json
from pathlib import Path

from hospital_marl.core.actions import ROLES
from policies.benchmarl import onnx_role
from policies.marl import MarlTeamPolicy, has_run_format

FORMAT = "hospital_marl.fast/1"
METADATA_FILE = "fast.json"


def is_fast_run(path: str | Path) -> bool:
    """True for a ``hospital-marl train fast-mappo`` run directory."""
    return has_run_format(path, METADATA_FILE, FORMAT)


def load_fast_policy(path: str | Path, name: str | None = None, which: str = "best") -> MarlTeamPolicy:
    """A fast-trainer run directory as a team-track policy: the actors of the best validation
    evaluation (checkpoint selection, the default) or those at the end of training (``which="final"``)."""
    run_dir = Path(path)
    if not is_fast_run(run_dir):
        raise FileNotFoundError(
            f"{run_dir} is not a `hospital-marl train fast-mappo` run (no {METADATA_FILE})"
        )
    meta = json.loads((run_dir / METADATA_FILE).read_text())
    if which not in meta["actors"]:
        raise FileNotFoundError(
            f"{run_dir}: this run has no {which} actors (it keeps {', '.join(meta['actors'])})"
        )
    actors = meta["actors"][which]
    missing = [role for role in ROLES if not (run_dir / actors[role]).is_file()]
    if missing:
        raise FileNotFoundError(f"{run_dir}: no actor file for {', '.join(missing)}")
    policy = MarlTeamPolicy(
        {role: onnx_role(role, run_dir / actors[role]) for role in ROLES}, name=name or meta["name"]
    )
    policy.metadata = meta
    return policy


__all__ = ["FORMAT", "METADATA_FILE", "is_fast_run", "load_fast_policy"]
