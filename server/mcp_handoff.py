"""Standard MCP connections handed whole to the transport's process (issue 24's latency target).

Forwarding each standard MCP request through the server's event loop cost that loop ~0.3 ms of
CPU per request (uvicorn's parsing, the guards, the hand-over, the reply: 1.2 ms per session of
``initialize``, ``initialized``, ``tools/call`` and ``DELETE``), and one ``/ws`` session's median
step rose from 0.23 to 0.27 ms beside a client cycling MCP sessions (to 0.31-0.37 ms with a
planner tab as well), while the same client served by another server process cost nothing. So a
*connection* whose first request is standard MCP leaves the server's process altogether:

- :class:`RoutingProtocol` is the server's HTTP protocol (uvicorn's ``http`` option). It reads a
  connection's first request; unless that is a standard MCP request to ``/mcp`` (the test is
  :func:`claims`), it hands the connection, bytes read so far included, to uvicorn's own protocol
  and steps aside. A standard MCP connection's socket goes to the transport's process over a Unix
  socket (``SCM_RIGHTS``) with the bytes read so far.
- :func:`serve_connection`, in that process, answers the connection's requests with h11 (the HTTP/1.1
  state machine uvicorn's pure-Python protocol uses). A request that is not standard MCP (any
  route, a refused method, a request h11 cannot parse, a body over the limit) sends the connection
  *back*, unanswered bytes included, and the server serves it from then on as any other.

What a request may do is still decided in the server's process: the transport's process asks it
(ownership, caps, expiry, protocol versions; :class:`server.mcp_http.StreamableMCP`), a small
frame each way instead of the whole request. The guards (:class:`server.guards.RequestGuardMiddleware`)
run in the process on each request it answers, the same code with the same settings. A
connection is handed over at most twice, and a request never waits on the server's loop for
anything but its decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import struct
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import h11
from starlette.types import ASGIApp, Message, Scope

from server.guards import replay

logger = logging.getLogger("server.mcp")
access_logger = logging.getLogger("uvicorn.access")
"""The process writes an access-log line per request it answers, as uvicorn does for the rest."""

PREFIX_LIMIT = 64 * 1024
"""Bytes of a connection's unanswered requests that travel with it (beyond: it stays where it is)."""
CHANNEL_BUFFER = 4 * PREFIX_LIMIT
"""Each end's socket buffer for the hand-over channel (a few connections in flight at once)."""
KEEP_ALIVE_S = 5.0
"""Idle seconds before the process closes a kept-alive connection (uvicorn's default)."""
READ_LIMIT_S = 30.0
"""Seconds a started request may take to arrive in full."""
HEADER_TIMEOUT_S = 10.0
"""Seconds a new connection has to send its first request's head (``header_timeout_s``)."""
MAX_PENDING = 256
"""Connections that may be waiting for their first request's head at once (``max_pending_connections``)."""
MCP_PATH = "/mcp"
SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
_SDK_METHODS = frozenset({"initialize", "server/discover"})
"""Methods that open a standard MCP exchange (OpenEnv's route knows neither)."""
_HEADS = (b"POST " + MCP_PATH.encode(), b"DELETE " + MCP_PATH.encode())


# ------------------------------------------------------------------ which requests
def header(scope: Scope, name: bytes) -> str | None:
    """A request header's value (the first), or None."""
    return next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == name), None)


def claims(scope: Scope, body: bytes) -> bool:
    """Whether a request to ``/mcp`` is the SDK's (standard MCP) rather than OpenEnv's JSON-RPC."""
    if scope["method"] == "DELETE" or header(scope, SESSION_HEADER) is not None:
        return True
    if header(scope, VERSION_HEADER) is not None:
        return True
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # the guards answer these (400 / 422)
        return False
    return isinstance(message, dict) and message.get("method") in _SDK_METHODS


