"""The tiny radiotherapy training run the trainer tests share (a few hundred steps, one eval)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from training.radiotherapy import Args

TINY_RT: dict[str, Any] = dict(
    timesteps=256, n_envs=2, n_steps=128, batch_size=64, n_epochs=1, eval_freq=10**6, eval_episodes=1
)
"""Two rollouts of two envs, one epoch, graded only at the start and the end."""


def tiny_rt_args(save: Path, **options: Any) -> Args:
    """:data:`TINY_RT` saved under ``save``, with ``options`` (seed, warm start, residual ...)."""
    return Args(**(TINY_RT | {"save": str(save)} | options))
