"""What every view shares: building the simulator from env kwargs, masks, rendering."""

from __future__ import annotations

from typing import Any

import numpy as np

from hospital_marl.core.clinical import DEFAULT_CLINICAL, ClinicalParams
from hospital_marl.core.generator import DayGenerator, generate_day
from hospital_marl.core.hospital import Hospital
from hospital_marl.core.rewards import DEFAULT_REWARDS, RewardTable
from hospital_marl.core.scenarios import Scenario, get_scenario
from hospital_marl.envs.render import RENDER_MODES, render_frame

REWARD_MODES = ("team", "role")


def make_hospital(
    scenario: str | Scenario | None,
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
    """``reset(options={"scenario": ...})`` picks the next episode's scenario.

    Every scenario has the same observation and action spaces, so switching is safe.
    """
    if options and options.get("scenario") is not None:
        scenario = get_scenario(options["scenario"])
        if scenario.episode_length != hospital.scenario.episode_length:
            raise ValueError(
                f"scenario {scenario.name!r} has episode_length {scenario.episode_length}, this env "
                f"was built for {hospital.scenario.episode_length}: make a new env instead"
            )
        hospital.scenario = scenario
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


class RoleViewMixin:
    """What the two PettingZoo views share: the simulator, the per-role spaces, state()."""

    def _init_role_view(
        self,
        scenario: str | Scenario | None,
        render_mode: str | None,
        reward_mode: str,
        max_cycles: int | None,
        clinical: ClinicalParams | None,
        rewards: RewardTable | None,
        day_generator: DayGenerator | None,
    ) -> None:
        from gymnasium import spaces

        from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
        from hospital_marl.envs.observations import ObservationBuilder, role_space, state_space

        self.render_mode = check_render_mode(render_mode)
        self.reward_mode = check_reward_mode(reward_mode)
        self.hospital = make_hospital(scenario, max_cycles, clinical, rewards, day_generator)
        self._builder = ObservationBuilder(self.hospital)
        self._seeder = EpisodeSeeder()
        self.possible_agents = list(ROLES)
        self.observation_spaces = {
            role: spaces.Dict(
                {
                    "observation": role_space(role, self.hospital),
                    "action_mask": spaces.Box(0, 1, (ROLE_ACTION_COUNTS[role],), np.int8),
                }
            )
            for role in ROLES
        }
        self.action_spaces = {role: spaces.Discrete(ROLE_ACTION_COUNTS[role]) for role in ROLES}
        self.state_space = state_space(self.hospital)

    def observation_space(self, agent: str) -> Any:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> Any:
        return self.action_spaces[agent]

    def state(self) -> np.ndarray:
        return self._builder.state()


def render(hospital: Hospital, render_mode: str | None) -> Any:
    if render_mode is None:
        return None
    return render_frame(hospital, render_mode)
