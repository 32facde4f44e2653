"""A real uvicorn server on a free loopback port, in a background thread (shut down on exit)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from server.app import build_app, uvicorn_options
from server.settings import ServerSettings

START_TIMEOUT_S = 120.0
"""Generous: a warm app starts the MCP transport's process first, 20-40 s on a loaded 2-core box."""


def loopback_socket() -> socket.socket:
    """A listening-ready TCP socket bound to 127.0.0.1 on a port the OS picked."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by accepted sockets: without it each HTTP reply waits ~40 ms for a delayed ACK.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def free_port() -> int:
    with loopback_socket() as sock:
        return sock.getsockname()[1]


def wait_healthy(
    url: str,
    timeout_s: float = START_TIMEOUT_S,
    alive: Callable[[], bool] = lambda: True,
    token: str | None = None,
) -> None:
    deadline = time.monotonic() + timeout_s
    headers = {"authorization": f"Bearer {token}"} if token else {}
    while time.monotonic() < deadline and alive():
        try:
            if httpx.get(f"{url}/health", timeout=1.0, headers=headers).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server at {url} not healthy within {timeout_s} s")


@contextmanager
def live_server(
    settings: ServerSettings | None = None, app: Any = None, log_level: str = "warning"
) -> Iterator[str]:
    """Serve ``app`` (default ``build_app(settings)``) on 127.0.0.1; yields the base URL; always
    stops the server.

    Logging is left alone (uvicorn's ``log_config=None``): its records propagate to pytest's
    ``caplog`` and reports. uvicorn's default config would bind handlers to the ``sys.stderr``
    of the moment, a capture stream pytest closes after the test (``I/O operation on closed
    file`` for every later record, and a suite that loses its stderr)."""
    settings = settings or ServerSettings()
    sock = loopback_socket()
    host, port = sock.getsockname()
    config = uvicorn.Config(
        app if app is not None else build_app(settings),
        log_level=log_level,
        log_config=None,
        **uvicorn_options(settings),
        lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="uvicorn-test")
    thread.start()
    url = f"http://{host}:{port}"
    try:
        wait_healthy(url, alive=thread.is_alive, token=settings.token)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
