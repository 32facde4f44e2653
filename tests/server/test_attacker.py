"""Issue 43: the server against a determined local attacker.

Each test is one finding of that review, reproduced with bounded traffic on loopback only:
lone surrogates in JSON, the docs/schema/behaviour mismatches, fairness under rotated source
addresses, slow headers, the token, Gradio's API, the MCP worker's restart.
"""

from __future__ import annotations

import functools
import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

from starlette.websockets import WebSocketDisconnect

from server.app import SESSION_HEADER
from server.settings import ServerSettings
from tests.server.live import live_server

pytestmark = pytest.mark.server

JSON = {"content-type": "application/json"}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
LONE = ["\\ud800", "\\udfff", "x\\udc00y", "\\ud83dz"]
"""JSON escapes of lone surrogates (a high one alone, a low one alone, one high followed by no low)."""


def put(template: str, escape: str) -> str:
    """``template`` with its ``@`` replaced by ``escape`` (JSON text with a chosen escape in it)."""
    return template.replace("@", escape)


def ws_send(ws: Any, text: str) -> dict:
    ws.send_text(text)
    return json.loads(ws.receive_text())


@pytest.fixture(scope="module")
def live() -> Iterator[str]:
    with live_server(ServerSettings(max_sessions=8, max_sessions_per_client=0)) as url:
        yield url


# ------------------------------------------------------------ 1. lone surrogates
@pytest.mark.parametrize("escape", LONE)
def test_a_lone_surrogate_is_a_422_on_reset_and_step_and_the_episode_goes_on(
    client: Any, escape: str
) -> None:
    response = client.post("/reset", content=put('{"seed": 1, "episode_id": "@"}', escape), headers=JSON)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["type"] == "invalid_unicode"
    sid = client.post("/reset", json={"seed": 3}).json()["session_id"]
    client.post("/step", json={"action": {"action": 0}}, headers={SESSION_HEADER: sid})
    for body in (
        put('{"action": {"action": 0}, "session_id": "@"}', escape),
        put('{"action": {"action": 0, "metadata": {"@": 1}}}', escape),
    ):
        response = client.post("/step", content=body, headers=JSON | {SESSION_HEADER: sid})
        assert response.status_code == 422, response.text
    after = client.post("/step", json={"action": {"action": 0}}, headers={SESSION_HEADER: sid})
    assert after.status_code == 200 and after.json()["observation"]["info"]["tick"] == 2


def test_a_valid_surrogate_pair_is_one_character_and_accepted(client: Any) -> None:
    response = client.post("/reset", content='{"seed": 1, "episode_id": "\\ud83d\\ude00"}', headers=JSON)
    assert response.status_code == 200, response.text
    assert (
        client.get("/state", headers={SESSION_HEADER: response.json()["session_id"]}).json()["episode_id"]
        == "\U0001f600"
    )


@pytest.mark.parametrize("escape", LONE)
def test_a_lone_surrogate_on_openenv_mcp_is_a_4xx(client: Any, escape: str) -> None:
    body = put('{"jsonrpc": "2.0", "id": "@", "method": "tools/list", "params": {}}', escape)
    response = client.post("/mcp", content=body, headers=JSON)
    assert 400 <= response.status_code < 500, response.text


@pytest.mark.parametrize("escape", LONE)
def test_a_lone_surrogate_on_ws_is_an_error_and_the_episode_lives_on(client: Any, escape: str) -> None:
    with client.websocket_connect("/ws") as ws:
        ws_send(ws, json.dumps({"type": "reset", "data": {"seed": 5, "episode_id": "mine"}}))
        ws_send(ws, json.dumps({"type": "step", "data": {"action": 0}}))
        for text in (
            put('{"type": "reset", "data": {"seed": 1, "episode_id": "@"}}', escape),
            put('{"type": "step", "data": {"action": 0, "metadata": {"k": "@"}}}', escape),
            put('{"type": "@"}', escape),
        ):
            reply = ws_send(ws, text)
            assert (reply["type"], reply["data"]["code"]) == ("error", "VALIDATION_ERROR"), reply
        state = ws_send(ws, json.dumps({"type": "state"}))["data"]
        assert (state["episode_id"], state["tick"], state["seed"]) == ("mine", 1, 5)


@pytest.mark.parametrize("escape", LONE[:2])
def test_a_lone_surrogate_on_standard_mcp_is_a_4xx_and_the_session_lives_on(live: str, escape: str) -> None:
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"},
        },
    }  # fmt: skip
    with httpx.Client(timeout=120) as http:  # the first standard MCP request starts its process
        bad_init = json.dumps(init).replace('"name": "t"', put('"name": "@"', escape))
        assert 400 <= http.post(f"{live}/mcp", content=bad_init, headers=MCP_HEADERS).status_code < 500
        response = http.post(f"{live}/mcp", json=init, headers=MCP_HEADERS)
        assert response.status_code == 200, response.text
        headers = MCP_HEADERS | {"mcp-session-id": response.headers["mcp-session-id"]}
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        http.post(f"{live}/mcp", json=ready, headers=headers)
        call = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "@"}}'
        response = http.post(f"{live}/mcp", content=put(call, escape), headers=headers)
        assert 400 <= response.status_code < 500, response.text
        listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}
        response = http.post(f"{live}/mcp", json=listing, headers=headers)
        assert response.status_code == 200 and "read_board" in response.text
        http.delete(f"{live}/mcp", headers=headers)


