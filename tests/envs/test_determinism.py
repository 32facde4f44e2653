"""Same seed => bit-identical trajectories in every view, within a process and across
processes (PettingZoo 1.27's ``parallel_seed_test`` only compares one step)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import hospital_marl
from hospital_marl import BUILTIN_SCENARIOS, COMPOSED_ENV_ID, ROLE_ACTION_COUNTS, ROLES, TEAM_ENV_ID
from tests.helpers import (
    assert_same_trajectory,
    flat_action_script,
    masked_random_flat,
    record_aec,
    record_composed,
    record_parallel,
    record_team,
    trajectory_digest,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDERS = {"composed": record_composed, "team": record_team, "aec": record_aec, "parallel": record_parallel}


def assert_identical(a: Any, b: Any, where: str = "") -> None:
    """Deep equality for nested dicts/lists/tuples of numpy arrays and scalars."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
        assert np.asarray(a).dtype == np.asarray(b).dtype, where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_identical(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


# ----------------------------------------------------- multi-step, in-process
@pytest.mark.parametrize("view", RECORDERS)
@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_view__same_seed_gives_identical_multi_step_trajectory(view: str, scenario: str) -> None:
    actions = flat_action_script(scenario, 31)
    first, second = RECORDERS[view](scenario, 31, actions), RECORDERS[view](scenario, 31, actions)
    assert len(first) > 10
    assert_same_trajectory(first, second)


def aec_rollout(scenario: str, seed: int) -> list:
    """All three roles act (random over their masks, some unmasked) until the episode ends."""
    env = hospital_marl.env(scenario=scenario)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        out.append((agent, obs, reward, terminated, truncated, info, env.state()))
        if terminated or truncated:
            action = None
        elif rng.random() < 0.1:
            action = int(rng.integers(ROLE_ACTION_COUNTS[agent]))
        else:
            action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        env.step(action)
    return out


def parallel_rollout(scenario: str, seed: int) -> list:
    """Simultaneous random joint actions (conflicts and invalid actions included)."""
    env = hospital_marl.parallel_env(scenario=scenario)
    observations, infos = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = [(observations, infos)]
    while env.agents:
        actions = {
            role: int(rng.choice(np.flatnonzero(observations[role]["action_mask"])))
            if rng.random() > 0.1
            else int(rng.integers(ROLE_ACTION_COUNTS[role]))
            for role in env.agents
        }
        observations, rewards, terminations, truncations, infos = env.step(actions)
        out.append((actions, observations, rewards, terminations, truncations, infos, env.state()))
    return out


def gym_rollout(env_id: str, scenario: str, seed: int) -> list:
    env = gym.make(env_id, scenario=scenario)
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = [(obs, info)]
    done = False
    while not done:
        if env_id == COMPOSED_ENV_ID:
            action = masked_random_flat(info["action_mask"], rng, 0.1)
        else:
            masks = np.split(info["action_mask"], np.cumsum([ROLE_ACTION_COUNTS[r] for r in ROLES])[:-1])
            action = np.array([int(rng.choice(np.flatnonzero(m))) for m in masks])
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((action, obs, reward, terminated, truncated, info))
        done = terminated or truncated
    return out


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_aec__all_roles_acting_is_deterministic_over_a_whole_episode(scenario: str) -> None:
    first = aec_rollout(scenario, 5)
    assert len(first) > 3 * 10
    assert_identical(first, aec_rollout(scenario, 5))


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_parallel__simultaneous_actions_are_deterministic_over_a_whole_episode(scenario: str) -> None:
    first = parallel_rollout(scenario, 6)
    assert len(first) > 10
    assert_identical(first, parallel_rollout(scenario, 6))


@pytest.mark.parametrize("env_id", [COMPOSED_ENV_ID, TEAM_ENV_ID])
@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_gym_env__same_seed_gives_identical_obs_rewards_and_infos(env_id: str, scenario: str) -> None:
    first = gym_rollout(env_id, scenario, 7)
    assert len(first) > 10
    assert_identical(first, gym_rollout(env_id, scenario, 7))


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_different_seeds__give_different_trajectories_in_every_view(scenario: str) -> None:
    for rollout in (aec_rollout, parallel_rollout):
        a, b = rollout(scenario, 1), rollout(scenario, 2)
        with pytest.raises(AssertionError):
            assert_identical(a, b)
    for env_id in (COMPOSED_ENV_ID, TEAM_ENV_ID):
        with pytest.raises(AssertionError):
            assert_identical(gym_rollout(env_id, scenario, 1), gym_rollout(env_id, scenario, 2))


# ------------------------------------------------ reset() without a seed
def days_after_unseeded_resets(make, n: int = 3) -> list:
    """The day after reset(seed=...), then after each of n plain reset() calls."""
    env = make()
    hospital = env.unwrapped.hospital if hasattr(env, "unwrapped") else env.hospital
    env.reset(seed=123)
    days = [hospital.day]
    for _ in range(n):
        env.reset()
        days.append(hospital.day)
    return days


@pytest.mark.parametrize(
    "make",
    [
        lambda: hospital_marl.env(scenario="surge"),
        lambda: hospital_marl.parallel_env(scenario="surge"),
        lambda: gym.make(COMPOSED_ENV_ID, scenario="surge"),
        lambda: gym.make(TEAM_ENV_ID, scenario="surge"),
    ],
    ids=["aec", "parallel", "composed", "team"],
)
def test_reset_without_seed__continues_deterministically_after_a_seeded_reset(make) -> None:
    first, second = days_after_unseeded_resets(make), days_after_unseeded_resets(make)
    assert first == second  # the same sequence of days
    assert all(first[i] != first[i + 1] for i in range(len(first) - 1))  # new days, not replays


def test_reset_without_seed__continues_identically_in_every_view() -> None:
    views = [
        hospital_marl.env(scenario="normal_day"),
        hospital_marl.parallel_env(scenario="normal_day"),
        gym.make(COMPOSED_ENV_ID, scenario="normal_day"),
        gym.make(TEAM_ENV_ID, scenario="normal_day"),
    ]
    days = []
    for env in views:
        env.reset(seed=99)
        env.reset()
        days.append((env.unwrapped.hospital if hasattr(env, "unwrapped") else env.hospital).day)
    assert all(day == days[0] for day in days)


def test_unseeded_envs__draw_different_days() -> None:
    a, b = gym.make(COMPOSED_ENV_ID), gym.make(COMPOSED_ENV_ID)
    a.reset()
    b.reset()
    assert a.unwrapped.hospital.day != b.unwrapped.hospital.day


# ------------------------------------------------------------ across processes
def digest_in_fresh_interpreter(scenario: str, seed: int, hash_seed: str) -> str:
    code = f"from tests.helpers import trajectory_digest; print(trajectory_digest({scenario!r}, {seed}))"
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_trajectories__are_bit_identical_across_processes() -> None:
    """Two fresh interpreters (different hash seeds) and this one agree on every view's episode."""
    here = trajectory_digest("mass_casualty", 2024)
    assert here == digest_in_fresh_interpreter("mass_casualty", 2024, hash_seed="0")
    assert here == digest_in_fresh_interpreter("mass_casualty", 2024, hash_seed="12345")
    assert here != trajectory_digest("mass_casualty", 2025)
