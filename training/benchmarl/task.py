"""The ED as a BenchMARL task: one per built-in scenario, and ``ALL_SCENARIOS`` (their mix).

``HospitalTask.NORMAL_DAY.get_task(config)`` (or :func:`make_task`) gives the
:class:`HospitalTaskClass` a BenchMARL ``Experiment`` takes. As BenchMARL's VMAS tasks do,
it builds a natively batched env (:class:`~training.benchmarl.env.HospitalTorchEnv`, batch =
BenchMARL's ``n_envs_per_worker``) and hands BenchMARL the *unbatched* specs: one group per
role with its observation and action mask, the global ``state`` (MAPPO's critic reads it;
IPPO's critics read each role's own observation), no info.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from benchmarl.environments.common import Task, TaskClass
from torchrl.data import Composite
from torchrl.envs import EnvBase

from hospital_marl.core.actions import ROLES
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS, get_scenario
from training.benchmarl.env import HospitalTorchEnv
from training.common import reward_table

ALL = "all_scenarios"


def _base(env: EnvBase) -> HospitalTorchEnv:
    while not isinstance(env, HospitalTorchEnv):
        env = env.base_env  # TransformedEnv layers BenchMARL adds
    return env


class HospitalTaskClass(TaskClass):
    """Config keys: ``reward_mode`` ("team"), ``reward_scale`` (learning scale of the reward),
    ``reward_overrides`` (training-only reward-table changes, ``"field=number,..."``), ``reward``
    ("env": the env's dense reward; "score": the graded score, paid per step)."""

    @property
    def scenarios(self) -> tuple[str, ...]:
        name = self.name.lower()
        return tuple(BUILTIN_SCENARIOS) if name == ALL else (name,)

    def get_env_fun(
        self, num_envs: int, continuous_actions: bool, seed: int | None, device: Any
    ) -> Callable[[], EnvBase]:
        config = copy.deepcopy(self.config)
        scenarios = self.scenarios
        num_envs = max(num_envs, len(scenarios))  # a mix needs one env per scenario at least
        return lambda: HospitalTorchEnv(
            num_envs=num_envs,
            scenarios=scenarios,
            seed=seed,
            reward_mode=config.get("reward_mode", "team"),
            reward_scale=config.get("reward_scale", 1.0),
            rewards=reward_table(config.get("reward_overrides", "")),
            reward=config.get("reward", "env"),
            device=device,
        )

    def supports_continuous_actions(self) -> bool:
        return False

    def supports_discrete_actions(self) -> bool:
        return True

    def has_render(self, env: EnvBase) -> bool:
        return False

    def max_steps(self, env: EnvBase) -> int:
        return max(get_scenario(s).episode_length for s in self.scenarios)

    def group_map(self, env: EnvBase) -> dict[str, list[str]]:
        return _base(env).group_map

    def observation_spec(self, env: EnvBase) -> Composite:
        spec = env.full_observation_spec_unbatched.clone()
        del spec["state"]
        for role in ROLES:
            del spec[(role, "action_mask")]
        return spec

    def action_mask_spec(self, env: EnvBase) -> Composite:
        spec = env.full_observation_spec_unbatched.clone()
        del spec["state"]
        for role in ROLES:
            del spec[(role, "observation")]
        return spec

    def state_spec(self, env: EnvBase) -> Composite:
        return Composite({"state": env.full_observation_spec_unbatched["state"].clone()})

    def info_spec(self, env: EnvBase) -> Composite | None:
        return None

    def action_spec(self, env: EnvBase) -> Composite:
        return env.full_action_spec_unbatched

    @staticmethod
    def env_name() -> str:
        return "hospital_marl"


class HospitalTask(Task):
    """The five built-in scenarios, and ``ALL_SCENARIOS`` (the batch split between them)."""

    NORMAL_DAY = None
    SURGE = None
    MASS_CASUALTY = None
    NIGHT_SHIFT = None
    VENTILATOR_CRISIS = None
    ALL_SCENARIOS = None

    @staticmethod
    def associated_class() -> type[TaskClass]:
        return HospitalTaskClass


def make_task(
    scenario: str,
    reward_mode: str = "team",
    reward_scale: float = 1.0,
    reward_overrides: str = "",
    reward: str = "env",
) -> HospitalTaskClass:
    """The task for a scenario name (or ``"all_scenarios"``), configured without BenchMARL's YAML."""
    task = HospitalTask[scenario.upper()]
    config = {
        "reward_mode": reward_mode,
        "reward_scale": reward_scale,
        "reward_overrides": reward_overrides,
        "reward": reward,
    }
    return task.get_task(config=config)  # type: ignore[return-value]