# ------------------------------------------------ 2. docs, schema and behaviour agree
def test_delete_mcp_without_a_session_id_is_400_even_at_the_cap(clock: Any) -> None:
    """MCP's transport: a request without the session id a server requires is a 400; the caps are
    about opening sessions, and a DELETE opens none (it was a 429 at the cap)."""
    from server.app import build_app
    from tests.server.conftest import local_client

    settings = ServerSettings(max_sessions=8, max_sessions_per_client=2)
    app = build_app(settings, clock=clock)
    with local_client(app) as client, client.websocket_connect("/ws"), client.websocket_connect("/ws"):
        assert client.get("/sessions").json()["websocket"]["active"] == 2  # this client's cap
        opening = client.post("/reset", json={"seed": 1})
        assert opening.status_code == 429  # at the cap indeed
        response = client.delete("/mcp", headers=MCP_HEADERS)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["data"]["code"] == "NO_SESSION"


@pytest.fixture(scope="module")
def web_client() -> Iterator[Any]:
    from server.app import build_app
    from tests.server.conftest import local_client

    with local_client(build_app(ServerSettings(web=True, max_sessions_per_client=0))) as client:
        yield client


@pytest.mark.parametrize("method", ["TRACE", "PUT", "POST", "DELETE", "PATCH"])
def test_a_method_web_metadata_does_not_serve_is_405_as_documented(web_client: Any, method: str) -> None:
    """docs/server.md: "Methods a /web/... route does not serve get 405" (this one was a 404: the
    Gradio mount answered it)."""
    response = web_client.request(method, "/web/metadata")
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == "GET"
    assert web_client.get("/web/metadata").status_code == 200


def test_the_schema_says_a_step_needs_a_session_id_from_one_carrier(client: Any) -> None:
    """``session_id`` is optional in the body only because the header or cookie may carry it: the
    document says so where a client reads the field, and the behaviour is the 400 it names."""
    doc = client.get("/openapi.json").json()
    field = doc["components"]["schemas"]["HospitalStepRequest"]["properties"]["session_id"]
    query = next(p for p in doc["paths"]["/state"]["get"]["parameters"] if p["name"] == "session_id")
    for description in (field["description"], query["description"]):
        assert "required" in description and "NO_SESSION" in description, description
    assert "NO_SESSION" in doc["paths"]["/step"]["post"]["responses"]["400"]["description"]
    response = client.post("/step", json={"action": {"action": 0}})
    assert response.status_code == 400 and response.json()["detail"]["code"] == "NO_SESSION"


def test_an_integral_float_action_is_the_same_action_on_step_ws_and_mcp_act(client: Any) -> None:
    """server/README: ``2.0`` is the JSON integer 2; docs/server.md: tool arguments are as strict
    as /step. So ``2.0`` plays action 2 everywhere (MCP ``act`` refused it) and ``2.5`` nowhere."""
    seed, action = 21, 0  # the no-op: legal on every tick

    def http(value: Any) -> tuple[int, Any]:
        sid = client.post("/reset", json={"seed": seed}).json()["session_id"]
        response = client.post("/step", json={"action": {"action": value}, "session_id": sid})
        client.delete(f"/sessions/{sid}")
        return response.status_code, response.json().get("reward")

    def ws(value: Any) -> tuple[str, Any]:
        with client.websocket_connect("/ws") as socket:
            ws_send(socket, json.dumps({"type": "reset", "data": {"seed": seed}}))
            reply = ws_send(socket, json.dumps({"type": "step", "data": {"action": value}}))
        return reply["type"], reply["data"].get("reward")

    def mcp(value: Any) -> tuple[str, Any]:
        def rpc(method: str, params: dict) -> dict:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            return client.post("/mcp", json=body).json()

        sid = rpc("openenv/session/create", {})["result"]["session_id"]
        rpc("tools/call", {"session_id": sid, "name": "start_shift", "arguments": {"seed": seed}})
        answer = rpc("tools/call", {"session_id": sid, "name": "act", "arguments": {"action": value}})
        rpc("openenv/session/close", {"session_id": sid})
        return (
            ("error", None) if "error" in answer else ("ok", answer["result"]["structured_content"]["reward"])
        )

    assert http(float(action)) == http(action) and http(action)[0] == 200
    assert ws(float(action)) == ws(action) and ws(action)[0] == "observation"
    assert mcp(float(action)) == mcp(action) and mcp(action)[0] == "ok"
    assert http(action + 0.5)[0] == 422
    assert ws(action + 0.5)[0] == "error"
    assert mcp(action + 0.5)[0] == "error"


