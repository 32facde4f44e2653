"""The PPO trainer's env pipeline (:func:`make_env`): the composed (or team) env, scenario
cycling, the training reward, Monitor, reward scale and the feature encoding. Apart from
:mod:`training.ppo` so that behaviour cloning (:mod:`training.clone`) builds the very same env
without importing the trainer that calls it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from hospital_marl.envs.composed import HospitalEDEnv, HospitalEDTeamEnv
from hospital_marl.envs.wrappers import ScoreReward
from policies.learned import FEATURE_CLIP, FeatureEncoder
from policies.pruning import prune_dominated
from training.common import ScenarioCycler

if TYPE_CHECKING:
    from training.ppo import Args


class EncodedObservation(gym.ObservationWrapper):
    """The Dict observation -> :class:`~policies.learned.FeatureEncoder`'s fixed-scale vector."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.encoder = FeatureEncoder()
        self.observation_space = spaces.Box(0.0, FEATURE_CLIP, (self.encoder.size,), np.float32)

    def observation(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return self.encoder(observation)


class ScenarioCycle(gym.Wrapper):
    """Switches scenario every episode through ``reset(options={"scenario": ...})``
    (:class:`training.common.ScenarioCycler`, env ``rank`` starting at scenario ``rank % n``)."""

    def __init__(self, env: gym.Env, scenarios: tuple[str, ...], rank: int = 0) -> None:
        super().__init__(env)
        self.cycle = ScenarioCycler(scenarios, rank)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return self.env.reset(seed=seed, options={**(options or {}), "scenario": self.cycle()})


class ScaleReward(gym.RewardWrapper):
    """Multiplies the reward by a fixed factor (learning only; the Monitor below it logs raw returns)."""

    def __init__(self, env: gym.Env, scale: float) -> None:
        super().__init__(env)
        self.scale = scale

    def reward(self, reward: float) -> float:
        return reward * self.scale


class PruneDominated(gym.Wrapper):
    """``action_masks()`` minus the dominated actions (:func:`policies.pruning.prune_dominated`).

    Sits on the Dict-observation env: it keeps the last observation to prune against.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._obs: dict[str, np.ndarray] = {}

    def reset(self, **kwargs: Any):
        self._obs, info = self.env.reset(**kwargs)
        return self._obs, info

    def step(self, action: Any):
        self._obs, *rest = self.env.step(action)
        return self._obs, *rest

    def action_masks(self) -> np.ndarray:
        return prune_dominated(self._obs, self.env.unwrapped.action_masks())


class EarlyDischargeCost(gym.Wrapper):
    """Charges ``points`` per early discharge on top of the score reward (training only).

    The score prices an early discharge only through the deaths of patients who bounce
    back; a policy trained on it alone carried the habit from full wards (surge) to empty
    ones (night_shift: many a shift, each a chance of 0.1 x severity of a sicker return).
    """

    def __init__(self, env: gym.Env, points: float) -> None:
        super().__init__(env)
        self.points = points

    def step(self, action: Any):
        hospital = self.env.unwrapped.hospital
        before = hospital.counters.early_discharges
        obs, reward, terminated, truncated, info = self.env.step(action)
        reward -= self.points * (hospital.counters.early_discharges - before)
        return obs, reward, terminated, truncated, info


def make_env(args: Args, rank: int = 0) -> gym.Env:
    """One training env: the composed (or team) env, scenario cycling, Monitor, reward scale, encoding."""
    from stable_baselines3.common.monitor import Monitor

    env_cls = HospitalEDTeamEnv if args.track == "team" else HospitalEDEnv
    env: gym.Env = env_cls(scenario=args.scenarios[rank % len(args.scenarios)], rewards=args.rewards)
    if args.prune:
        env = PruneDominated(env)
    if len(args.scenarios) > 1:
        env = ScenarioCycle(env, args.scenarios, rank)
    if args.reward == "score":
        env = ScoreReward(env)
        if args.early_discharge_points:
            env = EarlyDischargeCost(env, args.early_discharge_points)
    env = Monitor(env)  # raw episode returns for the curve
    env = ScaleReward(env, args.reward_scale)
    return EncodedObservation(env)


def make_vec_env(args: Args) -> Any:
    from stable_baselines3.common.vec_env import DummyVecEnv

    return DummyVecEnv([lambda rank=rank: make_env(args, rank) for rank in range(args.n_envs)])
