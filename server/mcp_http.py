"""``/mcp`` as standard MCP: the streamable HTTP transport of the ``mcp`` SDK, beside OpenEnv's.

A standard client (the ``mcp`` SDK's ``streamablehttp_client``, fastmcp's ``Client``)
``initialize`` s, gets an ``Mcp-Session-Id`` header, and sends it with every later
request (``tools/list``, ``tools/call``, ``DELETE /mcp`` to end). Each such session
plays its own episode through the same tools as OpenEnv's MCP routes
(:func:`server.mcp_tools.build_tools`): the SDK's ``StreamableHTTPSessionManager`` runs the
transport; this module only decides which requests are the SDK's, and keeps the sessions
under the app's rules:

- a session is its creator's: a request naming another client's (or an unknown, expired
  or closed) session id gets 404, as the MCP spec says for an unknown session;
- sessions count against the per-client cap, at most ``max_sessions`` at once, and end
  after ``http_session_ttl_s`` idle (nobody holds a connection to them);
- the server is stateful (an episode per session), so it speaks the handshake era: a
  request pinned to a sessionless protocol version is refused with a JSON-RPC error and
  clients fall back to ``initialize``.

The SDK's transport and the tools run on an event loop of their own, in a thread
(:meth:`StreamableMCP.running`): a session's ``initialize``, tool calls and teardown are
milliseconds of Python each, and on the server's loop every WebSocket step waited behind them
(issue 24: one client cycling MCP sessions raised a ``/ws`` user's p99 from 3 ms to ~100 ms).
The server's loop only hands each request over and sends the reply back; the two loops share
the interpreter, whose switch interval (``server.app.GIL_SWITCH_INTERVAL_S``) bounds the wait.

Everything else that arrives at ``POST /mcp`` (OpenEnv's JSON-RPC with
``openenv/session/create`` and ``session_id`` params, as ``MCPToolClient`` speaks it) goes
to OpenEnv's route as before.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import get_http_request
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.guards import logger
from server.mcp_tools import HospitalMCPEnvironment, build_tools
from server.sessions import ClientLedger, SessionCapacityError, SessionStore
from server.settings import ServerSettings

SOURCE = "MCP (streamable HTTP)"
SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
_SDK_METHODS = frozenset({"initialize", "server/discover"})
"""Methods that open a standard MCP exchange (OpenEnv's route knows neither)."""


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == name), None)


