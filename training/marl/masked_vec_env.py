"""Parameter sharing's env as a class: :class:`MaskedParallelVecEnv`, a mask-aware SB3 ``VecEnv``
over parallel envs, one slot per role. Imports SB3 (the ``train`` extra): build it through
:func:`training.marl.vec_env.make_masked_parallel_vec_env`, which imports without it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv

from hospital_marl.core.actions import ROLES
from hospital_marl.core.scenarios import DEFAULT_SCENARIO
from hospital_marl.envs.parallel import HospitalParallelEnv
from policies.marl import MAX_ACTIONS, OBS_CLIP, SHARED_OBS, encode_shared, pad_mask
from training.common import ScenarioCycler


class MaskedParallelVecEnv(VecEnv):
    """Mask-aware SB3 ``VecEnv`` over ``n_envs`` parallel envs, 3 agent slots each (parameter sharing).

    SuperSuit's stable-baselines3 path (``pettingzoo_env_to_vec_env_v1`` +
    ``concat_vec_envs_v1``) flattens the agents into vector slots but drops the action
    masks (and the Dict observations that carry them), so sb3-contrib's MaskablePPO
    cannot mask. This VecEnv does the same slot layout -- slot ``3 * i + k`` is role
    ``ROLES[k]`` of parallel env ``i`` -- and keeps the masks:

    - observations: each role's scaled vector zero-padded to the largest role vector
      (``MAX_OBS``) plus a role one-hot (:func:`encode_shared`);
    - actions: ``Discrete(21)`` for every slot; a role's actions beyond its own count
      are padding and always masked (:func:`pad_mask`);
    - ``env_method("action_masks")`` returns one bool mask per slot (the parallel env's
      mask for that agent, padded), so ``sb3_contrib.common.maskable.utils.get_action_masks``
      and ``is_masking_supported`` (``has_attr("action_masks")``) work.

    Rewards are the team reward (every slot of an env gets it) times ``reward_scale``;
    an env resets itself when its episode ends (``terminal_observation`` in the slot's
    info, SB3 convention; ``episode`` with the raw return on the triage slot, so the
    Monitor-style buffer counts each episode once). Padding is done here rather than with
    SuperSuit's ``pad_observations_v0``/``pad_action_space_v0``, which pad the raw (unscaled)
    Dict observation and would also need the masks padded separately.
    """

    def __init__(
        self,
        n_envs: int,
        scenarios: tuple[str, ...] = (DEFAULT_SCENARIO,),
        reward_scale: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.envs = [HospitalParallelEnv(scenario=scenarios[i % len(scenarios)]) for i in range(n_envs)]
        self.scenarios = scenarios
        self.reward_scale = reward_scale
        self._cycles = [ScenarioCycler(scenarios, i) for i in range(n_envs)]
        self._base_seeds = [seed + 7919 * i for i in range(n_envs)]
        self._episode = [0] * n_envs
        self._masks = np.zeros((n_envs * len(ROLES), MAX_ACTIONS), bool)
        self._returns = np.zeros(n_envs)
        self._lengths = np.zeros(n_envs, int)
        self._actions: np.ndarray | None = None
        obs_space = spaces.Box(0.0, OBS_CLIP, (SHARED_OBS,), np.float32)
        super().__init__(n_envs * len(ROLES), obs_space, spaces.Discrete(MAX_ACTIONS))

    # -- helpers
    def _slots(self, i: int, observations: Mapping[str, Mapping[str, np.ndarray]]) -> np.ndarray:
        rows = []
        for k, role in enumerate(ROLES):
            rows.append(encode_shared(role, observations[role]["observation"]))
            self._masks[i * len(ROLES) + k] = pad_mask(observations[role]["action_mask"])
        return np.stack(rows)

    def _reset_env(self, i: int) -> np.ndarray:
        scenario = self._cycles[i]()
        episode_seed = self._base_seeds[i] + 100_003 * self._episode[i]
        self._episode[i] += 1
        observations, _ = self.envs[i].reset(seed=episode_seed, options={"scenario": scenario})
        self._returns[i], self._lengths[i] = 0.0, 0
        return self._slots(i, observations)

    # -- VecEnv API
    def reset(self) -> np.ndarray:
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return np.concatenate([self._reset_env(i) for i in range(len(self.envs))])

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(-1)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        assert self._actions is not None, "step_async first"
        n = len(ROLES)
        obs = np.zeros((self.num_envs, SHARED_OBS), np.float32)
        rewards = np.zeros(self.num_envs, np.float32)
        dones = np.zeros(self.num_envs, bool)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i in range(len(self.envs)):
            team, done, slots = self._step_env(
                i, self._actions[i * n : (i + 1) * n], infos[i * n : (i + 1) * n]
            )
            rewards[i * n : (i + 1) * n] = team * self.reward_scale
            dones[i * n : (i + 1) * n] = done
            obs[i * n : (i + 1) * n] = slots
        return obs, rewards, dones, infos

    def _step_env(
        self, i: int, actions: np.ndarray, infos: list[dict[str, Any]]
    ) -> tuple[float, bool, np.ndarray]:
        """Parallel env ``i`` one step: its team reward, whether its episode ended (then its slots'
        ``infos`` say how, and the env has been reset) and its slots' next observations."""
        observations, rew, term, trunc, _ = self.envs[i].step(
            {role: int(actions[k]) for k, role in enumerate(ROLES)}
        )
        team = float(rew[ROLES[0]])
        self._returns[i] += team
        self._lengths[i] += 1
        slots = self._slots(i, observations)
        done = bool(term[ROLES[0]] or trunc[ROLES[0]])
        if done:
            for k, info in enumerate(infos):
                info["terminal_observation"] = slots[k]
                info["TimeLimit.truncated"] = bool(trunc[ROLES[0]] and not term[ROLES[0]])
            infos[0]["episode"] = {"r": float(self._returns[i]), "l": int(self._lengths[i])}
            slots = self._reset_env(i)
        return team, done, slots

    def action_masks(self) -> np.ndarray:
        """(num_envs, 21) bool: each slot's mask, padded actions False."""
        return self._masks.copy()

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def _indices(self, indices: Any) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        return [indices] if isinstance(indices, int) else list(indices)

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        if attr_name == "action_masks":
            return [lambda j=j: self._masks[j].copy() for j in self._indices(indices)]
        if attr_name == "render_mode":
            return [None for _ in self._indices(indices)]
        return [getattr(self.envs[j // len(ROLES)], attr_name) for j in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        for j in self._indices(indices):
            setattr(self.envs[j // len(ROLES)], attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **kwargs: Any) -> list:
        if method_name == "action_masks":
            return [self._masks[j].copy() for j in self._indices(indices)]
        return [
            getattr(self.envs[j // len(ROLES)], method_name)(*method_args, **kwargs)
            for j in self._indices(indices)
        ]

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False for _ in self._indices(indices)]

    def has_attr(self, attr_name: str) -> bool:
        return attr_name == "action_masks" or hasattr(self.envs[0], attr_name)

    def seed(self, seed: int | None = None) -> list[None]:
        if seed is not None:
            self._base_seeds = [seed + 7919 * i for i in range(len(self.envs))]
            self._episode = [0] * len(self.envs)
        return [None for _ in range(self.num_envs)]