def is_mcp_route(scope: Scope) -> bool:
    """``POST`` or ``DELETE`` at ``/mcp`` (anything else there is the app's: OpenAPI's 405s)."""
    return scope["path"].rstrip("/") == MCP_PATH and scope["method"] in ("POST", "DELETE")


def error_reply() -> list[Message]:
    """The ASGI messages of a 500 JSON-RPC ``internal error`` (a request the SDK or the app failed)."""
    body = b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32603, "message": "internal error"}}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return [
        {"type": "http.response.start", "status": 500, "headers": headers},
        {"type": "http.response.body", "body": body},
    ]


class _Request:
    """One request read with h11: its ASGI scope and body, or why it cannot be (``None``)."""

    def __init__(self) -> None:
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=PREFIX_LIMIT)
        self.start: h11.Request | None = None
        self.body = bytearray()
        self.too_large = False

    def feed(self, data: bytes, max_body: int) -> bool | None:
        """Take bytes; True once the whole request is in, None while more is needed, False if it
        is not one to take here (malformed, too large, not ``/mcp``)."""
        if data:
            self.conn.receive_data(data)
        try:
            while True:
                event = self.conn.next_event()
                if event is h11.NEED_DATA:
                    return None
                if isinstance(event, h11.Request):
                    self.start = event
                    if (
                        event.method not in (b"POST", b"DELETE")
                        or self.conn.client_is_waiting_for_100_continue
                    ):
                        return False  # not standard MCP; or uvicorn's own protocol sends the 100
                elif isinstance(event, h11.Data):
                    self.body += event.data
                    if len(self.body) > max_body:
                        self.too_large = True
                        return False
                else:  # the end (True), or ConnectionClosed / PAUSED
                    return isinstance(event, h11.EndOfMessage)
        except h11.RemoteProtocolError:
            return False

    def scope(self, sock: socket.socket | None = None) -> Scope:
        """The request's ASGI scope (``server`` / ``client`` from ``sock``; None without one)."""
        assert self.start is not None
        raw_path, _, query = self.start.target.partition(b"?")
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": self.start.http_version.decode("ascii"),
            "server": _address(sock.getsockname) if sock is not None else None,
            "client": _address(sock.getpeername) if sock is not None else None,
            "scheme": "http",
            "method": self.start.method.decode("ascii"),
            "root_path": "",
            "path": unquote(raw_path.decode("ascii", "replace")),
            "raw_path": raw_path,
            "query_string": query,
            "headers": [(name, value) for name, value in self.start.headers],
        }


def _address(get: Callable[[], Any]) -> tuple[str, int] | None:
    try:
        address = get()
    except OSError:
        return None
    return (str(address[0]), int(address[1])) if isinstance(address, tuple) else None


# ------------------------------------------------------------------ the channel
def channel_pair() -> tuple[socket.socket, socket.socket]:
    """The hand-over channel: a Unix ``SOCK_SEQPACKET`` pair (one message, one connection)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for end in (ours, theirs):
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, CHANNEL_BUFFER)
        end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CHANNEL_BUFFER)
        end.setblocking(False)
    return ours, theirs


_CID = struct.Struct("!Q")
"""A handed-over connection's id, before its bytes in each channel message (0: a connection sent back)."""


def send_connection(channel: socket.socket, fd: int, data: bytes, cid: int = 0) -> bool:
    """Send a connection's socket, its id and its unanswered bytes (False: it stays with the sender)."""
    if len(data) > PREFIX_LIMIT:
        return False
    try:
        socket.send_fds(channel, [_CID.pack(cid) + bytes(data)], [fd])
    except OSError:  # the channel is full (BlockingIOError) or gone
        return False
    return True


