"""Gymnasium 1.2's vector wrappers on ``gym.make_vec`` (issue #44, item 2): the native batched env
autoresets next-step (Gymnasium's default), so each wrapper gives the numbers it gives on
``SyncVectorEnv`` of the scalar env, seed for seed and action for action; masks are reachable
under any wrapper, as Gymnasium documents (``env.unwrapped.call`` / ``get_attr``, ``infos``)."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as vw

from hospital_marl import COMPOSED_ENV_ID, TEAM_ENV_ID
from hospital_marl.envs.vector import HospitalEDVectorEnv

N, TICKS = 3, 12  # short shifts: every env ends several episodes in the run
KWARGS = {"scenario": "surge", "max_cycles": TICKS}


def _flat(env: gym.vector.VectorEnv) -> gym.vector.VectorEnv:
    return vw.FlattenObservation(env)


WRAPPERS: dict[str, Callable[[gym.vector.VectorEnv], gym.vector.VectorEnv]] = {
    "RecordEpisodeStatistics": vw.RecordEpisodeStatistics,
    "FlattenObservation": _flat,
    "NormalizeObservation": lambda env: vw.NormalizeObservation(_flat(env)),
    "TransformObservation": lambda env: vw.TransformObservation(
        env, lambda obs: {**obs, "time_step": obs["time_step"] / TICKS}
    ),
    "NormalizeReward": vw.NormalizeReward,
    "ClipReward": lambda env: vw.ClipReward(env, -1.0, 1.0),
}


def _both(env_id: str, wrap: Callable) -> tuple[gym.vector.VectorEnv, gym.vector.VectorEnv]:
    native = wrap(gym.make_vec(env_id, num_envs=N, **KWARGS))
    sync = wrap(gym.make_vec(env_id, num_envs=N, vectorization_mode="sync", **KWARGS))
    assert isinstance(native.unwrapped, type(gym.make_vec(env_id, num_envs=1).unwrapped))
    return native, sync


def _equal(a, b, what: str) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for key in a:
            _equal(a[key], b[key], f"{what}[{key}]")
    else:
        np.testing.assert_array_equal(a, b, err_msg=what)


def _masked_actions(masks: tuple[np.ndarray, ...], rng: np.random.Generator) -> np.ndarray:
    return np.array([rng.choice(np.flatnonzero(mask)) for mask in masks])


@pytest.mark.parametrize("name", WRAPPERS)
def test_wrapper__same_numbers_as_on_sync_vector_env(name: str) -> None:
    native, sync = _both(COMPOSED_ENV_ID, WRAPPERS[name])  # a bare AssertionError here before
    obs_n, _ = native.reset(seed=7)
    obs_s, _ = sync.reset(seed=7)
    _equal(obs_n, obs_s, "reset")
    rng = np.random.default_rng(0)
    episodes, ended = 0, np.zeros(N, bool)
    for step in range(3 * (TICKS + 1)):
        masks = native.unwrapped.call("action_masks")
        for i, (a, b) in enumerate(zip(masks, sync.unwrapped.call("action_masks"))):
            if not ended[i]:  # at an episode's last step the next action is ignored: its mask too
                np.testing.assert_array_equal(a, b)
        actions = _masked_actions(masks, rng)
        out_n, out_s = native.step(actions), sync.step(actions)
        ended = out_s[2] | out_s[3]
        for what, a, b in zip(("obs", "reward", "terminated", "truncated"), out_n, out_s):
            _equal(a, b, f"step {step} {what}")
        info_n, info_s = out_n[4], out_s[4]
        if "episode" in info_s:
            episodes += int(info_s["_episode"].sum())
            _equal(info_n["episode"]["r"], info_s["episode"]["r"], "episode return")
            _equal(info_n["episode"]["l"], info_s["episode"]["l"], "episode length")
    if name == "RecordEpisodeStatistics":
        assert episodes == 3 * N
        assert list(native.length_queue) == [TICKS] * (3 * N)  # 99 of 100 ticks before (same-step)
        assert list(native.return_queue) == list(sync.return_queue)


def test_team_id__record_episode_statistics_as_on_sync() -> None:
    native, sync = _both(TEAM_ENV_ID, vw.RecordEpisodeStatistics)
    native.reset(seed=1)
    sync.reset(seed=1)
    for _ in range(2 * (TICKS + 1)):
        actions = np.zeros((N, 3), np.int64)
        native.step(actions)
        sync.step(actions)
    assert list(native.length_queue) == list(sync.length_queue) == [TICKS] * (2 * N)
    assert list(native.return_queue) == list(sync.return_queue)


def test_make_vec__declares_next_step__the_classes_keep_same_step() -> None:
    assert gym.make_vec(COMPOSED_ENV_ID, num_envs=2).metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert gym.make_vec(TEAM_ENV_ID, num_envs=2).metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert HospitalEDVectorEnv(2).metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    same = gym.make_vec(COMPOSED_ENV_ID, num_envs=2, autoreset_mode="same_step")
    assert same.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    with pytest.raises(ValueError, match="autoreset_mode must be one of"):
        gym.make_vec(COMPOSED_ENV_ID, num_envs=2, autoreset_mode="sometimes")


def test_masks__reachable_under_wrappers_as_on_sync() -> None:
    native, sync = _both(COMPOSED_ENV_ID, lambda env: vw.NormalizeObservation(_flat(env)))
    _, info_n = native.reset(seed=3)
    _, info_s = sync.reset(seed=3)
    np.testing.assert_array_equal(info_n["action_mask"], info_s["action_mask"])  # infos pass through
    assert len(native.unwrapped.call("action_masks")) == N
    assert native.unwrapped.get_attr("scenario") == sync.unwrapped.get_attr("scenario")


def test_vector_score_reward__same_episode_returns_in_either_mode() -> None:
    """The package's own vector wrapper reads an episode's end from either autoreset mode."""
    from hospital_marl.envs.wrappers import VectorScoreReward

    returns = {}
    for mode in ("same_step", "next_step"):
        env = VectorScoreReward(gym.make_vec(COMPOSED_ENV_ID, num_envs=1, autoreset_mode=mode, **KWARGS))
        env.reset(seed=4)
        total, episodes, restarting = 0.0, [], False
        while len(episodes) < 3:
            _, reward, terminated, truncated, _ = env.step(np.zeros(1, np.int64))
            if restarting:  # next-step: the ignored step that starts the next episode pays nothing
                assert reward[0] == 0.0
                restarting = False
                continue
            total += float(reward[0])
            if terminated[0] or truncated[0]:
                episodes.append(total)
                total, restarting = 0.0, mode == "next_step"
        returns[mode] = episodes
    assert returns["next_step"] == pytest.approx(returns["same_step"], abs=1e-9)