async def _json_reply(
    send: Send, status: int, body: dict[str, Any], extra: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def _rpc_error(code: int, message: str, data_code: str, request_id: Any = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": {"code": data_code}},
    }


class StreamableMCP:
    """The standard MCP transport at ``/mcp`` (see the module docstring)."""

    def __init__(
        self, settings: ServerSettings, ledger: ClientLedger, clock: Callable[[], float], scenario: str
    ) -> None:
        self.episodes = SessionStore[HospitalMCPEnvironment](
            None,
            settings.max_sessions,
            settings.http_session_ttl_s,
            clock,
            ledger,
            close=lambda env: env.close(),
            name=SOURCE,
        )
        self._ledger = ledger
        self._scenario = scenario
        self._ttl_s = settings.http_session_ttl_s
        self._max_sessions = settings.max_sessions
        self.tools = build_tools(self._episode)
        self._manager: StreamableHTTPSessionManager | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the transport's own loop (its thread)
        self._stop: asyncio.Event | None = None  # set on that loop: the thread ends
        self._runs = 0

    # ----------------------------------------------------------- lifespan
    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the SDK's session manager, on its own loop in a thread, while the app runs (one
        manager, however many lifespans a test opens on the same app)."""
        if self._manager is not None:
            self._runs += 1
            try:
                yield
            finally:
                self._runs -= 1
            return
        self._manager = StreamableHTTPSessionManager(
            self.tools._mcp_server,
            json_response=True,
            session_idle_timeout=self._ttl_s,
            max_sessions=self._max_sessions,
        )
        ready, failure = threading.Event(), []
        thread = threading.Thread(
            target=self._serve, args=(self._manager, ready, failure), name="mcp-streamable", daemon=True
        )
        thread.start()
        await asyncio.get_running_loop().run_in_executor(None, ready.wait)
        try:
            if failure:
                raise failure[0]
            yield
        finally:
            loop, stop = self._loop, self._stop
            if loop is not None and stop is not None:
                loop.call_soon_threadsafe(stop.set)
            await asyncio.get_running_loop().run_in_executor(None, thread.join, 30)
            self._manager = None
            for sid in list(self.episodes.ids()):
                self.episodes.close(sid)

    def _serve(self, manager: StreamableHTTPSessionManager, ready: threading.Event, failure: list) -> None:
        """The transport's thread: a loop running the SDK's manager until :meth:`running` stops it."""

        async def main() -> None:
            stop = asyncio.Event()
            try:
                async with manager.run():
                    self._loop, self._stop = asyncio.get_running_loop(), stop
                    ready.set()
                    await stop.wait()
            finally:
                self._loop = None

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported to the lifespan (a failure to start), else logged
            if not ready.is_set():
                failure.append(exc)
            else:
                logger.exception("the MCP transport's loop ended with an error")
        finally:
            ready.set()

    # ------------------------------------------------------------ dispatch
    @staticmethod
    def claims(scope: Scope, body: bytes) -> bool:
        """Whether a request to ``/mcp`` is the SDK's (standard MCP) rather than OpenEnv's."""
        if scope["method"] == "DELETE" or _header(scope, SESSION_HEADER) is not None:
            return True
        if _header(scope, VERSION_HEADER) is not None:
            return True
        try:
            message = json.loads(body)
        except ValueError:
            return False
        return isinstance(message, dict) and message.get("method") in _SDK_METHODS

    async def __call__(self, scope: Scope, body: bytes, send: Send) -> None:
        """Answer one request: handled on the transport's loop, its reply sent from the caller's."""
        loop = self._loop
        if loop is None:
            await _json_reply(send, 503, _rpc_error(-32000, "MCP transport not running", "NOT_READY"))
            return
        replies: list[Message] = []

        async def keep(message: Message) -> None:
            replies.append(message)

        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._handle(scope, body, keep), loop))
        for message in replies:
            await send(message)

    async def _handle(self, scope: Scope, body: bytes, send: Send) -> None:
        client = scope["client"][0] if scope.get("client") else ""
        version = _header(scope, VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await _json_reply(send, 400, _rpc_error(
                -32600,
                f"this server keeps an episode per MCP session: it speaks the initialize handshake "
                f"(protocol versions {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}), not {version}",
                "UNSUPPORTED_PROTOCOL_VERSION",
            ))  # fmt: skip
            return
        if self._manager is None:
            await _json_reply(send, 503, _rpc_error(-32000, "MCP transport not running", "NOT_READY"))
            return
        sid = _header(scope, SESSION_HEADER)
        if sid is not None:
            if self.episodes.get(sid, client) is None:
                await _json_reply(send, 404, _rpc_error(
                    -32001,
                    "Session not found: it never existed, was closed, expired after "
                    f"{self._ttl_s:g} s idle, or is another client's; initialize a new one",
                    "UNKNOWN_SESSION",
                ))  # fmt: skip
                return
            await self._manager.handle_request(scope, _replay(body), send)
            if scope["method"] == "DELETE":
                self.episodes.close(sid, client)
            return
        await self._open(scope, body, send, client)

    async def _open(self, scope: Scope, body: bytes, send: Send, client: str) -> None:
        """An ``initialize``: count the new session for its client, then let the SDK answer."""
        try:
            self._ledger.acquire(client, SOURCE, self._max_sessions)
        except SessionCapacityError as exc:
            await _json_reply(send, 429, _rpc_error(-32000, str(exc), exc.code))
            return
        if len(self.episodes) >= self._max_sessions:
            self._ledger.release(client, SOURCE)
            message = f"{SOURCE} session limit reached ({self._max_sessions}); retry later"
            await _json_reply(send, 429, _rpc_error(-32000, message, "SESSION_LIMIT"))
            return
        opened: list[str] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                sid = dict(message.get("headers", ())).get(SESSION_HEADER)
                if sid:
                    opened.append(sid.decode("latin-1"))
            await send(message)

        assert self._manager is not None
        try:
            await self._manager.handle_request(scope, _replay(body), watch)
        finally:
            if opened:
                env = HospitalMCPEnvironment(scenario=self._scenario)
                self.episodes.add(opened[0], env, client)
                logger.info("MCP session opened (streamable HTTP)")
            else:
                self._ledger.release(client, SOURCE)

    # ------------------------------------------------------------ episodes
    def _episode(self) -> HospitalMCPEnvironment:
        """The episode of the MCP session the current tool call belongs to."""
        sid = get_http_request().headers.get("mcp-session-id")
        env = self.episodes.get(sid) if sid else None
        if env is None:
            raise ToolError("no MCP session: initialize first (the episode lives in the session)")
        return env


ALLOWED_METHODS = ("POST", "DELETE")
"""What ``/mcp`` serves over HTTP (the OpenAPI document lists both)."""


async def _method_not_allowed(scope: Scope, send: Send) -> None:
    """405 with ``Allow: POST, DELETE``. No server-initiated SSE stream is offered (the tools only
    answer requests), so ``GET`` is a 405 as MCP's transport allows; clients carry on without it."""
    message = f"{scope['method']} /mcp: use POST (DELETE with Mcp-Session-Id ends a session)"
    allow = ((b"allow", ", ".join(ALLOWED_METHODS).encode()),)
    await _json_reply(send, 405, _rpc_error(-32600, message, "METHOD_NOT_ALLOWED"), allow)


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


class MCPDispatch:
    """ASGI middleware: requests to ``/mcp`` that are standard MCP go to :class:`StreamableMCP`;
    everything else (OpenEnv's JSON-RPC included) to the app."""

    def __init__(self, app: ASGIApp, mcp: StreamableMCP) -> None:
        self.app = app
        self.mcp = mcp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != "/mcp":
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ALLOWED_METHODS:
            await _method_not_allowed(scope, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if self.mcp.claims(scope, body):
            await self.mcp(scope, body, send)
        else:
            await self.app(scope, _replay(body), send)