def receive_connections(channel: socket.socket) -> list[tuple[socket.socket, bytes, int]] | None:
    """The connections waiting on the channel, each with its bytes and id (None once the other end
    has gone)."""
    received: list[tuple[socket.socket, bytes, int]] = []
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, _CID.size + PREFIX_LIMIT, 1)
        except BlockingIOError:
            return received
        except OSError:
            return None
        if not message and not fds:
            return None
        (cid,) = _CID.unpack_from(message) if len(message) >= _CID.size else (0,)
        for fd in fds:
            sock = socket.socket(fileno=fd)
            sock.setblocking(False)
            received.append((sock, bytes(message[_CID.size :]), cid))


# ------------------------------------------------------------------ the server's side
class RoutingProtocol(asyncio.Protocol):
    """uvicorn's ``http`` protocol for this server: a connection whose first request is standard
    MCP goes to the transport's process; every other one is uvicorn's own protocol's.

    The app tells where to (``app.state.streamable_mcp``: an object with ``hand_over(transport,
    data, uvicorn_kwargs) -> bool``); without one, or with its process not running, the
    connection stays. ``prefix``/``route=False``: a connection coming back from the process.
    """

    def __init__(
        self,
        config: Any,
        server_state: Any,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        prefix: bytes = b"",
        route: bool = True,
    ) -> None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        self._inner_class = AutoHTTPProtocol
        self._kwargs = {
            "config": config,
            "server_state": server_state,
            "app_state": app_state,
            "_loop": _loop,
        }
        self._buffer = bytearray(prefix)
        state = getattr(getattr(config, "app", None), "state", None)
        self._target = getattr(state, "streamable_mcp", None) if route else None
        self._max_body = getattr(getattr(state, "settings", None), "max_message_bytes", PREFIX_LIMIT)
        self._request: _Request | None = None
        self._transport: Any = None
        self._inner: asyncio.Protocol | None = None
        self._pending = _pending_of(server_state) if route else None
        settings = getattr(state, "settings", None)
        self._deadline_s = getattr(settings, "header_timeout_s", HEADER_TIMEOUT_S)
        self._max_pending = getattr(settings, "max_pending_connections", MAX_PENDING)

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]  # uvloop's is no asyncio.Transport
        self._transport = transport
        if self._pending is not None:
            self._watch_first_request(transport)
        if self._target is None or not self._target.takes_connections():
            self._stay()
        elif self._buffer:
            self.data_received(b"")

    # ------------------------------------------------------------ slow clients
    def _watch_first_request(self, transport: Any) -> None:
        """A connection must send its first request's head within ``header_timeout_s``, and at
        most ``max_pending_connections`` may be waiting to at once (a slowloris client held 400
        connections for good: neither uvicorn protocol times out a request's head). Beyond the cap
        the oldest waiting one is closed, not the newcomer: a client that sends its head at once
        is never refused however many connections dribble."""
        pending = self._pending
        assert pending is not None
        while len(pending) >= self._max_pending:
            oldest = next(iter(pending))
            del pending[oldest]
            if not oldest.first_request_in():
                oldest.close_slow("too many connections still sending their first request")
        pending[self] = None
        asyncio.get_running_loop().call_later(self._deadline_s, self._deadline)

    def first_request_in(self) -> bool:
        """Whether the connection has sent its first request's head (or has closed, or been
        handed over, or become a WebSocket)."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return True
        inner = self._inner
        if inner is None:
            return False  # still ours: its head is not whole yet
        if transport.get_protocol() is not inner:
            return True  # upgraded (a WebSocket)
        return getattr(inner, "cycle", None) is not None

    def close_slow(self, why: str) -> None:
        logger.info("closing a slow connection: %s", why)
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()

    def _deadline(self) -> None:
        if self._pending is not None:
            self._pending.pop(self, None)
        if not self.first_request_in():
            self.close_slow(f"no request head within {self._deadline_s:g} s")

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._request is None:
            head = bytes(self._buffer[: len(_HEADS[1]) + 1])
            if (
                len(head) < len(_HEADS[1]) + 1
                and any(h.startswith(head) for h in _HEADS)
                and b"\n" not in head
            ):
                return  # too little to tell yet
            if not any(
                head.startswith(h) and head[len(h) : len(h) + 1] in (b" ", b"/", b"?") for h in _HEADS
            ):
                self._stay()
                return
            self._request = _Request()
            data = bytes(self._buffer)
        verdict = self._request.feed(data, min(self._max_body, PREFIX_LIMIT))
        if verdict is None and len(self._buffer) <= PREFIX_LIMIT:
            return
        if verdict and self._handed_over():
            return
        self._stay()

    def _handed_over(self) -> bool:
        """Hand the connection over if its whole first request is standard MCP at ``/mcp``."""
        request, transport, target = self._request, self._transport, self._target
        if request is None or request.start is None or transport is None or target is None:
            return False
        try:
            scope = request.scope()
            if not (is_mcp_route(scope) and claims(scope, bytes(request.body))):
                return False
            transport.pause_reading()
            if target.hand_over(transport, bytes(self._buffer), self._kwargs):
                transport.abort()  # our copy of the socket; the process holds its own
                return True
            transport.resume_reading()
        except Exception:  # never lose a connection to routing: uvicorn's protocol serves it
            logger.exception("could not hand a standard MCP connection over; the server serves it")
            with contextlib.suppress(Exception):
                transport.resume_reading()
        return False

    def _stay(self) -> asyncio.Protocol:
        """Give the connection, and what it has sent so far, to uvicorn's own protocol."""
        assert self._transport is not None
        inner = self._inner_class(**self._kwargs)
        self._inner = inner
        self._transport.set_protocol(inner)
        inner.connection_made(self._transport)
        if self._buffer:
            inner.data_received(bytes(self._buffer))
        self._buffer.clear()
        return inner

    def eof_received(self) -> bool | None:
        """The client half-closed before its first request was whole: uvicorn's protocol answers
        it as it would have."""
        if self._transport is None:
            return None
        inner = self._stay()
        return inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._pending is not None:
            self._pending.pop(self, None)


