"""Ray RLlib for hospital_marl (the ``rllib`` extra): multi-agent PPO, one masked module per role.

- :mod:`policies.rllib.module`: :class:`MaskedRoleModule`, a TorchRLModule that masks its logits
  with the observation's ``action_mask`` (checkpoints refer to it by import path);
- :mod:`policies.rllib.policy`: :func:`load_rllib_policy`, a trained run as a team-track policy.

Training lives above grading, in :mod:`training.rllib` (the env, the masked-action audit,
``hospital-marl train rllib``).

Importing this package is cheap (no ray, no torch): :func:`is_rllib_run` lets a
loader recognise a run directory before importing anything heavy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

INSTALL_HINT = 'pip install -e ".[rllib]" -c constraints/cpu.txt (from a clone of the repository)'
METADATA_FILE = "rllib.json"
"""A run directory's metadata (what :func:`load_rllib_policy` reads)."""
CHECKPOINT_DIR = "checkpoint"
"""The algorithm checkpoint's directory inside a run directory."""


def module_dir(checkpoint: Path, role: str) -> Path:
    """Where an algorithm checkpoint keeps the learner's module of one role."""
    return checkpoint / "learner_group" / "learner" / "rl_module" / role


def require_rllib() -> None:
    """Raise a clear ImportError when ray[rllib] / torch (the ``rllib`` extra) are missing."""
    try:
        import ray.rllib  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"RLlib needs ray[rllib] and torch ({exc.name} is missing): {INSTALL_HINT}"
        ) from exc


def is_rllib_run(path: str | Path) -> bool:
    """True for a ``hospital-marl train rllib`` run directory or an RLlib algorithm checkpoint."""
    path = Path(path)
    return path.is_dir() and (
        (path / METADATA_FILE).is_file()
        or (path / "learner_group").is_dir()
        or (path / CHECKPOINT_DIR / "learner_group").is_dir()
    )


def load_rllib_policy(path: str | Path, name: str | None = None) -> Any:
    """See :func:`policies.rllib.policy.load_rllib_policy` (imported on call: it needs ray and torch)."""
    from policies.rllib.policy import load_rllib_policy as load

    return load(path, name=name)


def rllib_factories() -> dict[str, Any]:
    """Registry entries: ``"rllib"`` loads a run given its path (``policies.load("rllib:path=RUN_DIR")``)."""

    def rllib(path: str | None = None, name: str | None = None) -> Any:
        if path is None:
            raise ValueError("the rllib policy needs its run directory: 'rllib:path=RUN_DIR'")
        return load_rllib_policy(path, name=name)

    return {"rllib": rllib}


__all__ = [
    "CHECKPOINT_DIR",
    "METADATA_FILE",
    "is_rllib_run",
    "load_rllib_policy",
    "module_dir",
    "require_rllib",
    "rllib_factories",
]
