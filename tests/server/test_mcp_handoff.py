"""A standard MCP connection is served whole by the MCP transport's process (issue 24's latency
target: its requests cost the server's event loop ~0.3 ms of CPU each when forwarded).

Each test runs a real uvicorn server with the server's HTTP protocol (``uvicorn_options``) and an
ASGI middleware counting the requests that reach the app in the server's own process: a standard
MCP request on a connection that began with one must not reach it; anything else must, and gets
exactly the answer it gets on a connection the server kept."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

import httpx

from server.app import build_app
from server.settings import ServerSettings
from tests.server.live import live_server

pytestmark = pytest.mark.server

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
CLIENT = {"name": "t", "version": "0"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT},
}
WAIT_S = 60.0


class SeenByTheServer:
    """ASGI middleware (outermost): the (method, path) of every HTTP request the server's own
    process handles."""

    def __init__(self, app: Any, seen: list[tuple[str, str]]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append((scope["method"], scope["path"]))
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    seen: list[tuple[str, str]] = []
    app = build_app(ServerSettings(max_sessions=64), warm=True)
    app.add_middleware(SeenByTheServer, seen=seen)
    with live_server(app=app) as url:
        yield url, seen


def one_connection(url: str) -> httpx.Client:
    """A client that sends every request on one kept-alive connection."""
    return httpx.Client(base_url=url, timeout=WAIT_S, limits=httpx.Limits(max_connections=1))


def call(http: httpx.Client, sid: str, rid: int, method: str, params: dict[str, Any]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    return http.post("/mcp", json=body, headers=HEADERS | {"mcp-session-id": sid})


def mcp_requests(seen: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [s for s in seen if s[1].rstrip("/") == "/mcp"]


def test_a_standard_mcp_connection_never_reaches_the_servers_process(served: Any) -> None:
    """An episode through the ``mcp`` SDK's own client: every request answered, none of its
    ``POST`` s or its ``DELETE`` handled by the server's process (before the hand-over, each one
    was). The client's attempt at a server-sent-event stream (``GET``, on a connection of its
    own) is the server's 405, as before."""
    import asyncio

    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    url, seen = served
    before = len(mcp_requests(seen))

    async def episode() -> list[float]:
        async with streamable_http_client(f"{url}/mcp") as streams, ClientSession(*streams) as session:
            await session.initialize()
            await session.call_tool("start_shift", {"seed": 3, "scenario": "normal_day"})
            rewards = []
            for _ in range(3):
                result = await session.call_tool("wait", {})
                rewards.append(json.loads(result.content[0].text)["reward"])
            return rewards

    rewards = asyncio.run(episode())
    assert len(rewards) == 3 and all(isinstance(r, float) for r in rewards)
    assert [r for r in mcp_requests(seen)[before:] if r[0] != "GET"] == []


def test_other_requests_on_a_handed_over_connection_come_back_to_the_server(served: Any) -> None:
    """On one connection: ``initialize`` (handed over), ``GET /health`` (sent back: the server
    answers it), then the session's ``tools/list`` (now on the server's side, still that client's
    session) and its ``DELETE``."""
    url, seen = served
    with one_connection(url) as http:
        opened = http.post("/mcp", json=INIT, headers=HEADERS)
        assert opened.status_code == 200
        sid = opened.headers["mcp-session-id"]
        start = len(seen)
        assert http.get("/health").status_code == 200
        assert seen[start:] == [("GET", "/health")]
        listed = call(http, sid, 2, "tools/list", {})
        assert listed.status_code == 200 and {t["name"] for t in listed.json()["result"]["tools"]} >= {"wait"}
        assert http.delete("/mcp", headers=HEADERS | {"mcp-session-id": sid}).status_code == 200
        assert mcp_requests(seen[start:]) == [("POST", "/mcp"), ("DELETE", "/mcp")]
        again = call(http, sid, 3, "tools/list", {})
        assert again.status_code == 404 and again.json()["error"]["data"]["code"] == "UNKNOWN_SESSION"


def test_a_session_opened_on_a_handed_over_connection_is_counted_and_ends(served: Any) -> None:
    """The server's books follow sessions it never saw a request of: ``/sessions`` counts it while
    open, and its ``DELETE`` gives the slot back."""
    url, _ = served
    active = lambda: httpx.get(f"{url}/sessions").json()["mcp"]["active"]  # noqa: E731
    base = active()
    with one_connection(url) as http:
        sid = http.post("/mcp", json=INIT, headers=HEADERS).headers["mcp-session-id"]
        assert active() == base + 1
        assert call(http, sid, 2, "tools/list", {}).status_code == 200
        assert http.delete("/mcp", headers=HEADERS | {"mcp-session-id": sid}).status_code == 200
    assert active() == base


