"""Safe by default (issue 24): sessions have owners, caps are on, cross-site requests are refused.

1. Ownership: a session belongs to the channel and the client that created it. A ``/ws``
   client cannot hand its session id to HTTP ``/mcp`` to close it (freeing its slot while it
   keeps stepping) or to drive it; another client cannot close or drive an HTTP MCP session.
2. Caps on by default: one client cannot fill any pool (at most half of each, 16 in all);
   sessions nobody holds a connection to expire sooner than WebSocket ones.
3. Cross-site: JSON routes take ``application/json`` only (415), ``Host`` and ``Origin`` are
   checked against an allow-list (loopback by default), non-finite numbers are refused on
   every path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from server.app import build_app
from server.settings import DEFAULT_PER_CLIENT, ServerSettings, add_server_arguments, settings_from_args
from tests.server.conftest import FakeClock, local_client

pytestmark = pytest.mark.server


def rpc(client: Any, method: str, params: dict | None = None, rid: int = 1) -> dict:
    response = client.post(
        "/mcp", json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
    )
    assert response.status_code == 200, response.text
    return response.json()


def ws_rpc(ws: Any, method: str, params: dict | None = None) -> dict:
    ws.send_text(
        json.dumps(
            {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}}
        )
    )
    return json.loads(ws.receive_text())["data"]


def ws_send(ws: Any, message: dict) -> dict:
    ws.send_text(json.dumps(message))
    return json.loads(ws.receive_text())


def pool(client: Any) -> dict:
    return client.get("/sessions").json()["websocket"]


@pytest.fixture
def app(clock: FakeClock) -> Any:
    return build_app(ServerSettings(max_sessions=8, max_http_sessions=8), clock=clock)


@pytest.fixture
def alice(app: Any) -> Iterator[Any]:
    with local_client(app, client=("10.0.0.1", 40000)) as c:
        yield c


@pytest.fixture
def bob(app: Any, alice: Any) -> Iterator[Any]:
    with local_client(app, client=("10.0.0.2", 40000)) as c:
        yield c


# ------------------------------------------------------------------ 1. ownership
def test_a_ws_session_id_cannot_be_closed_over_http_mcp(alice: Any) -> None:
    """The measured bypass: /ws asks for its id, HTTP closes it, the slot is freed while it steps."""
    with alice.websocket_connect("/ws") as ws:
        ws_send(ws, {"type": "reset", "data": {"seed": 1}})
        own = ws_rpc(ws, "openenv/session/create")
        sid = (own.get("result") or {}).get("session_id")
        if sid is not None:
            answer = rpc(alice, "openenv/session/close", {"session_id": sid})
            assert answer["error"]["data"]["code"] == "UNKNOWN_SESSION", answer
        assert pool(alice)["active"] == 1  # still counted while the WebSocket lives
        step = ws_send(ws, {"type": "step", "data": {"action": 0}})
        assert step["type"] == "observation"


def test_a_ws_session_cannot_be_driven_over_http_mcp(alice: Any) -> None:
    with alice.websocket_connect("/ws") as ws:
        ws_send(ws, {"type": "reset", "data": {"seed": 1}})
        sid = (ws_rpc(ws, "openenv/session/create").get("result") or {}).get("session_id")
        if sid is None:
            return  # nothing to hand over: nothing to drive
        call = {"session_id": sid, "name": "wait", "arguments": {}}
        answer = rpc(alice, "tools/call", call)
        assert answer["error"]["data"]["code"] == "UNKNOWN_SESSION", answer
        state = ws_send(ws, {"type": "state"})["data"]
        assert state["tick"] == 0  # the HTTP call played nothing in this episode


def test_a_websocket_cannot_close_someone_elses_http_mcp_session(alice: Any, bob: Any) -> None:
    sid = rpc(bob, "openenv/session/create")["result"]["session_id"]
    with alice.websocket_connect("/ws") as ws:
        answer = ws_rpc(ws, "openenv/session/close", {"session_id": sid})
        assert "error" in answer and answer["error"]["data"]["code"] in ("UNKNOWN_SESSION", "NOT_ALLOWED")
    assert rpc(bob, "tools/list", {"session_id": sid}).get("error") is None  # bob's session lives


def test_an_http_mcp_session_is_its_clients_only(alice: Any, bob: Any) -> None:
    sid = rpc(alice, "openenv/session/create")["result"]["session_id"]
    for method, params in (
        ("tools/call", {"session_id": sid, "name": "start_shift", "arguments": {"seed": 1}}),
        ("openenv/session/close", {"session_id": sid}),
    ):
        assert rpc(bob, method, params)["error"]["data"]["code"] == "UNKNOWN_SESSION"
    assert "error" not in rpc(
        alice, "tools/call", {"session_id": sid, "name": "start_shift", "arguments": {}}
    )
    assert rpc(alice, "openenv/session/close", {"session_id": sid})["result"]["closed"] is True


def test_an_http_episode_is_its_clients_only(alice: Any, bob: Any) -> None:
    sid = alice.post("/reset", json={"seed": 1}).json()["session_id"]
    bob.cookies.clear()
    assert bob.post("/step", json={"action": {"action": 0}, "session_id": sid}).status_code == 404
    assert bob.get("/state", params={"session_id": sid}).status_code == 404
    assert bob.delete(f"/sessions/{sid}").status_code == 404
    assert alice.get("/state", params={"session_id": sid}).json()["tick"] == 0


# ------------------------------------------------------------ 2. caps by default
def test_per_client_caps_are_on_by_default_and_flags_set_them() -> None:
    assert ServerSettings().max_sessions_per_client == DEFAULT_PER_CLIENT
    assert ServerSettings.from_env({"HOSPITAL_MAX_SESSIONS_PER_CLIENT": "0"}).max_sessions_per_client is None
    parser = __import__("argparse").ArgumentParser()
    add_server_arguments(parser)
    assert (
        settings_from_args(parser.parse_args(["--max-sessions-per-client", "3"]), {}).max_sessions_per_client
        == 3
    )
    # Nobody holds a connection to an HTTP episode or an HTTP MCP session: they expire sooner.
    assert ServerSettings().http_session_ttl_s < ServerSettings().idle_timeout_s


@pytest.mark.parametrize("source", ["mcp_create", "reset"])
def test_one_client_cannot_fill_a_pool(alice: Any, bob: Any, source: str) -> None:
    """The measured lock-out: 64 MCP creates (or resets) filled the pool for every other client."""
    opened = 0
    for i in range(8):
        alice.cookies.clear()
        if source == "reset":
            ok = alice.post("/reset", json={"seed": i}).status_code == 200
        else:
            ok = "result" in rpc(alice, "openenv/session/create", rid=i)
        opened += ok
    assert opened == 4  # half of 8
    with bob.websocket_connect("/ws") as ws:  # someone else still gets in
        assert ws_send(ws, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
    bob.cookies.clear()
    assert bob.post("/reset", json={"seed": 0}).status_code == 200


def test_http_mcp_sessions_expire_on_the_shorter_timeout(alice: Any, clock: FakeClock) -> None:
    settings = ServerSettings()
    rpc(alice, "openenv/session/create")
    assert pool(alice)["mcp_http"] == 1
    clock.advance(ServerSettings(max_sessions=8, max_http_sessions=8).http_session_ttl_s + 1)
    assert pool(alice)["mcp_http"] == 0
    assert settings.http_session_ttl_s < settings.idle_timeout_s


# -------------------------------------------------------------- 3. cross-site
@pytest.fixture
def local(clock: FakeClock) -> Iterator[Any]:
    with local_client(build_app(ServerSettings(), clock=clock)) as c:
        yield c


MCP_LIST = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
@pytest.mark.parametrize("route", ["/mcp", "/reset", "/step"])
def test_json_routes_refuse_other_content_types_with_415(local: Any, route: str, content_type: str) -> None:
    response = local.post(
        route, content=MCP_LIST if route == "/mcp" else '{"seed": 1}', headers={"content-type": content_type}
    )
    assert response.status_code == 415, response.text
    assert response.json()["detail"]["code"] == "UNSUPPORTED_MEDIA_TYPE"


def test_the_text_plain_path_cannot_smuggle_nan(local: Any) -> None:
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
        '"params": {"name": "act", "arguments": {"action": NaN}}}'
    )
    for content_type in ("text/plain", "application/json"):
        assert local.post("/mcp", content=body, headers={"content-type": content_type}).status_code in (
            415,
            422,
        )


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.nip.io"])
def test_a_foreign_host_header_is_refused(local: Any, host: str) -> None:
    response = local.get("/health", headers={"host": host})
    assert response.status_code == 421 and response.json()["detail"]["code"] == "HOST_NOT_ALLOWED"
    with pytest.raises(WebSocketDisconnect), local.websocket_connect("/ws", headers={"host": host}) as ws:
        ws.receive_text()


@pytest.mark.parametrize("host", ["localhost:8000", "127.0.0.1", "[::1]:8000"])
def test_loopback_hosts_are_served(local: Any, host: str) -> None:
    assert local.get("/health", headers={"host": host}).status_code == 200


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://127.0.0.1.evil.example"])
def test_a_foreign_origin_is_refused_on_http_and_websocket(local: Any, origin: str) -> None:
    response = local.post(
        "/mcp", content=MCP_LIST, headers={"content-type": "application/json", "origin": origin}
    )
    assert response.status_code == 403 and response.json()["detail"]["code"] == "ORIGIN_NOT_ALLOWED"
    with pytest.raises(WebSocketDisconnect), local.websocket_connect("/ws", headers={"origin": origin}) as ws:
        ws.receive_text()


@pytest.mark.parametrize("origin", ["http://localhost:5173", "http://127.0.0.1:8000"])
def test_loopback_origins_are_accepted(local: Any, origin: str) -> None:
    response = local.post(
        "/mcp", content=MCP_LIST, headers={"content-type": "application/json", "origin": origin}
    )
    assert response.status_code == 200
    with local.websocket_connect("/ws", headers={"origin": origin}) as ws:
        assert ws_send(ws, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"


def test_the_allow_lists_widen_by_flag_and_variable(clock: FakeClock) -> None:
    parser = __import__("argparse").ArgumentParser()
    add_server_arguments(parser)
    args = parser.parse_args(["--allow-host", "lab.example.org", "--allow-origin", "https://lab.example.org"])
    settings = settings_from_args(args, {})
    assert settings == ServerSettings.from_env(
        {"HOSPITAL_ALLOWED_HOSTS": "lab.example.org", "HOSPITAL_ALLOWED_ORIGINS": "https://lab.example.org"}
    )
    with TestClient(build_app(settings, clock=clock), base_url="http://lab.example.org") as c:
        assert c.get("/health").status_code == 200
        assert c.get("/health", headers={"origin": "https://lab.example.org"}).status_code == 200
        assert (
            c.get("/health", headers={"origin": "http://lab.example.org"}).status_code == 200
        )  # same-origin
        assert c.get("/health", headers={"origin": "https://other.example.org"}).status_code == 403
        assert c.get("/health", headers={"host": "other.example.org"}).status_code == 421
    with TestClient(
        build_app(ServerSettings(allowed_hosts=("*",)), clock=clock), base_url="http://any.where"
    ) as c:
        assert c.get("/health").status_code == 200


def test_a_forwarded_for_header_does_not_make_a_new_client() -> None:
    """A real server (uvicorn, as ``serve`` runs it) keys clients by their TCP address. uvicorn's
    own default trusts ``X-Forwarded-For`` from loopback, and a local client naming a new address
    in each request held 40 HTTP episodes against a per-client cap of 16."""
    import httpx

    from tests.server.live import live_server

    cap = 4
    with live_server(ServerSettings(max_sessions_per_client=cap)) as url:
        codes = [
            httpx.post(f"{url}/reset", json={"seed": i}, headers={"x-forwarded-for": f"10.0.0.{i}"})
            for i in range(cap + 3)
        ]
        assert [r.status_code for r in codes] == [200] * cap + [429] * 3
        assert codes[-1].json()["detail"]["code"] == "CLIENT_SESSION_LIMIT"
        assert httpx.get(f"{url}/sessions").json()["per_client"]["clients"] == 1
