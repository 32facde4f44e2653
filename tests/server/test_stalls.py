"""No stalls (issue 24 item 5): work that takes a while elsewhere in the server does not hold up a
WebSocket client's step. Ordering, not timing: a step is answered while the other work is
provably still in flight (held at a gate the test opens afterwards)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

import httpx
from websockets.sync.client import connect

from server.mcp_tools import HospitalMCPEnvironment
from server.settings import ServerSettings
from tests.server.live import live_server

pytestmark = pytest.mark.server

MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
WAIT_S = 30.0


def test_opening_an_mcp_session_does_not_hold_up_websocket_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """A standard MCP session's set-up (its episode's environment is built as it opens) runs off
    the server's event loop: held there, it must not stop a /ws step from being answered."""
    armed, started, gate = threading.Event(), threading.Event(), threading.Event()
    build = HospitalMCPEnvironment.__init__

    def held_build(self: HospitalMCPEnvironment, *args: Any, **kwargs: Any) -> None:
        if armed.is_set():  # blocks whichever loop runs it, as slow Python work would
            started.set()
            gate.wait(WAIT_S * 2)
        build(self, *args, **kwargs)

    monkeypatch.setattr(HospitalMCPEnvironment, "__init__", held_build)
    client = {"name": "t", "version": "0"}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    with live_server(ServerSettings(max_sessions=8)) as url:
        replies: list[httpx.Response] = []

        def open_session() -> None:
            replies.append(httpx.post(f"{url}/mcp", json=init, headers=MCP_HEADERS, timeout=WAIT_S * 3))

        opener = threading.Thread(target=open_session, daemon=True)
        try:
            with connect("ws://" + url.split("://", 1)[1] + "/ws", open_timeout=WAIT_S) as ws:
                ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
                assert json.loads(ws.recv(timeout=WAIT_S))["type"] == "observation"
                armed.set()
                opener.start()
                assert started.wait(WAIT_S), "the MCP session never started to open"
                ws.send(json.dumps({"type": "step", "data": {"action": 0}}))
                reply = json.loads(ws.recv(timeout=WAIT_S))  # TimeoutError: the step waited for MCP
                assert reply["type"] == "observation" and reply["data"]["observation"]["time_step"]
                assert opener.is_alive() and not replies  # the session was still opening meanwhile
        finally:
            gate.set()
            if opener.ident is not None:
                opener.join(WAIT_S)
        assert replies and replies[0].status_code == 200 and "mcp-session-id" in replies[0].headers