def _pending_of(server_state: Any) -> dict[RoutingProtocol, None]:
    """The server's connections still sending their first request, oldest first (kept on
    uvicorn's per-server state object, so each server has its own)."""
    pending = getattr(server_state, "hospital_pending", None)
    if pending is None:
        pending = {}
        with contextlib.suppress(AttributeError):
            server_state.hospital_pending = pending
    return pending


def accept_returned(channel: socket.socket, kwargs: Callable[[], dict[str, Any] | None]) -> bool:
    """On the server's loop: serve the connections the process sent back (False: channel gone)."""
    returned = receive_connections(channel)
    if returned is None:
        return False
    for sock, prefix, _ in returned:
        serve_here(sock, prefix, kwargs())
    return True


def serve_here(sock: socket.socket, prefix: bytes, settings: dict[str, Any] | None) -> None:
    """On the server's loop: serve a connection (and ``prefix``, the bytes read from it so far and
    not answered) with uvicorn's protocol as any other; ``settings``: its protocol's arguments
    (None: the server is not serving, so the connection is closed)."""
    if settings is None:
        sock.close()
        return

    def protocol() -> RoutingProtocol:
        return RoutingProtocol(**settings, prefix=prefix, route=False)

    loop = asyncio.get_running_loop()
    task = loop.create_task(loop.connect_accepted_socket(protocol, sock))
    task.add_done_callback(_log_failure)


UNAVAILABLE_REPLY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)
_UNAVAILABLE_BODY = (
    b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "the MCP transport\'s '
    b"process stopped while answering this request: retry (its sessions are gone: initialize a new "
    b'one)", "data": {"code": "NOT_READY"}}}'
)


def unavailable(sock: socket.socket) -> None:
    """Answer a request the transport's process died while answering with a 503 (``Retry-After``),
    then close: a response, never a dropped connection. Best effort (a small, non-blocking write)."""
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        sock.send(UNAVAILABLE_REPLY % (len(_UNAVAILABLE_BODY), _UNAVAILABLE_BODY))
    sock.close()


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning(
            "a connection sent back by the MCP transport could not be served: %s", task.exception()
        )


