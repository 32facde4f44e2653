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
    max_sessions=4,
    max_http_sessions=3,
    http_session_ttl_s=60.0,
    max_message_bytes=4096,
    max_sessions_per_client=0,  # these tests fill pools from one client; test_safety tests the caps
    session_rate=0,  # ... and open sessions faster than a client should (test_attacker tests the rates)
    session_rate_per_client=0,
)

LOCAL = "http://127.0.0.1"
"""The base URL of in-process test clients: the server serves loopback host names only."""


def local_client(app: Any, **options: Any) -> Any:
    """FastAPI's TestClient addressing the app as ``127.0.0.1`` (HTTP and WebSocket alike:
    Starlette's ``websocket_connect`` otherwise names the host ``testserver``, which a server
    that serves loopback names only refuses)."""
    from fastapi.testclient import TestClient

    class LocalClient(TestClient):
        def websocket_connect(self, url: str, *args: Any, **kwargs: Any) -> Any:
            return super().websocket_connect(LOCAL.replace("http", "ws") + url, *args, **kwargs)

    return LocalClient(app, **{"base_url": LOCAL, **options})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client(clock: FakeClock) -> Iterator[Any]:
    """The app in-process (FastAPI's TestClient), small limits, a fake clock for session expiry."""
    from server.app import build_app

    with local_client(build_app(TEST_SETTINGS, clock=clock)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def live_url() -> Iterator[str]:
    """A real uvicorn server on a free loopback port, shared by a test module."""
    from tests.server.live import live_server

    with live_server(
        ServerSettings(max_sessions=16, max_message_bytes=4096, max_sessions_per_client=0)
    ) as url:
        yield url