def test_the_rt_action_documents_every_action_of_the_table() -> None:
    """Its docstring said 8 actions while the schema took 0..9: the description is the table's."""
    from hospital_marl.radiotherapy.core.plan import ACTIONS
    from server.radiotherapy import RTAction

    schema = RTAction.model_json_schema()
    field = schema["properties"]["action"]
    assert (field["minimum"], field["maximum"]) == (0, len(ACTIONS) - 1)
    for action in ACTIONS:
        assert f"{action.id} {action.name}" in field["description"]
    counted = re.findall(r"\b(\d+) (?:planning )?actions\b", schema.get("description", ""))
    assert all(int(n) == len(ACTIONS) for n in counted), counted


def test_standard_mcp_on_the_rt_server_is_a_documented_400(clock: Any) -> None:
    """The RT env has no MCP tools: a standard client's ``initialize`` gets a 400 saying so
    (``MCP_NOT_SUPPORTED``, as server/README documents), not "Method not found"."""
    from server.app import build_app
    from tests.server.conftest import local_client

    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"},
        },
    }  # fmt: skip
    settings = ServerSettings(env="radiotherapy", max_sessions_per_client=0)
    with local_client(build_app(settings, clock=clock)) as client:
        response = client.post("/mcp", json=init, headers=MCP_HEADERS)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["data"]["code"] == "MCP_NOT_SUPPORTED"
        listing = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        assert listing.status_code == 200  # OpenEnv's JSON-RPC answers as before
    readme = (Path(__file__).parents[2] / "server" / "README.md").read_text()
    assert "MCP_NOT_SUPPORTED" in readme


# ------------------------------------------------ 5. wildcard hosts, the token, Docker
TOKEN = "s3cret-token-for-the-tests-0123456789"
EVIL = {"host": "evil.example:8000", "origin": "http://evil.example:8000"}
"""DNS rebinding: the attacker's name resolves to 127.0.0.1, so its page's requests carry its own
name as both Host and Origin."""


def _app_client(clock: Any, **settings: Any) -> Any:
    from fastapi.testclient import TestClient

    from server.app import build_app

    app = build_app(ServerSettings(max_sessions_per_client=0, **settings), clock=clock)
    return TestClient(app, base_url="http://evil.example:8000")


def test_dns_rebinding_under_wildcard_hosts_is_refused_without_a_token(clock: Any) -> None:
    with _app_client(clock, allowed_hosts=("*",)) as client:
        assert client.post("/reset", json={"seed": 1}, headers=EVIL).status_code == 403
        body = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
        assert client.post("/mcp", json=body, headers=EVIL).status_code == 403
        with (
            pytest.raises(WebSocketDisconnect),
            client.websocket_connect("ws://evil.example:8000/ws", headers=EVIL),
        ):
            pass
        # A program (no Origin) is still served under '*', as before: it is no browser page.
        assert client.post("/reset", json={"seed": 1}, headers={"host": EVIL["host"]}).status_code == 200


def test_the_token_is_required_on_every_route_websockets_included(clock: Any) -> None:
    with _app_client(clock, allowed_hosts=("*",), token=TOKEN) as client:
        for method, path in (
            ("GET", "/health"),
            ("POST", "/reset"),
            ("GET", "/sessions"),
            ("GET", "/schema"),
        ):
            response = client.request(
                method, path, json={"seed": 1} if method == "POST" else None, headers=EVIL
            )
            assert response.status_code == 401 and response.json()["detail"]["code"] == "TOKEN_REQUIRED"
            wrong = EVIL | {"authorization": "Bearer " + TOKEN[:-1] + "x"}
            assert client.request(method, path, headers=wrong).status_code == 401
        with (
            pytest.raises(WebSocketDisconnect),
            client.websocket_connect("ws://evil.example:8000/ws", headers=EVIL),
        ):
            pass
        bearer = EVIL | {"authorization": f"Bearer {TOKEN}"}
        assert client.post("/reset", json={"seed": 1}, headers=bearer).status_code == 200
        with client.websocket_connect("ws://evil.example:8000/ws", headers=bearer) as ws:
            assert ws_send(ws, json.dumps({"type": "reset", "data": {"seed": 2}}))["type"] == "observation"
        # A browser: opened once with ?token=, it keeps a cookie its later requests carry.
        opened = client.get(f"/health?token={TOKEN}", headers=EVIL)
        assert opened.status_code == 200 and "hospital_token=" in opened.headers["set-cookie"]
        assert client.get("/sessions", headers=EVIL).status_code == 200  # the cookie jar sent it


@pytest.fixture(scope="module")
def token_url() -> Iterator[str]:
    """A live server with a token, writing uvicorn's access log (shared by this module's tests)."""
    with live_server(ServerSettings(token=TOKEN, max_sessions_per_client=0), log_level="info") as url:
        yield url


