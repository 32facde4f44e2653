"""The agent against a running server (WebSocket, and MCP tools through openenv's MCP client),
and the MCP tools themselves: listed with schemas from the action table, playable, refusing
illegal actions without playing them."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import numpy as np
import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

from openenv.core.mcp_client import MCPToolClient

from grading.grader import episode_seed
from hospital_marl.core.actions import ACTION_GROUPS, ROLE_ACTION_COUNTS, ROLES, Kind
from hospital_marl.envs.composed import HospitalEDEnv, HospitalEDTeamEnv
from hospital_marl.envs.text import render_prompt
from hospital_marl_cli.agents.llm import main
from tests.llm.conftest import StandInFactory, first_legal

pytestmark = pytest.mark.server

TOOLS = {
    "start_shift", "read_board", "legal_actions", "admit", "ventilate", "transfer", "discharge",
    "early_discharge", "wait", "act",
}  # fmt: skip


def _run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str, *argv: str):
    monkeypatch.setenv("API_BASE_URL", url)
    monkeypatch.setenv("MODEL_NAME", "standin-model")
    monkeypatch.setenv("API_KEY", "test-key")
    status = main(["--timeout", "5", "--retries", "0", "--scenarios", "night_shift", *argv])
    return status, capsys.readouterr().out


def _mcp(live_url: str) -> MCPToolClient:
    client = MCPToolClient(base_url=live_url)
    client.use_production_mode = True  # HTTP /mcp, one persistent session
    return client


@pytest.mark.parametrize("mode", [(), ("--mcp",)], ids=["websocket", "mcp_tools"])
def test_server__the_same_replies_print_the_in_process_lines(
    standin: StandInFactory,
    live_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mode,
) -> None:
    with standin() as (_, url):
        local_status, local = _run(monkeypatch, capsys, url)
        status, served = _run(monkeypatch, capsys, url, "--server", live_url, *mode)
    assert local_status == status == 0
    assert served == local and served.count("[STEP]") > 0


def test_server_team__three_roles_decide_on_the_same_state(
    standin: StandInFactory,
    live_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with standin() as (server, url):
        status, out = _run(monkeypatch, capsys, url, "--server", live_url, "--track", "team")
    env = HospitalEDTeamEnv(scenario="night_shift")  # the server's team step: one state, three choices
    _, info = env.reset(seed=episode_seed(0, "night_shift", 0))
    done, actions, asked = False, [], 0
    while not done:
        masks = np.split(info["action_mask"], np.cumsum([ROLE_ACTION_COUNTS[r] for r in ROLES])[:-1])
        joint = [first_legal(m) for m in masks]
        asked += sum(int(np.count_nonzero(m)) > 1 for m in masks)
        actions.append(",".join(map(str, joint)))
        _, _, terminated, truncated, info = env.step(joint)
        done = terminated or truncated
    lines = out.splitlines()
    assert status == 0 and [line.split()[2] for line in lines[1:-1]] == [f"action={a}" for a in actions]
    assert f"score={info['score'] / 100:.2f}" in lines[-1]
    # Only role decisions with a choice are asked (a role whose only legal action is the no-op is not).
    assert len(server.requests) == asked


def test_mcp_agent__text_without_a_number_and_illegal_tool_calls_play_the_noop(
    standin: StandInFactory,
    live_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with standin("garbage", "illegal", "prose") as (_, url):
        status, out = _run(monkeypatch, capsys, url, "--server", live_url, "--mcp")
    # The scripted replies answer the first ticks with a choice (quiet ticks are not asked).
    steps = [s for s in out.splitlines()[1:-1] if not s.endswith("error=null")]
    assert status == 0 and len(steps) == 2
    assert steps[0].endswith("error=no_action_number") and " action=0 " in steps[0]
    assert " action=0 " in steps[1] and steps[1].split("error=")[1].startswith("illegal_action_")


def test_mcp_tools__listed_with_schemas_from_the_action_table(live_url: str) -> None:
    async def listed() -> dict[str, Any]:
        client = _mcp(live_url)
        try:
            return {t.name: t.input_schema for t in await client.list_tools()}
        finally:
            await client.close()

    schemas = asyncio.run(listed())
    assert set(schemas) == TOOLS
    count = {g.kind: g.count for g in ACTION_GROUPS}
    assert schemas["admit"]["properties"]["queue_slot"]["maximum"] == count[Kind.ADMIT_GENERAL] - 1
    assert schemas["admit"]["properties"]["unit"]["enum"] == ["general", "icu"]
    assert schemas["ventilate"]["properties"]["ventilator"]["maximum"] == count[Kind.VENTILATE] - 1
    assert schemas["discharge"]["properties"]["icu_bed"]["maximum"] == count[Kind.DISCHARGE_ICU] - 1
    assert schemas["act"]["properties"]["action"]["maximum"] == 38
    assert set(schemas["admit"]["required"]) == {"queue_slot", "unit"}


def test_mcp_tools__named_tools_play_the_actions_they_list_like_the_in_process_env(live_url: str) -> None:
    env = HospitalEDEnv(scenario="surge")
    obs, info = env.reset(seed=9)
    rng = random.Random(9)

    async def play() -> None:
        nonlocal obs, info
        client = _mcp(live_url)
        try:
            board = await client.call_tool("start_shift", scenario="surge", seed=9)
            for _ in range(40):
                assert board["text"] == render_prompt(obs, info["action_mask"], None, 100)
                listed = await client.call_tool("legal_actions")
                assert [row["action"] for row in listed] == np.flatnonzero(info["action_mask"]).tolist()
                row = rng.choice(listed)
                board = await client.call_tool(row["tool"], **row["arguments"])
                obs, reward, *_, info = env.step(row["action"])
                assert board["action"] == row["action"] and board["reward"] == pytest.approx(reward)
            illegal = int(np.flatnonzero(~info["action_mask"])[0])
            with pytest.raises(RuntimeError, match=f"action {illegal} .* is not legal now"):
                await client.call_tool("act", action=illegal)
            assert (await client.call_tool("read_board"))["tick"] == 40  # nothing was played
            with pytest.raises(RuntimeError, match="unknown scenario"):
                await client.call_tool("start_shift", scenario="no_such_day")
        finally:
            await client.close()

    asyncio.run(play())


def test_mcp_tools__acting_before_a_shift_is_refused(live_url: str) -> None:
    async def act() -> None:
        client = _mcp(live_url)
        try:
            with pytest.raises(RuntimeError, match="call start_shift first"):
                await client.call_tool("wait")
        finally:
            await client.close()

    asyncio.run(act())


@pytest.mark.filterwarnings("ignore:Accessing `Tool.inputSchema` is deprecated")  # openenv 0.3 reads it
def test_mcp_environment__tools_through_step_and_built_only_when_asked() -> None:
    """OpenEnv's simulation-mode path (ListToolsAction / CallToolAction through ``step``) plays the
    same episode as ``reset``/``step``; a session that never asks for tools never builds them."""
    from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction

    from server.mcp_tools import HospitalMCPEnvironment

    env = HospitalMCPEnvironment(scenario="surge")
    env.reset(seed=2)
    env.step(0)
    assert env._mcp is None  # plain use: no FastMCP server, no client
    assert {t.name for t in env.step(ListToolsAction()).tools} == TOOLS
    played = env.step(CallToolAction(tool_name="wait", arguments={}))
    assert played.error is None and played.result.data["tick"] == 2 == env.state.tick
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        _ = env.mcp_client


@pytest.mark.parametrize("mode", [(), ("--mcp",)], ids=["websocket", "mcp_tools"])
def test_server_unreachable__success_false_and_exit_1(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], mode
) -> None:
    from tests.server.live import free_port

    with standin() as (server, url):
        status, out = _run(monkeypatch, capsys, url, "--server", f"http://127.0.0.1:{free_port()}", *mode)
    assert status == 1 and not server.requests
    assert out.splitlines() == [
        "[START] task=night_shift env=hospital_marl/HospitalED-v0 model=standin-model",
        "[END] success=false steps=0 score=0.00 rewards=",
    ]


def test_mcp_over_the_ws_session__tools_play_the_sessions_own_episode(live_url: str) -> None:
    """``{"type": "mcp"}`` messages on /ws reach the tools of that session's environment: a tool
    call continues the episode that ``reset`` started, and ``step`` continues after it."""
    import json

    from websockets.asyncio.client import connect

    def rpc(i: int, name: str, **arguments: Any) -> str:
        params = {"name": name, "arguments": arguments}
        return json.dumps(
            {"type": "mcp", "data": {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}}
        )

    async def play() -> None:
        async with connect(live_url.replace("http://", "ws://") + "/ws") as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": 4, "scenario": "surge"}}))
            assert json.loads(await ws.recv())["type"] == "observation"
            await ws.send(rpc(1, "wait"))
            answer = json.loads(await ws.recv())
            assert answer["type"] == "mcp" and answer["data"]["id"] == 1
            assert answer["data"]["result"]["structured_content"]["tick"] == 1
            await ws.send(json.dumps({"type": "step", "data": {"action": 0}}))
            assert json.loads(await ws.recv())["data"]["observation"]["info"]["tick"] == 2

    asyncio.run(asyncio.wait_for(play(), timeout=60))
