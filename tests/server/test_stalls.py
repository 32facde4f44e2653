"""No stalls (issue 24 item 5): work that takes a while elsewhere in the server does not hold up a
WebSocket client's step. Ordering, not timing: a step is answered while the other work is
provably still in flight (held at a gate the test opens afterwards)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

import httpx
from websockets.sync.client import connect

from server.app import build_app
from server.settings import ServerSettings
from tests.server.live import live_server

pytestmark = pytest.mark.server

MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
WAIT_S = 30.0


def test_a_stuck_mcp_transport_does_not_hold_up_websocket_steps() -> None:
    """Standard MCP sessions are served by a process of their own: frozen (SIGSTOP) while a client
    opens a session, it must not stop a /ws step from being answered, and once it runs again the
    session opens. The server's own process is a different one."""
    client = {"name": "t", "version": "0"}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    app = build_app(ServerSettings(max_sessions=8))
    with live_server(app=app) as url:
        first = httpx.post(f"{url}/mcp", json=init, headers=MCP_HEADERS, timeout=WAIT_S * 4)
        assert first.status_code == 200 and "mcp-session-id" in first.headers
        pid = app.state.streamable_mcp.transport_pid
        assert pid is not None and pid != os.getpid()
        replies: list[httpx.Response] = []

        def open_session() -> None:
            replies.append(httpx.post(f"{url}/mcp", json=init, headers=MCP_HEADERS, timeout=WAIT_S * 3))

        opener = threading.Thread(target=open_session, daemon=True)
        os.kill(pid, signal.SIGSTOP)
        try:
            with connect("ws://" + url.split("://", 1)[1] + "/ws", open_timeout=WAIT_S) as ws:
                ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
                assert json.loads(ws.recv(timeout=WAIT_S))["type"] == "observation"
                opener.start()
                ws.send(json.dumps({"type": "step", "data": {"action": 0}}))
                reply = json.loads(ws.recv(timeout=WAIT_S))  # TimeoutError: the step waited for MCP
                assert reply["type"] == "observation" and reply["data"]["observation"]["time_step"]
                assert opener.is_alive() and not replies  # the session could not open meanwhile
        finally:
            os.kill(pid, signal.SIGCONT)
            if opener.ident is not None:
                opener.join(WAIT_S)
        assert replies and replies[0].status_code == 200 and "mcp-session-id" in replies[0].headers


def test_a_dead_mcp_transport_gives_back_its_sessions_and_a_fresh_one_serves() -> None:
    """If the transport's process dies, its sessions are gone: their ids are 404 (as any unknown
    session), their slots come back to the shared pool, and the next ``initialize`` is served by a
    fresh process."""
    client = {"name": "t", "version": "0"}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    app = build_app(ServerSettings(max_sessions=8))
    with live_server(app=app) as url:
        opened = httpx.post(f"{url}/mcp", json=init, headers=MCP_HEADERS, timeout=WAIT_S * 4)
        sid = opened.headers["mcp-session-id"]
        holders = lambda: httpx.get(f"{url}/sessions").json()["mcp"]["active"]  # noqa: E731
        assert holders() == 1
        assert httpx.get(f"{url}/sessions").json()["per_client"]["clients"] == 1  # its slot, this client's
        pid = app.state.streamable_mcp.transport_pid
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + WAIT_S
        while holders() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert holders() == 0
        assert httpx.get(f"{url}/sessions").json()["per_client"]["clients"] == 0
        stale = httpx.post(f"{url}/mcp", json=listing, headers=MCP_HEADERS | {"mcp-session-id": sid})
        assert stale.status_code == 404 and stale.json()["error"]["data"]["code"] == "UNKNOWN_SESSION"
        again = httpx.post(f"{url}/mcp", json=init, headers=MCP_HEADERS, timeout=WAIT_S * 4)
        assert again.status_code == 200 and again.headers["mcp-session-id"] != sid
        assert app.state.streamable_mcp.transport_pid not in (None, pid)
