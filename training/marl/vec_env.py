"""Parameter sharing's env: a mask-aware SB3 ``VecEnv`` over parallel envs, one slot per role."""

from __future__ import annotations

from typing import Any

from hospital_marl.core.scenarios import DEFAULT_SCENARIO


def make_masked_parallel_vec_env(
    n_envs: int, scenarios: tuple[str, ...] = (DEFAULT_SCENARIO,), reward_scale: float = 1.0, seed: int = 0
) -> Any:
    """A :class:`~training.marl.masked_vec_env.MaskedParallelVecEnv` (imported here so that this
    module, and :mod:`training.marl`, import without SB3)."""
    from training.marl.masked_vec_env import MaskedParallelVecEnv

    return MaskedParallelVecEnv(n_envs, scenarios, reward_scale, seed)
