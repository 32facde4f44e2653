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

The SDK's transport, the tools and the episodes run in a process of their own
(:mod:`server.mcp_transport`): a session's ``initialize``, tool calls and teardown are
milliseconds of Python each, and in the server's interpreter every WebSocket step waited behind
them (issue 24). The server's loop decides ownership, caps, expiry and versions here, hands each
request over and sends the reply back.

Everything else that arrives at ``POST /mcp`` (OpenEnv's JSON-RPC with
``openenv/session/create`` and ``session_id`` params, as ``MCPToolClient`` speaks it) goes
to OpenEnv's route as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from server import mcp_handoff
from server.guards import json_reply, logger, read_body, replay
from server.mcp_handoff import SESSION_HEADER, VERSION_HEADER, header
from server.mcp_transport import TransportArgs, TransportProcess, TransportUnavailable
from server.sessions import ClientLedger, SessionBudget, SessionCapacityError, SessionStore
from server.settings import ServerSettings

SOURCE = "MCP (streamable HTTP)"


def _rpc_error(code: int, message: str, data_code: str, request_id: Any = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": {"code": data_code}},
    }


class StreamableMCP:
    """The standard MCP transport at ``/mcp`` (see the module docstring): the server's side.

    Args:
        warm: start the transport's process with the app (the served app: ``serve`` and
            ``uvicorn server.app:app``) rather than at the first standard MCP request (what
            tests' many short-lived apps want: most never speak standard MCP).
    """

    def __init__(
        self,
        settings: ServerSettings,
        ledger: ClientLedger,
        clock: Callable[[], float],
        scenario: str,
        warm: bool = False,
        budget: SessionBudget | None = None,
    ) -> None:
        self.episodes = SessionStore[str](
            None,
            settings.max_sessions,
            settings.http_session_ttl_s,
            clock,
            ledger,
            close=self._forget,
            name=SOURCE,
            evict_idle_s=settings.evict_idle_s,
            budget=budget,
        )
        self._ledger = ledger
        self._ttl_s = settings.http_session_ttl_s
        self._max_sessions = settings.max_sessions
        self._warm = warm
        args = TransportArgs(
            scenario,
            self._ttl_s,
            self._max_sessions,
            settings.max_message_bytes,
            tuple(settings.allowed_hosts),
            tuple(settings.allowed_origins),
            settings.token,
        )
        self._process = TransportProcess(args, self, self._lost)
        self._opening = 0  # sessions being opened (their slots are held)
        self._runs = 0

    @property
    def transport_pid(self) -> int | None:
        """The transport's process id while it runs (None before the first request, unless warm)."""
        return self._process.pid

    # ----------------------------------------------------------- lifespan
    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve while the app runs; stop the transport's process (and forget its sessions) at the
        end (one process, however many lifespans a test opens on the same app)."""
        self._runs += 1
        try:
            if self._warm:
                await self._process.started()
                self._process.keep_standby()  # a second process ready to take over if it dies
            yield
        finally:
            self._runs -= 1
            if not self._runs:
                await self._process.stop()
                for sid in list(self.episodes.ids()):
                    self.episodes.close(sid)

    def _forget(self, sid: str) -> None:
        """A session closed or expired here: its episode ends in the transport's process too."""
        self._process.close_episode(sid)

    def _lost(self) -> None:
        """The transport's process ended unasked: its sessions are gone (their slots come back)."""
        for sid in list(self.episodes.ids()):
            self.episodes.close(sid)

    # ------------------------------------------------------------ dispatch
    claims = staticmethod(mcp_handoff.claims)

    def takes_connections(self) -> bool:
        """Whether a standard MCP connection can be handed to the transport's process now."""
        return self._process.takes_connections()

    def hand_over(self, transport: Any, data: bytes, uvicorn: dict[str, Any]) -> bool:
        """Hand a standard MCP connection to the transport's process (:mod:`server.mcp_handoff`)."""
        return self._process.hand_over(transport, data, uvicorn)

    def decide(self, client: str, method: str, version: str | None, sid: str | None) -> tuple[str, Any]:
        """What a standard MCP request may do: ``("refuse", (status, body))``, ``("open", None)``
        (a slot is held for ``client`` until :meth:`opened`), or ``("serve", None)``."""
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return "refuse", (400, _rpc_error(
                -32600,
                f"this server keeps an episode per MCP session: it speaks the initialize handshake "
                f"(protocol versions {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}), not {version}",
                "UNSUPPORTED_PROTOCOL_VERSION",
            ))  # fmt: skip
        if sid is None and method == "DELETE":  # before any cap: there is nothing to open or end
            return "refuse", (400, _rpc_error(
                -32600, "Bad Request: DELETE /mcp ends a session: send its Mcp-Session-Id header",
                "NO_SESSION",
            ))  # fmt: skip
        if sid is None:
            try:
                self._ledger.admit(client)
                self._ledger.acquire(client, SOURCE, self._max_sessions)
            except SessionCapacityError as exc:
                return "refuse", (429, _rpc_error(-32000, str(exc), exc.code))
            if len(self.episodes) + self._opening >= self._max_sessions:
                self.episodes.evict_longest_idle()  # room for a newcomer, not a refusal
            if len(self.episodes) + self._opening >= self._max_sessions:
                self._ledger.release(client, SOURCE)
                message = f"{SOURCE} session limit reached ({self._max_sessions}); retry later"
                return "refuse", (429, _rpc_error(-32000, message, "SESSION_LIMIT"))
            try:
                self._make_room()
            except SessionCapacityError as exc:
                self._ledger.release(client, SOURCE)
                return "refuse", (429, _rpc_error(-32000, str(exc), exc.code))
            self._opening += 1
            return "open", None
        if self.episodes.get(sid, client) is None:
            return "refuse", (404, _rpc_error(
                -32001,
                "Session not found: it never existed, was closed, expired after "
                f"{self._ttl_s:g} s idle, or is another client's; initialize a new one",
                "UNKNOWN_SESSION",
            ))  # fmt: skip
        return "serve", None

    def _make_room(self) -> None:
        """Room in the server's budget of unconnected sessions (the store's lock first, as
        :meth:`SessionStore.open` takes them)."""
        budget = self.episodes.budget
        if budget is not None:
            with self.episodes.lock:
                budget.make_room(self.episodes)

    def opened(self, client: str, sid: str | None) -> None:
        """An ``open`` ended: the session counts from now on, or its slot comes back."""
        self._opening -= 1
        if sid:
            self.episodes.add(sid, sid, client)
            logger.info("MCP session opened (streamable HTTP)")
        else:
            self._ledger.release(client, SOURCE)

    def ended(self, client: str, sid: str | None) -> None:
        """A ``DELETE`` was answered: the session is over."""
        if sid is not None:
            self.episodes.close(sid, client)

    async def __call__(self, scope: Scope, body: bytes, send: Send) -> None:
        """Answer one request that arrived on the server's own connections: decided here, the SDK's
        answer made in the transport's process."""
        client = scope["client"][0] if scope.get("client") else ""
        sid = header(scope, SESSION_HEADER)
        kind, detail = self.decide(client, scope["method"], header(scope, VERSION_HEADER), sid)
        if kind == "refuse":
            await json_reply(send, *detail)
            return
        replies, opened = None, None
        try:
            replies, opened = await self._process.request(scope, body, kind == "open")
        except TransportUnavailable as exc:
            message = f"MCP transport not running: {exc}"
            await json_reply(send, 503, _rpc_error(-32000, message, "NOT_READY"))
        finally:  # answered, unavailable or cancelled: the held slot becomes the session or comes back
            if kind == "open":
                self.opened(client, opened)  # before the client has the reply: it may ask again at once
        if replies is None:
            return
        if kind == "serve" and scope["method"] == "DELETE":
            self.ended(client, sid)
        for message in replies:
            await send(message)