def test_ids_the_server_does_not_know_are_404_on_a_handed_over_connection(served: Any) -> None:
    """Ownership is the server's decision even where it sees no request: a made-up id, and a
    ``/ws`` session's id, get the unknown-session answer."""
    url, seen = served
    start = len(seen)
    with one_connection(url) as http:
        assert http.post("/mcp", json=INIT, headers=HEADERS).status_code == 200
        for sid in ("not-a-session", "0" * 32):
            reply = call(http, sid, 2, "tools/list", {})
            assert reply.status_code == 404 and reply.json()["error"]["data"]["code"] == "UNKNOWN_SESSION"
    assert mcp_requests(seen[start:]) == []


BAD_REQUESTS = [  # (headers, body): each is refused by the guards
    ({"content-type": "text/plain"}, json.dumps(INIT).encode()),
    ({"content-type": "application/json"}, b'{"jsonrpc": "2.0", "id": NaN, "method": "initialize"}'),
    ({"content-type": "application/json", "origin": "https://evil.example"}, json.dumps(INIT).encode()),
    ({"content-type": "application/json", "host": "evil.example"}, json.dumps(INIT).encode()),
    (
        {"content-type": "application/json"},
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "x": "\xff"}',
    ),
]


@pytest.mark.parametrize(("headers", "body"), BAD_REQUESTS)
def test_the_guards_answer_alike_on_both_sides(served: Any, headers: dict[str, str], body: bytes) -> None:
    """A refused standard MCP request gets the same status and body from the transport's process
    (first request of a connection: handed over) as from the server (a connection it kept)."""
    url, _ = served
    accept = {"accept": HEADERS["accept"]}
    with one_connection(url) as http:
        handed = http.post("/mcp", content=body, headers=accept | headers)
    with one_connection(url) as http:
        assert http.get("/health").status_code == 200  # the server keeps this connection
        kept = http.post("/mcp", content=body, headers=accept | headers)
    assert handed.status_code == kept.status_code and handed.status_code in (400, 403, 415, 421, 422)
    assert handed.json() == kept.json()


def test_an_oversized_body_on_a_handed_over_connection_is_413(served: Any) -> None:
    url, _ = served
    limit = ServerSettings().max_message_bytes
    with one_connection(url) as http:
        sid = http.post("/mcp", json=INIT, headers=HEADERS).headers["mcp-session-id"]
        big = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"pad": "x" * limit}}
        reply = http.post("/mcp", content=json.dumps(big).encode(), headers=HEADERS | {"mcp-session-id": sid})
        assert reply.status_code == 413 and reply.json()["detail"]["code"] == "PAYLOAD_TOO_LARGE"


