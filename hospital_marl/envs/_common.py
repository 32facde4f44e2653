"""What every view shares: building the simulator from env kwargs, masks, rendering."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from hospital_marl.core.clinical import DEFAULT_CLINICAL, ClinicalParams
from hospital_marl.core.generator import DayGenerator, generate_day
from hospital_marl.core.hospital import Hospital
from hospital_marl.core.rewards import DEFAULT_REWARDS, RewardTable
from hospital_marl.core.scenarios import Scenario, ScenarioDistribution, resolve_scenario
from hospital_marl.envs.observations import (
    ObservationBuilder,
    check_layout,
    presence_of,
    role_space,
    state_space,
    with_presence,
)
from hospital_marl.envs.render import RENDER_MODES, render_frame

REWARD_MODES = ("team", "role")


def make_hospital(
    scenario: str | Scenario | ScenarioDistribution | None,
    max_cycles: int | None,
    clinical: ClinicalParams | None,
    rewards: RewardTable | None,
    day_generator: DayGenerator | None,
) -> Hospital:
    return Hospital(
        scenario,
        clinical=clinical or DEFAULT_CLINICAL,
        rewards=rewards or DEFAULT_REWARDS,
        day_generator=day_generator or generate_day,
        max_ticks=max_cycles,
    )


def check_render_mode(render_mode: str | None) -> str | None:
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"render_mode must be one of {RENDER_MODES} or None, got {render_mode!r}")
    return render_mode


def check_reward_mode(reward_mode: str) -> str:
    if reward_mode not in REWARD_MODES:
        raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {reward_mode!r}")
    return reward_mode


def switch_scenario(hospital: Hospital, options: dict[str, Any] | None) -> None:
    """``reset(options={"scenario": ...})`` picks the next episode's scenario (or distribution).

    Every scenario has the same observation and action spaces, so switching is safe.
    """
    if options and options.get("scenario") is not None:
        scenario = resolve_scenario(options["scenario"])
        if scenario.episode_length != hospital.scenario.episode_length:
            raise ValueError(
                f"scenario {scenario.name!r} has episode_length {scenario.episode_length}, this env "
                f"was built for {hospital.scenario.episode_length}: make a new env instead"
            )
        hospital.set_scenario(scenario)
        hospital.max_ticks = min(hospital.max_ticks, scenario.episode_length)


class EpisodeSeeder:
    """Seeds episodes like Gymnasium does: ``reset(seed=s)`` uses ``s``; a later
    ``reset()`` draws the next seed from a generator seeded by ``s`` (fresh
    entropy if never seeded). The same derivation in every view keeps them identical."""

    def __init__(self) -> None:
        self._rng: np.random.Generator | None = None
        self._seed: int | None = None

    def __call__(self, seed: int | None) -> int:
        if seed is not None:  # the generator is made when a later reset() needs it: seeding
            self._rng, self._seed = None, seed  # NumPy costs more than starting a kernel day
            return seed
        if self._rng is None:
            self._rng = np.random.default_rng(self._seed)
        return int(self._rng.integers(2**63 - 1))

    def ahead(self, k: int) -> np.ndarray:
        """The seeds of the next ``k`` seedless resets at once (int64; the same as ``k`` calls
        of ``self(None)``: NumPy's ``integers(size=k)`` draws the scalar calls' sequence)."""
        if self._rng is None:
            self._rng = np.random.default_rng(self._seed)
        return self._rng.integers(2**63 - 1, size=k)


OBSERVATION_FORMATS = ("dict", "flat", "padded", "padded_flat")
"""The PettingZoo envs' ``observation_format`` (see :class:`RoleViewMixin`)."""


def check_observation_format(observation_format: str) -> str:
    if observation_format not in OBSERVATION_FORMATS:
        raise ValueError(
            f"observation_format must be one of {OBSERVATION_FORMATS}, got {observation_format!r}"
        )
    return observation_format


