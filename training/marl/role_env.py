"""Iterated best response's env: one role of the AEC env as a single-agent Gymnasium env."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from hospital_marl.core.scenarios import DEFAULT_SCENARIO
from hospital_marl.envs.aec import HospitalAECEnv
from policies.marl import OBS_CLIP, ROLE_SCALES, RoleAct, encode_role
from training.common import ScenarioCycler


class RoleEnv(gym.Env):
    """One role of the AEC env as a single-agent Gymnasium env; the other roles are frozen inside it.

    ``reset``/``step`` return the role's scaled observation (:func:`encode_role`);
    :meth:`action_masks` is its AEC mask (what sb3-contrib's MaskablePPO reads). A step plays
    the role's action, then the other roles' frozen policies until the role's next turn
    (the tick runs in between); the reward is the team reward the role received over that
    cycle (times ``reward_scale``). Scenarios switch every episode (env ``rank`` starts at
    scenario ``rank % n``).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        role: str,
        others: Mapping[str, RoleAct],
        scenarios: tuple[str, ...] = (DEFAULT_SCENARIO,),
        reward_scale: float = 1.0,
        rank: int = 0,
    ) -> None:
        super().__init__()
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        missing = set(ROLES) - {role} - set(others)
        if missing:
            raise ValueError(f"RoleEnv({role!r}) needs frozen policies for {sorted(missing)}")
        self.role, self.others = role, dict(others)
        self.scenarios, self.reward_scale = scenarios, reward_scale
        self.cycle = ScenarioCycler(scenarios, rank)
        self.aec = HospitalAECEnv(scenario=self.cycle.first)
        self.observation_space = spaces.Box(0.0, OBS_CLIP, (len(ROLE_SCALES[role]),), np.float32)
        self.action_space = spaces.Discrete(ROLE_ACTION_COUNTS[role])
        self._return = 0.0
        self._length = 0

    def action_masks(self) -> np.ndarray:
        return self.aec.action_mask(self.role).astype(bool)

    def _observe(self) -> np.ndarray:
        return encode_role(self.role, self.aec.observe(self.role)["observation"])

    def _done(self) -> tuple[bool, bool]:
        return self.aec.terminations[self.role], self.aec.truncations[self.role]

    def _play_others(self) -> float:
        """Frozen roles act until it is this role's turn again (or the episode ends); the reward accrued."""
        total = 0.0
        while self.aec.agent_selection != self.role and not any(self._done()):
            agent = self.aec.agent_selection
            obs = self.aec.observe(agent)
            self.aec.step(self.others[agent](obs["observation"], obs["action_mask"]))
            total += self.aec.rewards[self.role]
        return total

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.aec.reset(seed=seed, options={**(options or {}), "scenario": self.cycle()})
        self._return, self._length = 0.0, 0
        self._play_others()
        return self._observe(), {}

    def step(self, action: int):
        self.aec.step(int(action))
        reward = self.aec.rewards[self.role]
        if not any(self._done()):
            reward += self._play_others()
        terminated, truncated = self._done()
        self._return += reward
        self._length += 1
        info: dict[str, Any] = {}
        if terminated or truncated:
            info["episode"] = {"r": self._return, "l": self._length}
        return self._observe(), reward * self.reward_scale, terminated, truncated, info
