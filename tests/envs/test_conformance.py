"""The ecosystem's own conformance checks (SPEC §5): PettingZoo, Gymnasium, SB3, sb3-contrib."""

from __future__ import annotations

import types
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env
from pettingzoo.test import (
    api_test,
    max_cycles_test,
    parallel_api_test,
    parallel_seed_test,
    render_test,
    seed_test,
)
from pettingzoo.test.state_test import state_test
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import hospital_marl
from hospital_marl import BUILTIN_SCENARIOS, COMPOSED_ENV_ID, ROLE_ACTION_COUNTS, ROLES, TEAM_ENV_ID

GYM_IDS = (COMPOSED_ENV_ID, TEAM_ENV_ID)
MASK_SIZE = {COMPOSED_ENV_ID: 39, TEAM_ENV_ID: 41}
# SPEC §5 requires waiting_queue (10, 3); SB3 merely recommends flat observations.
SB3_WAITING_QUEUE_SHAPE = r"Your observation waiting_queue has an unconventional shape"


@contextmanager
def only_the_required_shape_warning_ignored() -> Iterator[None]:
    """Every other warning from the checkers is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=SB3_WAITING_QUEUE_SHAPE)
        yield


def scenario_module(scenario: str) -> types.SimpleNamespace:
    """What ``max_cycles_test`` needs of a module (``env`` and ``parallel_env``), for one scenario."""
    return types.SimpleNamespace(
        env=lambda **kw: hospital_marl.env(scenario=scenario, **kw),
        parallel_env=lambda **kw: hospital_marl.parallel_env(scenario=scenario, **kw),
    )


# api_test's style advice that does not apply by design: observations are
# {"observation", "action_mask"} dicts (PettingZoo's masking convention), each
# role sees its own blocks (different sizes), and agents are named by role.
API_TEST_ADVICE = [
    "ignore:Observation space for each agent probably should be:UserWarning",
    "ignore:We recommend agents to be named:UserWarning",
    "ignore:Agents have different observation space sizes:UserWarning",
    "ignore:Observation is not a NumPy array:UserWarning",
    "ignore:Observations are different shapes:UserWarning",
]


# --------------------------------------------------------------- PettingZoo
@pytest.mark.filterwarnings(*API_TEST_ADVICE)
@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_aec__passes_pettingzoo_api_test(scenario: str) -> None:
    api_test(hospital_marl.env(scenario=scenario), num_cycles=400)


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_parallel__passes_pettingzoo_parallel_api_test(scenario: str) -> None:
    parallel_api_test(hospital_marl.parallel_env(scenario=scenario), num_cycles=400)


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_aec__passes_pettingzoo_seed_test(scenario: str) -> None:
    seed_test(lambda: hospital_marl.env(scenario=scenario), num_cycles=400)


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_parallel__passes_pettingzoo_parallel_seed_test(scenario: str) -> None:
    parallel_seed_test(lambda: hospital_marl.parallel_env(scenario=scenario), num_cycles=400)


def test_package__passes_pettingzoo_max_cycles_test() -> None:
    max_cycles_test(hospital_marl)


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_every_scenario__passes_pettingzoo_max_cycles_test(scenario: str) -> None:
    max_cycles_test(scenario_module(scenario))


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_aec_and_parallel__pass_pettingzoo_state_test(scenario: str) -> None:
    state_test(hospital_marl.env(scenario=scenario), hospital_marl.parallel_env(scenario=scenario))


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_aec__passes_pettingzoo_render_test(scenario: str) -> None:
    render_test(lambda **kw: hospital_marl.raw_env(scenario=scenario, **kw))


@pytest.mark.parametrize("make", [hospital_marl.env, hospital_marl.parallel_env])
def test_pettingzoo_views__observation_masks_are_int8_of_the_role_action_count(make) -> None:
    env = make(scenario="surge")
    reset = env.reset(seed=0)
    observations = reset[0] if isinstance(reset, tuple) else {r: env.observe(r) for r in ROLES}
    for role in ROLES:
        mask = observations[role]["action_mask"]
        assert mask.dtype == np.int8 and mask.shape == (ROLE_ACTION_COUNTS[role],)
        assert set(np.unique(mask)) <= {0, 1} and mask[0] == 1
        assert env.observation_space(role)["action_mask"].dtype == np.int8
        assert env.observation_space(role).contains(observations[role])


def test_aec__state_space_contains_state_and_matches_parallel() -> None:
    aec, par = hospital_marl.env(scenario="surge"), hospital_marl.parallel_env(scenario="surge")
    aec.reset(seed=1)
    par.reset(seed=1)
    assert aec.state_space == par.state_space
    assert aec.state_space.contains(aec.state())
    np.testing.assert_array_equal(aec.state(), par.state())


# ------------------------------------------------------------ Gymnasium/SB3
@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
@pytest.mark.parametrize("env_id", GYM_IDS)
def test_gym_env__passes_gymnasium_check_env(env_id: str, scenario: str) -> None:
    env = gym.make(env_id, scenario=scenario)
    with only_the_required_shape_warning_ignored():
        gymnasium_check_env(env.unwrapped)


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
@pytest.mark.parametrize("env_id", GYM_IDS)
def test_gym_env__passes_sb3_check_env(env_id: str, scenario: str) -> None:
    with only_the_required_shape_warning_ignored():
        sb3_check_env(gym.make(env_id, scenario=scenario))
        sb3_check_env(gym.make(env_id, scenario=scenario).unwrapped)


@pytest.mark.parametrize("env_id", GYM_IDS)
def test_gym_env__sb3_warns_about_the_waiting_queue_shape_only(env_id: str) -> None:
    """The one warning we filter is really the one SB3 emits (so the filter is not hiding others)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sb3_check_env(gym.make(env_id, scenario="surge"))
    messages = {str(w.message) for w in caught}
    assert any("waiting_queue" in m for m in messages)
    assert all("waiting_queue" in m for m in messages), messages