def test_a_token_in_the_url_never_reaches_the_access_log(token_url: str, caplog: Any) -> None:
    """uvicorn's access line quotes the request's full path: ``?token=`` must be blanked there."""
    caplog.set_level("INFO", logger="uvicorn.access")
    url = token_url
    assert httpx.get(f"{url}/health?x=1&token={TOKEN}").status_code == 200
    wrong = TOKEN[:-1] + "x"
    assert httpx.get(f"{url}/sessions?token={wrong}").status_code == 401
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(_access_lines(caplog)) < 2:
        time.sleep(0.05)
    lines = _access_lines(caplog)
    assert any("/health?x=1&token=" in line and " 200" in line for line in lines), lines
    assert any("/sessions?token=" in line and " 401" in line for line in lines), lines
    assert not any(TOKEN in line or wrong in line for line in lines), lines  # not even a wrong guess


def _access_lines(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]


def test_a_browser_opening_a_page_with_the_token_is_sent_on_without_it(clock: Any) -> None:
    """The token leaves the address bar (and so the history and a copied link); the cookie keeps it."""
    with _app_client(clock, allowed_hosts=("*",), token=TOKEN) as client:
        page = {"accept": "text/html,application/xhtml+xml", "sec-fetch-mode": "navigate"}
        opened = client.get(f"/docs?token={TOKEN}&lang=en", headers=page, follow_redirects=False)
        assert opened.status_code == 303
        assert opened.headers["location"] == "/docs?lang=en"
        assert f"hospital_token={TOKEN}" in opened.headers["set-cookie"]
        assert "HttpOnly" in opened.headers["set-cookie"]
        assert client.get("/docs", headers=page).status_code == 200  # the cookie carries it now
        # A wrong token is a 401, never a redirect that would set it.
        client.cookies.clear()
        refused = client.get(f"/docs?token={TOKEN[:-1]}x", headers=page, follow_redirects=False)
        assert refused.status_code == 401


def test_the_docker_image_opens_no_wildcard_host_and_its_healthcheck_sends_the_token(token_url: str) -> None:
    import re
    import subprocess
    import sys

    from tests.server.test_deploy import DOCKERFILE, dockerfile_env

    assert "*" not in dockerfile_env().get("HOSPITAL_ALLOWED_HOSTS", "")
    (check,) = re.findall(r'^\s+CMD python -c "(.*)" \|\| exit 1$', DOCKERFILE, re.MULTILINE)
    probe = check.replace("http://127.0.0.1:8000", token_url)
    run = functools.partial(subprocess.run, [sys.executable, "-c", probe], capture_output=True, timeout=60)
    assert run(env={"HOSPITAL_TOKEN": TOKEN}).returncode == 0
    assert run(env={}).returncode != 0  # the server did refuse it: the token is what passed


# ------------------------------------------------ 4. slow request heads (slowloris)
SLOW_HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
"""A request head that never ends: what a slowloris client sends, then dribbles."""


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _closed_by_server(sock: socket.socket, wait_s: float) -> bool:
    """Whether the server closes ``sock`` within ``wait_s`` (reads EOF or a reset)."""
    sock.settimeout(wait_s)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except OSError:  # reset
        return True


def test_a_connection_that_never_finishes_its_head_is_closed_after_the_deadline() -> None:
    settings = ServerSettings(header_timeout_s=1.0, max_sessions_per_client=0)
    with live_server(settings) as url:
        slow = [socket.create_connection(("127.0.0.1", _port(url))) for _ in range(20)]
        try:
            for sock in slow:
                sock.sendall(SLOW_HEAD)
            assert all(_closed_by_server(sock, 20.0) for sock in slow)
        finally:
            for sock in slow:
                sock.close()


def test_slow_heads_beyond_the_cap_close_the_oldest_and_an_honest_client_is_served() -> None:
    cap = 16
    settings = ServerSettings(header_timeout_s=600.0, max_pending_connections=cap, max_sessions_per_client=0)
    with live_server(settings) as url:
        slow = [socket.create_connection(("127.0.0.1", _port(url))) for _ in range(3 * cap)]
        try:
            for sock in slow:
                sock.sendall(SLOW_HEAD)
            # The deadline is far off: only the cap can free anything, and it did.
            closed = [_closed_by_server(sock, 0.5) for sock in slow[:cap]]
            assert all(closed), closed
            for _ in range(3):  # a newcomer is served while the attack holds the rest
                assert httpx.get(f"{url}/health", timeout=20).status_code == 200
            assert not _closed_by_server(slow[-1], 0.2)  # the newest ones are held: not a blanket close
        finally:
            for sock in slow:
                sock.close()


