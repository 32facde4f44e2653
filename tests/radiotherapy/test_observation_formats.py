"""The radiotherapy env's ``observation_format`` (issue #44, item 6): ``"dict_1d"`` and ``"flat"``
carry the default's values; on ``"dict_1d"`` SB3's and Gymnasium's checkers give no warning (the
default's 2-D blocks draw SB3's "unconventional shape" warning)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from hospital_marl.radiotherapy import RT_ENV_ID
from hospital_marl.radiotherapy.envs.planning import OBSERVATION_KEYS


def test_dict_1d__passes_sb3_and_gymnasium_checkers_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_check_env(gym.make(RT_ENV_ID, task="prostate", observation_format="dict_1d"))
        gymnasium_check_env(gym.make(RT_ENV_ID, task="prostate", observation_format="dict_1d").unwrapped)


def test_default__still_draws_sb3s_shape_warning() -> None:
    """What the option is for: the default's 2-D blocks (kept for its checkpoints) warn."""
    with pytest.warns(UserWarning, match="unconventional shape"):
        sb3_check_env(gym.make(RT_ENV_ID, task="prostate"))


@pytest.mark.parametrize("fmt", ["dict_1d", "flat"])
def test_formats__carry_the_defaults_values(fmt: str) -> None:
    env, default = (
        gym.make(RT_ENV_ID, task="head_neck", observation_format=fmt),
        gym.make(RT_ENV_ID, task="head_neck"),
    )
    a, _ = env.reset(seed=5)
    b, _ = default.reset(seed=5)
    for step in range(12):
        assert env.observation_space.contains(a)
        expected = np.concatenate([b[key].ravel() for key in OBSERVATION_KEYS])
        got = a if fmt == "flat" else np.concatenate([a[key] for key in OBSERVATION_KEYS])
        np.testing.assert_array_equal(got, expected, err_msg=f"step {step}")
        action = int(np.flatnonzero(default.unwrapped.action_masks())[step % 3 - 1])
        a, *_ = env.step(action)
        b, *_ = default.step(action)


def test_unknown_format__a_clear_error() -> None:
    with pytest.raises(ValueError, match="observation_format must be one of"):
        gym.make(RT_ENV_ID, observation_format="image")
