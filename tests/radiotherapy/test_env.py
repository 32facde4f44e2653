"""SPEC-RT §3–§5, §7 through the Gymnasium env: ids, masks, reward, episode end, observation, render."""

from __future__ import annotations

import copy
import warnings

import gymnasium as gym
import numpy as np
import pytest

import hospital_marl  # noqa: F401  (registers the ids)
from hospital_marl.radiotherapy import BUILTIN_TASKS, RT_ENV_ID, RadiotherapyPlanningEnv, task_env_id
from hospital_marl.radiotherapy.core.metrics import CRITICAL_CAP, PASS_THRESHOLD
from hospital_marl.radiotherapy.core.phantoms import disc, make_phantom
from hospital_marl.radiotherapy.core.plan import (
    ACTIONS,
    ADD,
    LOCK,
    MAX_BEAMS,
    N_ACTIONS,
    NARROW,
    WEIGHT_UP,
    Plan,
)
from hospital_marl.radiotherapy.envs.render import FRAME_SHAPE, frame_layout
from tests.radiotherapy.conftest import CENTRE, rollout


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_gym_make__per_task_id_and_task_kwarg(task: str) -> None:
    by_id = gym.make(task_env_id(task))
    by_kwarg = gym.make(RT_ENV_ID, task=task)
    assert by_id.unwrapped.task.name == by_kwarg.unwrapped.task.name == task
    obs_a, _ = by_id.reset(seed=3)
    obs_b, _ = by_kwarg.reset(seed=3)
    for key in obs_a:
        np.testing.assert_array_equal(obs_a[key], obs_b[key])


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_check_env__gymnasium_and_sb3_are_clean(task: str) -> None:
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(task_env_id(task), render_mode="rgb_array").unwrapped, skip_render_check=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sb3_check_env(RadiotherapyPlanningEnv(task))
    # SB3 only advises flattening the 2-D Dict entries (its MultiInputPolicy flattens them itself)
    assert all("unconventional shape" in str(w.message) for w in caught), [str(w.message) for w in caught]


def _changes(env: RadiotherapyPlanningEnv, action: int) -> bool:
    """Does ``action`` change the plan (or end the episode)? Probed on a deep copy."""
    probe = copy.deepcopy(env)
    plan = probe.plan
    before = (plan.angles.copy(), plan.weights.copy(), plan.margins.copy(), plan.n_beams, plan.active)
    _, _, terminated, _, _ = probe.step(action)
    after = (plan.angles, plan.weights, plan.margins, plan.n_beams, plan.active)
    changed = any(not np.array_equal(a, b) for a, b in zip(before, after))
    return changed or terminated


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_action_masks__exact_by_probing_every_action(task: str) -> None:
    env = RadiotherapyPlanningEnv(task)
    rng = np.random.default_rng(0)
    seen = np.zeros(N_ACTIONS, bool)
    for episode in range(6):
        _, info = env.reset(seed=episode)
        done = False
        while not done:
            mask = env.action_masks()
            np.testing.assert_array_equal(mask, info["action_mask"])
            for action in range(N_ACTIONS):
                assert mask[action] == _changes(env, action), f"{ACTIONS[action].name} mask {mask[action]}"
            seen |= ~mask
            # bias towards adding, weighting up and narrowing, so full plans and every bound are reached
            valid = np.flatnonzero(mask)
            preferred = [a for a in (ADD, WEIGHT_UP, NARROW) if mask[a] and rng.random() < 0.5]
            action = preferred[0] if preferred else int(valid[rng.integers(len(valid))])
            _, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
    assert seen.all(), "every action was invalid somewhere (7 beams, weight and margin bounds reached)"


def test_invalid_action__does_nothing_costs_a_step_and_is_counted() -> None:
    env = RadiotherapyPlanningEnv("prostate")
    obs, info = env.reset(seed=1)
    assert info["action_mask"].tolist() == [True] + [False] * (N_ACTIONS - 1)  # an empty plan: only "add"
    new_obs, reward, terminated, truncated, info = env.step(LOCK)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["invalid_actions"] == 1 and info["steps"] == 1
    for key in obs:
        if key != "step_fraction":
            np.testing.assert_array_equal(obs[key], new_obs[key])


NOT_ACTIONS = (N_ACTIONS, -1, 10**6, 2**70, 1.5, float("nan"), "add", None, True, np.bool_(False),
               np.float32(0.0), np.array([0, 1]), np.array(0.0), [0], {"action": 0})  # fmt: skip


