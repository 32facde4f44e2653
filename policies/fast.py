"""Team-track policies trained by the fast trainer (``hospital-marl train fast-mappo``: MAPPO, IPPO).

A run directory holds ``fast.json`` (``format: hospital_marl.fast/1``: algorithm, the ONNX actor of
each role for the best validation evaluation and for the end of training, the curve's rows, wall and
CPU time, args, command) and the actors (``best/<role>.onnx``, ``final/<role>.onnx``: the role's
observation encoded by :func:`policies.marl.encode_role` -> logits). :func:`load_fast_policy` plays
them with onnxruntime (no torch) as a :class:`~policies.marl.MarlTeamPolicy`: each role takes the most
probable action its mask allows, exactly as BenchMARL-trained teams play (:mod:`policies.benchmarl`).
A ``--recurrent`` run's actors take and return their GRU state too (``recurrent: true`` and
``hidden_size`` in ``fast.json``): :class:`RecurrentTeamPolicy` carries each role's state from one of
its decisions to the next.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hospital_marl.core.actions import ROLES
from hospital_marl.core.hospital import Hospital
from policies.base import BasePolicy
from policies.benchmarl import onnx_role
from policies.learned import OnnxRecurrentLogits, best_action
from policies.marl import MarlTeamPolicy, encode_role, has_run_format
from policies.protocol import as_trained

FORMAT = "hospital_marl.fast/1"
METADATA_FILE = "fast.json"


RecurrentStep = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""A recurrent actor: (encoded role observation, hidden state) -> (logits, next hidden state)."""


class RecurrentTeamPolicy(BasePolicy):
    """Recurrent actors (``--recurrent``) as a team-track policy: each role's hidden state is carried
    from one of its decisions to the next (one per tick, as in training) and zeroed by :meth:`reset`,
    at every episode's start. Deterministic: the most probable action the mask allows. The same class
    plays the exported actors (:class:`~policies.learned.OnnxRecurrentLogits`) and, while training,
    the torch ones (:func:`training.fast.mappo.team_policy`)."""

    tracks: tuple[str, ...] = ("team",)

    def __init__(
        self, steps: Mapping[str, RecurrentStep], hidden_size: int, name: str = "fast_recurrent"
    ) -> None:
        super().__init__()
        self.steps, self.hidden_size, self.name = dict(steps), hidden_size, name
        self.metadata: dict[str, Any] = {}
        self.hidden = self._zeros()

    def _zeros(self) -> dict[str, np.ndarray]:
        return {role: np.zeros(self.hidden_size, np.float32) for role in ROLES}

    def reset(self, seed: int | None = None, hospital: Hospital | Any = None) -> None:
        super().reset(seed=seed, hospital=hospital)
        self.hidden = self._zeros()

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        logits, self.hidden[role] = self.steps[role](
            encode_role(role, np.asarray(observation)), self.hidden[role]
        )
        return best_action(logits, np.asarray(action_mask))


def is_fast_run(path: str | Path) -> bool:
    """True for a ``hospital-marl train fast-mappo`` run directory."""
    return has_run_format(path, METADATA_FILE, FORMAT)


def load_fast_policy(path: str | Path, name: str | None = None, which: str = "best") -> Any:
    """A fast-trainer run directory as a team-track policy: the actors of the best validation
    evaluation (checkpoint selection, the default) or those at the end of training (``which="final"``),
    played on the team protocol the run was trained on (``"protocol"`` in ``fast.json``; a run that
    records none was trained on the simultaneous one): :func:`policies.protocol.as_trained`."""
    run_dir = Path(path)
    if not is_fast_run(run_dir):
        raise FileNotFoundError(
            f"{run_dir} is not a `hospital-marl train fast-mappo` run (no {METADATA_FILE})"
        )
    meta = json.loads((run_dir / METADATA_FILE).read_text())
    if not meta["actors"] and meta.get("export", "").startswith("torch"):
        raise FileNotFoundError(
            f"{run_dir}: a --recurrent run from before recurrent actors were exported to ONNX: its "
            "actors are only in best.pt / final.pt (training.fast.mappo.team_policy plays them with torch)"
        )
    if which not in meta["actors"]:
        raise FileNotFoundError(
            f"{run_dir}: this run has no {which} actors (it keeps {', '.join(meta['actors'])})"
        )
    actors = meta["actors"][which]
    missing = [role for role in ROLES if not (run_dir / actors[role]).is_file()]
    if missing:
        raise FileNotFoundError(f"{run_dir}: no actor file for {', '.join(missing)}")
    policy: MarlTeamPolicy | RecurrentTeamPolicy
    if meta.get("recurrent"):
        steps = {role: OnnxRecurrentLogits(run_dir / actors[role]) for role in ROLES}
        policy = RecurrentTeamPolicy(steps, int(meta["hidden_size"]), name=name or meta["name"])
    else:
        policy = MarlTeamPolicy(
            {role: onnx_role(role, run_dir / actors[role]) for role in ROLES}, name=name or meta["name"]
        )
    policy.metadata = meta
    return as_trained(policy, meta.get("protocol"))


__all__ = ["FORMAT", "METADATA_FILE", "RecurrentTeamPolicy", "is_fast_run", "load_fast_policy"]
