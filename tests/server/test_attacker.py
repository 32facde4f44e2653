"""Issue 43: the server against a determined local attacker.

Each test is one finding of that review, reproduced with bounded traffic on loopback only:
lone surrogates in JSON, the docs/schema/behaviour mismatches, fairness under rotated source
addresses, slow headers, the token, Gradio's API, the MCP worker's restart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

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