# ------------------------------------------------ 3. fairness without honest addresses
def _from(address: str) -> httpx.Client:
    """An HTTP client whose sockets are bound to ``address`` (127.0.0.N: another loopback source)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30)


@pytest.fixture(scope="module")
def small_pools_url() -> Iterator[str]:
    """A live server with pools of 4 (HTTP episodes; WebSocket/MCP), a per-client cap of 2, eviction
    after 0.3 s idle and no creation rate limit (shared: each test uses its own addresses)."""
    settings = ServerSettings(
        max_http_sessions=4,
        max_sessions=4,
        max_sessions_per_client=2,
        evict_idle_s=0.3,
        session_rate=0,
        session_rate_per_client=0,
    )
    with live_server(settings) as url:
        yield url


def test_rotated_addresses_cannot_lock_newcomers_out_of_http_sessions(small_pools_url: str) -> None:
    """Issue 43: 4 addresses x 16 creations filled every pool and newcomers got 429 for the idle
    timeout. A full store now evicts its longest-idle session for a newcomer."""
    url = small_pools_url
    attackers = [_from(f"127.0.{n}.{n + 1}") for n in range(1, 5)]
    held = []
    for attacker in attackers:
        response = attacker.post(f"{url}/reset", json={"seed": 1})
        assert response.status_code == 200, response.text
        held.append((attacker, response.json()["session_id"]))
    assert httpx.get(f"{url}/sessions").json()["http"]["active"] == 4
    time.sleep(0.5)  # the attackers' sessions now idle longer than evict_idle_s
    with _from("127.0.0.77") as honest:
        response = honest.post(f"{url}/reset", json={"seed": 2})
        assert response.status_code == 200, response.text
        step = honest.post(
            f"{url}/step", json={"action": {"action": 0}, "session_id": response.json()["session_id"]}
        )
        assert step.status_code == 200
    oldest_client, oldest = held[0]
    assert oldest_client.get(f"{url}/state", params={"session_id": oldest}).status_code == 404  # evicted
    assert held[1][0].get(f"{url}/state", params={"session_id": held[1][1]}).status_code == 200
    for attacker in attackers:
        attacker.close()


def fresh_reset(client: Any, seed: int = 1) -> Any:
    """``POST /reset`` opening a new session (without the cookie of the client's last one, which
    would reset that session in place)."""
    client.cookies.clear()
    return client.post("/reset", json={"seed": seed})


def test_a_busy_session_is_not_evicted(clock: Any) -> None:
    """Eviction takes only a session idle ``evict_idle_s``: a full store of sessions in use still
    refuses (429), so a flood cannot push out a client that is playing."""
    from server.app import build_app
    from tests.server.conftest import local_client

    settings = ServerSettings(
        max_http_sessions=2, max_sessions_per_client=0, evict_idle_s=5.0, session_rate=0
    )
    with local_client(build_app(settings, clock=clock)) as client:
        sids = [fresh_reset(client, i).json()["session_id"] for i in range(2)]
        clock.advance(4.0)
        assert fresh_reset(client).status_code == 429
        clock.advance(1.0)
        client.get("/state", params={"session_id": sids[1]})  # the second one is used: the first is LRU
        assert fresh_reset(client).status_code == 200
        assert client.get("/state", params={"session_id": sids[0]}).status_code == 404
        assert client.get("/state", params={"session_id": sids[1]}).status_code == 200


def test_session_creation_is_rate_limited_per_address_and_overall(clock: Any) -> None:
    """Per address ``session_rate_per_client`` a second (twice that in a burst), all addresses
    together ``session_rate``: rotating addresses escapes the first, not the second."""
    from fastapi.testclient import TestClient

    from server.app import build_app

    settings = ServerSettings(
        max_http_sessions=64, max_sessions_per_client=0, session_rate=4.0, session_rate_per_client=1.0
    )
    app = build_app(settings, clock=clock)
    clients = [
        TestClient(app, base_url="http://127.0.0.1", client=(f"127.0.0.{n}", 5000)) for n in range(2, 12)
    ]
    with clients[0] as first:
        codes = [fresh_reset(first).status_code for _ in range(3)]
        assert codes == [200, 200, 429]  # a burst of 2, then the per-address limit
        assert fresh_reset(first).json()["detail"]["code"] == "RATE_LIMITED"
        rotated = [fresh_reset(c) for c in clients[1:]]
        # 8 tokens overall (4/s, burst 8): 2 were taken above; 6 more addresses get one each.
        assert [r.status_code for r in rotated] == [200] * 6 + [429] * 3
        assert rotated[-1].json()["detail"]["code"] == "RATE_LIMITED"
        clock.advance(1.0)  # 4 tokens overall, 1 per address
        assert fresh_reset(clients[9]).status_code == 200


def test_http_mcp_sessions_kept_fresh_from_many_addresses_leave_websockets_room(small_pools_url: str) -> None:
    """Issue 43: rotated addresses filled OpenEnv's pool with HTTP MCP sessions nobody holds and kept
    them fresh; a newcomer's /ws got 1013 (the quiet-box attack run). They now hold at most half the
    pool: the newcomer connects at once, and a later create ends the longest-idle one instead."""
    import asyncio

    from websockets.asyncio.client import connect

    url = small_pools_url
    body = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
    answers = []
    for n in range(4):  # refused, or (on a slow box, one idle past 0.3 s) made room for: never 3 held
        with _from(f"127.0.{n + 1}.9") as attacker:
            answers.append(attacker.post(f"{url}/mcp", json=body).json())
            assert httpx.get(f"{url}/sessions").json()["websocket"]["mcp_http"] <= 2
    assert ["result" in a for a in answers[:2]] == [True, True]
    assert all("result" in a or a["error"]["data"]["code"] == "CAPACITY_REACHED" for a in answers)

    async def newcomer() -> dict:
        ws_url = url.replace("http", "ws") + "/ws"
        async with connect(ws_url, local_addr=("127.0.0.88", 0)) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": 3}}))
            return json.loads(await ws.recv())

    assert asyncio.run(asyncio.wait_for(newcomer(), 60))["type"] == "observation"
    time.sleep(0.5)  # now idle past evict_idle_s: a create ends the longest-idle one for itself
    with _from("127.0.5.9") as late:
        assert "result" in late.post(f"{url}/mcp", json=body).json()
    assert httpx.get(f"{url}/sessions").json()["websocket"]["mcp_http"] == 2


def test_web_tabs_left_behind_from_many_addresses_make_room_for_a_new_tab(clock: Any) -> None:
    """Issue 43: tabs opened by API calls from 2 addresses x 16 held the web view "full" for 10
    minutes. The tabs' store (what every page event goes through) now evicts the longest-idle."""
    from server.app import build_app

    settings = ServerSettings(web=True, max_web_sessions=4, max_sessions_per_client=2, evict_idle_s=5.0)
    store = build_app(settings, clock=clock).state.web_sessions
    tabs = [store.open(f"127.0.{n}.1")[0] for n in range(1, 5)]
    clock.advance(6.0)
    sid, _ = store.open("127.0.0.99")  # was SessionCapacityError ("server is full")
    assert store.owns(sid, "127.0.0.99") and not store.owns(tabs[0], "127.0.1.1")
    assert all(store.owns(tab, f"127.0.{n}.1") for n, tab in enumerate(tabs[1:], start=2))
    for tab in store.ids():
        store.close(tab)


