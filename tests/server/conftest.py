"""Fixtures of the server tests.

Every test module here starts with ``pytest.importorskip("openenv.core")``: without
the ``server`` extra they are skipped, so this file imports the server lazily.
Servers bind 127.0.0.1 only and are always shut down (``finally``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from server.settings import ServerSettings


class FakeClock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


TEST_SETTINGS = ServerSettings(
    max_sessions=4, max_http_sessions=3, http_session_ttl_s=60.0, max_message_bytes=4096
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client(clock: FakeClock) -> Iterator[Any]:
    """The app in-process (FastAPI's TestClient), small limits, a fake clock for session expiry."""
    from fastapi.testclient import TestClient

    from server.app import build_app

    with TestClient(build_app(TEST_SETTINGS, clock=clock)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def live_url() -> Iterator[str]:
    """A real uvicorn server on a free loopback port, shared by a test module."""
    from tests.server.live import live_server

    with live_server(ServerSettings(max_sessions=16, max_message_bytes=4096)) as url:
        yield url
