"""The parallel view: the three roles act at once, resolved in role order.

Native rather than ``aec_to_parallel``: in the AEC env each role sees the
previous role's move, so it is not parallelizable. Here all three choose
from the same observation; an action that was valid on the mask its role
saw but was made impossible by an earlier role's action is a *conflict*
(a no-op, counted, no penalty). An action invalid on the mask it saw is
invalid (-1, counted). A live agent missing from the action dict no-ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pettingzoo import ParallelEnv

from hospital_marl.core.actions import ROLES
from hospital_marl.core.clinical import ClinicalParams
from hospital_marl.core.generator import DayGenerator
from hospital_marl.core.rewards import RewardTable
from hospital_marl.core.scenarios import Scenario, ScenarioDistribution
from hospital_marl.envs import _common
from hospital_marl.envs.infos import NOOP, OUTCOME_NAMES
from hospital_marl.envs.render import RENDER_MODES


def resolve_joint_action(env_hospital: Any, actions: dict[str, Any], masks_seen: dict[str, Any]) -> dict:
    """Carry out one action per role in role order; conflicts are free, invalid actions cost -1."""
    outcomes = {}
    for role in ROLES:
        action = actions.get(role, 0)
        try:
            seen_valid = bool(masks_seen[role][int(action)]) if not isinstance(action, bool) else False
        except (TypeError, ValueError, IndexError, OverflowError):
            seen_valid = False
        outcomes[role] = env_hospital.act(role, action, valid_when_chosen=seen_valid).value
    return outcomes


_CODE = {name: code for code, name in enumerate(OUTCOME_NAMES)}


class HospitalParallelEnv(_common.RoleViewMixin, ParallelEnv):
    """Emergency department, three roles acting simultaneously each tick.

    Same spaces, rewards, arguments and episode end as
    :class:`~hospital_marl.envs.aec.HospitalAECEnv`; ``infos[role]["outcome"]``
    says whether each action was done, a no-op, invalid or a conflict (a code of
    :data:`hospital_marl.envs.infos.OUTCOME_NAMES`; the same four integer keys from ``reset()`` on).
    """

    metadata = {"name": "hospital_marl_parallel_v0", "render_modes": list(RENDER_MODES), "render_fps": 10}

    def __init__(
        self,
        scenario: str | Scenario | ScenarioDistribution | None = None,
        render_mode: str | None = None,
        reward_mode: str = "team",
        max_cycles: int | None = None,
        clinical: ClinicalParams | None = None,
        rewards: RewardTable | None = None,
        day_generator: DayGenerator | None = None,
        *,
        observation_format: str = "dict",
        end_info: bool = False,
        observation_layout: str | None = None,
    ) -> None:
        self._init_role_view(
            scenario,
            render_mode,
            reward_mode,
            max_cycles,
            clinical,
            rewards,
            day_generator,
            observation_format,
            end_info,
            observation_layout,
        )
        self._masks_seen: dict[str, np.ndarray] = {}

    def _observations(self, agents: list[str]) -> dict[str, Any]:
        observations = self._builder.roles(agents)  # first: builds the state's mask with it
        self._masks_seen = {role: self.hospital.role_mask_array(role) for role in ROLES}
        if self.observation_format != "dict" or self._masked:
            return {role: self._format(role, observations[role], self._masks_seen[role]) for role in agents}
        return {
            role: {"observation": observations[role], "action_mask": self._masks_seen[role].copy()}
            for role in agents
        }

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        _common.switch_scenario(self.hospital, options)
        self.hospital.reset(self._seeder(seed))
        self.agents = list(self.possible_agents)
        if self.render_mode == "human":
            self.render()
        infos = {a: {"tick": 0, "invalid_actions": 0, "conflicts": 0, "outcome": NOOP} for a in self.agents}
        return self._observations(self.agents), infos

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise RuntimeError("the episode has ended; call reset()")
        h = self.hospital
        outcomes = resolve_joint_action(h, actions, self._masks_seen)
        result = h.tick()
        agents = list(self.agents)
        if self.reward_mode == "role":
            rewards = {a: result.role_rewards[a] for a in agents}
        else:
            rewards = {a: result.reward for a in agents}
        terminations = {a: result.terminated for a in agents}
        truncations = {a: result.truncated for a in agents}
        c = h.counters
        infos: dict[str, dict[str, Any]] = {
            a: {
                "tick": h.tick_count,
                "outcome": _CODE[outcomes[a]],
                "invalid_actions": c.invalid_actions,
                "conflicts": c.conflicts,
            }
            for a in agents
        }
        observations = self._observations(agents)
        if result.terminated or result.truncated:
            end = self._end_info()
            for a in agents:
                infos[a].update(end)
            self.agents = []
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminations, truncations, infos

    def render(self) -> Any:
        return _common.render(self.hospital, self.render_mode)

    def close(self) -> None:
        pass


def parallel_env(**kwargs: Any) -> HospitalParallelEnv:
    """The native parallel env (see module docstring for conflict resolution)."""
    return HospitalParallelEnv(**kwargs)
