"""Every view's mask is exactly what the simulator would carry out (SPEC §3, §5).

At each decision point the mask a view hands out is checked against a deep
copy of its simulator trying each action: valid iff the copy carries it out.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest

import hospital_marl
from hospital_marl import COMPOSED_ENV_ID, ROLE_ACTION_COUNTS, ROLES, TEAM_ENV_ID, Hospital
from hospital_marl.core.hospital import Outcome
from tests.helpers import SCENARIOS_AND_TINY, masked_random_flat, scenario_id


def role_validity(h: Hospital, role: str) -> np.ndarray:
    """What the simulator would carry out, per role action (no-op counts as valid)."""
    valid = []
    for ra in range(ROLE_ACTION_COUNTS[role]):
        outcome = copy.deepcopy(h).act(role, ra)
        valid.append(outcome is Outcome.DONE or (ra == 0 and outcome is Outcome.NOOP))
    return np.array(valid)


def flat_validity(h: Hospital) -> np.ndarray:
    valid = []
    for a in range(39):
        outcome = copy.deepcopy(h).act_flat(a)
        valid.append(outcome is Outcome.DONE or (a == 0 and outcome is Outcome.NOOP))
    return np.array(valid)


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_aec__observation_action_mask_is_exactly_what_is_valid(scenario) -> None:
    env = hospital_marl.env(scenario=scenario)
    env.reset(seed=8)
    h = env.unwrapped.hospital
    rng = np.random.default_rng(8)
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        mask = obs["action_mask"]
        assert mask.dtype == np.int8 and mask.shape == (ROLE_ACTION_COUNTS[agent],)
        np.testing.assert_array_equal(
            mask.astype(bool), role_validity(h, agent), err_msg=f"{agent} t={h.tick_count}"
        )
        action = (
            int(rng.choice(np.flatnonzero(mask))) if rng.random() > 0.15 else int(rng.integers(len(mask)))
        )
        env.step(action)


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_parallel__every_role_mask_is_exactly_what_is_valid_on_the_shared_state(scenario) -> None:
    env = hospital_marl.parallel_env(scenario=scenario)
    observations, _ = env.reset(seed=9)
    rng = np.random.default_rng(9)
    while env.agents:
        for role in ROLES:
            mask = observations[role]["action_mask"]
            assert mask.dtype == np.int8
            np.testing.assert_array_equal(mask.astype(bool), role_validity(env.hospital, role))
        actions = {r: int(rng.choice(np.flatnonzero(observations[r]["action_mask"]))) for r in ROLES}
        observations, *_ = env.step(actions)


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_composed__action_masks_are_exactly_what_is_valid(scenario) -> None:
    env = gym.make(COMPOSED_ENV_ID, scenario=scenario)
    _, info = env.reset(seed=10)
    rng = np.random.default_rng(10)
    done = False
    while not done:
        mask = env.unwrapped.action_masks()
        assert mask.dtype == np.bool_ and mask.shape == (39,)
        np.testing.assert_array_equal(mask, flat_validity(env.unwrapped.hospital))
        np.testing.assert_array_equal(info["action_mask"], mask)
        _, _, terminated, truncated, info = env.step(masked_random_flat(mask, rng, 0.1))
        done = terminated or truncated


@pytest.mark.parametrize("scenario", SCENARIOS_AND_TINY, ids=scenario_id)
def test_team__action_masks_are_the_three_exact_role_masks_concatenated(scenario) -> None:
    env = gym.make(TEAM_ENV_ID, scenario=scenario)
    _, info = env.reset(seed=11)
    rng = np.random.default_rng(11)
    done = False
    while not done:
        mask = env.unwrapped.action_masks()
        assert mask.dtype == np.bool_ and mask.shape == (41,)
        h = env.unwrapped.hospital
        np.testing.assert_array_equal(mask, np.concatenate([role_validity(h, r) for r in ROLES]))
        np.testing.assert_array_equal(info["action_mask"], mask)
        parts = np.split(mask, np.cumsum([ROLE_ACTION_COUNTS[r] for r in ROLES])[:-1])
        _, _, terminated, truncated, info = env.step(np.array([rng.choice(np.flatnonzero(p)) for p in parts]))
        done = terminated or truncated


def test_tiny__env_masks_never_offer_missing_ventilators_or_icu_beds(tiny) -> None:
    env = hospital_marl.env(scenario=tiny)
    env.reset(seed=0)
    for _ in range(100):
        for role in ROLES:
            mask = env.observe(role)["action_mask"]
            if role == "ventilator_officer":
                assert not mask[1 + tiny.ventilators :].any()
            if role == "bed_manager":
                assert not mask[11 + tiny.icu_beds :].any()
        for role in ROLES:
            mask = env.observe(role)["action_mask"]
            env.step(int(np.flatnonzero(mask)[-1]))
        if any(env.terminations.values()) or any(env.truncations.values()):
            break
