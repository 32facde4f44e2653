"""Per-role learners on the shared team reward: ``hospital-marl train marl`` (:mod:`training.marl.trainer`).

- :mod:`training.marl.role_env`: :class:`RoleEnv`, one role as a single-agent env (iterated best response);
- :mod:`training.marl.vec_env`: the mask-aware VecEnv of parameter sharing;
- :mod:`training.marl.trainer`: the arguments, both trainers, the run directory.

The trained run plays through :func:`policies.marl.load_marl_policy` (below this package).
"""

from training.marl.role_env import RoleEnv
from training.marl.trainer import Args, train
from training.marl.vec_env import make_masked_parallel_vec_env

__all__ = ["Args", "RoleEnv", "make_masked_parallel_vec_env", "train"]
