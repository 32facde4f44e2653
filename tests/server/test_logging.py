"""No server (the app's own ``serve`` nor the tests' servers) ties logging to the stream of the moment.

uvicorn's default logging config binds its handlers to ``sys.stderr`` / ``sys.stdout``
as they are when a server starts. Under pytest that is a capture stream, closed when
the test ends: each later uvicorn record then fails with ``I/O operation on closed
file`` (a serial CI run crashed with a lost ``sys.stderr`` around 45 % of the suite).
"""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

from server.logs import CurrentStreamHandler, log_config
from server.settings import ServerSettings
from tests.helpers import stream_handlers
from tests.llm.openai_standin import OpenAIStandIn, serve_standin
from tests.server.live import live_server

pytestmark = pytest.mark.server


def _handlers_on(*streams: io.StringIO) -> list[str]:
    return stream_handlers(lambda stream: any(stream is s for s in streams))


SERVERS: dict[str, Callable[[], AbstractContextManager[str]]] = {
    "env server": lambda: live_server(ServerSettings(max_sessions=2)),
    "OpenAI stand-in": lambda: serve_standin(OpenAIStandIn([], "first_legal", 1.0)),
}


@pytest.mark.parametrize("start", SERVERS.values(), ids=SERVERS.keys())
def test_a_test_server_leaves_no_handler_on_the_streams_it_started_under(
    monkeypatch: pytest.MonkeyPatch, start: Callable[[], AbstractContextManager[str]]
) -> None:
    err, out = io.StringIO(), io.StringIO()  # what pytest's capsys puts there, closed after the test
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", out)
    try:
        with start():
            pass
    finally:
        monkeypatch.undo()
    assert _handlers_on(err, out) == []


def test_serves_log_handlers_write_to_the_current_stderr_after_the_old_one_closed() -> None:
    handlers = log_config()["handlers"]
    assert {h["()"] for h in handlers.values()} == {CurrentStreamHandler}
    assert {h["name"] for h in handlers.values()} == {"stderr", "stdout"}

    logger = logging.getLogger("tests.server.test_logging")
    logger.propagate = False
    handler = CurrentStreamHandler("stderr")
    logger.addHandler(handler)
    first, second, saved = io.StringIO(), io.StringIO(), sys.stderr
    try:
        sys.stderr = first
        logger.warning("one")
        first.close()
        sys.stderr = second
        logger.warning("two")  # a stored stream would raise "I/O operation on closed file" here
    finally:
        sys.stderr = saved
        logger.removeHandler(handler)
    assert second.getvalue() == "two\n"