def raw_exchange(url: str, chunks: list[bytes], replies: int) -> list[bytes]:
    """Send ``chunks`` (one write each) on one socket; read until ``replies`` responses are in."""
    host, port = url.split("://", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        for chunk in chunks:
            sock.sendall(chunk)
            time.sleep(0.002)
        data = b""
        while data.count(b"HTTP/1.1 ") < replies or not _complete(data, replies):
            more = sock.recv(65536)
            if not more:
                break
            data += more
    return [b"HTTP/1.1 " + part for part in data.split(b"HTTP/1.1 ")[1:]]


def _complete(data: bytes, replies: int) -> bool:
    parts = data.split(b"HTTP/1.1 ")[1:]
    if len(parts) < replies:
        return False
    head, _, body = parts[-1].partition(b"\r\n\r\n")
    lengths = [
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    ]
    length = lengths[0] if lengths else None
    return length is not None and len(body) >= length


def request_bytes(method: str, path: str, body: bytes = b"", extra: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n{extra}"
    if body:
        head += f"content-type: application/json\r\naccept: {HEADERS['accept']}\r\n"
        head += f"content-length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def test_a_first_request_arriving_byte_by_byte_is_routed_and_answered(served: Any) -> None:
    url, seen = served
    start = len(seen)
    init = request_bytes("POST", "/mcp", json.dumps(INIT).encode())
    (reply,) = raw_exchange(url, [init[i : i + 1] for i in range(len(init))], 1)
    assert reply.startswith(b"HTTP/1.1 200") and b"mcp-session-id" in reply.lower()
    health = request_bytes("GET", "/health")
    (reply,) = raw_exchange(url, [health[i : i + 1] for i in range(len(health))], 1)
    assert reply.startswith(b"HTTP/1.1 200")
    assert seen[start:] == [("GET", "/health")]


def test_pipelined_requests_are_answered_in_order_across_the_hand_back(served: Any) -> None:
    """``initialize`` and ``GET /health`` in one write: the process answers the first, sends the
    connection back with the second, and the server answers it."""
    url, seen = served
    start = len(seen)
    both = request_bytes("POST", "/mcp", json.dumps(INIT).encode()) + request_bytes("GET", "/health")
    first, second = raw_exchange(url, [both], 2)
    assert first.startswith(b"HTTP/1.1 200") and b"mcp-session-id" in first.lower()
    assert second.startswith(b"HTTP/1.1 200") and b'"status"' in second
    assert seen[start:] == [("GET", "/health")]


def test_openenv_json_rpc_at_mcp_stays_with_the_server(served: Any) -> None:
    """OpenEnv's JSON-RPC (``tools/list`` with no MCP headers) is the server's own route."""
    url, seen = served
    start = len(seen)
    with one_connection(url) as http:
        reply = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    assert reply.status_code == 200 and "tools" in reply.json()["result"]
    assert seen[start:] == [("POST", "/mcp")]


def test_a_client_waiting_for_100_continue_gets_it(served: Any) -> None:
    """``Expect: 100-continue`` (curl sends it for bodies over 1 KB): the body comes only after the
    server's ``100 Continue``, so the first request cannot be read whole before the routing
    decision; uvicorn's own protocol answers the 100 and the request is served."""
    url, _ = served
    host, port = url.split("://", 1)[1].split(":")
    body = json.dumps(INIT).encode()
    head = request_bytes("POST", "/mcp", body, extra="expect: 100-continue\r\n")[: -len(body)]
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(head)
        assert sock.recv(65536).startswith(b"HTTP/1.1 100")  # a timeout here: nobody sent the 100
        sock.sendall(body)
        sock.settimeout(WAIT_S)
        reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 200") and b"mcp-session-id" in reply.lower()


def test_the_process_writes_the_access_log_lines_of_what_it_answers(tmp_path: Any) -> None:
    """``serve`` logs every request (uvicorn's access log, on stdout): those the MCP process answers
    too, in uvicorn's format."""
    import subprocess
    import sys

    from tests.server.live import free_port, wait_healthy

    port = free_port()
    out = (tmp_path / "stdout.txt").open("w+")
    command = [sys.executable, "-m", "server.app", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, timeout_s=90, alive=lambda: proc.poll() is None)
        with one_connection(url) as http:
            sid = http.post("/mcp", json=INIT, headers=HEADERS).headers["mcp-session-id"]
            assert call(http, sid, 2, "tools/list", {}).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out.seek(0)
    lines = [line for line in out.read().splitlines() if '"POST /mcp HTTP/1.1"' in line]
    assert len(lines) == 2 and all(line.rstrip().endswith("200 OK") or " 200" in line for line in lines)


NESTED = b"[" * 30000 + b"]" * 30000


@pytest.mark.parametrize(
    "body", [NESTED, b'{"method": "initialize", "x": ' + NESTED + b"}"], ids=["array", "in-initialize"]
)
def test_deeply_nested_bodies_get_the_guards_422_on_either_side(served: Any, body: bytes) -> None:
    """Deciding whether a first request is standard MCP reads its JSON before the guards do: a
    nesting too deep for Python's parser must still get the guards' answer, not a dropped
    connection."""
    url, _ = served
    with one_connection(url) as http:
        first = http.post("/mcp", content=body, headers=HEADERS)
        assert first.status_code == 422
        assert http.get("/health").status_code == 200  # the connection lives on


class _Pipe:
    """Stands in for the frame pipe's transport: keeps what is written."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, frame: bytes) -> None:
        self.frames.append(frame)

    def close(self) -> None:
        pass


def test_a_process_that_dies_mid_open_gives_the_held_slot_back() -> None:
    """The server holds a slot (and counts it against the client) from deciding an ``initialize``
    on a handed-over connection until the process reports what came of it; if the process dies
    in between, the slot and the client's count come back (with a cap of one, the client could
    otherwise never open a session again)."""
    import time as _time

    from server.mcp_http import StreamableMCP
    from server.sessions import ClientLedger

    settings = ServerSettings(max_sessions=2, max_sessions_per_client=1)
    ledger = ClientLedger(settings.max_sessions_per_client)
    mcp = StreamableMCP(settings, ledger, _time.monotonic, settings.scenario)
    process = mcp._process
    pipe = _Pipe()
    process._writer = pipe  # as if running
    process._on_frame(("ask", 1, "10.0.0.7", "POST", None, None))
    assert len(pipe.frames) == 1 and ledger.clients() == 1
    process._on_frame(("ask", 2, "10.0.0.7", "POST", None, None))  # the client's cap: refused
    assert b"CLIENT_SESSION_LIMIT" in pipe.frames[1]
    process._on_lost(pipe)
    assert ledger.clients() == 0
    assert mcp.decide("10.0.0.7", "POST", None, None) == ("open", None)  # it may open again
