"""The RT env served by OpenEnv (``server.radiotherapy``): same trajectory as in process, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from hospital_marl.radiotherapy import RadiotherapyPlanningEnv
from server.radiotherapy import make_app

pytestmark = pytest.mark.server


def send(ws, message: dict) -> dict:
    ws.send_json(message)
    return ws.receive_json()


def test_websocket__episode_matches_the_in_process_env() -> None:
    local = RadiotherapyPlanningEnv("head_neck")
    obs, info = local.reset(seed=5)
    rng = np.random.default_rng(0)
    with TestClient(make_app()).websocket_connect("/ws") as ws:
        reply = send(ws, {"type": "reset", "data": {"seed": 5, "task": "head_neck"}})["data"]
        assert reply["observation"]["action_mask"] == info["action_mask"].tolist()
        done = False
        while not done:
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
            obs, reward, terminated, truncated, info = local.step(action)
            reply = send(ws, {"type": "step", "data": {"action": action}})["data"]
            assert reply["reward"] == reward
            assert reply["observation"]["observation"]["tumour_dvh"] == obs["tumour_dvh"].tolist()
            done = terminated or truncated
            assert reply["done"] == done
        assert reply["observation"]["score"] == info["score"]
        state = send(ws, {"type": "state"})["data"]
        assert state["task"] == "head_neck" and state["seed"] == 5 and state["score"] == info["score"]


def test_websocket__bad_input_is_an_error_message_and_the_session_lives_on() -> None:
    with TestClient(make_app("prostate")).websocket_connect("/ws") as ws:
        assert send(ws, {"type": "step", "data": {"action": 0}})["type"] == "error"  # before reset
        assert send(ws, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        for bad in (8, -1, 1.5, "0", True):
            reply = send(ws, {"type": "step", "data": {"action": bad}})
            assert (reply["type"], reply["data"]["code"]) == ("error", "VALIDATION_ERROR"), bad
        assert send(ws, {"type": "reset", "data": {"seed": 1, "task": "lung"}})["type"] == "error"
        assert send(ws, {"type": "step", "data": {"action": 0}})["type"] == "observation"
