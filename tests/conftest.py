"""Shared fixtures. Plain helper functions live in ``tests/helpers.py``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hospital_marl import SCENARIOS, Scenario, register_scenario
from tests.helpers import TINY

pytest_plugins = ["tests.ci_gaps"]  # in CI, a test that cannot import its dependencies fails


@pytest.fixture
def tiny() -> Scenario:
    """3 general beds, 2 ICU beds, 1 ventilator: slots beyond the resources must be masked out."""
    return TINY


@pytest.fixture
def registered_scenario() -> Iterator[Scenario]:
    """A user-defined scenario in the registry for one test (removed afterwards)."""
    scenario = Scenario(name="test_my_ward", general_beds=8, icu_beds=3, ventilators=2, arrival_rate=1.2)
    register_scenario(scenario)
    try:
        yield scenario
    finally:
        SCENARIOS.pop(scenario.name, None)