@pytest.mark.parametrize("env_id", GYM_IDS)
def test_gym_env__masking_is_found_by_sb3_contrib_through_the_wrappers(env_id: str) -> None:
    env = gym.make(env_id, scenario="ventilator_crisis")
    assert env is not env.unwrapped  # gym.make's wrapper chain is in the way
    env.reset(seed=0)
    assert is_masking_supported(env)
    masks = get_action_masks(env)
    assert masks.dtype == np.bool_ and masks.shape == (MASK_SIZE[env_id],)
    np.testing.assert_array_equal(masks, env.unwrapped.action_masks())


@pytest.mark.parametrize("env_id", GYM_IDS)
def test_gym_env__masking_is_found_by_sb3_contrib_through_a_vec_env(env_id: str) -> None:
    vec = DummyVecEnv([lambda: Monitor(gym.make(env_id, scenario="surge"))] * 2)
    vec.seed(0)
    vec.reset()
    assert is_masking_supported(vec)
    masks = get_action_masks(vec)
    assert masks.dtype == np.bool_ and masks.shape == (2, MASK_SIZE[env_id])
    vec.close()


@pytest.mark.parametrize("env_id", GYM_IDS)
def test_gym_env__info_action_mask_equals_action_masks_every_step(env_id: str) -> None:
    env = gym.make(env_id, scenario="surge")
    obs, info = env.reset(seed=2)
    rng = np.random.default_rng(2)
    done = False
    while not done:
        mask = env.unwrapped.action_masks()
        assert mask.dtype == np.bool_ and mask.shape == (MASK_SIZE[env_id],)
        np.testing.assert_array_equal(info["action_mask"], mask)
        assert env.observation_space.contains(obs)
        obs, reward, terminated, truncated, info = env.step(masked_sample(env_id, mask, rng))
        assert isinstance(reward, float)
        done = terminated or truncated


def masked_sample(env_id: str, mask: np.ndarray, rng: np.random.Generator):
    if env_id == COMPOSED_ENV_ID:
        return int(rng.choice(np.flatnonzero(mask)))
    action, start = [], 0
    for role in ROLES:
        n = ROLE_ACTION_COUNTS[role]
        action.append(int(rng.choice(np.flatnonzero(mask[start : start + n]))))
        start += n
    return np.array(action)


@pytest.mark.parametrize("env_id", GYM_IDS)
def test_gym_env__composed_observation_keeps_the_original_keys_and_shapes(env_id: str) -> None:
    env = gym.make(env_id)
    obs, _ = env.reset(seed=0)
    expected = {
        "bed_occupancy": (20,),
        "icu_occupancy": (5,),
        "ventilator_status": (3,),
        "waiting_queue": (10, 3),
        "time_step": (1,),
        "stats": (3,),
    }
    for key, shape in expected.items():
        assert obs[key].shape == shape and env.observation_space[key].shape == shape
