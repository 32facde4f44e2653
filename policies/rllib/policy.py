"""RLlib-trained role modules as a team-track :class:`~policies.base.Policy`.

Loading needs no Ray cluster: each role's module is restored with
``RLModule.from_checkpoint`` from the algorithm checkpoint's module directory
(a pickled constructor -- class by reference, spaces, model config -- plus the
torch weights). ``ray.init`` is never called; ray[rllib] and torch must be
installed (the ``rllib`` extra), and this package (the module class lives in
:mod:`policies.rllib.module`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hospital_marl.core.actions import ROLES
from policies.base import BasePolicy
from policies.rllib import CHECKPOINT_DIR, METADATA_FILE, module_dir, require_rllib


class RLlibTeamPolicy(BasePolicy):
    """One RLlib module per role; deterministic: the most probable action the mask allows.

    The module already masks its logits; the argmax is taken over the mask the
    grader passes once more, so an action outside the mask is impossible even for
    a module trained without masking.
    """

    name = "rllib"
    tracks: tuple[str, ...] = ("team",)

    def __init__(self, modules: Mapping[str, Any], name: str | None = None) -> None:
        super().__init__()
        import torch

        missing = [role for role in ROLES if role not in modules]
        if missing:
            raise ValueError(f"no module for role(s) {missing}; got {sorted(modules)}")
        self.modules = dict(modules)
        for module in self.modules.values():
            module.eval()
        self._torch = torch
        self.metadata: dict[str, Any] = {}
        if name:
            self.name = name

    def logits(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> np.ndarray:
        """The role module's (masked) logits for one observation."""
        from ray.rllib.core.columns import Columns

        torch = self._torch
        batch = {
            Columns.OBS: {
                "observation": torch.as_tensor(np.asarray(observation, np.float32)).reshape(1, -1),
                "action_mask": torch.as_tensor(np.asarray(action_mask, np.int8)).reshape(1, -1),
            }
        }
        with torch.inference_mode():
            out = self.modules[role].forward_inference(batch)
        return out[Columns.ACTION_DIST_INPUTS][0].numpy()

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        logits = self.logits(role, observation, action_mask)
        return int(np.argmax(np.where(np.asarray(action_mask, dtype=bool), logits, -np.inf)))

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        raise NotImplementedError("rllib plays the team track (grade with track='team')")


def find_module_dirs(path: Path) -> dict[str, Path]:
    """Role -> module checkpoint directory, from a run directory (``rllib.json``), an
    algorithm checkpoint, or a MultiRLModule checkpoint (``.../rl_module``)."""
    meta_file = path / METADATA_FILE
    if meta_file.exists():
        meta = json.loads(meta_file.read_text())
        return {role: path / rel for role, rel in meta["modules"].items()}
    candidates = [path / CHECKPOINT_DIR, path]
    for base in candidates:
        if (base / "learner_group").is_dir():
            return {role: module_dir(base, role) for role in ROLES}
    if all((path / role).is_dir() for role in ROLES):
        return {role: path / role for role in ROLES}
    raise FileNotFoundError(
        f"{path} is not an RLlib run directory ({METADATA_FILE}), algorithm checkpoint (learner_group/) "
        f"or MultiRLModule checkpoint (one directory per role: {', '.join(ROLES)})"
    )


def load_rllib_policy(path: str | Path, name: str | None = None) -> RLlibTeamPolicy:
    """A team-track policy from ``hospital-marl train rllib``'s run directory (or a checkpoint in it)."""
    require_rllib()
    from ray.rllib.core.rl_module.rl_module import RLModule

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no RLlib run or checkpoint at {path}")
    dirs = find_module_dirs(path)
    for role, directory in dirs.items():
        if not directory.is_dir():
            raise FileNotFoundError(f"module checkpoint of role {role!r} missing: {directory}")
    modules = {role: RLModule.from_checkpoint(str(directory.resolve())) for role, directory in dirs.items()}
    policy = RLlibTeamPolicy(modules, name=name)
    meta_file = path / METADATA_FILE
    if meta_file.exists():
        policy.metadata = json.loads(meta_file.read_text())
    return policy
