"""Every route through FastAPI's TestClient: OpenEnv's routes, stateful HTTP episodes, bad input."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

from starlette.websockets import WebSocketDisconnect

from hospital_marl.core.actions import N_FLAT_ACTIONS
from server.app import SESSION_COOKIE, SESSION_HEADER
from tests.server.conftest import TEST_SETTINGS
from tests.server.reference import Reference, choose_flat

pytestmark = pytest.mark.server


def reset(client: Any, **body: Any) -> str:
    response = client.post("/reset", json=body)
    assert response.status_code == 200, response.text
    return response.json()["session_id"]


def step(client: Any, sid: str, action: int = 0) -> dict:
    client.cookies.clear()
    response = client.post("/step", json={"action": {"action": action}, "session_id": sid})
    assert response.status_code == 200, response.text
    return response.json()


def detail_code(response: Any) -> str:
    return response.json()["detail"]["code"]


# ------------------------------------------------------------ OpenEnv routes
def test_routes__health_metadata_schema_and_openapi(client: Any) -> None:
    assert client.get("/health").json() == {"status": "healthy"}
    metadata = client.get("/metadata").json()
    assert metadata["name"] == "hospital_marl" and metadata["description"]
    schema = client.get("/schema").json()
    assert schema["action"]["title"] == "HospitalAction"
    assert schema["observation"]["title"] == "HospitalObservation"
    assert schema["state"]["title"] == "HospitalState"  # not OpenEnv's base State
    assert "queue_length" in schema["state"]["properties"]
    openapi = client.get("/openapi.json").json()
    assert openapi["info"]["version"] == "1.0.0"  # OpenEnv's HTTP API version: validate reads it
    for path in ("/reset", "/step", "/state", "/health", "/metadata", "/schema", "/sessions", "/mcp"):
        assert path in openapi["paths"], path
    assert client.get("/docs").status_code == 200


def test_routes__mcp_answers_json_rpc(client: Any) -> None:
    answer = client.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    ).json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == 1
    assert {"start_shift", "read_board", "act"} <= {t["name"] for t in answer["result"]["tools"]}
    assert client.post("/mcp", json={}).json()["jsonrpc"] == "2.0"
    with client.websocket_connect("/mcp") as ws:
        ws.send_text(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
        assert json.loads(ws.receive_text())["id"] == 2
    assert client.get("/redoc").status_code == 200


def test_sessions__reports_counts_and_limits_never_ids(client: Any) -> None:
    reset(client, seed=0)
    info = client.get("/sessions").json()
    assert info["http"] == {
        "active": 1,
        "max": TEST_SETTINGS.max_http_sessions,
        "idle_timeout_s": TEST_SETTINGS.http_session_ttl_s,
    }
    assert info["websocket"] == {
        "active": 0,
        "max": TEST_SETTINGS.max_sessions,
        "idle_timeout_s": TEST_SETTINGS.idle_timeout_s,
        "ws": 0,
        "mcp_websocket": 0,
        "mcp_http": 0,
    }
    assert info["web"] is None  # the web view is off unless asked for
    assert info["mcp"] == {
        "active": 0,
        "max": TEST_SETTINGS.max_sessions,
        "idle_timeout_s": TEST_SETTINGS.http_session_ttl_s,
    }
    assert info["per_client"] == {"max": None, "clients": 1}


# ------------------------------------------------------ stateful HTTP episodes
def test_http_episode__reset_then_step_continues_and_matches_in_process(client: Any) -> None:
    response = client.post("/reset", json={"seed": 21, "scenario": "mass_casualty"})
    body = response.json()
    sid = body["session_id"]
    assert response.headers[SESSION_HEADER] == sid and response.cookies[SESSION_COOKIE] == sid
    assert body["reward"] is None and body["done"] is False
    ref, rng = Reference("mass_casualty", 21), random.Random(3)
    ref.check(body["observation"], None, False)
    done, steps = False, 0
    while not done:
        action = choose_flat(body["observation"]["action_mask"], rng)
        body = step(client, sid, action)
        ref.step(action)
        ref.check(body["observation"], body["reward"], body["done"])
        done, steps = body["done"], steps + 1
    assert body["observation"]["metrics"] == ref.env.unwrapped.hospital.metrics()
    state = client.get("/state", params={"session_id": sid}).json()
    assert (state["tick"], state["step_count"], state["done"], state["seed"]) == (steps, steps, True, 21)


@pytest.mark.parametrize("carrier", ["body", "header", "cookie"])
def test_http_episode__session_id_travels_in_body_header_or_cookie(client: Any, carrier: str) -> None:
    sid = reset(client, seed=2)
    if carrier != "cookie":
        client.cookies.clear()
    body = {"action": {"action": 0}} | ({"session_id": sid} if carrier == "body" else {})
    headers = {SESSION_HEADER: sid} if carrier == "header" else {}
    for tick in (1, 2):
        response = client.post("/step", json=body, headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["session_id"] == sid
        state = client.get("/state", params={"session_id": sid} if carrier == "body" else {}, headers=headers)
        assert state.json()["tick"] == tick


def test_http_episode__reset_with_a_known_session_reuses_it(client: Any) -> None:
    sid = reset(client, seed=1)
    step(client, sid)
    assert reset(client, seed=1, session_id=sid) == sid
    assert client.get("/state", params={"session_id": sid}).json()["tick"] == 0
    assert client.get("/sessions").json()["http"]["active"] == 1
    client.cookies.clear()
    other = reset(client, session_id="not-a-session")  # unknown: a new session opens
    assert other != sid and client.get("/sessions").json()["http"]["active"] == 2


def test_http_episode__sessions_are_isolated(client: Any) -> None:
    client.cookies.clear()
    a = reset(client, seed=5)
    client.cookies.clear()
    b = reset(client, seed=5)
    ref_a, ref_b = Reference("normal_day", 5), Reference("normal_day", 5)
    for i in range(12):
        action_a, action_b = (i % 3, 0)
        ref_a.check(*_step_and_ref(client, a, action_a, ref_a))
        ref_b.check(*_step_and_ref(client, b, action_b, ref_b))
    ticks = {sid: client.get("/state", params={"session_id": sid}).json()["tick"] for sid in (a, b)}
    assert ticks == {a: 12, b: 12}


def _step_and_ref(client: Any, sid: str, action: int, ref: Reference) -> tuple[dict, float, bool]:
    body = step(client, sid, action)
    ref.step(action)
    return body["observation"], body["reward"], body["done"]


def test_http_episode__expires_after_the_idle_timeout(client: Any, clock: Any) -> None:
    sid = reset(client, seed=0)
    clock.advance(TEST_SETTINGS.http_session_ttl_s - 1)
    step(client, sid)  # activity renews the session
    clock.advance(TEST_SETTINGS.http_session_ttl_s - 1)
    step(client, sid)
    clock.advance(TEST_SETTINGS.http_session_ttl_s + 1)
    client.cookies.clear()
    response = client.post("/step", json={"action": {"action": 0}, "session_id": sid})
    assert response.status_code == 404 and detail_code(response) == "UNKNOWN_SESSION"
    assert "expired" in response.json()["detail"]["message"]
    assert client.get("/sessions").json()["http"]["active"] == 0


def test_http_episode__session_limit_answers_429_until_one_closes(client: Any) -> None:
    sids = []
    for _ in range(TEST_SETTINGS.max_http_sessions):
        client.cookies.clear()
        sids.append(reset(client, seed=0))
    client.cookies.clear()
    full = client.post("/reset", json={"seed": 0})
    assert full.status_code == 429 and detail_code(full) == "SESSION_LIMIT"
    assert "DELETE /sessions" in full.json()["detail"]["message"]
    step(client, sids[0])  # the open sessions keep working
    assert client.delete(f"/sessions/{sids[0]}").status_code == 204
    assert client.delete(f"/sessions/{sids[0]}").status_code == 404
    client.cookies.clear()
    assert client.post("/reset", json={"seed": 0}).status_code == 200


def test_http_episode__step_without_a_session_is_a_clear_400_not_a_fresh_episode(client: Any) -> None:
    response = client.post("/step", json={"action": {"action": 0}})
    assert response.status_code == 400 and detail_code(response) == "NO_SESSION"
    assert "POST /reset" in response.json()["detail"]["message"]
    assert client.get("/state").status_code == 400
    assert client.get("/sessions").json()["http"]["active"] == 0


def test_http_episode__unknown_session_is_404(client: Any) -> None:
    response = client.post("/step", json={"action": {"action": 0}, "session_id": "nope"})
    assert response.status_code == 404 and detail_code(response) == "UNKNOWN_SESSION"
    assert client.get("/state", params={"session_id": "nope"}).status_code == 404
    assert (
        client.post("/step", json={"action": {"action": 0}}, headers={SESSION_HEADER: "nope"}).status_code
        == 404
    )


def test_http_episode__step_after_the_end_is_409(client: Any) -> None:
    sid = reset(client, seed=0, scenario="night_shift")
    done = False
    while not done:
        done = step(client, sid)["done"]
    response = client.post("/step", json={"action": {"action": 0}, "session_id": sid})
    assert response.status_code == 409 and detail_code(response) == "EPISODE_ENDED"


def test_http_episode__other_track_in_one_episode_is_409(client: Any) -> None:
    sid = reset(client, seed=0)
    step(client, sid, 1)
    response = client.post("/step", json={"action": {"triage": 1}, "session_id": sid})
    assert response.status_code == 409 and detail_code(response) == "TRACK_MIX"


def test_http_episode__team_action_steps_all_roles(client: Any) -> None:
    sid = reset(client, seed=4)
    response = client.post("/step", json={"action": {"triage": 1, "bed_manager": 0}, "session_id": sid})
    assert response.status_code == 200, response.text
    info = response.json()["observation"]["info"]
    assert info["outcomes"] == {"triage": "done", "bed_manager": "noop", "ventilator_officer": "noop"}


# ----------------------------------------------------------------- bad input
BAD_ACTIONS = [
    ({"action": -1}, "greater_than_equal"),
    ({"action": N_FLAT_ACTIONS}, "less_than_equal"),
    ({"action": 2.5}, "int_type"),
    ({"action": "2"}, "int_type"),
    ({"action": True}, "int_type"),
    ({"action": None}, "missing_action"),
    ({}, "missing_action"),
    ({"action": 1, "extra": 1}, "extra_forbidden"),
    ({"action": 1, "triage": 1}, "ambiguous_action"),
]


@pytest.mark.parametrize(("action", "error"), BAD_ACTIONS, ids=[e for _, e in BAD_ACTIONS])
def test_bad_input__http_actions_are_422_and_the_episode_goes_on(
    client: Any, action: dict, error: str
) -> None:
    sid = reset(client, seed=0)
    response = client.post("/step", json={"action": action, "session_id": sid})
    assert response.status_code == 422
    assert error in {e["type"] for e in response.json()["detail"]}
    assert client.get("/state", params={"session_id": sid}).json()["tick"] == 0  # nothing happened
    assert step(client, sid)["observation"]["info"]["tick"] == 1


@pytest.mark.parametrize(
    ("route", "body", "status"),
    [
        ("/step", {"session_id": "x"}, 422),  # no action at all
        ("/step", {"action": 3, "session_id": "x"}, 422),  # must be {"action": {"action": 3}}
        ("/step", {"action": {"action": 0}, "session_id": "x", "turbo": True}, 422),  # extra field
        ("/reset", {"seed": -1}, 422),
        ("/reset", {"seed": "7"}, 422),
        ("/reset", {"scenario": "moon_base"}, 422),
        ("/reset", {"scenario": "surge", "difficulty": 9}, 422),
        ("/reset", [1, 2], 422),
    ],
)
def test_bad_input__http_bodies_are_4xx(client: Any, route: str, body: Any, status: int) -> None:
    response = client.post(route, json=body)
    assert response.status_code == status, response.text
    assert client.get("/health").status_code == 200


def test_bad_input__unknown_scenario_names_the_valid_ones(client: Any) -> None:
    message = client.post("/reset", json={"scenario": "moon_base"}).json()["detail"][0]["msg"]
    assert "moon_base" in message and "normal_day" in message


@pytest.mark.parametrize("route", ["/reset", "/step"])
def test_bad_input__malformed_json_is_422(client: Any, route: str) -> None:
    response = client.post(route, content=b'{"seed": 1', headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "json_invalid"


def test_bad_input__oversized_bodies_are_413(client: Any) -> None:
    big = json.dumps({"seed": 1, "episode_id": "x" * TEST_SETTINGS.max_message_bytes})
    response = client.post("/reset", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413 and detail_code(response) == "PAYLOAD_TOO_LARGE"

    def chunks():  # no content-length: the limit must hold for streamed bodies too
        yield b'{"seed": 1, "episode_id": "'
        for _ in range(8):
            yield b"x" * 1024
        yield b'"}'

    response = client.post("/reset", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert client.get("/health").status_code == 200


# --------------------------------------------------------------- WebSocket
def ws_send(ws: Any, message: Any) -> dict:
    ws.send_text(message if isinstance(message, str) else json.dumps(message))
    return json.loads(ws.receive_text())


def test_websocket__bad_messages_get_errors_and_the_session_lives_on(client: Any) -> None:
    with client.websocket_connect("/ws") as ws:
        assert ws_send(ws, {"type": "step", "data": {"action": 1}})["data"]["message"].endswith("reset first")
        assert ws_send(ws, {"type": "reset", "data": {"seed": 3}})["type"] == "observation"
        ref = Reference("normal_day", 3)
        errors = [
            ("{not json", "INVALID_JSON"),
            ({"type": "teleport"}, "UNKNOWN_TYPE"),
            ({"type": "step", "data": {"action": 39}}, "VALIDATION_ERROR"),
            ({"type": "step", "data": {"action": -1}}, "VALIDATION_ERROR"),
            ({"type": "step", "data": {"action": 1.5}}, "VALIDATION_ERROR"),
            ({"type": "step", "data": {"action": "1"}}, "VALIDATION_ERROR"),
            ({"type": "step", "data": {"action": True}}, "VALIDATION_ERROR"),
            ({"type": "step", "data": {}}, "VALIDATION_ERROR"),
            ({"type": "step", "data": {"action": 1, "x": 0}}, "VALIDATION_ERROR"),
            ({"type": "step"}, "VALIDATION_ERROR"),
            ("x" * (TEST_SETTINGS.max_message_bytes + 1), "MESSAGE_TOO_LARGE"),
            ({"type": "reset", "data": {"seed": -5}}, "VALIDATION_ERROR"),
            ({"type": "reset", "data": {"scenario": "moon_base"}}, "VALIDATION_ERROR"),
        ]
        for message, code in errors:
            reply = ws_send(ws, message)
            assert (reply["type"], reply["data"]["code"]) == ("error", code), message
        ws.send_bytes(b"\x00\x01")
        assert json.loads(ws.receive_text())["data"]["code"] == "MESSAGE_NOT_TEXT"
        # None of that touched the episode: it continues exactly as in-process.
        reply = ws_send(ws, {"type": "step", "data": {"action": 1}})
        ref.step(1)
        ref.check(reply["data"]["observation"], reply["data"]["reward"], reply["data"]["done"])
        assert ws_send(ws, {"type": "state"})["data"]["tick"] == 1


def test_websocket__step_after_the_end_is_an_error(client: Any) -> None:
    with client.websocket_connect("/ws") as ws:
        reply = ws_send(ws, {"type": "reset", "data": {"seed": 0, "scenario": "night_shift"}})
        while not reply["data"]["done"]:
            reply = ws_send(ws, {"type": "step", "data": {"action": 0}})
        error = ws_send(ws, {"type": "step", "data": {"action": 0}})
        assert error["type"] == "error" and "ended" in error["data"]["message"]
        assert ws_send(ws, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"


def test_websocket__session_limit_sends_a_capacity_error_then_closes_1013(client: Any) -> None:
    from contextlib import ExitStack

    with ExitStack() as stack:
        sockets = [
            stack.enter_context(client.websocket_connect("/ws")) for _ in range(TEST_SETTINGS.max_sessions)
        ]
        for i, ws in enumerate(sockets):
            assert ws_send(ws, {"type": "reset", "data": {"seed": i}})["type"] == "observation"
        assert client.get("/sessions").json()["websocket"]["active"] == TEST_SETTINGS.max_sessions
        with client.websocket_connect("/ws") as extra:
            error = json.loads(extra.receive_text())
            assert error["data"]["code"] == "CAPACITY_REACHED"
            assert error["data"]["max_sessions"] == TEST_SETTINGS.max_sessions
            with pytest.raises(WebSocketDisconnect) as closed:
                extra.receive_text()
            assert closed.value.code == 1013 and "capacity" in closed.value.reason
        # The sessions already open are unaffected.
        assert ws_send(sockets[0], {"type": "step", "data": {"action": 0}})["type"] == "observation"
    with client.websocket_connect("/ws") as again:  # slots free once those close
        assert ws_send(again, {"type": "reset", "data": {}})["type"] == "observation"
