"""Team-track policies trained with BenchMARL (``hospital-marl train benchmarl``: MAPPO, IPPO, QMIX, VDN).

A run directory holds ``benchmarl.json`` (``format: hospital_marl.benchmarl/1``: algorithm,
the ONNX actor of each role for the best validation evaluation and for the end of
training, the learning curve's last row, args, command) and the actors themselves
(``best/<role>.onnx``, ``final/<role>.onnx``, with ``--warm-start`` ``clone/<role>.onnx``: encoded
role observation -> action logits, or
action values for QMIX / VDN; the
runs committed under ``policies/checkpoints/marl/benchmarl/`` keep ``best/`` only).
:func:`load_benchmarl_policy` plays them with onnxruntime -- no torch, TorchRL or
BenchMARL needed to grade or play a trained team -- as a :class:`~policies.marl.MarlTeamPolicy`:
each role takes the most probable action its mask allows (BenchMARL's deterministic
evaluation of a masked categorical policy), or for QMIX / VDN the highest-valued one (TorchRL's
``QValueModule`` greedy masked argmax: the same rule on the Q-network's output).
"""

from __future__ import annotations

import json
from pathlib import Path

from hospital_marl.core.actions import ROLES
from policies.learned import OnnxLogits
from policies.marl import MarlTeamPolicy, RoleAct, has_run_format, logits_role

FORMAT = "hospital_marl.benchmarl/1"
METADATA_FILE = "benchmarl.json"
ALGORITHMS = ("mappo", "ippo", "qmix", "vdn")
OFF_POLICY = ("qmix", "vdn")
"""The Q-learning algorithms: off-policy collection, their actors output action values."""


def is_benchmarl_run(path: str | Path) -> bool:
    """True for a ``hospital-marl train benchmarl`` run directory."""
    return has_run_format(path, METADATA_FILE, FORMAT)


def onnx_role(role: str, path: str | Path) -> RoleAct:
    """A role's exported actor as a frozen role policy (raw observation, mask) -> action."""
    return logits_role(role, OnnxLogits(path))


def load_benchmarl_policy(
    path: str | Path, name: str | None = None, final: bool = False, which: str | None = None
) -> MarlTeamPolicy:
    """A ``train benchmarl`` run directory as a team-track policy: the actors of the best
    validation evaluation (checkpoint selection), or those at the end of training (``final=True``),
    or any other set the run lists (``which="clone"``: a warm start's cloned actors, before PPO)."""
    run_dir = Path(path)
    if not is_benchmarl_run(run_dir):
        raise FileNotFoundError(
            f"{run_dir} is not a `hospital-marl train benchmarl` run (no {METADATA_FILE})"
        )
    meta = json.loads((run_dir / METADATA_FILE).read_text())
    which = which or ("final" if final else "best")
    if which not in meta["actors"]:  # published runs keep only the best-validation actors
        kept = ", ".join(meta["actors"])
        raise FileNotFoundError(f"{run_dir}: this run has no {which} actors (it keeps {kept})")
    actors = meta["actors"][which]
    missing = [role for role in ROLES if not (run_dir / actors[role]).is_file()]
    if missing:
        raise FileNotFoundError(f"{run_dir}: no actor file for {', '.join(missing)}")
    roles = {role: onnx_role(role, run_dir / actors[role]) for role in ROLES}
    policy = MarlTeamPolicy(roles, name=name or meta.get("name"))
    policy.metadata = meta
    return policy


__all__ = ["ALGORITHMS", "FORMAT", "METADATA_FILE", "is_benchmarl_run", "load_benchmarl_policy", "onnx_role"]
