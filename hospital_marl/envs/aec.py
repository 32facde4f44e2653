"""The AEC view: three roles take turns, then the tick runs."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers
from pettingzoo.utils.env import AECIterable
from pettingzoo.utils.env_logger import EnvLogger
from pettingzoo.utils.wrappers.order_enforcing import AECOrderEnforcingIterable, AECOrderEnforcingIterator

from hospital_marl.core.actions import ROLES
from hospital_marl.core.clinical import ClinicalParams
from hospital_marl.core.generator import DayGenerator
from hospital_marl.core.hospital import OUTCOMES
from hospital_marl.core.rewards import RewardTable
from hospital_marl.core.scenarios import Scenario, ScenarioDistribution
from hospital_marl.envs import _common
from hospital_marl.envs.infos import NOOP
from hospital_marl.envs.render import RENDER_MODES

_CODE_OF = {outcome: code for code, outcome in enumerate(OUTCOMES)}


class HospitalAECEnv(_common.RoleViewMixin, AECEnv):
    """Emergency department, one decision per role per tick.

    Description:
        ``triage`` admits waiting patients to general or ICU beds, ``bed_manager``
        transfers, steps down and discharges, ``ventilator_officer`` puts free
        ventilators on ICU patients. Each role's action is carried out at once
        (the next role sees its effect), and after ``ventilator_officer`` the
        tick runs: treatment, deterioration and deaths, waiting, arrivals.

    Action Space:
        ``triage`` Discrete(21), ``bed_manager`` Discrete(16),
        ``ventilator_officer`` Discrete(4); 0 is each role's no-op. See
        :data:`hospital_marl.ACTION_TABLE` for the mapping to the flat table.

    Observation Space:
        ``{"observation": Box(float32), "action_mask": Box(int8)}``: the role's
        own blocks (:data:`hospital_marl.envs.observations.ROLE_BLOCKS`) and
        its exact validity mask. ``state()`` is every block, flattened.
        ``observation_format`` offers a flat ``Box`` and padded forms for libraries
        that need them (:class:`~hospital_marl.envs._common.RoleViewMixin`).

    Infos:
        Every role's info has the same integer keys from ``reset()`` on:
        ``tick``, ``invalid_actions``, ``conflicts`` and ``outcome`` (its last
        action's, a code of :data:`hospital_marl.envs.infos.OUTCOME_NAMES`).

    Rewards:
        ``reward_mode="team"`` (default): every role receives the tick's team
        reward when the tick runs. ``"role"``: action-caused rewards
        (an invalid action, a discharge it ordered) go only to the role that
        acted, the tick's other events to all. Invalid actions cost -1, are
        counted (``info["invalid_actions"]``) and never raise.

    Starting State:
        An empty ED with the day's tick-0 arrivals waiting.

    Episode End:
        Terminated when deaths reach ``scenario.max_deaths``; truncated after
        ``scenario.episode_length`` ticks (or ``max_cycles``).

    Arguments:
        scenario: a registered name, a :class:`~hospital_marl.Scenario`, or a mapping of overrides.
        render_mode: ``"ansi"``, ``"human"`` or ``"rgb_array"``.
        reward_mode: ``"team"`` or ``"role"``.
        max_cycles: truncate after this many ticks (PettingZoo convention).
        clinical, rewards, day_generator: swap the dynamics, reward table or arrival model.
        observation_format: ``"dict"`` (default), ``"flat"``, ``"padded"`` or ``"padded_flat"``.
        observation_layout: ``"fixed"``, ``"masked"`` (each role's vector ends with the
            presence blocks: which general beds, ICU beds, ventilators exist this episode) or
            None (masked for a distribution, fixed otherwise).
        end_info: also put the episode's ``metrics`` and ``counters`` in the last infos
            (changes the info keys at the end; off by default).
    """

    metadata = {
        "name": "hospital_marl_v0",
        "render_modes": list(RENDER_MODES),
        "is_parallelizable": False,
        "render_fps": 10,
    }

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
        super().__init__()
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

    def action_mask(self, agent: str) -> np.ndarray:
        """The agent's int8 validity mask for the current state (padded formats: padded)."""
        mask = self.hospital.role_mask_array(agent)
        pad = self._pad[agent]
        return mask if pad is None else _common._padded(mask, pad[1])

    def observe(self, agent: str) -> Any:
        observation = self._builder.role(agent)  # first: builds the state's mask with it
        if self.observation_format == "dict" and not self._masked:
            return {"observation": observation, "action_mask": self.hospital.role_mask_array(agent)}
        return self._format(agent, observation, self.hospital.role_mask_array(agent))

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        _common.switch_scenario(self.hospital, options)
        self.hospital.reset(self._seeder(seed))
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: self._info() for a in self.agents}
        self._turn = 0
        self.agent_selection = self.agents[0]
        if self.render_mode == "human":
            self.render()

    def _info(self, outcome: int = NOOP) -> dict[str, Any]:
        """The role's info: always :data:`~hospital_marl.envs.infos.INFO_KEYS`, all integers."""
        h = self.hospital
        return {
            "tick": h.tick_count,
            "invalid_actions": h.count("invalid_actions"),
            "conflicts": h.count("conflicts"),
            "outcome": outcome,
        }

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        h = self.hospital
        self._cumulative_rewards[agent] = 0.0
        outcome = h.act(agent, action)  # a bad action is counted invalid, never raised
        self.infos[agent] = self._info(_CODE_OF[outcome])
        self._turn += 1
        if self._turn == len(ROLES):
            self._turn = 0
            result = h.tick()
            per_role = result.role_rewards if self.reward_mode == "role" else None
            self.rewards = {a: (per_role[a] if per_role else result.reward) for a in self.agents}
            if result.terminated or result.truncated:
                end = self._end_info()
                for a in self.agents:
                    self.terminations[a] = result.terminated
                    self.truncations[a] = result.truncated
                    self.infos[a] = {**self._info(self.infos[a]["outcome"]), **end}
        else:
            self.rewards = dict.fromkeys(self.agents, 0.0)
        self.agent_selection = ROLES[self._turn]
        self._accumulate_rewards()
        if self.render_mode == "human" and self._turn == 0:
            self.render()

    def render(self) -> Any:
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without a render_mode; pass render_mode=...")
            return None
        return _common.render(self.hospital, self.render_mode)

    def close(self) -> None:
        pass