# ------------------------------------------------ 6. the web view's Gradio API
@pytest.fixture(scope="module")
def web_served() -> Iterator[tuple[str, Any]]:
    from server.app import build_app

    app = build_app(ServerSettings(web=True, max_web_sessions=8, max_sessions_per_client=0))
    with live_server(app=app) as url:
        yield url, app


@pytest.fixture(scope="module")
def web_url(web_served: tuple[str, Any]) -> str:
    return web_served[0]


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/web/gradio_api/call/nope", {"data": []}, 404),
        ("/web/gradio_api/run/nope", {"data": []}, 404),
        ("/web/gradio_api/api/nope", {"data": []}, 404),
        ("/web/gradio_api/queue/join", {"fn_index": 9999, "data": [], "session_hash": "h"}, 422),
        ("/web/gradio_api/queue/join", {"fn_index": -1, "data": [], "session_hash": "h"}, 422),
        ("/web/gradio_api/queue/join", {"fn_index": True, "data": [], "session_hash": "h"}, 422),
        ("/web/gradio_api/run/predict", {"fn_index": 9999, "data": []}, 422),
    ],
)
def test_unknown_gradio_api_names_and_indices_are_4xx(
    web_url: str, path: str, body: dict, status: int, capfd: pytest.CaptureFixture[str]
) -> None:
    response = httpx.post(web_url + path, json=body, timeout=60)
    assert response.status_code == status, response.text
    assert response.json()["detail"]["code"] in ("UNKNOWN_API_NAME", "UNKNOWN_FN_INDEX")
    assert httpx.get(f"{web_url}/web/gradio_api/call/nope/x", timeout=60).status_code == 404
    assert "Traceback" not in capfd.readouterr().err


def _call(url: str, session_hash: str, seed: int) -> tuple[int, str]:
    """``/call/on_day`` then its stream, read to the end: (the post's status, the stream's end)."""
    with httpx.Client(base_url=url, timeout=120) as http:
        data = [None, "normal_day", seed, "flat", "heuristic"]
        posted = http.post("/web/gradio_api/call/on_day", json={"data": data, "session_hash": session_hash})
        if posted.status_code != 200:
            return posted.status_code, posted.text
        stream = http.get(f"/web/gradio_api/call/on_day/{posted.json()['event_id']}")
        return 200, stream.text


def test_concurrent_calls_on_one_session_hash_each_get_an_answer(
    web_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """12 concurrent ``/call`` s on one session hash: 1 stream completed in 60 s, the rest never
    did (their messages were taken by each other's streams; 12 KeyErrors). Now one runs, the
    others get 409 SESSION_BUSY at once, and the hash serves the next call after it."""
    from concurrent.futures import ThreadPoolExecutor

    session_hash = "attacker-hash-1"
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda seed: _call(web_url, session_hash, seed), range(12)))
    done = [text for status, text in answers if status == 200]
    busy = [text for status, text in answers if status == 409]
    assert len(done) + len(busy) == 12 and done, answers
    assert all("event: complete" in text for text in done), done
    assert all("SESSION_BUSY" in text for text in busy)
    status, text = _call(web_url, session_hash, 99)  # the hash is free again
    assert status == 200 and "event: complete" in text
    assert "KeyError" not in capfd.readouterr().err