class RoleViewMixin:
    """What the two PettingZoo views share: the simulator, the per-role spaces, state().

    ``observation_format`` picks what each role observes (chosen at construction):

    - ``"dict"`` (default): ``{"observation": Box(d_role), "action_mask": Box(int8, n_role)}``,
      PettingZoo's masking convention; ``Discrete(n_role)`` actions.
    - ``"flat"``: one float32 ``Box(d_role + n_role)``, the observation then the mask (0/1);
      :meth:`mask_slice` says where the mask is. For learners that take only a ``Box``.
    - ``"padded"``: the ``"dict"`` form with every role the same size: observations zero-padded
      to the largest role's (bed_manager's), actions ``Discrete(21)`` for every
      role, the padding actions masked out (taken anyway, they are invalid: -1, counted).
      For libraries that need identical spaces (Tianshou, SuperSuit's vector conversion).
    - ``"padded_flat"``: the ``"padded"`` form as one ``Box``: padded observation then padded
      mask, so the mask sits at the same slice for every role (SuperSuit + SB3).

    Values, masks and dynamics are the same in every format.
    """

    def _init_role_view(
        self,
        scenario: str | Scenario | ScenarioDistribution | None,
        render_mode: str | None,
        reward_mode: str,
        max_cycles: int | None,
        clinical: ClinicalParams | None,
        rewards: RewardTable | None,
        day_generator: DayGenerator | None,
        observation_format: str = "dict",
        end_info: bool = False,
        observation_layout: str | None = None,
    ) -> None:
        self.render_mode = check_render_mode(render_mode)
        self.reward_mode = check_reward_mode(reward_mode)
        self.observation_format = check_observation_format(observation_format)
        self.end_info = bool(end_info)
        self.hospital = make_hospital(scenario, max_cycles, clinical, rewards, day_generator)
        self.observation_layout = check_layout(observation_layout, self.hospital)
        self._masked = self.observation_layout == "masked"
        self._builder = ObservationBuilder(self.hospital)
        self._seeder = EpisodeSeeder()
        self.possible_agents = list(ROLES)
        padded = observation_format.startswith("padded")
        boxes = {role: role_space(role, self.hospital) for role in ROLES}
        if self._masked:  # every role sees which slots exist (appended to its vector)
            boxes = {role: with_presence(box) for role, box in boxes.items()}
        widest, most = max(b.shape[0] for b in boxes.values()), max(ROLE_ACTION_COUNTS.values())
        n_obs = {role: widest if padded else boxes[role].shape[0] for role in ROLES}
        n_act = {role: most if padded else ROLE_ACTION_COUNTS[role] for role in ROLES}
        self._pad = {role: (n_obs[role], n_act[role]) if padded else None for role in ROLES}
        self.observation_spaces: dict[str, Any] = {}
        self.mask_slices: dict[str, slice] = {}
        """Where each role's mask sits in its observation vector (the ``"flat"`` formats)."""
        lows = {role: _padded(boxes[role].low, n_obs[role]) for role in ROLES}
        highs = {role: _padded(boxes[role].high, n_obs[role]) for role in ROLES}
        if padded:  # one space for every role (Tianshou and SuperSuit compare spaces, bounds included)
            low, high = np.minimum.reduce(list(lows.values())), np.maximum.reduce(list(highs.values()))
            lows, highs = {role: low for role in ROLES}, {role: high for role in ROLES}
        for role in ROLES:
            low, high = lows[role], highs[role]
            if observation_format.endswith("flat"):
                self.mask_slices[role] = slice(n_obs[role], n_obs[role] + n_act[role])
                ones = np.ones(n_act[role], np.float32)
                self.observation_spaces[role] = spaces.Box(
                    np.concatenate([low, 0 * ones]), np.concatenate([high, ones]), dtype=np.float32
                )
            else:
                self.observation_spaces[role] = spaces.Dict(
                    {
                        "observation": spaces.Box(low, high, dtype=np.float32),
                        "action_mask": spaces.Box(0, 1, (n_act[role],), np.int8),
                    }
                )
        self.action_spaces: dict[str, spaces.Space[Any]] = {
            role: spaces.Discrete(n_act[role]) for role in ROLES
        }
        self.state_space = state_space(self.hospital)
        if self._masked:
            self.state_space = with_presence(self.state_space)

    def observation_space(self, agent: str) -> Any:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> Any:
        return self.action_spaces[agent]

    def mask_slice(self, agent: str) -> slice:
        """Where ``agent``'s action mask sits in its observation (``"flat"`` / ``"padded_flat"``):
        ``mask = obs[env.mask_slice(agent)] > 0``. The dict formats carry it as ``obs["action_mask"]``."""
        if agent not in self.mask_slices:
            raise ValueError(
                f"observation_format={self.observation_format!r} has no mask slice "
                f"for {agent!r}: the mask is obs['action_mask']"
            )
        return self.mask_slices[agent]

    def state(self) -> np.ndarray:
        if self._masked:
            return np.concatenate([self._builder.state(), self._presence()])
        return self._builder.state()

    def _presence(self) -> np.ndarray:
        return presence_of(self.hospital)

    def _format(self, role: str, observation: np.ndarray, mask: np.ndarray) -> Any:
        """One role's observation in this env's ``observation_format`` (``mask``: int8, role-sized)."""
        if self._masked:
            observation = np.concatenate([observation, self._presence()])
        pad = self._pad[role]
        if pad is not None:
            observation, mask = _padded(observation, pad[0]), _padded(mask, pad[1])
        if self.observation_format.endswith("flat"):
            return np.concatenate([observation, mask.astype(np.float32)])
        return {"observation": observation, "action_mask": mask if pad is not None else mask.copy()}

    def _end_info(self) -> dict[str, Any]:
        """With ``end_info=True``, the finished episode's metrics and counters in the last infos
        (off by default: the info keys then change at the episode's end, which TorchRL and
        Tianshou refuse; ``env.unwrapped.hospital.metrics()`` gives them at any time)."""
        if not self.end_info:
            return {}
        h = self.hospital
        return {"metrics": h.metrics(), "counters": h.counters.as_dict()}


def _padded(array: np.ndarray, size: int) -> np.ndarray:
    if array.shape[0] == size:
        return array
    out = np.zeros(size, array.dtype)
    out[: array.shape[0]] = array
    return out


def render(hospital: Hospital, render_mode: str | None) -> Any:
    if render_mode is None:
        return None
    return render_frame(hospital, render_mode)
