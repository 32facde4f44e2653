"""Ray RLlib for hospital_marl (the ``rllib`` extra): multi-agent PPO, one masked module per role.

- :mod:`policies.rllib.env`: the AEC env as an RLlib ``MultiAgentEnv`` (RLlib's
  ``PettingZooEnv``), registered as ``"hospital_marl_aec"``;
- :mod:`policies.rllib.module`: :class:`MaskedRoleModule`, a TorchRLModule that masks its logits
  with the observation's ``action_mask``;
- :mod:`policies.rllib.callbacks`: the masked-action audit;
- :mod:`policies.rllib.train` / :mod:`policies.rllib.cli`: ``hospital-marl train rllib``;
- :mod:`policies.rllib.policy`: :func:`load_rllib_policy`, a trained run as a team-track policy.

Importing this package is cheap (no ray, no torch): :func:`is_rllib_run` lets a
loader recognise a run directory before importing anything heavy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

METADATA_FILE = "rllib.json"
"""A run directory's metadata (what :func:`load_rllib_policy` reads)."""
CHECKPOINT_DIR = "checkpoint"
"""The algorithm checkpoint's directory inside a run directory."""


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


__all__ = ["CHECKPOINT_DIR", "METADATA_FILE", "is_rllib_run", "load_rllib_policy", "rllib_factories"]
