"""Stable-Baselines3 ``VecEnv`` over the natively batched envs (needs the ``train`` extra).

``MaskablePPO("MultiInputPolicy", HospitalSB3VecEnv(num_envs=B))`` trains on B
environments stepped by one kernel call per step (no per-env Python loop): SB3's
``env_method("action_masks")`` returns the ``(B, 39)`` (team: ``(B, 41)``) mask block,
which sb3-contrib stacks as it is. Episode ends follow SB3's conventions:
``infos[i]["terminal_observation"]``, ``"TimeLimit.truncated"``, plus the finished
episode's ``metrics``, ``counters`` and ``score``. Wrap it in ``VecMonitor`` for
episode returns in the logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvWrapper

from hospital_marl.envs.vector import HospitalEDTeamVectorEnv, HospitalEDVectorEnv


class HospitalSB3VecEnv(VecEnv):
    """SB3's VecEnv API on :class:`HospitalEDVectorEnv` (``team=True``: the team vector env)."""

    def __init__(
        self,
        num_envs: int = 1,
        scenario: Any = None,
        *,
        team: bool = False,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        cls = HospitalEDTeamVectorEnv if team else HospitalEDVectorEnv
        self.venv = cls(num_envs, scenario, **kwargs)
        super().__init__(num_envs, self.venv.single_observation_space, self.venv.single_action_space)
        self._seed = seed
        self._actions: np.ndarray | None = None

    # ------------------------------------------------------------- stepping
    def reset(self) -> dict[str, np.ndarray]:
        obs, _ = self.venv.reset(seed=self._seed)
        self._seed = None  # SB3 seeds once (seed()), later resets continue the sequence
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self):
        obs, rewards, terminated, truncated, info = self.venv.step(self._actions)
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if dones.any():
            final = info["final_info"]
            for e in np.flatnonzero(dones).tolist():
                infos[e] = {
                    "terminal_observation": info["final_obs"][e],
                    "TimeLimit.truncated": bool(truncated[e] and not terminated[e]),
                    "metrics": {k: float(v[e]) for k, v in final["metrics"].items() if not k.startswith("_")},
                    "score": float(final["score"][e]),
                }
        return obs, rewards.astype(np.float32), dones, infos

    def action_masks(self) -> np.ndarray:
        return self.venv.action_masks()

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        self._seed = seed
        return [None if seed is None else seed + i for i in range(self.num_envs)]

    def close(self) -> None:
        self.venv.close()

    # ------------------------------------------------------- env attributes
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        value = getattr(self, attr_name) if attr_name == "action_masks" else getattr(self.venv, attr_name)
        return [value] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise AttributeError("the batched hospital envs share one configuration: make a new one instead")

    def env_method(self, method_name: str, *args: Any, indices: VecEnvIndices = None, **kwargs: Any) -> Any:
        if method_name == "action_masks":
            masks = self.action_masks()
            return masks if indices is None else masks[list(self._indices(indices))]
        result = getattr(self.venv, method_name)(*args, **kwargs)
        return [result] * len(self._indices(indices))

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def _indices(self, indices: VecEnvIndices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, int):
            return [indices]
        return list(indices)


class VecMaskFromObservation(VecEnvWrapper):
    """sb3-contrib's ``action_masks()`` read from the observations themselves: ``obs[:, mask_slice] > 0``.

    Why: SuperSuit's vector envs (``pettingzoo_env_to_vec_env_v1`` + ``concat_vec_envs_v1``)
    carry only arrays, so the per-role masks of the PettingZoo env cannot reach MaskablePPO
    as methods; in ``observation_format="padded_flat"`` every role's mask sits at the same
    slice of its observation (``env.mask_slice(role)``), which survives SuperSuit's padding and
    ``agent_indicator_v0`` (appended after it). This wrapper hands that slice to MaskablePPO::

        env = hospital_marl.parallel_env(observation_format="padded_flat")
        mask = env.mask_slice("triage")  # the same for every role
        venv = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(ss.agent_indicator_v0(env)),
                                     4, base_class="stable_baselines3")
        MaskablePPO("MlpPolicy", VecMaskFromObservation(venv, mask)).learn(...)
    """

    def __init__(self, venv: VecEnv, mask_slice: slice) -> None:
        super().__init__(venv)
        self.mask_slice = mask_slice
        self._obs: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        obs = self.venv.reset()
        assert isinstance(obs, np.ndarray)  # the flat (Box) observation the mask is sliced from
        self._obs = obs
        return obs

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        self._obs = obs
        return obs, rewards, dones, infos

    def action_masks(self) -> np.ndarray:
        """``(num_envs, n)`` bool: the mask part of the latest observations."""
        if self._obs is None:
            raise RuntimeError("call reset() before action_masks()")
        return np.asarray(self._obs)[:, self.mask_slice] > 0

    def has_attr(self, attr_name: str) -> bool:
        """sb3-contrib asks this to decide whether to mask (answered here: SuperSuit's vector
        envs do not implement it)."""
        return attr_name == "action_masks" or self.venv.has_attr(attr_name)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        if attr_name == "action_masks":
            return [self.action_masks] * len(list(self._get_indices(indices)))
        return self.venv.get_attr(attr_name, indices)

    def env_method(self, method_name: str, *args: Any, indices: VecEnvIndices = None, **kwargs: Any) -> Any:
        if method_name == "action_masks":
            return list(self.action_masks()[list(self._get_indices(indices))])
        return self.venv.env_method(method_name, *args, indices=indices, **kwargs)
