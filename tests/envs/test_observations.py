"""Observations show the simulator's state (SPEC §5): the original's six keys plus the extras."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

import hospital_marl
from hospital_marl import COMPOSED_ENV_ID, ROLES, Hospital, Scenario
from hospital_marl.core.hospital import EMPTY
from hospital_marl.envs.observations import ROLE_INDEX, ObservationBuilder
from tests.helpers import TINY, global_vector, masked_random_flat, scenario_id, scripted_day


def assert_observation_shows(obs: dict[str, np.ndarray], h: Hospital) -> None:
    board, icu = h.board(), h.icu
    sev = h.severity
    padded_board = [sev[p] for p in board] + [0] * (20 - len(board))
    np.testing.assert_array_equal(obs["bed_occupancy"], padded_board)
    assert list(obs["bed_occupancy"][: len(board)]) == sorted(
        obs["bed_occupancy"][: len(board)], reverse=True
    )
    icu_sev = [0 if p == EMPTY else sev[p] for p in icu] + [0] * (5 - len(icu))
    np.testing.assert_array_equal(obs["icu_occupancy"], icu_sev)
    np.testing.assert_array_equal(
        obs["ventilator_status"], [v != EMPTY for v in h.vents] + [0] * (3 - len(h.vents))
    )
    expected_queue = np.zeros((10, 3))
    for slot, p in enumerate(h.queue[:10]):
        expected_queue[slot] = (sev[p], h.day.condition[p], h.wait[p])
    np.testing.assert_array_equal(obs["waiting_queue"], expected_queue)
    np.testing.assert_array_equal(obs["time_step"], [h.tick_count])
    np.testing.assert_array_equal(obs["stats"], [h.counters.discharges, h.counters.deaths, len(h.queue)])
    np.testing.assert_array_equal(
        obs["capacity"], [h.general.count(EMPTY), h.icu.count(EMPTY), h.vents.count(EMPTY), len(h.queue)]
    )
    occupied = [(bed, p) for bed, p in enumerate(icu) if p != EMPTY]
    for key, value in (
        ("icu_needs_vent", h.needs_ventilator),
        ("icu_on_vent", lambda p: h.vent_of[p] != EMPTY),
        ("icu_ready", h.is_ready),
    ):
        expected = np.zeros(5)
        for bed, p in occupied:
            expected[bed] = value(p)
        np.testing.assert_array_equal(obs[key], expected, err_msg=key)


@pytest.mark.parametrize("scenario", ("ventilator_crisis", "mass_casualty", TINY), ids=scenario_id)
def test_composed_observation__shows_the_core_state_every_tick(scenario) -> None:
    env = gym.make(COMPOSED_ENV_ID, scenario=scenario)
    obs, info = env.reset(seed=12)
    rng = np.random.default_rng(12)
    done = False
    while not done:
        assert_observation_shows(obs, env.unwrapped.hospital)
        assert env.observation_space.contains(obs)
        obs, _, terminated, truncated, info = env.step(masked_random_flat(info["action_mask"], rng, 0.1))
        done = terminated or truncated
    assert_observation_shows(obs, env.unwrapped.hospital)


def test_role_observations__are_their_blocks_of_the_global_state() -> None:
    env = hospital_marl.env(scenario="surge")
    env.reset(seed=3)
    comp = gym.make(COMPOSED_ENV_ID, scenario="surge")
    obs, _ = comp.reset(seed=3)
    for role in ROLES:
        np.testing.assert_array_equal(env.observe(role)["observation"], global_vector(obs)[ROLE_INDEX[role]])
        assert env.observation_space(role)["observation"].contains(env.observe(role)["observation"])


@pytest.mark.parametrize("episode_length", [2, 3, 4])
def test_observation__stays_in_its_space_for_short_custom_episodes(episode_length: int) -> None:
    """waiting_queue columns hold severity and condition (up to 5), not only waiting time (up to T)."""
    scenario = Scenario(name=f"short_{episode_length}", episode_length=episode_length)
    day = scripted_day([{"tick": 0, "severity": 5, "condition": 5, "latent": 0.999}])  # neuro, resuscitation
    env = gym.make(COMPOSED_ENV_ID, scenario=scenario, day_generator=day)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["waiting_queue"][0], [5, 5, 0])
    high = env.observation_space["waiting_queue"].high[0]
    assert env.observation_space.contains(obs), f"waiting_queue high {high} excludes severity 5 / condition 5"
    aec = hospital_marl.env(scenario=scenario, day_generator=day)
    aec.reset(seed=0)
    assert aec.state_space.contains(aec.state())
    for role in ROLES:
        assert aec.observation_space(role).contains(aec.observe(role))


def test_composed_step__observations_kept_by_the_caller_are_never_overwritten() -> None:
    """Gymnasium users keep observations (lists, frame stacks, replay buffers, tensors): what a
    step returned must still read the same after later steps, whether the caller keeps the
    whole dict, one block, a slice of a block, or a memoryview of it."""
    env = gym.make(COMPOSED_ENV_ID, scenario="surge")
    obs, info = env.reset(seed=5)
    rng = np.random.default_rng(5)
    kept: list[tuple[object, np.ndarray]] = []  # (what the caller kept, a copy taken at the time)
    for t in range(60):
        obs, _, terminated, truncated, info = env.step(masked_random_flat(info["action_mask"], rng))
        assert not (terminated or truncated)
        kind = t % 4
        if kind == 0:
            kept.append((obs, np.concatenate([v.ravel() for v in obs.values()]).copy()))
        elif kind == 1:
            kept.append((obs["waiting_queue"], obs["waiting_queue"].copy()))
        elif kind == 2:
            kept.append((obs["bed_occupancy"][:4], obs["bed_occupancy"][:4].copy()))
        else:
            kept.append((memoryview(obs["capacity"]), obs["capacity"].copy()))
        del obs  # the usual loop drops its last reference here; buffers may then be reused
    for thing, then in kept:
        if isinstance(thing, dict):
            now = np.concatenate([v.ravel() for v in thing.values()])
        else:
            now = np.asarray(thing)
        np.testing.assert_array_equal(now, then)


def test_composed_step__draws_more_bounce_backs_when_a_long_day_needs_them() -> None:
    """Every early discharge uses the next pair of the bounce-back stream (drawn in blocks of 64):
    a long day with more early discharges than one block must play on, exactly as the core."""
    long_day = Scenario(name="long_day", episode_length=1000, max_deaths=1000)
    env = gym.make(COMPOSED_ENV_ID, scenario=long_day).unwrapped
    core = Hospital(long_day)
    _, info = env.reset(seed=2)
    core.reset(seed=2)
    for t in range(1000):
        mask = info["action_mask"]
        action = 29 if mask[29] else (1 if mask[1] else 0)  # early-discharge whenever possible
        obs, reward, terminated, truncated, info = env.step(action)
        core.act_flat(action)
        core.tick()
        assert reward == core.last_reward and info["tick"] == core.tick_count == t + 1
        np.testing.assert_array_equal(global_vector(obs), ObservationBuilder(core).vector())
        if terminated or truncated:
            break
    assert core.counters.early_discharges > 64


def test_composed_env__a_deep_copy_or_a_pickle_steps_on_with_its_own_observations() -> None:
    """Planners copy envs: the copy's observations must follow the copy's state, not the original's."""
    env = gym.make(COMPOSED_ENV_ID, scenario="surge").unwrapped
    _, info = env.reset(seed=4)
    for _ in range(3):
        _, _, _, _, info = env.step(masked_random_flat(info["action_mask"], np.random.default_rng(0)))
    for twin in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        for action in (1, 11, 0, 24):
            mine, *_ = env.step(action)
            theirs, *_ = twin.step(action)
            np.testing.assert_array_equal(global_vector(theirs), global_vector(mine))
            np.testing.assert_array_equal(global_vector(theirs), ObservationBuilder(twin.hospital).vector())
        _, info = env.reset(seed=4)
        for _ in range(3):
            _, _, _, _, info = env.step(masked_random_flat(info["action_mask"], np.random.default_rng(0)))


