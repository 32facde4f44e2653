"""A real uvicorn server on a loopback port, driven by OpenEnv's GenericEnvClient,
the typed HospitalClient, raw WebSockets and plain HTTP."""

from __future__ import annotations

import asyncio
import random

import pytest
from websockets.exceptions import ConnectionClosedError

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

import httpx
from openenv.core import GenericEnvClient
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from server.client import HospitalClient, HospitalServerError
from server.models import HospitalObservation, HospitalState
from server.settings import ServerSettings
from tests.server.live import live_server
from tests.server.reference import Reference, choose_flat, choose_team

pytestmark = pytest.mark.server


def test_generic_client__reset_steps_state_match_in_process(live_url: str) -> None:
    async def play() -> None:
        async with GenericEnvClient(base_url=live_url) as env:
            result = await env.reset(seed=31, scenario="surge")
            ref, rng = Reference("surge", 31), random.Random(31)
            ref.check(result.observation, result.reward, result.done)
            while not result.done:
                action = choose_flat(result.observation["action_mask"], rng)
                result = await env.step({"action": action})
                ref.step(action)
                ref.check(result.observation, result.reward, result.done)
            state = await env.state()
            hospital = ref.env.unwrapped.hospital
            assert state["tick"] == hospital.tick_count and state["seed"] == 31
            assert state["cumulative_reward"] == hospital.counters.cumulative_reward
            assert result.observation["metrics"] == hospital.metrics()

    asyncio.run(asyncio.wait_for(play(), timeout=60))


def test_generic_client__sync_wrapper_works_too(live_url: str) -> None:
    with GenericEnvClient(base_url=live_url).sync() as env:
        result = env.reset(seed=2)
        result = env.step({"action": 0})
        assert result.observation["info"]["tick"] == 1
        assert env.state()["step_count"] == 1


def test_typed_client__sync_with_block_plays_the_in_process_trajectory(live_url: str) -> None:
    with HospitalClient(live_url) as env:
        result = env.reset(seed=8, scenario="ventilator_crisis")
        assert isinstance(result.observation, HospitalObservation)
        ref, rng = Reference("ventilator_crisis", 8), random.Random(8)
        ref.check(result.observation, result.reward, result.done)
        while not result.done:
            action = choose_flat(result.observation.action_mask, rng)
            result = env.step(action)
            ref.step(action)
            ref.check(result.observation, result.reward, result.done)
        state = env.state()
        assert isinstance(state, HospitalState)
        assert (state.done, state.track, state.score) == (True, "flat", ref.env.unwrapped.hospital.score())


def test_typed_client__async_team_track_matches_team_env(live_url: str) -> None:
    async def play() -> None:
        async with HospitalClient(live_url) as env:
            result = await env.reset(seed=14, scenario="mass_casualty")
            ref, rng = Reference("mass_casualty", 14, track="team"), random.Random(14)
            for _ in range(40):
                joint = choose_team(rng)
                result = await env.step_team(**joint)
                ref.step(joint)
                ref.check(result.observation, result.reward, result.done)
            assert (await env.state()).track == "team"

    asyncio.run(asyncio.wait_for(play(), timeout=60))


def test_typed_client__server_errors_carry_their_code_and_the_session_survives(live_url: str) -> None:
    with HospitalClient(live_url) as env:
        with pytest.raises(HospitalServerError) as exc:
            env.step(0)
        assert exc.value.code == "EXECUTION_ERROR" and "reset first" in str(exc.value)
        with pytest.raises(HospitalServerError) as exc:
            env.reset(scenario="moon_base")
        assert exc.value.code == "VALIDATION_ERROR"
        assert env.reset(seed=0).observation.info["tick"] == 0
        with pytest.raises(ValueError):  # the typed client validates before sending
            env.step(39)
        assert env.step(0).observation.info["tick"] == 1


