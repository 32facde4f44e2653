"""PettingZoo's own tests on every ``observation_format``, and the info contract (issue #29):
the same integer keys from ``reset()`` and every ``step()`` / ``last()`` in every multi-agent view."""

from __future__ import annotations

import types

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo.test import (
    api_test,
    max_cycles_test,
    parallel_api_test,
    parallel_seed_test,
    render_test,
    seed_test,
)

import hospital_marl
from hospital_marl import COMPOSED_ENV_ID, ROLE_ACTION_COUNTS, ROLES, TEAM_ENV_ID
from hospital_marl.envs.infos import INFO_KEYS, NOOP, OUTCOME_NAMES
from hospital_marl.envs.vector import HospitalMARLVectorEnv

FORMATS = ("flat", "padded", "padded_flat")
# api_test's style advice that does not apply by design (as in tests/envs/test_conformance.py)
API_TEST_ADVICE = [
    "ignore:Observation space for each agent probably should be:UserWarning",
    "ignore:We recommend agents to be named:UserWarning",
    "ignore:Agents have different observation space sizes:UserWarning",
    "ignore:Observation is not a NumPy array:UserWarning",
    "ignore:Observations are different shapes:UserWarning",
]


def module(observation_format: str) -> types.SimpleNamespace:
    """What ``max_cycles_test`` needs of a module, in one format."""
    return types.SimpleNamespace(
        env=lambda **kw: hospital_marl.env(observation_format=observation_format, **kw),
        parallel_env=lambda **kw: hospital_marl.parallel_env(observation_format=observation_format, **kw),
    )


@pytest.mark.filterwarnings(*API_TEST_ADVICE)
@pytest.mark.parametrize("observation_format", FORMATS)
def test_every_format__passes_pettingzoo_tests(observation_format: str) -> None:
    api_test(hospital_marl.env(observation_format=observation_format), num_cycles=150)
    parallel_api_test(hospital_marl.parallel_env(observation_format=observation_format), num_cycles=150)
    seed_test(lambda: hospital_marl.env(observation_format=observation_format), num_cycles=150)
    parallel_seed_test(
        lambda: hospital_marl.parallel_env(observation_format=observation_format), num_cycles=150
    )
    max_cycles_test(module(observation_format))
    render_test(lambda **kw: hospital_marl.raw_env(observation_format=observation_format, **kw))


@pytest.mark.parametrize("observation_format", FORMATS)
def test_every_format__carries_the_default_observation_and_mask(observation_format: str) -> None:
    env = hospital_marl.parallel_env(observation_format=observation_format)
    default = hospital_marl.parallel_env()
    obs, _ = env.reset(seed=5)
    want, _ = default.reset(seed=5)
    rng = np.random.default_rng(5)
    for _ in range(30):
        for role in ROLES:
            d, n = want[role]["observation"].shape[0], ROLE_ACTION_COUNTS[role]
            if observation_format.endswith("flat"):
                vector, mask = obs[role][:d], obs[role][env.mask_slice(role)]
                assert obs[role].dtype == np.float32
            else:
                vector, mask = obs[role]["observation"][:d], obs[role]["action_mask"]
                assert mask.dtype == np.int8
            np.testing.assert_array_equal(vector, want[role]["observation"])
            np.testing.assert_array_equal(mask[:n], want[role]["action_mask"])
            assert not np.any(mask[n:]) and not np.any(vector[d:])  # padding: zeros, masked out
            assert env.observation_space(role).contains(obs[role])
        actions = {r: int(rng.choice(np.flatnonzero(want[r]["action_mask"]))) for r in ROLES}
        obs, *_ = env.step(actions)
        want, *_ = default.step(actions)


def test_padded_formats__a_padding_action_is_invalid_not_an_error() -> None:
    env = hospital_marl.parallel_env(observation_format="padded")
    env.reset(seed=0)
    padding = ROLE_ACTION_COUNTS["ventilator_officer"]  # the first action past its own
    _, _rewards, _, _, infos = env.step({"triage": 0, "bed_manager": 0, "ventilator_officer": padding})
    assert OUTCOME_NAMES[infos["ventilator_officer"]["outcome"]] == "invalid"
    assert infos["ventilator_officer"]["invalid_actions"] == 1


