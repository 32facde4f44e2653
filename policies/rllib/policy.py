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
from policies.marl import ROLE_ENCODINGS, MarlTeamPolicy, logits_role
from policies.rllib import CHECKPOINT_DIR, METADATA_FILE, module_dir, require_rllib


class ModuleLogits:
    """An RLlib role module's actor (:attr:`~policies.rllib.module.MaskedRoleModule.pi`) as a
    :class:`~policies.learned.Logits`: an encoded role observation -> its action logits (torch)."""

    def __init__(self, module: Any) -> None:
        import torch

        self.module = module.eval()
        self._torch = torch

    def __call__(self, features: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            x = torch.as_tensor(np.asarray(features, np.float32)).reshape(1, -1)
            return self.module.pi(x)[0].numpy()


class RLlibTeamPolicy(MarlTeamPolicy):
    """One RLlib module per role, played like every per-role policy (:func:`~policies.marl.logits_role`):
    the role's raw observation through the encoding the module was trained on (its
    ``model_config["encoding"]``), the actor's logits, the most probable action the mask allows.
    The mask the grader passes decides, so an action outside it is impossible."""

    name = "rllib"

    def __init__(self, modules: Mapping[str, Any], name: str | None = None) -> None:
        missing = [role for role in ROLES if role not in modules]
        if missing:
            raise ValueError(f"no module for role(s) {missing}; got {sorted(modules)}")
        self.modules = dict(modules)
        unknown = {m.encoding for m in self.modules.values()} - set(ROLE_ENCODINGS)
        if unknown:
            known = ", ".join(ROLE_ENCODINGS)
            raise ValueError(f"unknown observation encoding(s) {sorted(unknown)}; known: {known}")
        roles = {
            role: logits_role(role, ModuleLogits(module), ROLE_ENCODINGS[module.encoding])
            for role, module in self.modules.items()
        }
        super().__init__(roles, name=name)


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