def test_concurrent_sessions__are_isolated(live_url: str) -> None:
    scenarios = [
        "normal_day",
        "surge",
        "mass_casualty",
        "night_shift",
        "ventilator_crisis",
        "surge",
        "normal_day",
        "surge",
    ]

    async def play(i: int, scenario: str) -> int:
        async with HospitalClient(live_url) as env:
            result = await env.reset(seed=100 + i % 2, scenario=scenario)  # equal seeds too: no sharing
            ref, rng = Reference(scenario, 100 + i % 2), random.Random(i)
            steps = 0
            while not result.done and steps < 60:
                action = choose_flat(result.observation.action_mask, rng)
                result = await env.step(action)
                ref.step(action)
                ref.check(result.observation, result.reward, result.done)
                steps += 1
                await asyncio.sleep(0)  # interleave the sessions' messages
            assert (await env.state()).tick == steps
            return steps

    async def main() -> list[int]:
        return await asyncio.gather(*(play(i, s) for i, s in enumerate(scenarios)))

    assert all(n > 0 for n in asyncio.run(asyncio.wait_for(main(), timeout=90)))


def test_session_limit__clients_see_a_capacity_error_not_a_bare_close() -> None:
    async def run(url: str) -> None:
        holders = [HospitalClient(url), HospitalClient(url)]
        try:
            for env in holders:
                await env.connect()
                await env.reset(seed=0)
            generic = GenericEnvClient(base_url=url)
            try:
                # OpenEnv's generic client sees the capacity either as the error message (if
                # its request goes out first) or as the close frame right after it (code 1013,
                # a reason naming the capacity): a race; either way it is told "capacity".
                with pytest.raises((RuntimeError, ConnectionClosedError)) as generic_exc:
                    await generic.reset()
                if isinstance(generic_exc.value, ConnectionClosedError):
                    close = generic_exc.value.rcvd
                    assert close is not None and close.code == 1013 and "capacity" in close.reason
                else:
                    assert "CAPACITY_REACHED" in str(generic_exc.value)
            finally:
                await generic.close()
            typed = HospitalClient(url)
            try:
                await typed.connect()
                await asyncio.sleep(0.2)  # let the server's close arrive before we send
                with pytest.raises(HospitalServerError) as exc:
                    await typed.reset()
                assert exc.value.code == "CAPACITY_REACHED"
            finally:
                await typed.close()
            assert (await holders[0].step(0)).observation.info["tick"] == 1  # the others are unaffected
        finally:
            for env in holders:
                await env.close()
        async with HospitalClient(url) as env:  # a freed slot is usable again
            assert (await env.reset(seed=1)).observation.info["tick"] == 0

    # One client fills the pool here: per-client caps off (test_safety tests them).
    with live_server(ServerSettings(max_sessions=2, max_sessions_per_client=0)) as url:
        asyncio.run(asyncio.wait_for(run(url), timeout=60))


def test_oversized_websocket_frames__close_1009_and_other_sessions_go_on(live_url: str) -> None:
    ws_url = live_url.replace("http://", "ws://") + "/ws"

    async def run() -> None:
        async with HospitalClient(live_url) as bystander:
            await bystander.reset(seed=0)
            async with connect(ws_url, max_size=None) as ws:
                await ws.send("x" * (ServerSettings(max_message_bytes=4096).ws_frame_limit_bytes + 1))
                with pytest.raises(ConnectionClosed) as closed:
                    await asyncio.wait_for(ws.recv(), timeout=10)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009  # message too big
            assert (await bystander.step(0)).observation.info["tick"] == 1

    asyncio.run(asyncio.wait_for(run(), timeout=30))


def test_plain_http__reset_then_step_continues_with_a_cookie_jar(live_url: str) -> None:
    # What users of the original do: POST /reset, then POST /step, with any session-aware HTTP client.
    with httpx.Client(base_url=live_url, timeout=10) as http:
        first = http.post("/reset", json={"seed": 6}).json()
        ref = Reference("normal_day", 6)
        ref.check(first["observation"], first["reward"], first["done"])
        for action in (1, 0, 0):
            body = http.post("/step", json={"action": {"action": action}}).json()
            ref.step(action)
            ref.check(body["observation"], body["reward"], body["done"])
        assert http.get("/state").json()["tick"] == 3
        sid = first["session_id"]
        assert http.delete(f"/sessions/{sid}").status_code == 204  # also clears the cookie
        assert http.post("/step", json={"action": {"action": 0}}).status_code == 400
        assert http.post("/step", json={"action": {"action": 0}, "session_id": sid}).status_code == 404
    with httpx.Client(base_url=live_url, timeout=10) as stateless:  # no id, no cookie: a clear 400
        assert stateless.post("/step", json={"action": {"action": 0}}).status_code == 400