def raw_env(**kwargs: Any) -> HospitalAECEnv:
    """The unwrapped AEC env."""
    return HospitalAECEnv(**kwargs)


class _OrderEnforcing(wrappers.OrderEnforcingWrapper):
    """PettingZoo's ``OrderEnforcingWrapper`` with the per-step loop's calls forwarded in one hop.

    Inherited, ``last()``, ``step()`` and ``agent_iter()`` read about eight attributes per
    role-step through the wrapper's ``__getattr__`` (two levels of checks each): a large
    share of a wrapped role-step. Here they make PettingZoo's own checks (before reset, after the end,
    step() between turns) and then read the wrapped env directly."""

    def last(self, observe: bool = True) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if not self._has_reset:
            raise AttributeError("agent_selection cannot be accessed before reset")
        return self.env.last(observe)

    def step(self, action: Any) -> None:
        if not self._has_reset:
            EnvLogger.error_step_before_reset()
        elif not self.env.agents:
            self._has_updated = True
            EnvLogger.warn_step_after_terminated_truncated()
        else:
            self._has_updated = True
            self.env.step(action)

    def agent_iter(self, max_iter: int = 2**63) -> AECIterable:
        if not self._has_reset:
            EnvLogger.error_agent_iter_before_reset()
        return _OrderEnforcingIterable(self, max_iter)

    def __str__(self) -> str:
        return str(self.env)  # as PettingZoo prints its own wrapper


class _OrderEnforcingIterable(AECOrderEnforcingIterable):
    def __iter__(self) -> AECOrderEnforcingIterator:
        return _OrderEnforcingIterator(self.env, self.max_iter)


class _OrderEnforcingIterator(AECOrderEnforcingIterator):
    """PettingZoo's checked iterator (step() between turns), reading the env in one hop."""

    def __next__(self) -> str:
        wrapper = self.env
        inner = wrapper.env
        if not inner.agents or self.iters_til_term <= 0:
            raise StopIteration
        self.iters_til_term -= 1
        assert wrapper._has_updated, "need to call step() or reset() in a loop over `agent_iter`"
        wrapper._has_updated = False
        return inner.agent_selection


def env(**kwargs: Any) -> AECEnv:
    """The AEC env with PettingZoo's standard safety wrappers.

    ``AssertOutOfBoundsWrapper`` is deliberately not used: an out-of-range
    action is the simulator's business (counted, -1), never an exception.
    """
    return _OrderEnforcing(HospitalAECEnv(**kwargs))