def test_step__anything_that_is_not_an_action_is_an_invalid_action() -> None:
    """SPEC-RT §3: an invalid action does nothing and is counted (never an error), whatever it is:
    out of range, not an int, a bool. Each is one step, reward 0, the plan unchanged."""
    env = RadiotherapyPlanningEnv("prostate")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    obs, info = env.reset(seed=0)
    for count, bad in enumerate(NOT_ACTIONS, start=1):
        new_obs, reward, terminated, truncated, info = env.step(bad)
        assert (reward, terminated, truncated) == (0.0, False, False), repr(bad)
        assert info["invalid_actions"] == count and info["steps"] == count, repr(bad)
        assert env.plan.n_beams == 0
        for key in obs:
            if key != "step_fraction":
                np.testing.assert_array_equal(obs[key], new_obs[key])
    # integer NumPy scalars and single-element integer arrays are actions, as in the ED's env
    for good in (np.int64(ADD), np.array(ADD), np.array([ADD], dtype=np.int32)):
        _, _, _, _, info = env.step(good)
        assert info["invalid_actions"] == len(NOT_ACTIONS)
    assert env.plan.n_beams == 3
    env.step(LOCK)
    with pytest.raises(RuntimeError, match="over"):
        env.step(ADD)


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_return__equals_the_final_score(task: str) -> None:
    env = RadiotherapyPlanningEnv(task)
    rng = np.random.default_rng(1)
    for seed in range(15):
        _, _, rewards, info = rollout(env, seed, rng, masked=seed % 3 != 0)
        assert sum(rewards) == pytest.approx(info["score"], abs=1e-12)
        assert info["score"] == env.plan.score


def test_locking__early_or_late_is_neutral() -> None:
    # the same plan locked at once or after idle moves (turn there and back) returns the same
    returns = []
    for idle in (0, 6):
        env = RadiotherapyPlanningEnv("head_neck")
        env.reset(seed=9)
        total = sum(env.step(ADD)[1] for _ in range(5))
        for i in range(idle):
            total += env.step(1 if i % 2 == 0 else 2)[1]
        total += env.step(LOCK)[1]
        returns.append(total)
    assert returns[0] == pytest.approx(returns[1], abs=1e-12)


def test_truncation__at_the_step_limit_the_plan_is_graded_as_if_locked() -> None:
    env = gym.make(RT_ENV_ID, task={"name": "prostate", "max_steps": 12})
    _, info = env.reset(seed=4)
    total, steps, truncated, terminated = 0.0, 0, False, False
    while not (truncated or terminated):
        action = ADD if info["action_mask"][ADD] else 1  # never lock: keep turning
        _, reward, terminated, truncated, info = env.step(action)
        total += reward
        steps += 1
    assert truncated and not terminated and steps == 12
    locked = RadiotherapyPlanningEnv({"name": "prostate", "max_steps": 13})  # room for the lock
    locked.reset(seed=4)
    for _ in range(7):
        locked.step(ADD)
    for _ in range(5):
        locked.step(1)
    _, _, terminated, _, locked_info = locked.step(LOCK)
    assert terminated
    assert info["score"] == pytest.approx(locked_info["score"]) == pytest.approx(total)


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_observation__every_value_within_its_declared_bounds(task: str) -> None:
    env = RadiotherapyPlanningEnv(task)
    rng = np.random.default_rng(2)
    for seed in range(8):
        _, observations, _, _ = rollout(env, seed, rng, masked=True)
        for obs in observations:
            assert env.observation_space.contains(obs), {k: (v.min(), v.max()) for k, v in obs.items()}
    # a deliberately extreme plan: 7 beams at full weight (the DVHs and ratios saturate, clipped)
    env.reset(seed=0)
    for _ in range(MAX_BEAMS):
        env.step(ADD)
        for _ in range(4):
            obs, *_ = env.step(WEIGHT_UP)
    assert env.observation_space.contains(obs)
    assert obs["tumour_status"][2] == 1.0  # overdosed


