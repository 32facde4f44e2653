"""Shared fixtures. Plain helper functions live in ``tests/helpers.py``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hospital_marl import SCENARIOS, Scenario, register_scenario
from tests.helpers import TINY, stream_handlers

pytest_plugins = ["tests.ci_gaps"]  # in CI, a test that cannot import its dependencies fails


def closed_stream_handlers() -> list[str]:
    """Loggers with a ``StreamHandler`` whose stream is closed (``"<logger>: <handler>"``)."""
    return stream_handlers(lambda stream: getattr(stream, "closed", False))


@pytest.fixture(autouse=True)
def _no_log_handler_on_a_closed_stream() -> Iterator[None]:
    """A test must not leave a logging handler on a stream that is closed once the test ends
    (pytest's capture streams are): every later record would raise ``I/O operation on closed
    file``, and a serial CI run lost its ``sys.stderr`` that way. Checked as the test ends."""
    yield
    if leaked := closed_stream_handlers():
        pytest.fail(f"logging handlers left on a closed stream: {leaked}", pytrace=False)


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
