"""An invalid action is never an error (SPEC §3): it does nothing, costs exactly -1 and is counted.

Each check runs twin envs with the same seed through the same prefix, then
steps one with the bad action and the other with a no-op: the rewards differ
by exactly -1 per invalid action, the invalid counter by one, and the
observations not at all.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest

import hospital_marl
from hospital_marl import COMPOSED_ENV_ID, ROLE_ACTION_COUNTS, ROLES, TEAM_ENV_ID
from hospital_marl.envs.infos import OUTCOME_NAMES
from tests.helpers import BAD_ACTIONS, NOOP, masked_random_flat, value_id

EXACT = 1e-9
PREFIX_TICKS = 25
ROLE_OUT_OF_RANGE = {role: n for role, n in ROLE_ACTION_COUNTS.items()}


def invalid_count(env) -> int:
    return env.unwrapped.hospital.counters.invalid_actions


# ---------------------------------------------------------------- composed
def composed_twins(seed: int = 3) -> tuple[gym.Env, gym.Env]:
    twins = []
    for _ in range(2):
        env = gym.make(COMPOSED_ENV_ID, scenario="surge")
        _, info = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for _ in range(PREFIX_TICKS):
            _, _, _, _, info = env.step(masked_random_flat(info["action_mask"], rng))
        twins.append(env)
    return twins[0], twins[1]


@pytest.mark.parametrize("bad", BAD_ACTIONS, ids=value_id)
def test_composed__bad_action_never_raises_costs_1_and_is_counted(bad) -> None:
    env, twin = composed_twins()
    obs, reward, _, _, info = env.step(bad)
    twin_obs, twin_reward, *_ = twin.step(NOOP)
    assert OUTCOME_NAMES[info["outcome"]] == "invalid"
    assert reward == pytest.approx(twin_reward - 1.0, abs=EXACT)
    assert invalid_count(env) == invalid_count(twin) + 1
    for key in obs:
        np.testing.assert_array_equal(obs[key], twin_obs[key])


def test_composed__every_masked_out_action_costs_1() -> None:
    env, _ = composed_twins()
    invalid = np.flatnonzero(~env.unwrapped.action_masks())
    assert len(invalid) > 0
    for a in invalid[:8]:
        env, twin = composed_twins()
        reward = env.step(int(a))[1]
        assert reward == pytest.approx(twin.step(NOOP)[1] - 1.0, abs=EXACT)
        assert invalid_count(env) == invalid_count(twin) + 1


# --------------------------------------------------------------------- AEC
def aec_twins(seed: int = 4, **kwargs) -> tuple:
    twins = []
    for _ in range(2):
        env = hospital_marl.env(scenario="normal_day", **kwargs)
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for _ in range(PREFIX_TICKS * len(ROLES)):
            mask = env.observe(env.agent_selection)["action_mask"]
            env.step(int(rng.choice(np.flatnonzero(mask))))
        twins.append(env)
    return twins[0], twins[1]


def run_tick(env, role_actions: dict) -> dict[str, float]:
    for role in ROLES:
        assert env.agent_selection == role
        env.step(role_actions.get(role, 0))
    return dict(env.rewards)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("bad", BAD_ACTIONS, ids=value_id)
def test_aec__bad_role_action_never_raises_costs_1_and_is_counted(role: str, bad) -> None:
    env, twin = aec_twins()
    rewards, twin_rewards = run_tick(env, {role: bad}), run_tick(twin, {})
    for r in ROLES:
        assert rewards[r] == pytest.approx(twin_rewards[r] - 1.0, abs=EXACT)  # team reward
    assert invalid_count(env) == invalid_count(twin) + 1
    np.testing.assert_array_equal(env.state(), twin.state())


@pytest.mark.parametrize("role", ROLES)
def test_aec__out_of_range_role_action_costs_1(role: str) -> None:
    env, twin = aec_twins()
    rewards = run_tick(env, {role: ROLE_OUT_OF_RANGE[role]})
    assert rewards[role] == pytest.approx(run_tick(twin, {})[role] - 1.0, abs=EXACT)


@pytest.mark.parametrize("role", ROLES)
def test_aec_role_reward_mode__charges_the_invalid_action_to_its_role_only(role: str) -> None:
    env, twin = aec_twins(reward_mode="role")
    rewards, twin_rewards = run_tick(env, {role: -1}), run_tick(twin, {})
    for r in ROLES:
        expected = twin_rewards[r] - (1.0 if r == role else 0.0)
        assert rewards[r] == pytest.approx(expected, abs=EXACT), r


# ---------------------------------------------------------------- parallel
def parallel_twins(seed: int = 5) -> tuple:
    twins = []
    for _ in range(2):
        env = hospital_marl.parallel_env(scenario="ventilator_crisis")
        observations, _ = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for _ in range(PREFIX_TICKS):
            actions = {r: int(rng.choice(np.flatnonzero(observations[r]["action_mask"]))) for r in ROLES}
            observations, *_ = env.step(actions)
        twins.append(env)
    return twins[0], twins[1]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("bad", BAD_ACTIONS, ids=value_id)
def test_parallel__bad_role_action_never_raises_costs_1_and_is_counted(role: str, bad) -> None:
    env, twin = parallel_twins()
    _, rewards, _, _, infos = env.step({r: (bad if r == role else 0) for r in ROLES})
    _, twin_rewards, *_ = twin.step({r: 0 for r in ROLES})
    assert OUTCOME_NAMES[infos[role]["outcome"]] == "invalid"
    for r in ROLES:
        assert rewards[r] == pytest.approx(twin_rewards[r] - 1.0, abs=EXACT)
    assert invalid_count(env) == invalid_count(twin) + 1 and infos[role]["invalid_actions"] == invalid_count(
        env
    )


def test_parallel__a_missing_role_no_ops_for_free() -> None:
    env, twin = parallel_twins()
    _, rewards, _, _, infos = env.step({"triage": 0})
    _, twin_rewards, *_ = twin.step({r: 0 for r in ROLES})
    assert rewards == twin_rewards and invalid_count(env) == invalid_count(twin)
    assert OUTCOME_NAMES[infos["bed_manager"]["outcome"]] == "noop"


# -------------------------------------------------------------------- team
def team_twins(seed: int = 6) -> tuple:
    twins = []
    for _ in range(2):
        env = gym.make(TEAM_ENV_ID, scenario="mass_casualty")
        _, info = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for _ in range(PREFIX_TICKS):
            masks = np.split(info["action_mask"], np.cumsum([ROLE_ACTION_COUNTS[r] for r in ROLES])[:-1])
            _, _, _, _, info = env.step(np.array([int(rng.choice(np.flatnonzero(m))) for m in masks]))
        twins.append(env)
    return twins[0], twins[1]


def team_action(role: str, value) -> list:
    return [value if r == role else 0 for r in ROLES]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("bad", [-1, 99, np.int64(-2), 2.5, "x", None, True, [1]], ids=value_id)
def test_team__one_bad_role_action_costs_exactly_1(role: str, bad) -> None:
    """One malformed element invalidates that role's action only; the others' no-ops stay no-ops."""
    env, twin = team_twins()
    _, reward, _, _, info = env.step(team_action(role, bad))
    _, twin_reward, *_ = twin.step([0, 0, 0])
    names = [OUTCOME_NAMES[code] for code in info["outcomes"]]  # role by role, as the team vector env's
    assert names[ROLES.index(role)] == "invalid"
    assert [n for n, r in zip(names, ROLES) if r != role] == ["noop", "noop"]
    assert reward == pytest.approx(twin_reward - 1.0, abs=EXACT)
    assert invalid_count(env) == invalid_count(twin) + 1


@pytest.mark.parametrize(
    "bad", ["abc", None, 3.5, [1, 2], np.zeros(4, dtype=np.int64), {"a": 1}], ids=value_id
)
def test_team__malformed_joint_action_never_raises_and_each_invalid_costs_1(bad) -> None:
    env, twin = team_twins()
    _, reward, _, _, info = env.step(bad)
    _, twin_reward, *_ = twin.step([0, 0, 0])
    extra_invalid = invalid_count(env) - invalid_count(twin)
    assert extra_invalid >= 1 and all(OUTCOME_NAMES[c] in ("invalid", "noop") for c in info["outcomes"])
    assert reward == pytest.approx(twin_reward - extra_invalid, abs=EXACT)


# ------------------------------------------------------ never raise, fuzzed
@pytest.mark.parametrize(
    ("make", "step"),
    [
        (lambda: gym.make(COMPOSED_ENV_ID, scenario="surge"), lambda env, a: env.step(a)),
        (lambda: gym.make(TEAM_ENV_ID, scenario="surge"), lambda env, a: env.step([a, a, a])),
    ],
    ids=["composed", "team"],
)
def test_gym_env__random_garbage_actions_never_raise_over_an_episode(make: Callable, step: Callable) -> None:
    env = make()
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    garbage = [*BAD_ACTIONS, *range(-3, 45)]
    done = False
    while not done:
        _, _, terminated, truncated, _ = step(env, garbage[int(rng.integers(len(garbage)))])
        done = terminated or truncated
    h = env.unwrapped.hospital
    assert 0 < h.counters.invalid_actions <= h.counters.actions
