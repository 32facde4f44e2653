"""Gymnasium's and SB3's checkers on ``observation_format="dict_1d"`` (no warning at all), and
masked PPO (sb3-contrib) on ``gym.make`` through SB3's ``make_vec_env`` and on the batched env."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.env_util import make_vec_env

from hospital_marl import COMPOSED_ENV_ID, TEAM_ENV_ID
from hospital_marl.envs.infos import INVALID
from hospital_marl.envs.sb3 import HospitalSB3VecEnv

PPO_KWARGS = {"n_steps": 64, "batch_size": 64, "n_epochs": 1, "seed": 0, "policy_kwargs": {"net_arch": [16]}}


@pytest.mark.parametrize("env_id", [COMPOSED_ENV_ID, TEAM_ENV_ID])
def test_dict_1d__passes_gymnasium_and_sb3_checkers_without_a_warning(env_id: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default's waiting_queue (10, 3) warns here
        gymnasium_check_env(gym.make(env_id, observation_format="dict_1d").unwrapped)
        sb3_check_env(gym.make(env_id, observation_format="dict_1d"))


def test_dict_1d__is_the_default_observation_with_1d_blocks() -> None:
    flat, default = gym.make(COMPOSED_ENV_ID, observation_format="dict_1d"), gym.make(COMPOSED_ENV_ID)
    a, _ = flat.reset(seed=4)
    b, _ = default.reset(seed=4)
    for _ in range(20):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key].ndim == 1
            np.testing.assert_array_equal(a[key], b[key].ravel())  # row by row: slot i at [3i:3i+3]
        action = int(np.flatnonzero(default.unwrapped.action_masks())[-1])
        a, *_ = flat.step(action)
        b, *_ = default.step(action)


class InvalidActions(BaseCallback):
    """Invalid actions taken during ``learn()``, read from the envs' own outcome codes / counters."""

    def __init__(self) -> None:
        super().__init__()
        self.invalid = 0

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "outcome" in info:  # gym.make's envs report each step's outcome
                self.invalid += info["outcome"] == INVALID
            elif "metrics" in info:  # the batched env reports at each episode's end
                self.invalid += info["metrics"]["invalid_action_rate"] > 0
        return True


def test_maskable_ppo_on_make_vec_env__zero_invalid_actions() -> None:
    vec = make_vec_env(COMPOSED_ENV_ID, n_envs=2, seed=0, env_kwargs={"observation_format": "dict_1d"})
    counter = InvalidActions()
    MaskablePPO("MultiInputPolicy", vec, **PPO_KWARGS).learn(256, callback=counter)
    assert counter.invalid == 0


def test_maskable_ppo_on_the_batched_env__zero_invalid_actions() -> None:
    vec = HospitalSB3VecEnv(num_envs=4, seed=0, observation_format="dict_1d")
    counter = InvalidActions()
    MaskablePPO("MultiInputPolicy", vec, **PPO_KWARGS).learn(512, callback=counter)  # 128 ticks: one end
    assert counter.invalid == 0
    assert (vec.venv.episode_counters()["invalid_actions"] == 0).all()  # the running episodes too
