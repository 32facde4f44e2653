"""The RT env served by THE server (``build_app`` with ``env="radiotherapy"``, SPEC-RT §7).

Same trajectory as in process over WebSocket and stateful HTTP; the ED's guards and session
limits hold for it too (bad messages answered and the session kept, sessions counted in
``/sessions``, capacity refusals); the served env is chosen at start.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import numpy as np
import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from hospital_marl.radiotherapy import RadiotherapyPlanningEnv
from hospital_marl.radiotherapy.core.plan import N_ACTIONS
from hospital_marl.radiotherapy.core.tasks import TASKS
from server.app import build_app
from server.app import make_rt_app as make_app
from server.guards import MAX_JSON_DEPTH
from server.settings import ServerSettings
from tests.server.conftest import local_client

pytestmark = pytest.mark.server

SETTINGS = ServerSettings(
    env="radiotherapy", max_sessions=3, max_http_sessions=2, max_message_bytes=4096, max_sessions_per_client=0
)


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with local_client(build_app(SETTINGS)) as test_client:
        yield test_client


def send(ws: Any, message: Any) -> dict:
    ws.send_text(message if isinstance(message, str) else json.dumps(message))
    return json.loads(ws.receive_text())


def legal_actions(seed: int) -> Iterator[int]:
    rng = np.random.default_rng(seed)
    while True:
        yield int(rng.integers(N_ACTIONS))  # legal or not: an illegal one is penalised the same way


def test_websocket__episode_matches_the_in_process_env(client: TestClient) -> None:
    local = RadiotherapyPlanningEnv("head_neck")
    obs, info = local.reset(seed=5)
    actions = legal_actions(0)
    with client.websocket_connect("/ws") as ws:
        reply = send(ws, {"type": "reset", "data": {"seed": 5, "task": "head_neck"}})["data"]
        assert reply["observation"]["action_mask"] == info["action_mask"].tolist()
        assert reply["observation"]["observation"]["tumour_dvh"] == obs["tumour_dvh"].tolist()
        done = False
        while not done:
            action = next(actions)
            obs, reward, terminated, truncated, info = local.step(action)
            reply = send(ws, {"type": "step", "data": {"action": action}})["data"]
            assert reply["reward"] == reward
            for key, value in obs.items():
                assert reply["observation"]["observation"][key] == value.tolist(), key
            assert reply["observation"]["action_mask"] == info["action_mask"].tolist()
            assert reply["observation"]["invalid_actions"] == info["invalid_actions"]
            done = terminated or truncated
            assert reply["done"] == done
        assert reply["observation"]["score"] == info["score"]
        state = send(ws, {"type": "state"})["data"]
        assert (state["task"], state["seed"], state["score"]) == ("head_neck", 5, info["score"])
        error = send(ws, {"type": "step", "data": {"action": 0}})
        assert error["type"] == "error" and "reset" in error["data"]["message"]


def test_websocket__bad_messages_get_errors_and_the_session_keeps_its_plan(client: TestClient) -> None:
    local = RadiotherapyPlanningEnv("prostate")
    local.reset(seed=1)
    with client.websocket_connect("/ws") as ws:
        assert send(ws, {"type": "step", "data": {"action": 0}})["type"] == "error"  # before reset
        assert send(ws, {"type": "reset", "data": {"seed": 1}})["data"]["observation"]["task"] == "prostate"
        send(ws, {"type": "step", "data": {"action": 0}})
        local.step(0)
        bad: list[tuple[Any, str]] = [
            *(
                ({"type": "step", "data": {"action": a}}, "VALIDATION_ERROR")
                for a in (N_ACTIONS, -1, 1.5, "0", True)
            ),
            ({"type": "step", "data": {"action": 0, "x": 1}}, "VALIDATION_ERROR"),
            ({"type": "reset", "data": {"seed": 1, "task": "moon"}}, "VALIDATION_ERROR"),
            ({"type": "reset", "data": {"seed": 1, "scenario": "normal_day"}}, "VALIDATION_ERROR"),
            ("{not json", "INVALID_JSON"),
            ("[]", "VALIDATION_ERROR"),
            ("null", "VALIDATION_ERROR"),
            ('{"type": "step", "data": {"action": NaN}}', "VALIDATION_ERROR"),
            ("[" * (MAX_JSON_DEPTH + 5) + "]" * (MAX_JSON_DEPTH + 5), "VALIDATION_ERROR"),
            ("x" * (SETTINGS.max_message_bytes + 1), "MESSAGE_TOO_LARGE"),
        ]
        for message, code in bad:
            reply = send(ws, message)
            assert (reply["type"], reply["data"]["code"]) == ("error", code), str(message)[:40]
        # None of that touched the plan: it continues exactly as in process.
        obs, reward, *_ = local.step(3)
        reply = send(ws, {"type": "step", "data": {"action": 3}})["data"]
        assert reply["reward"] == reward
        assert reply["observation"]["observation"]["beams"] == obs["beams"].tolist()


def test_sessions__counted_and_bounded_like_the_eds(client: TestClient) -> None:
    with ExitStack() as stack:
        sockets = [stack.enter_context(client.websocket_connect("/ws")) for _ in range(SETTINGS.max_sessions)]
        for i, ws in enumerate(sockets):
            assert send(ws, {"type": "reset", "data": {"seed": i}})["type"] == "observation"
        sessions = client.get("/sessions").json()
        assert sessions["websocket"]["active"] == sessions["websocket"]["ws"] == SETTINGS.max_sessions
        with client.websocket_connect("/ws") as extra:
            assert json.loads(extra.receive_text())["data"]["code"] == "CAPACITY_REACHED"
            with pytest.raises(WebSocketDisconnect) as closed:
                extra.receive_text()
            assert closed.value.code == 1013
    assert client.get("/sessions").json()["websocket"]["active"] == 0
    opened = []
    for i in range(SETTINGS.max_http_sessions + 1):
        client.cookies.clear()  # else the cookie of the last reset names its session, which is reused
        opened.append(client.post("/reset", json={"seed": i}))
    assert [r.status_code for r in opened] == [200] * SETTINGS.max_http_sessions + [429]
    assert client.get("/sessions").json()["http"]["active"] == SETTINGS.max_http_sessions
    for r in opened[:-1]:
        assert client.delete(f"/sessions/{r.json()['session_id']}").status_code == 204


def test_mcp__sessions_count_in_the_shared_pool_though_rt_has_no_tools(client: TestClient) -> None:
    def rpc(method: str, params: dict) -> dict:
        return client.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        ).json()

    assert "error" in rpc("tools/list", {})
    sid = rpc("openenv/session/create", {})["result"]["session_id"]
    pool = client.get("/sessions").json()["websocket"]
    assert (pool["active"], pool["mcp_http"]) == (1, 1)
    assert client.get("/sessions").json()["mcp"] is None  # no standard MCP transport without tools
    assert "error" not in rpc("openenv/session/close", {"session_id": sid})
    assert client.get("/sessions").json()["websocket"]["active"] == 0


def test_http__stateful_episode_matches_in_process_and_errors_are_4xx(client: TestClient) -> None:
    client.cookies.clear()
    local = RadiotherapyPlanningEnv("pediatric_brain")
    local.reset(seed=9)
    reset = client.post("/reset", json={"seed": 9, "task": "pediatric_brain"})
    assert reset.status_code == 200, reset.text
    sid = reset.json()["session_id"]
    for action in (0, 6, 0, 1, 3, 4, 7):
        obs, reward, terminated, truncated, info = local.step(action)
        step = client.post("/step", json={"action": {"action": action}, "session_id": sid})
        assert step.status_code == 200, step.text
        body = step.json()
        assert (body["reward"], body["done"]) == (reward, terminated or truncated)
        assert body["observation"]["observation"]["oar_dvh"] == obs["oar_dvh"].tolist()
    assert body["done"] and body["observation"]["score"] == info["score"]
    state = client.get("/state", params={"session_id": sid}).json()
    assert (state["task"], state["score"]) == ("pediatric_brain", info["score"])
    assert client.post("/step", json={"action": {"action": 0}, "session_id": sid}).status_code == 409
    assert client.post("/step", json={"action": {"action": N_ACTIONS}, "session_id": sid}).status_code == 422
    unknown = client.post("/reset", json={"task": "moon"})
    assert unknown.status_code == 422 and all(t in unknown.text for t in TASKS)
    infinite = client.post("/reset", content=b'{"seed": 1e400}', headers={"content-type": "application/json"})
    assert infinite.status_code == 422 and infinite.json()["detail"]
    assert client.delete(f"/sessions/{sid}").status_code == 204


def test_schema_and_metadata_describe_the_rt_env(client: TestClient) -> None:
    schema = client.get("/schema").json()
    assert schema["action"]["properties"]["action"]["maximum"] == N_ACTIONS - 1
    assert {"task", "score", "metrics", "action_mask"} <= set(schema["observation"]["properties"])
    assert "beams" in schema["state"]["properties"]
    assert "radiotherapy" in client.get("/metadata").json()["name"]


def test_the_served_env_is_chosen_at_start() -> None:
    with local_client(make_app("head_neck")) as rt, rt.websocket_connect("/ws") as ws:
        assert send(ws, {"type": "reset", "data": {"seed": 0}})["data"]["observation"]["task"] == "head_neck"
    environ = {"HOSPITAL_ENV": "radiotherapy", "HOSPITAL_RT_TASK": "pediatric_brain"}
    settings = ServerSettings.from_env(environ)
    assert (settings.env, settings.rt_task) == ("radiotherapy", "pediatric_brain")
    assert ServerSettings.from_env({}).env == "ed"
    with pytest.raises(ValueError, match="radiotherapy task"):
        ServerSettings(task="pediatric_brain")  # a task means nothing to the ED
    with pytest.raises(ValueError, match="valid names"):
        ServerSettings(env="radiotherapy", task="moon")
    with pytest.raises(ValueError, match="unknown environment"):
        ServerSettings(env="icu")


def test_cli__serve_takes_the_env_and_task() -> None:
    from hospital_marl_cli import build_parser
    from server.settings import settings_from_args

    args = build_parser().parse_args(["serve", "--env", "radiotherapy", "--task", "head_neck", "--web"])
    settings = settings_from_args(args, environ={})
    assert (settings.env, settings.task, settings.web) == ("radiotherapy", "head_neck", True)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--env", "icu"])
