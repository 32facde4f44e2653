"""HospitalEnvironment: the OpenEnv Environment is a thin view of the composed env."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

from pydantic import ValidationError

from hospital_marl import BUILTIN_SCENARIOS
from server.environment import (
    EpisodeEndedError,
    EpisodeNotStartedError,
    HospitalEnvironment,
    TrackMixError,
)
from server.models import HospitalAction
from tests.server.reference import Reference, choose_flat, choose_team

pytestmark = pytest.mark.server


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_environment__flat_trajectory_matches_composed_env(scenario: str) -> None:
    env, rng = HospitalEnvironment(), random.Random(scenario)
    obs = env.reset(seed=11, scenario=scenario)
    ref = Reference(scenario, 11)
    ref.check(obs, None, False)
    while not obs.done:
        action = choose_flat(obs.action_mask, rng)
        obs = env.step(HospitalAction(action=action))
        ref.step(action)
        ref.check(obs, obs.reward, obs.done)
        assert obs.reward == ref.reward
    assert obs.metrics == ref.env.unwrapped.hospital.metrics()
    assert obs.info["score"] == ref.env.unwrapped.hospital.score()
    assert env.state.cumulative_reward == ref.env.unwrapped.hospital.counters.cumulative_reward


@pytest.mark.parametrize("scenario", ["normal_day", "ventilator_crisis"])
def test_environment__team_trajectory_matches_team_env(scenario: str) -> None:
    env, rng = HospitalEnvironment(), random.Random(7)
    obs = env.reset(seed=5, scenario=scenario)
    ref = Reference(scenario, 5, track="team")
    while not obs.done:
        joint = choose_team(rng)
        obs = env.step(HospitalAction(**joint))
        ref.step(joint)
        ref.check(obs, obs.reward, obs.done)
        assert set(obs.info["outcomes"]) == set(joint)
    counters = env.state.counters
    assert counters["actions"] == 3 * env.state.tick  # one action per role per tick
    assert env.state.track == "team"


def test_environment__step_before_reset_is_an_error() -> None:
    with pytest.raises(EpisodeNotStartedError, match="reset first"):
        HospitalEnvironment().step(0)


def test_environment__step_after_the_end_is_an_error_not_a_new_episode() -> None:
    env = HospitalEnvironment()
    obs = env.reset(seed=0, scenario="night_shift")
    while not obs.done:
        obs = env.step(0)
    tick = env.state.tick
    with pytest.raises(EpisodeEndedError, match="reset"):
        env.step(0)
    assert env.state.tick == tick and env.state.done


def test_environment__an_episode_stays_on_its_first_steps_track() -> None:
    env = HospitalEnvironment()
    env.reset(seed=0)
    env.step(HospitalAction(action=1))
    with pytest.raises(TrackMixError, match="flat track"):
        env.step(HospitalAction(triage=1))
    env.reset(seed=0)
    env.step(HospitalAction(triage=1))  # a new episode may take the other track
    assert env.state.track == "team"


def test_environment__default_scenario_comes_from_HOSPITAL_SCENARIO(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSPITAL_SCENARIO", "surge")
    env = HospitalEnvironment()
    env.reset(seed=0)
    assert env.state.scenario == "surge"
    env.reset(seed=0, scenario="night_shift")
    assert env.state.scenario == "night_shift"
    env.reset(seed=0)  # a reset naming no scenario gets the default again, not the last one
    assert env.state.scenario == "surge"
    monkeypatch.setenv("HOSPITAL_SCENARIO", "no_such_day")
    with pytest.raises(ValueError, match="HOSPITAL_SCENARIO"):
        HospitalEnvironment()


def test_environment__reset_rejects_unknown_arguments_and_bad_seeds() -> None:
    env = HospitalEnvironment()
    with pytest.raises(ValidationError, match="extra"):
        env.reset(seed=0, difficulty="hard")
    with pytest.raises(ValidationError, match="greater than or equal"):
        env.reset(seed=-3)
    with pytest.raises(ValidationError, match="unknown scenario"):
        env.reset(scenario="moon_base")


def test_environment__seedless_resets_are_reproducible_after_a_seeded_one() -> None:
    # As in Gymnasium: reset(seed=s) then reset() draws the next day from s.
    seeds = []
    for _ in range(2):
        env = HospitalEnvironment()
        env.reset(seed=123)
        env.reset()
        seeds.append(env.state.seed)
    assert seeds[0] == seeds[1] and seeds[0] != 123


def test_environment__sessions_share_nothing() -> None:
    a, b = HospitalEnvironment(), HospitalEnvironment()
    a.reset(seed=1)
    b.reset(seed=1)
    for _ in range(10):
        a.step(0)
    assert b.state.tick == 0 and a.state.tick == 10
    assert a._env.hospital is not b._env.hospital