class NoStandardMCP:
    """``/mcp`` of a server with no MCP tools (radiotherapy): a standard MCP request (``initialize``,
    an ``Mcp-Session-Id``) is a 400 whose JSON-RPC error says so (``MCP_NOT_SUPPORTED``), rather than
    OpenEnv's "Method not found" that left an SDK client guessing. OpenEnv's JSON-RPC is untouched."""

    claims = staticmethod(mcp_handoff.claims)
    methods = ("POST",)
    """No session to end: ``DELETE /mcp`` is a 405 here, as the RT app's OpenAPI document says."""

    async def __call__(self, scope: Scope, body: bytes, send: Send) -> None:
        message = (
            "this server plays the radiotherapy env, which has no MCP tools: standard MCP "
            "(initialize, Mcp-Session-Id) is not served here; play over /ws, or /reset and /step"
        )
        await json_reply(send, 400, _rpc_error(-32601, message, "MCP_NOT_SUPPORTED"))


ALLOWED_METHODS = ("POST", "DELETE")
"""What ``/mcp`` serves over HTTP (the OpenAPI document lists both)."""


async def _method_not_allowed(scope: Scope, send: Send, allowed: tuple[str, ...] = ALLOWED_METHODS) -> None:
    """405 with ``Allow: POST, DELETE`` (``allowed``). No server-initiated SSE stream is offered (the
    tools only answer requests), so ``GET`` is a 405 as MCP's transport allows; clients carry on
    without it."""
    message = f"{scope['method']} /mcp: use POST" + (
        " (DELETE with Mcp-Session-Id ends a session)" if "DELETE" in allowed else ""
    )
    allow = ((b"allow", ", ".join(allowed).encode()),)
    await json_reply(send, 405, _rpc_error(-32600, message, "METHOD_NOT_ALLOWED"), allow)


class MCPDispatch:
    """ASGI middleware: requests to ``/mcp`` that are standard MCP go to :class:`StreamableMCP`;
    everything else (OpenEnv's JSON-RPC included) to the app."""

    def __init__(self, app: ASGIApp, mcp: StreamableMCP | NoStandardMCP) -> None:
        self.app = app
        self.mcp = mcp
        self.allowed: tuple[str, ...] = getattr(mcp, "methods", ALLOWED_METHODS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != "/mcp":
            await self.app(scope, receive, send)
            return
        if scope["method"] not in self.allowed:
            await _method_not_allowed(scope, send, self.allowed)
            return
        body = await read_body(receive)
        if body is None:
            return
        if self.mcp.claims(scope, body):
            await self.mcp(scope, body, send)
        else:
            await self.app(scope, replay(body), send)