def test_composed_space__each_env_has_its_own_with_its_days_bounds() -> None:
    """Spaces are shared by no two envs (each seeds its own sampler), and a day's length is in
    its bounds (time_step <= T; a queue slot's waiting time <= max(5, T))."""
    first, second = (gym.make(COMPOSED_ENV_ID).unwrapped for _ in range(2))
    assert first.observation_space is not second.observation_space
    assert first.observation_space["waiting_queue"] is not second.observation_space["waiting_queue"]
    reference = gym.make(COMPOSED_ENV_ID).observation_space
    reference.seed(3)
    expected = [reference.sample() for _ in range(2)]
    first.observation_space.seed(3)
    drawn = [first.observation_space.sample()]
    second.observation_space.seed(99)  # the other env's seeding and drawing ...
    second.observation_space.sample()
    drawn.append(first.observation_space.sample())  # ... leave this one's stream as it was
    assert all(np.array_equal(d[k], e[k]) for d, e in zip(drawn, expected) for k in e)
    for length in (7, 300):
        env = gym.make(COMPOSED_ENV_ID, scenario=Scenario(name=f"len_{length}", episode_length=length))
        space = env.observation_space
        assert space["time_step"].high[0] == length
        np.testing.assert_array_equal(space["waiting_queue"].high[0], [5, 5, max(5, length)])
    aec_a, aec_b = hospital_marl.env(), hospital_marl.env()
    for role in ROLES:
        assert aec_a.observation_space(role) is not aec_b.observation_space(role)
        assert aec_a.observation_space(role) == aec_b.observation_space(role)
    assert aec_a.state_space is not aec_b.state_space and aec_a.state_space == aec_b.state_space
    short = Scenario(name="len_7", episode_length=7)
    flat = gym.make(COMPOSED_ENV_ID, observation_format="dict_1d", scenario=short)
    assert flat.observation_space["waiting_queue"].shape == (30,)
    assert flat.observation_space["waiting_queue"].high[2] == 7


def test_composed_space__the_copies_kept_are_bounded_and_each_day_gets_its_own_bounds() -> None:
    from hospital_marl.envs import observations

    lengths = range(2, 2 + 2 * observations.SPACE_CACHE_ENTRIES)
    for length in (*lengths, *lengths):  # past the bound, and again after the first ones left it
        env = gym.make(COMPOSED_ENV_ID, scenario=Scenario(name=f"len_{length}", episode_length=length))
        assert env.observation_space["time_step"].high[0] == length
        assert len(observations._SPACES) <= observations.SPACE_CACHE_ENTRIES