# ------------------------------------------------ 7. the MCP worker killed
def _wait_standby(process: Any, deadline: float) -> int:
    """The pid of the transport's standby once it is started and ready."""
    while not (process._standby is not None and process._standby.done()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return process._standby.result().process.pid


def test_a_killed_mcp_worker_drops_no_connection_and_its_standby_takes_over() -> None:
    """Issue 43: after a SIGKILL of the worker, connections handed to it in the ~0.3 s before were
    dropped with no response, and new sessions waited 18-41 s (a fresh process's start-up). Now:
    a request the worker never read is served on (by the ready standby, which takes over at once);
    one it was answering gets a 503 with Retry-After; the next session opens without a wait."""
    import os
    import signal
    import threading

    from server.app import build_app

    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"},
        },
    }  # fmt: skip
    app = build_app(ServerSettings(max_sessions=8, max_sessions_per_client=0))  # as warm, below
    mcp = app.state.streamable_mcp
    with live_server(app=app) as url:
        process = mcp._process
        assert httpx.post(f"{url}/mcp", json=init, headers=MCP_HEADERS, timeout=300).status_code == 200
        process._loop.call_soon_threadsafe(process.keep_standby)  # what the served (warm) app does
        deadline = time.monotonic() + 300
        standby_pid = _wait_standby(process, deadline)
        first = mcp.transport_pid
        assert first is not None and standby_pid != first
        # 1. Connections handed over to a worker that never reads them (stopped), then killed.
        os.kill(first, signal.SIGSTOP)
        replies: list[Any] = []

        def initialize() -> None:
            try:
                replies.append(httpx.post(f"{url}/mcp", json=init, headers=MCP_HEADERS, timeout=120))
            except httpx.HTTPError as exc:  # a dropped connection: what must not happen
                replies.append(exc)

        clients = [threading.Thread(target=initialize) for _ in range(3)]
        for client in clients:
            client.start()
        while len(process._handed) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(process._handed) == 3  # all three are the stopped worker's now
        os.kill(first, signal.SIGKILL)
        for client in clients:
            client.join(timeout=120)
        assert [getattr(r, "status_code", r) for r in replies] == [200] * 3, replies
        assert all("mcp-session-id" in r.headers for r in replies)
        assert mcp.transport_pid == standby_pid  # taken over, not started now
        # 2. A request the worker is answering when it is killed: a 503 to retry, not silence.
        second = standby_pid
        _wait_standby(process, deadline)  # the next standby, for what follows
        decide = mcp.decide

        def decide_then_kill(*question: Any) -> Any:
            os.kill(second, signal.SIGKILL)  # the worker has read the request and awaits this
            return decide(*question)

        mcp.decide = decide_then_kill
        try:
            answer = httpx.post(f"{url}/mcp", json=init, headers=MCP_HEADERS, timeout=120)
        finally:
            mcp.decide = decide
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1", answer.text
        assert answer.json()["error"]["data"]["code"] == "NOT_READY"
        response = httpx.post(f"{url}/mcp", json=init, headers=MCP_HEADERS, timeout=120)
        assert response.status_code == 200 and "mcp-session-id" in response.headers
        assert mcp.transport_pid not in (None, first, second)


# ------------------------------------------- one budget for every unconnected session
def _stores(clock: Any, limit: int, live: set[str]) -> tuple[Any, Any, Any]:
    from server.sessions import ClientLedger, SessionBudget, SessionStore

    budget = SessionBudget(limit)
    ledger = ClientLedger()
    http = SessionStore(dict, 64, 120.0, clock, ledger, evict_idle_s=5.0, budget=budget)
    web = SessionStore(
        dict,
        64,
        600.0,
        clock,
        ledger,
        name="web session",
        evict_idle_s=5.0,
        budget=budget,
        connected=lambda tab: tab.get("hash") in live,
        unconnected_ttl_s=120.0,
    )
    return budget, http, web


def test_one_budget_spans_every_store_and_evicts_the_longest_idle_unconnected_session(clock: Any) -> None:
    """Rotating addresses past every per-client cap fills the stores together: the budget holds them
    all, and a newcomer in any store pushes out the longest-idle session of any store that nobody
    holds a connection to (never a connected web tab, however idle)."""
    from server.sessions import SessionCapacityError

    live = {"page-a"}
    budget, http, web = _stores(clock, 4, live)
    connected_tab, tab = web.open("10.0.0.1")
    tab["hash"] = "page-a"  # its page holds its heartbeat open
    api_tab, _ = web.open("10.0.0.2")  # web-view API calls: no page
    clock.advance(1.0)
    old_http, _ = http.open("10.0.0.3")
    clock.advance(1.0)
    new_http, _ = http.open("10.0.0.4")
    assert budget.held() == 4
    clock.advance(4.0)  # all idle 4 s or more; the pure-API tab 6 s, the HTTP ones 5 s and 4 s
    fifth, _ = http.open("10.0.0.5")  # the HTTP store has room of its own: the budget decides
    assert web.get(api_tab) is None  # the longest-idle unconnected one, in another store
    assert web.get(connected_tab) is not None and http.get(old_http) is not None
    clock.advance(5.0)
    http.get(old_http)  # both in use again
    http.get(fifth)
    web.open("10.0.0.6")
    assert http.get(new_http) is None  # the longest idle of the unconnected ones now
    # Everyone left is either connected or was used within evict_idle_s: a newcomer is refused.
    clock.advance(1.0)
    with pytest.raises(SessionCapacityError) as refused:
        http.open("10.0.0.7")
    assert refused.value.code == "SERVER_SESSION_LIMIT"
    assert budget.held() == 4 and web.get(connected_tab) is not None


