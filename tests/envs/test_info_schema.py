"""One info schema in every creation path (issue #44, item 3): ``gym.make``, ``gym.make_vec`` in
sync, async and native modes, and PettingZoo's AEC and parallel envs give the same keys with the
same dtypes, from ``reset()`` on; ``outcome`` is an integer code everywhere
(``OUTCOME_NAMES[code]`` names it)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import hospital_marl
from hospital_marl import COMPOSED_ENV_ID, ROLES, TEAM_ENV_ID
from hospital_marl.envs.infos import INFO_KEYS, INVALID, NOOP

KWARGS = {"scenario": "surge", "max_cycles": 6}
GYM_KEYS = {"action_mask", "tick", "scenario", *INFO_KEYS}
EPISODE_END = {"metrics", "counters", "score"}


def _kind(value: Any) -> str:
    """The dtype family a library sees in a buffer: integer, bool, float or object."""
    dtype = np.asarray(value).dtype
    for name, family in (("bool", np.bool_), ("integer", np.integer), ("float", np.floating)):
        if np.issubdtype(dtype, family):
            return name
    return "object"


def _schema(info: dict[str, Any], batched: bool) -> dict[str, str]:
    """Key -> dtype family (``_key`` masks dropped, each checked against its key; episode-end keys
    dropped: they appear only at an episode's end in every path)."""
    out = {}
    for key, value in info.items():
        if key.startswith("_") or key in EPISODE_END:
            continue
        if batched:
            assert info["_" + key].all(), key  # every env has every key from reset on
        out[key] = _kind(value)
    return out


def _scalar(env_id: str) -> list[dict[str, str]]:
    env = gym.make(env_id, **KWARGS)
    _, info = env.reset(seed=0)
    seen = [_schema(info, False)]
    for _ in range(KWARGS["max_cycles"] + 1):
        _, _, terminated, truncated, info = env.step(env.action_space.sample() * 0)
        seen.append(_schema(info, False))
        if terminated or truncated:
            assert set(info) >= EPISODE_END
            _, info = env.reset()
            seen.append(_schema(info, False))
    return seen


def _vector(env_id: str, mode: str) -> list[dict[str, str]]:
    env = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, **KWARGS)
    _, info = env.reset(seed=0)
    seen = [_schema(info, True)]
    for _ in range(KWARGS["max_cycles"] + 2):
        *_, terminated, truncated, info = env.step(np.zeros(env.action_space.shape, np.int64))
        seen.append(_schema(info, True))
        if (terminated | truncated).any():
            assert set(info) >= EPISODE_END
    env.close()
    return seen


@pytest.mark.parametrize("env_id", [COMPOSED_ENV_ID, TEAM_ENV_ID])
def test_gym_paths__same_keys_and_dtypes_from_reset_on(env_id: str) -> None:
    scalar = _scalar(env_id)
    expected = scalar[0]
    assert set(expected) >= GYM_KEYS
    for key in INFO_KEYS:
        assert expected[key] == "integer", key  # outcome too: a code, never a string
    assert expected["scenario"] == "object" and expected["action_mask"] == "bool"
    for path, seen in [("gym.make", scalar)] + [
        (mode, _vector(env_id, mode)) for mode in ("sync", "async", "vector_entry_point")
    ]:
        for schema in seen:
            assert schema == expected, path


def test_outcome__the_same_code_in_every_gym_path() -> None:
    """One invalid action (out of range) gives INVALID in the scalar env and each vector mode."""
    scalar = gym.make(COMPOSED_ENV_ID, **KWARGS)
    scalar.reset(seed=0)
    codes = {"gym.make": scalar.step(99)[4]["outcome"]}
    for mode in ("sync", "async", "vector_entry_point"):
        env = gym.make_vec(COMPOSED_ENV_ID, num_envs=2, vectorization_mode=mode, **KWARGS)
        env.reset(seed=0)
        codes[mode] = env.step(np.array([99, 0]))[4]["outcome"][0]
        env.close()
    assert codes == dict.fromkeys(codes, INVALID)


@pytest.mark.parametrize("maker", ["env", "parallel_env"])
def test_pettingzoo__each_roles_info_has_the_shared_keys_as_integers(maker: str) -> None:
    env = getattr(hospital_marl, maker)(**KWARGS)
    if maker == "env":
        env.reset(seed=0)
        infos = env.infos
    else:
        _, infos = env.reset(seed=0)
    for role in ROLES:
        assert set(INFO_KEYS) <= set(infos[role])
        assert all(_kind(infos[role][key]) == "integer" for key in INFO_KEYS)
        assert infos[role]["outcome"] == NOOP
