"""Scenarios are validated frozen data, selectable by name everywhere (SPEC §6)."""

from __future__ import annotations

import dataclasses
import re

import gymnasium as gym
import pytest

import hospital_marl
from hospital_marl import (
    BUILTIN_SCENARIOS,
    SCENARIOS,
    Burst,
    Hospital,
    Scenario,
    get_scenario,
    register_scenario,
)

GOOD_BURST = {"start": 30, "end": 33, "rate": 5.0, "condition": 3, "severity_mix": (0.0, 0.0, 0.2, 0.5, 0.3)}


def names_field_and_value(field: str, value: object) -> str:
    """A regex: the message names the field, then shows the bad value."""
    return rf"{re.escape(field)}\b.*{re.escape(repr(value) if not isinstance(value, tuple) else str(value))}"


def test_builtin_scenarios__are_the_five_of_the_spec() -> None:
    assert BUILTIN_SCENARIOS == ("normal_day", "surge", "mass_casualty", "night_shift", "ventilator_crisis")
    assert all(get_scenario(name).name == name for name in BUILTIN_SCENARIOS)


def test_scenario__is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_scenario("surge").arrival_rate = 3.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("severity_mix", (0.5, 0.5, 0.5, 0.0, 0.0)),  # sums to 1.5
        ("severity_mix", (0.1, 0.1, 0.1, 0.1, 0.1)),  # sums to 0.5
        ("condition_mix", (0.3, 0.3, 0.3, 0.3, 0.3)),
        ("severity_mix", (0.5, 0.5)),  # wrong length
        ("severity_mix", (0.2, 0.2, 0.2, 0.2, 0.1, 0.1)),
        ("condition_mix", (0.25, 0.25, 0.25, 0.25)),
        ("severity_mix", (1.5, -0.5, 0.0, 0.0, 0.0)),  # negative entry
    ],
)
def test_scenario__rejects_bad_mix_naming_field_and_value(field: str, value: tuple) -> None:
    with pytest.raises(ValueError, match=names_field_and_value(field, value)):
        Scenario(name="x", **{field: value})


@pytest.mark.parametrize("value", [-0.1, -5.0, float("nan"), float("inf")])
def test_scenario__rejects_bad_arrival_rate_naming_field_and_value(value: float) -> None:
    with pytest.raises(ValueError, match=names_field_and_value("arrival_rate", value)):
        Scenario(name="x", arrival_rate=value)


def test_scenario__rejects_non_numeric_arrival_rate_with_value_error() -> None:
    with pytest.raises(ValueError, match=names_field_and_value("arrival_rate", "fast")):
        Scenario(name="x", arrival_rate="fast")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("general_beds", 0),
        ("general_beds", 33),
        ("general_beds", -3),
        ("general_beds", 2.5),
        ("general_beds", 10.0),
        ("general_beds", "10"),
        ("general_beds", True),
        ("icu_beds", 0),
        ("icu_beds", 6),
        ("ventilators", 0),
        ("ventilators", 4),
        ("ventilators", 1.5),
        ("episode_length", 0),
        ("max_deaths", 0),
    ],
)
def test_scenario__rejects_bad_resource_count_naming_field_and_value(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=names_field_and_value(field, value)):
        Scenario(name="x", **{field: value})


@pytest.mark.parametrize(
    ("field", "value"), [("amplitude", -0.1), ("amplitude", 1.5), ("peak", float("nan"))]
)
def test_scenario__rejects_bad_profile_naming_field_and_value(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=names_field_and_value(field, value)):
        Scenario(name="x", **{field: value})


def test_scenario__rejects_empty_name() -> None:
    with pytest.raises(ValueError, match="name"):
        Scenario(name="")


def test_scenario__rejects_a_burst_that_is_not_a_burst() -> None:
    with pytest.raises(ValueError, match="burst"):
        Scenario(name="x", burst={"start": 1})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("start", -1),
        ("end", 29),  # before start
        ("rate", -2.0),
        ("rate", float("nan")),
        ("condition", 0),
        ("condition", 6),
        ("severity_mix", (0.0, 0.0, 0.2, 0.5)),
        ("severity_mix", (0.0, 0.0, 0.2, 0.5, 0.5)),
    ],
)
def test_burst__rejects_bad_field_naming_field_and_value(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=names_field_and_value(field, value)):
        Burst(**{**GOOD_BURST, field: value})


@pytest.mark.parametrize(
    ("field", "value"),
    [("start", 2.5), ("end", 33.5), ("condition", 2.0), ("condition", True), ("start", "30"), ("rate", "x")],
)
def test_burst__rejects_wrongly_typed_field_naming_field_and_value(field: str, value: object) -> None:
    """A burst that validates must also run: a float tick or condition id crashes the day generator."""
    with pytest.raises(ValueError, match=names_field_and_value(field, value)):
        Burst(**{**GOOD_BURST, field: value})


def test_get_scenario__unknown_name_raises_value_error_listing_valid_names() -> None:
    with pytest.raises(ValueError, match=r"'nope'.*normal_day"):
        get_scenario("nope")


def test_env__unknown_scenario_name_raises_value_error() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        hospital_marl.env(scenario="nope")


def test_register_scenario__makes_it_selectable_by_name_in_every_view(registered_scenario: Scenario) -> None:
    name = registered_scenario.name
    aec = hospital_marl.env(scenario=name)
    aec.reset(seed=0)
    assert aec.unwrapped.hospital.scenario is registered_scenario
    assert len(aec.unwrapped.hospital.general) == registered_scenario.general_beds
    parallel = hospital_marl.parallel_env(scenario=name)
    parallel.reset(seed=0)
    assert parallel.hospital.scenario is registered_scenario
    for env_id in (hospital_marl.COMPOSED_ENV_ID, hospital_marl.TEAM_ENV_ID):
        env = gym.make(env_id, scenario=name)
        env.reset(seed=0)
        assert env.unwrapped.scenario is registered_scenario


def test_register_scenario__refuses_to_overwrite_silently(registered_scenario: Scenario) -> None:
    with pytest.raises(ValueError, match=registered_scenario.name):
        register_scenario(Scenario(name=registered_scenario.name))
    assert SCENARIOS[registered_scenario.name] is registered_scenario


def test_get_scenario__mapping_overrides_a_base_scenario() -> None:
    scenario = get_scenario({"base": "surge", "arrival_rate": 2.0})
    surge = get_scenario("surge")
    assert scenario.arrival_rate == 2.0
    assert scenario.severity_mix == surge.severity_mix and scenario.condition_mix == surge.condition_mix
    env = hospital_marl.env(scenario={"base": "surge", "arrival_rate": 2.0})
    env.reset(seed=0)
    assert env.unwrapped.hospital.scenario.arrival_rate == 2.0


def test_get_scenario__mapping_with_burst_mapping_builds_a_burst() -> None:
    scenario = get_scenario({"base": "normal_day", "burst": GOOD_BURST})
    assert scenario.burst == Burst(**GOOD_BURST)


def test_get_scenario__mapping_with_bad_value_raises_value_error() -> None:
    with pytest.raises(ValueError, match="arrival_rate"):
        get_scenario({"base": "surge", "arrival_rate": -1.0})


def test_custom_scenario__runs_a_whole_episode() -> None:
    h = Hospital(Scenario(name="short", episode_length=7, general_beds=2, icu_beds=1, ventilators=1))
    h.reset(0)
    while not h.done:
        h.tick()
    assert h.truncated and h.tick_count == 7