# ------------------------------------------------------------------ the process's side
async def serve_connection(
    sock: socket.socket,
    prefix: bytes,
    app: ASGIApp,
    max_body: int,
    send_back: Callable[[socket.socket, bytes], bool],
    news: Callable[[str], None] = lambda state: None,
) -> None:
    """Answer a handed-over connection's standard MCP requests with ``app`` until the client
    closes it, it idles, or a request is not one to answer here (then ``send_back`` it).

    ``news`` tells the server where the connection is, so that it can still answer it if this
    process dies: ``"busy"`` (a request read whole, no byte of its reply written), ``"replying"``
    (about to write the reply), ``"gone"`` (this process is done with it)."""
    loop = asyncio.get_running_loop()
    pending = bytearray(prefix)  # every byte of the requests not yet answered
    try:
        while True:
            request = _Request()
            verdict = request.feed(bytes(pending), max_body)
            while verdict is None:
                limit = READ_LIMIT_S if pending else KEEP_ALIVE_S
                data = await asyncio.wait_for(loop.sock_recv(sock, 65536), limit)
                if not data:
                    return
                pending += data
                verdict = request.feed(data, max_body)
            scope = request.scope(sock) if request.start is not None else None
            if request.too_large and scope is not None and is_mcp_route(scope):
                await _answer(sock, request, scope, app, more_body=True)  # the guards' 413
                break  # the rest of the body is unread: the connection ends
            if (
                not verdict
                or scope is None
                or not is_mcp_route(scope)
                or not claims(scope, bytes(request.body))
            ):
                news("gone")  # first: were this process to die now, the server must not serve it too
                if send_back(sock, bytes(pending)):
                    return
                break  # could not (over the channel's limit): close it; the client reconnects
            news("busy")
            if not await _answer(sock, request, scope, app, replying=news):
                break  # the client asked to close (or HTTP/1.0)
            pending = bytearray(request.conn.trailing_data[0])
    except (TimeoutError, ConnectionError, OSError):
        pass
    finally:
        sock.close()
        news("gone")


async def _answer(
    sock: socket.socket,
    request: _Request,
    scope: Scope,
    app: ASGIApp,
    more_body: bool = False,
    replying: Callable[[str], None] = lambda state: None,
) -> bool:
    """Run the app on one request (``more_body``: its body is only begun) and write its response;
    whether the connection may serve another request."""
    loop = asyncio.get_running_loop()
    receive = replay(bytes(request.body), more_body)
    messages: list[Message] = []

    async def send(message: Message) -> None:
        messages.append(message)

    try:
        await app(scope, receive, send)
    except Exception:
        logger.exception("the MCP transport failed a request")
        messages = []
    start = next((m for m in messages if m["type"] == "http.response.start"), None)
    if start is None:
        messages = error_reply()
        start = messages[0]
    conn = request.conn
    out = conn.send(h11.Response(status_code=start["status"], headers=list(start.get("headers", ()))))
    for message in messages:
        if message["type"] == "http.response.body" and message.get("body"):
            out += conn.send(h11.Data(data=message["body"]))
    out += conn.send(h11.EndOfMessage())
    replying("replying")  # told before the first byte is written: a 503 then would corrupt it
    await loop.sock_sendall(sock, out)
    if access_logger.isEnabledFor(logging.INFO):
        client = scope.get("client") or ("", 0)
        path = scope["path"] + (
            "?" + scope["query_string"].decode("latin-1") if scope["query_string"] else ""
        )
        access_logger.info(  # uvicorn's own access-log call, so its formatter applies
            '%s - "%s %s HTTP/%s" %d', f"{client[0]}:{client[1]}", scope["method"], path,
            scope["http_version"], start["status"],
        )  # fmt: skip
    return conn.our_state is h11.DONE and conn.their_state is h11.DONE
