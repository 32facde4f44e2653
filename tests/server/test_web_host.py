"""The ED web view's tabs play their days in the web host, a process of their own (issue 24's
latency target: the planner tab's work held the server's interpreter): nothing of a tab's day
runs in the server's process, a host that dies is replaced, a host never outlives its server,
and the server's helper processes yield to it on a busy machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("gradio", reason="the web view needs gradio (openenv-core brings it)")

import httpx

from server.app import build_app
from server.settings import ServerSettings
from server.web_host import RemoteTab, WebHost
from tests.server.live import live_server
from tests.server.test_web_http import _day_handler, _images, call

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Any]]:
    app = build_app(ServerSettings(web=True, max_sessions_per_client=0))
    with live_server(app=app) as url:
        yield url, app


def _fn(url: str, elem_id: str) -> int:
    config = httpx.get(f"{url}/web/config", timeout=30).json()
    elem = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    return next(
        d["id"] for d in config["dependencies"] if d["targets"] and elem.get(d["targets"][0][0]) == elem_id
    )


def _text(message: dict[str, Any]) -> str:
    return " ".join(str(o) for o in message["output"]["data"] if isinstance(o, str))


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie (killed, not yet reaped) is gone too
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"


def _wait_gone(pid: int, limit_s: float = 10.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_tabs_day_is_played_outside_the_servers_process(
    served: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In this (the server's) process no ED day can start now: the tab's day, its moves and its
    # agent still play, because they run in the host.
    from hospital_marl.core.hospital import Hospital

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("a web tab's episode ran in the server's process")

    monkeypatch.setattr(Hospital, "reset", refuse)  # every day of every env starts here
    url, app = served
    tab = uuid.uuid4().hex[:11]
    day = call(url, _day_handler(url), [None, "surge", 3, "flat", "heuristic"], tab)
    assert day["success"] and len(_images(day)) == 2, day
    sid = day["output"]["data"][0]
    finished = call(url, _fn(url, "agent-finish"), [sid], tab)
    assert finished["success"] and "shift over" in _text(finished), _text(finished)
    moved = call(url, _fn(url, "act-0"), [sid], tab)
    assert moved["success"] and "Last move: 0" in _text(moved), _text(moved)
    host = app.state.web_host.pid
    assert host is not None and host != os.getpid()


def test_a_host_that_dies_is_reported_to_the_tab_and_replaced(served: tuple[str, Any]) -> None:
    url, app = served
    tab = uuid.uuid4().hex[:11]
    day = call(url, _day_handler(url), [None, "normal_day", 5, "flat", "heuristic"], tab)
    sid = day["output"]["data"][0]
    old = app.state.web_host.pid
    os.kill(old, signal.SIGKILL)
    assert _wait_gone(old)
    lost = call(url, _fn(url, "agent-tick"), [sid], tab)
    assert lost["success"] and "worker process stopped" in _text(lost), _text(lost)
    again = call(url, _fn(url, "new-day"), [sid, "normal_day", 5, "flat", "heuristic"], tab)
    assert again["success"] and len(_images(again)) == 2, _text(again)
    assert app.state.web_host.pid not in (None, old)


def test_the_host_exits_when_its_server_process_is_killed() -> None:
    script = (
        "import sys\n"
        "from server.web_host import WebHost\n"
        "host = WebHost(); host.start(); print(host.pid, flush=True); sys.stdin.read()\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        pid = int(owner.stdout.readline())
        assert not _gone(pid)
        owner.kill()  # SIGKILL: no clean-up runs in the owner
        owner.wait()
        assert _wait_gone(pid), "the web host outlived its server's process"
    finally:
        owner.kill()


def test_the_web_host_and_the_mcp_transport_run_below_the_servers_priority() -> None:
    from server.agents import AGENT_NICE
    from server.mcp_transport import PROCESS_NICE

    mine = os.getpriority(os.PRIO_PROCESS, 0)
    host = WebHost()
    try:
        host.start()
        assert host.pid is not None
        assert os.getpriority(os.PRIO_PROCESS, host.pid) == min(19, mine + AGENT_NICE)
    finally:
        host.close()
    app = build_app(ServerSettings())
    from fastapi.testclient import TestClient

    with TestClient(app, base_url="http://127.0.0.1") as client:
        opened = client.post(
            "/mcp",
            json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            },
            headers={"accept": "application/json, text/event-stream"},
        )  # fmt: skip
        assert opened.status_code == 200, opened.text
        pid = app.state.streamable_mcp.transport_pid
        assert pid is not None and os.getpriority(os.PRIO_PROCESS, pid) == min(19, mine + PROCESS_NICE)


def test_closing_a_tab_never_waits_for_the_host() -> None:
    # The web store may expire a tab on the event loop, under its lock: the host's answer to the
    # close is not waited for there (here it comes only once released).
    release, closed = threading.Event(), threading.Event()

    class StuckHost:
        def close(self) -> None:
            release.wait(30)
            closed.set()

    tab = RemoteTab(WebHost(), "normal_day")
    tab._tab = StuckHost()
    tab.close()
    assert not closed.is_set()
    release.set()
    assert closed.wait(10)


def test_a_closed_host_starts_again_for_the_next_tab() -> None:
    # An app may run more than one lifespan (each ends with close): the next tab gets a new host.
    host = WebHost()
    try:
        host.start()
        first = host.pid
        host.close()
        assert host.pid is None and first is not None and _wait_gone(first)
        refusal, _, view = host.tab("normal_day", "10.0.0.1").perform(
            "new_day", ("normal_day", 2, "flat", "heuristic")
        )
        assert refusal is None and view.started and host.pid not in (None, first)
    finally:
        host.close()


def test_a_radiotherapy_tabs_plans_and_agent_run_outside_the_servers_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three RT tabs running the planner in the server's process raised a /ws client's step p99
    from 4.9 to 124 ms (issue 43): the plans, the agent's moves and the pictures are the host's."""
    from hospital_marl.radiotherapy import RadiotherapyPlanningEnv

    app = build_app(ServerSettings(env="radiotherapy", web=True, max_sessions_per_client=0))
    with live_server(app=app) as url:

        def refuse(*_: Any, **__: Any) -> None:
            raise AssertionError("a radiotherapy tab's plan ran in the server's process")

        monkeypatch.setattr(RadiotherapyPlanningEnv, "reset", refuse)  # every plan starts here
        config = httpx.get(f"{url}/web/config", timeout=30).json()
        load = next(d["id"] for d in config["dependencies"] if len(d["inputs"]) == 4)
        tab = uuid.uuid4().hex[:11]
        plan = call(url, load, [None, "prostate", 3, "evenly_spaced"], tab)
        assert plan["success"] and len(_images(plan)) == 2, _text(plan)
        assert "Patient: **prostate**, seed **3**" in _text(plan), _text(plan)
        sid = plan["output"]["data"][0]
        finished = call(url, _fn(url, "agent-finish"), [sid], tab)
        assert finished["success"] and "Agent (evenly_spaced)" in _text(finished), _text(finished)
        host = app.state.web_host.pid
        assert host is not None and host != os.getpid()
        # Your move, played in the host too: both pictures come back.
        stale = call(url, _fn(url, "act-0"), [sid], tab)
        assert stale["success"] and len(_images(stale)) == 2, _text(stale)