def test_observation__every_oar_of_the_task_is_seen() -> None:
    for task, n in (("prostate", 2), ("head_neck", 7), ("pediatric_brain", 5)):
        obs, _ = RadiotherapyPlanningEnv(task).reset(seed=0)
        assert obs["oar_present"].tolist() == [1.0] * n + [0.0] * (7 - n)


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_determinism__same_seed_and_actions_same_trajectory(task: str) -> None:
    env_a, env_b = RadiotherapyPlanningEnv(task), RadiotherapyPlanningEnv(task)
    actions, observations, rewards, _ = rollout(env_a, 11, np.random.default_rng(5))
    obs, _ = env_b.reset(seed=11)
    replay_obs, replay_rewards = [obs], []
    for action in actions:
        obs, reward, *_ = env_b.step(action)
        replay_obs.append(obs)
        replay_rewards.append(reward)
    assert rewards == replay_rewards
    for a, b in zip(observations, replay_obs):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


def test_critical_gating__a_serial_organ_over_its_near_max_fails_the_plan() -> None:
    """A real plan (head & neck) whose spinal cord D2% is over its limit cannot pass, however
    good the rest: the env's kernel path and the NumPy definitions agree on it."""
    from hospital_marl.radiotherapy.core.metrics import dose_at_volume

    plan = Plan("head_neck")
    plan.reset(np.random.default_rng(0))
    cord = plan.task.oar_names.index("spinal_cord")
    limit = plan.task.constraint_table.limit[cord]
    # beams from behind (through the cord) at full weight
    for angles in ([17, 18, 19], [16, 18, 20, 0], [18, 18, 18]):
        metrics, score = plan.evaluate(np.array(angles), np.full(len(angles), 10))
        # this beam set's dose (default apertures), recomputed apart from the plan
        dose = plan.cache.to_grid(
            plan.cache.dose(np.array(angles), np.full(len(angles), 1.0), np.full(len(angles), 2))
        )
        near_max = dose_at_volume(dose[plan.phantom.oars[cord]], 2)
        assert metrics.constraint_values[cord] == near_max
        if near_max > limit:
            assert not metrics.oar_pass[cord]
            assert score <= CRITICAL_CAP < PASS_THRESHOLD
            break
    else:
        raise AssertionError("no beam set put the cord over its limit")


def test_plan_reset__a_given_phantom_with_an_empty_oar_is_a_clear_error() -> None:
    body, tumour = disc(CENTRE, 25), disc(CENTRE, 5)
    rectum = disc((CENTRE[0] + 10, CENTRE[1]), 3)
    phantom = make_phantom(body, tumour, [rectum, np.zeros_like(body)])  # prostate: rectum, bladder
    with pytest.raises(ValueError, match="bladder"):
        Plan("prostate").reset(np.random.default_rng(0), phantom)


def test_render__rgb_array_and_ansi() -> None:
    env = RadiotherapyPlanningEnv("head_neck", render_mode="rgb_array")
    env.reset(seed=0)
    empty = env.render()
    env.step(ADD)
    frame = env.render()
    assert frame.shape == FRAME_SHAPE and frame.dtype == np.uint8
    layout = frame_layout(env.task)
    panel, dvh = layout.slice_panel.region, layout.dvh.region
    assert (frame[panel] != empty[panel]).any()  # dose wash and beam line appear
    assert (frame[dvh] != empty[dvh]).any()  # the DVH curves move
    text = RadiotherapyPlanningEnv("head_neck", render_mode="ansi")
    text.reset(seed=0)
    text.step(ADD)
    out = text.render()
    assert "D98" in out and "Gy" in out and "spinal_cord" in out and "score" in out
    with pytest.raises(ValueError, match="render_mode"):
        RadiotherapyPlanningEnv("prostate", render_mode="human")


def test_observation__dvhs_are_cumulative_monotone_and_follow_the_definition() -> None:
    from hospital_marl.radiotherapy.core.metrics import cumulative_dvh

    env = RadiotherapyPlanningEnv("pediatric_brain")
    rng = np.random.default_rng(4)
    _, observations, _, _ = rollout(env, 2, rng)
    for obs in observations:
        assert (np.diff(obs["tumour_dvh"]) <= 0).all()
        assert (np.diff(obs["oar_dvh"], axis=1) <= 0).all()
    dose = env.plan.dose_grid()
    obs = observations[-1]
    expected = cumulative_dvh(dose[env.plan.phantom.tumour], 2.0)
    np.testing.assert_allclose(obs["tumour_dvh"], expected, atol=1e-6)
    for slot, (oar, mask) in enumerate(zip(env.task.oars, env.plan.phantom.oars)):
        np.testing.assert_allclose(
            obs["oar_dvh"][slot], cumulative_dvh(dose[mask], 2 * oar.reference_gy / env.task.rx_gy), atol=1e-6
        )