def test_a_web_tab_without_its_page_expires_as_soon_as_an_http_episode(clock: Any) -> None:
    """2 addresses x 16 web-view API calls held their tabs 600 s ('server is full' for 10 min): a
    tab nobody's page is connected to now expires after the HTTP ttl; a loaded page's after 600 s."""
    live = {"page-a"}
    _, _, web = _stores(clock, 64, live)
    page, tab = web.open("10.0.0.1")
    tab["hash"] = "page-a"
    api_only, _ = web.open("10.0.0.2")
    clock.advance(121.0)
    assert web.get(api_only) is None
    assert web.get(page) is not None
    clock.advance(599.0)
    assert web.get(page) is not None  # used 599 s ago at the last look: not yet
    clock.advance(601.0)
    live.clear()
    assert web.get(page) is None


def test_a_live_websocket_session_outlasts_a_flood_of_unconnected_sessions(clock: Any) -> None:
    """A flood from rotated addresses fills the budget over and over (each newcomer evicting the
    longest-idle unconnected session): a /ws session, which holds its connection, plays on."""
    from fastapi.testclient import TestClient

    from server.app import build_app
    from tests.server.conftest import local_client

    settings = ServerSettings(
        max_unconnected_sessions=3,
        max_http_sessions=64,
        max_sessions_per_client=0,
        session_rate=0,
        session_rate_per_client=0,
        evict_idle_s=5.0,
    )
    app = build_app(settings, clock=clock)
    attackers = [
        TestClient(app, base_url="http://127.0.0.1", client=(f"127.0.{n}.9", 5000)) for n in range(1, 9)
    ]
    with local_client(app) as honest, honest.websocket_connect("/ws") as ws:
        assert ws_send(ws, json.dumps({"type": "reset", "data": {"seed": 7}}))["type"] == "observation"
        opened: list[str] = []
        for round_ in range(3):
            for attacker in attackers[round_ * 2 : round_ * 2 + 3]:
                response = fresh_reset(attacker)
                if response.status_code == 200:
                    opened.append(response.json()["session_id"])
                else:
                    assert response.json()["detail"]["code"] == "SERVER_SESSION_LIMIT"
            assert honest.get("/sessions").json()["http"]["active"] <= 3
            step = ws_send(ws, json.dumps({"type": "step", "data": {"action": 0}}))
            assert step["type"] == "observation", step  # the live session was never touched
            clock.advance(6.0)
        assert len(opened) > 3  # the budget was refilled: older idle ones were evicted
        assert honest.get("/sessions").json()["websocket"]["ws"] == 1


def test_a_page_counts_as_connected_while_its_heartbeat_stream_is_open(web_served: tuple[str, Any]) -> None:
    """Gradio's page holds ``/heartbeat/<session hash>`` open while loaded: the guard records it,
    so the web store can tell a loaded tab from one made of API calls."""
    url, app = web_served
    live = app.state.live_pages
    page = socket.create_connection(("127.0.0.1", _port(url)), timeout=30)
    try:  # the page's heartbeat request, held open as a loaded page holds it
        page.sendall(b"GET /web/gradio_api/heartbeat/page-one HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert b"200" in page.recv(1024).split(b"\r\n", 1)[0]
        assert "page-one" in live and "page-two" not in live
    finally:
        page.close()  # the tab closed
    deadline = time.monotonic() + 30
    while "page-one" in live and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "page-one" not in live


def test_a_web_tab_in_the_middle_of_a_long_event_is_neither_expired_nor_evicted(clock: Any) -> None:
    """A planner's day can outlast the ttl of a tab made by API calls: while an event runs (the tab's
    lock held) the tab is in use, and its idle time counts from the event's end."""
    from server.app import build_app

    settings = ServerSettings(web=True, max_web_sessions=4, max_sessions_per_client=0, evict_idle_s=5.0)
    store = build_app(settings, clock=clock).state.web_sessions
    busy, tab = store.open("127.0.1.1")
    idle, _ = store.open("127.0.2.1")
    with tab.lock:  # an event of the tab runs
        clock.advance(200.0)  # past the 120 s ttl of a tab without its page
        assert store.get(idle, "127.0.2.1") is None  # the idle one expired
        assert store.owns(busy, "127.0.1.1")
        others = [store.open(f"127.0.{n}.7")[0] for n in range(3, 6)]  # full: 4 of 4
        clock.advance(6.0)
        store.open("127.0.9.9")  # evicts the longest-idle tab not in use: never the busy one
        assert store.owns(busy, "127.0.1.1") and not store.owns(others[0], "127.0.3.7")
    for sid in store.ids():
        store.close(sid)
