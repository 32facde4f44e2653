"""``observation_format="dict_action_mask"`` / ``"dict_1d_action_mask"`` (issue #44, item 4): the
composed and team envs' observation carries the action mask as ``"action_mask"`` (what libraries
reading masks from observations expect), every other key as in the format without it."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from hospital_marl import COMPOSED_ENV_ID, TEAM_ENV_ID


@pytest.mark.parametrize("env_id", [COMPOSED_ENV_ID, TEAM_ENV_ID])
@pytest.mark.parametrize("base", ["dict", "dict_1d"])
def test_mask_inside__equals_action_masks_and_the_rest_is_unchanged(env_id: str, base: str) -> None:
    with_mask = gym.make(env_id, scenario="surge", observation_format=f"{base}_action_mask")
    plain = gym.make(env_id, scenario="surge", observation_format=base)
    a, info = with_mask.reset(seed=2)
    b, _ = plain.reset(seed=2)
    rng = np.random.default_rng(0)
    for _ in range(40):
        assert with_mask.observation_space.contains(a)
        assert a["action_mask"].dtype == np.bool_
        np.testing.assert_array_equal(a["action_mask"], with_mask.unwrapped.action_masks())
        np.testing.assert_array_equal(a["action_mask"], info["action_mask"])
        assert set(a) - {"action_mask"} == set(b)
        for key in b:
            np.testing.assert_array_equal(a[key], b[key])
        action = (
            with_mask.action_space.sample() * 0
            if env_id == TEAM_ENV_ID
            else rng.choice(np.flatnonzero(a["action_mask"]))
        )
        a, _, _, _, info = with_mask.step(action)
        b, *_ = plain.step(action)


def test_mask_inside__passes_gymnasiums_checker() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(COMPOSED_ENV_ID, observation_format="dict_1d_action_mask").unwrapped)


def test_vector_envs__refuse_the_mask_formats_clearly() -> None:
    with pytest.raises(ValueError, match="observation_format must be one of"):
        gym.make_vec(COMPOSED_ENV_ID, num_envs=2, observation_format="dict_action_mask")