def test_dict_formats__have_no_mask_slice_and_bad_formats_are_refused() -> None:
    with pytest.raises(ValueError, match="mask is obs\\['action_mask'\\]"):
        hospital_marl.parallel_env().mask_slice("triage")
    with pytest.raises(ValueError, match="observation_format must be one of"):
        hospital_marl.env(observation_format="image")
    with pytest.raises(ValueError, match="observation_format must be one of"):
        gym.make(COMPOSED_ENV_ID, observation_format="flat")


# ---------------------------------------------------------------- infos
def assert_info(info: dict) -> None:
    assert set(info) == set(INFO_KEYS), sorted(info)
    assert all(type(info[k]) is int for k in INFO_KEYS), info
    assert 0 <= info["outcome"] < len(OUTCOME_NAMES)


def test_aec__every_info_has_the_same_integer_keys_from_reset_to_the_end() -> None:
    env = hospital_marl.env(scenario="surge")
    env.reset(seed=1)
    for role in ROLES:
        assert env.infos[role]["outcome"] == NOOP  # before a role has acted
    rng = np.random.default_rng(1)
    for _agent in env.agent_iter():
        obs, _, terminated, truncated, info = env.last()
        assert_info(info)
        action = None if terminated or truncated else int(rng.choice(np.flatnonzero(obs["action_mask"])))
        env.step(action)


def test_parallel__every_info_has_the_same_integer_keys_from_reset_to_the_end() -> None:
    env = hospital_marl.parallel_env(scenario="surge")
    obs, infos = env.reset(seed=1)
    rng = np.random.default_rng(1)
    while True:
        assert set(infos) == set(ROLES)
        for info in infos.values():
            assert_info(info)
        actions = {r: int(rng.choice(np.flatnonzero(obs[r]["action_mask"]))) for r in env.agents}
        obs, _, terminations, truncations, infos = env.step(actions)
        if any(terminations.values()) or any(truncations.values()):
            for info in infos.values():
                assert_info(info)  # no metrics/counters by default: the keys never change
            break


def test_end_info__adds_the_episode_metrics_when_asked() -> None:
    env = hospital_marl.parallel_env(scenario="surge", end_info=True, max_cycles=3)
    env.reset(seed=1)
    for _ in range(3):
        _, _, _, truncations, infos = env.step({r: 0 for r in ROLES})
    assert all(truncations.values())
    assert infos["triage"]["metrics"] == env.hospital.metrics()


@pytest.mark.parametrize("kind", ["composed", "team", "marl"])
def test_vector_envs__infos_have_the_same_keys_from_reset_on(kind: str) -> None:
    if kind == "marl":
        env = HospitalMARLVectorEnv(num_envs=3, scenario="surge")
    else:
        env = gym.make_vec(
            COMPOSED_ENV_ID if kind == "composed" else TEAM_ENV_ID, num_envs=3, scenario="surge"
        )
    _, infos = env.reset(seed=0)
    keys = set(infos)
    assert set(INFO_KEYS) <= keys
    assert (infos["outcome"] == NOOP).all() and (infos["tick"] == 0).all()
    for _tick in range(1, 120):  # past the shift's end: an episode's end adds only its own keys
        if kind == "marl":
            actions = {r: np.zeros(3, np.int64) for r in ROLES}
        else:
            actions = np.zeros(env.action_space.shape, np.int64)
        _, _, _terminated, _truncated, infos = env.step(actions)
        episode_end = {"final_obs", "final_info", "metrics", "counters", "score"}  # same- / next-step
        assert set(infos) - episode_end - {f"_{k}" for k in episode_end} == keys
        for key in INFO_KEYS:
            assert np.issubdtype(infos[key].dtype, np.integer), key
    env.close()
