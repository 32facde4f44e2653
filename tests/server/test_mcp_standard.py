"""``/mcp`` is MCP to standard clients (issue 24): the ``mcp`` SDK's streamable-HTTP client and
fastmcp's ``Client`` connect to a real server, list the tools and play an episode, while
OpenEnv's ``MCPToolClient`` keeps working. Tool arguments are as strict as ``/step``; tool
errors over OpenEnv's JSON-RPC carry ``error.data.code``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

import httpx

from hospital_marl.envs.composed import HospitalEDEnv
from server.mcp_tools import ACTING_TOOLS, READING_TOOLS
from server.settings import ServerSettings
from tests.server.live import live_server

pytestmark = pytest.mark.server

SEED, TICKS = 5, 6


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with live_server(ServerSettings(max_sessions=8)) as base:
        yield base


def in_process_ticks() -> list[float]:
    """The rewards of waiting TICKS ticks on the same day, in-process."""
    env = HospitalEDEnv(scenario="normal_day")
    env.reset(seed=SEED)
    return [float(env.step(0)[1]) for _ in range(TICKS)]


def structured(result: Any) -> dict:
    data = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    if data is None:
        data = json.loads(result.content[0].text)
    return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data


async def play(session: Any) -> tuple[set[str], list[float], dict]:
    tools = await session.list_tools()
    names = {t.name for t in getattr(tools, "tools", tools)}
    board = structured(await session.call_tool("start_shift", {"seed": SEED, "scenario": "normal_day"}))
    assert board["tick"] == 0
    rewards = [structured(await session.call_tool("wait", {}))["reward"] for _ in range(TICKS)]
    return names, rewards, structured(await session.call_tool("read_board", {}))


def test_the_mcp_sdk_streamable_http_client_plays_an_episode(url: str) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> tuple[set[str], list[float], dict, Any]:
        async with streamable_http_client(f"{url}/mcp") as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                names, rewards, board = await play(session)
                strict = await session.call_tool("act", {"action": "5"})
                return names, rewards, board, strict

    names, rewards, board, strict = asyncio.run(asyncio.wait_for(run(), 120))
    assert set(ACTING_TOOLS) | set(READING_TOOLS) <= names
    assert rewards == pytest.approx(in_process_ticks()) and board["tick"] == TICKS
    assert strict.is_error  # "5" is not an action number, as on /step


def test_fastmcp_client_plays_an_episode_and_sessions_are_isolated(url: str) -> None:
    from fastmcp import Client

    async def run() -> tuple[Any, ...]:
        async with Client(f"{url}/mcp") as first, Client(f"{url}/mcp") as second:
            names, rewards, board = await play(first)
            other = structured(await second.call_tool("start_shift", {"seed": SEED + 1}))
            with pytest.raises(Exception, match=r"(?i)valid|type|integer"):
                await first.call_tool("act", {"action": True})
            after = structured(await first.call_tool("read_board", {}))
            return names, rewards, board, other, after

    names, rewards, board, other, after = asyncio.run(asyncio.wait_for(run(), 120))
    assert set(ACTING_TOOLS) <= names
    assert rewards == pytest.approx(in_process_ticks())
    assert (board["tick"], other["tick"], after["tick"]) == (TICKS, 0, TICKS)  # nothing was played


def test_openenv_mcp_tool_client_keeps_working(url: str) -> None:
    from openenv.core.mcp_client import MCPToolClient

    async def run() -> list[float]:
        client = MCPToolClient(base_url=url)
        client.use_production_mode = True
        try:
            await client.call_tool("start_shift", seed=SEED, scenario="normal_day")
            return [(await client.call_tool("wait"))["reward"] for _ in range(TICKS)]
        finally:
            await client.close()

    assert asyncio.run(asyncio.wait_for(run(), 120)) == pytest.approx(in_process_ticks())


def test_a_session_id_is_its_clients_and_unknown_ids_are_404(url: str) -> None:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"},
        },
    }  # fmt: skip
    response = httpx.post(f"{url}/mcp", json=init, headers=headers)
    assert response.status_code == 200, response.text
    sid = response.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    unknown = httpx.post(f"{url}/mcp", json=listing, headers=headers | {"mcp-session-id": "nope"})
    assert unknown.status_code == 404
    assert httpx.delete(f"{url}/mcp", headers=headers | {"mcp-session-id": sid}).status_code in (200, 204)
    gone = httpx.post(f"{url}/mcp", json=listing, headers=headers | {"mcp-session-id": sid})
    assert gone.status_code == 404


def test_methods_but_post_and_delete_are_405_as_the_openapi_document_says(url: str) -> None:
    """schemathesis found ``GET /mcp`` and ``DELETE /mcp`` answered 400 while the document listed
    POST only (ST204), and ``OPTIONS`` a 405 allowing POST alone (ST205). DELETE (ending a standard
    MCP session) is documented now; MCP's transport lets a server without an SSE stream answer
    GET with 405, and clients carry on."""
    headers = {"accept": "text/event-stream"}
    documented = httpx.get(f"{url}/openapi.json").json()["paths"]["/mcp"]
    assert "get" not in documented
    assert {"post", "delete"} <= set(documented)
    for method in ("GET", "OPTIONS", "PUT", "HEAD"):
        for extra in ({}, {"mcp-session-id": "anything"}):
            response = httpx.request(method, f"{url}/mcp", headers=headers | extra)
            assert response.status_code == 405, (method, response.text)
            assert set(response.headers["allow"].replace(" ", "").split(",")) == {"POST", "DELETE"}


@pytest.mark.parametrize("value", ["5", True, 5.5, None])
def test_openenv_json_rpc_tool_arguments_are_strict_and_errors_carry_a_code(url: str, value: Any) -> None:
    def rpc(method: str, params: dict) -> dict:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return httpx.post(f"{url}/mcp", json=body).json()

    sid = rpc("openenv/session/create", {})["result"]["session_id"]
    try:
        rpc("tools/call", {"session_id": sid, "name": "start_shift", "arguments": {"seed": 1}})
        answer = rpc("tools/call", {"session_id": sid, "name": "act", "arguments": {"action": value}})
        assert answer["error"]["data"]["code"] == "VALIDATION_ERROR", answer
        refused = rpc("tools/call", {"session_id": sid, "name": "act", "arguments": {"action": 38}})
        assert refused["error"]["data"]["code"] == "EXECUTION_ERROR", refused
        board = rpc("tools/call", {"session_id": sid, "name": "read_board", "arguments": {}})
        assert board["result"]["structured_content"]["tick"] == 0  # nothing was played
    finally:
        rpc("openenv/session/close", {"session_id": sid})
