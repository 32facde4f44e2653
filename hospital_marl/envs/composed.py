"""The composed view: one Discrete(39) masked action per tick (the original's
interface, spoken by the grader and the OpenEnv server), and the team view:
one MultiDiscrete([21, 16, 4]) action driving all three roles per tick."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from hospital_marl.core.actions import N_FLAT_ACTIONS, ROLE_ACTION_COUNTS, ROLES
from hospital_marl.core.clinical import ClinicalParams
from hospital_marl.core.generator import DayGenerator
from hospital_marl.core.hospital import OUTCOMES, ROLE_MASK_COLUMNS
from hospital_marl.core.rewards import RewardTable
from hospital_marl.core.scenarios import Scenario, ScenarioDistribution
from hospital_marl.envs import _common
from hospital_marl.envs.infos import NOOP, outcome_code
from hospital_marl.envs.observations import (
    MASK_KEY,
    OFFSETS,
    ComposedBuffers,
    ObservationBuilder,
    check_composed_format,
    check_layout,
    composed_space,
    format_has_mask,
    presence_of,
    presence_space,
    presence_views,
)
from hospital_marl.envs.parallel import resolve_joint_action
from hospital_marl.envs.render import RENDER_MODES


class _HospitalGymEnv(gym.Env):
    """Shared plumbing of the two single-controller views."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 10}

    def __init__(
        self,
        scenario: str | Scenario | ScenarioDistribution | None = None,
        render_mode: str | None = None,
        max_cycles: int | None = None,
        clinical: ClinicalParams | None = None,
        rewards: RewardTable | None = None,
        day_generator: DayGenerator | None = None,
        *,
        observation_format: str = "dict",
        observation_layout: str | None = None,
    ) -> None:
        self.render_mode = _common.check_render_mode(render_mode)
        self._one_d = check_composed_format(observation_format)
        self._mask_inside = format_has_mask(observation_format)
        self.observation_format = observation_format
        self.hospital = _common.make_hospital(scenario, max_cycles, clinical, rewards, day_generator)
        self.observation_layout = check_layout(observation_layout, self.hospital)
        self._masked = self.observation_layout == "masked"
        self._builder = ObservationBuilder(self.hospital)
        self.observation_space = composed_space(self.hospital, self._one_d)
        if self._masked:
            self.observation_space = spaces.Dict({**self.observation_space.spaces, **presence_space()})
        self._seeder = _common.EpisodeSeeder()
        self._mask: np.ndarray = np.zeros(N_FLAT_ACTIONS, np.bool_)
        self._mask_version = -1

    @property
    def scenario(self) -> Scenario:
        return self.hospital.scenario

    def action_masks(self) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    _noop: Any = NOOP  # ``outcome`` after reset (the team env's: one per role)

    def _info(self, extra: dict[str, Any]) -> dict[str, Any]:
        """The infos every creation path shares (:mod:`hospital_marl.envs.infos`): ``action_mask``,
        ``tick``, ``scenario``, ``outcome`` (an int code), ``invalid_actions``, ``conflicts``."""
        h = self.hospital
        info = {
            "action_mask": self.action_masks(),
            "tick": h.tick_count,
            "scenario": h.scenario.name,
            "outcome": self._noop,
            "invalid_actions": h.count("invalid_actions"),
            "conflicts": h.count("conflicts"),
            **extra,
        }
        if h.done:
            self._add_episode_end(info)
        return info

    def _add_episode_end(self, info: dict[str, Any]) -> None:
        h = self.hospital
        info["metrics"] = h.metrics()
        info["counters"] = h.counters.as_dict()
        info["score"] = h.score()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        _common.switch_scenario(self.hospital, options)
        self.hospital.reset(self._seeder(seed))
        if self._masked:
            self._presence = presence_views(presence_of(self.hospital))
        if self.render_mode == "human":
            self.render()
        return self._observation(self._builder.composed(self._one_d)), self._info({})

    def _with_mask_space(self, n_actions: int) -> None:
        """The ``..._action_mask`` formats: the mask joins the observation space (bool, as masks are)."""
        if self._mask_inside:
            # Box takes bool at run time (masks are bool); its annotation lists numbers only.
            mask = spaces.Box(0, 1, (n_actions,), np.bool_)  # type: ignore[arg-type]
            observed = self.observation_space
            if not isinstance(observed, spaces.Dict):
                raise TypeError("the ..._action_mask formats extend a Dict observation")
            self.observation_space = spaces.Dict({**observed.spaces, MASK_KEY: mask})

    def _observation(self, views: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The Dict observation in this env's layout (``"masked"``: with the presence blocks) and
        format (``..._action_mask``: with the action mask)."""
        if self._masked:
            if self.hospital.scenario.outage is not None:  # ventilators come and go within the day
                self._presence = presence_views(presence_of(self.hospital))
            views.update((key, value.copy()) for key, value in self._presence.items())
        if self._mask_inside:
            views[MASK_KEY] = self.action_masks()
        return views

    def _finish_step(self, reward: float, terminated: bool, truncated: bool, extra: dict[str, Any]):
        if self.render_mode == "human":
            self.render()
        return (
            self._observation(self._builder.composed(self._one_d)),
            reward,
            terminated,
            truncated,
            self._info(extra),
        )

    def render(self) -> Any:
        return _common.render(self.hospital, self.render_mode)


class HospitalEDEnv(_HospitalGymEnv):
    """Emergency department, one flat action per tick.

    Description:
        The three roles' decisions collapsed into one: each tick one action
        from the 39-action table is carried out, then the tick runs.

    Action Space:
        ``Discrete(39)``: 0 no-op, 1–10 admit queue slot i to a general bed,
        11–20 to an ICU bed, 21–23 ventilator v, 24–28 transfer board
        position k to ICU, 29–33 early-discharge board position k (from the
        bottom), 34–38 discharge ICU bed j. Mask: ``action_masks()`` (bool,
        found by sb3-contrib through wrappers) and ``info["action_mask"]``.

    Observation Space:
        ``Dict`` of float32 boxes: the original's six keys (``bed_occupancy``
        (20,), ``icu_occupancy`` (5,), ``ventilator_status`` (3,),
        ``waiting_queue`` (10, 3), ``time_step`` (1,), ``stats`` (3,)) plus
        ``board_remaining``, ``icu_remaining``, ``icu_needs_vent``,
        ``icu_on_vent``, ``icu_ready`` and ``capacity``. ``observation_format="dict_1d"``:
        the same keys and values with every block 1-D (``waiting_queue`` (30,), slot by
        slot), the shapes SB3's ``check_env`` expects.

    Rewards:
        The tick's team reward. Invalid actions: -1, counted, never raised.

    Starting State:
        An empty ED with the day's tick-0 arrivals waiting.

    Episode End:
        Terminated when deaths reach ``max_deaths``; truncated at the end of the shift.

    Arguments:
        scenario, render_mode, max_cycles, clinical, rewards, day_generator: as
        for :func:`hospital_marl.env`. ``reset(options={"scenario": name})``
        switches scenario for the next episode. observation_format: ``"dict"``
        (default), ``"dict_1d"``, or either with ``"_action_mask"`` (the mask inside the
        observation as ``"action_mask"``, for TorchRL's ``ActionMask`` and the like).
        observation_layout: ``"fixed"``, ``"masked"`` (adds
        ``general_present`` (20,), ``icu_present`` (5,), ``ventilator_present`` (3,): which
        slots exist this episode) or None (masked for a distribution, fixed otherwise).
    """

    def __init__(
        self,
        scenario: str | Scenario | ScenarioDistribution | None = None,
        render_mode: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(scenario, render_mode, **kwargs)
        self.action_space = spaces.Discrete(N_FLAT_ACTIONS)
        self._with_mask_space(N_FLAT_ACTIONS)
        self._buffers = ComposedBuffers(one_d=self._one_d)

    def action_masks(self) -> np.ndarray:
        """Bool validity of the 39 actions (sb3-contrib's MaskablePPO calls this). A fresh array."""
        h = self.hospital
        if self._mask_version != h.version:
            self._mask, self._mask_version = h.flat_mask_array(), h.version
        return self._mask.copy()

    def step(self, action: int):
        h = self.hospital
        obs, views = self._buffers.take()
        mask = np.empty(N_FLAT_ACTIONS, np.bool_)
        # act, tick, observe, mask: one kernel call, which also reports what the step returns
        code, reward, tick, terminated, truncated = h.step_flat_report(action, OFFSETS, obs, mask)
        version = h.version
        self._builder.adopt(obs, version)
        self._mask, self._mask_version = mask, version
        if self.render_mode == "human":
            self.render()
        info = {"action_mask": mask.copy(), "tick": tick, "scenario": h.scenario.name, "outcome": int(code)}
        info["invalid_actions"], info["conflicts"] = h.count("invalid_actions"), h.count("conflicts")
        if terminated or truncated:
            self._add_episode_end(info)
        return self._observation(views), reward, terminated, truncated, info


OUTCOME_VALUES = tuple(outcome.value for outcome in OUTCOMES)
"""The outcome names by the kernel's outcome code (``info["outcome"]`` is the code:
:data:`hospital_marl.envs.infos.OUTCOME_NAMES`)."""

TEAM_MASK_COLUMNS = np.concatenate([ROLE_MASK_COLUMNS[role] for role in ROLES])
"""The team mask (41) as columns of the flat mask."""


class HospitalEDTeamEnv(_HospitalGymEnv):
    """Emergency department, one controller driving all three roles per tick.

    Action Space:
        ``MultiDiscrete([21, 16, 4])``: (triage, bed_manager,
        ventilator_officer) actions, carried out in that order. An action
        valid on the mask but made impossible by an earlier role's action is
        a conflict (no-op, counted, free). ``action_masks()`` is the three
        role masks concatenated (41 bools), as MaskablePPO expects.

    Observation Space, Rewards, Starting State, Episode End, Arguments:
        as :class:`HospitalEDEnv`.
    """

    def __init__(
        self,
        scenario: str | Scenario | ScenarioDistribution | None = None,
        render_mode: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(scenario, render_mode, **kwargs)
        self.action_space = spaces.MultiDiscrete([ROLE_ACTION_COUNTS[r] for r in ROLES])
        self._with_mask_space(len(TEAM_MASK_COLUMNS))

    @property
    def _noop(self) -> np.ndarray:
        return np.full(len(ROLES), NOOP, np.int64)

    def _info(self, extra: dict[str, Any]) -> dict[str, Any]:
        info = super()._info(extra)
        info.setdefault("outcomes", info["outcome"].copy())
        return info

    def _role_masks(self) -> dict[str, np.ndarray]:
        return {role: self.hospital.role_mask_array(role) for role in ROLES}

    def action_masks(self) -> np.ndarray:
        """Bool validity of the 41 role actions: the three role masks (each with its no-op)."""
        return self.hospital.flat_mask_array()[TEAM_MASK_COLUMNS]

    def step(self, action: Any):
        joint = _split_joint_action(action)
        outcomes = resolve_joint_action(self.hospital, joint, self._role_masks())
        codes = np.array([outcome_code(outcomes[role]) for role in ROLES], np.int64)
        result = self.hospital.tick()
        extra = {"outcome": codes, "outcomes": codes.copy()}  # as the team vector env's
        return self._finish_step(result.reward, result.terminated, result.truncated, extra)


def _split_joint_action(action: Any) -> dict[str, Any]:
    """One element per role, each judged on its own (a bad element costs only its role -1).

    A numpy int array is split as is; a list/tuple keeps each element's own type,
    so ``[2.5, 0, 0]`` is one invalid triage action, not three. Anything that is
    not a sequence of three is invalid for every role.
    """
    if isinstance(action, np.ndarray) and action.shape == (len(ROLES),):
        return dict(zip(ROLES, list(action)))
    if isinstance(action, (list, tuple)) and len(action) == len(ROLES):
        return dict(zip(ROLES, action))
    return {role: None for role in ROLES}
