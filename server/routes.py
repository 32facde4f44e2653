"""The app's parts: openenv-core's ``create_app`` plus sessions, limits, guards and the web view.

:func:`build_app` is what :mod:`server.app` serves; its docstring (the app's description at
``/docs``) is :mod:`server.app`'s. Kept apart from :mod:`server.app` so that the ``server``
console script can check its port and parse its flags before importing fastapi, openenv-core
and Gradio (tens of seconds on a loaded machine).
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Body, Cookie, FastAPI, Header, HTTPException, Query, Request, Response, WebSocket
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute, APIWebSocketRoute
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcResponse
from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import SchemaResponse, WSErrorCode, WSErrorResponse
from pydantic import BaseModel
from starlette.routing import WebSocketRoute

from hospital_marl.core.hospital import warm_up as compile_kernel
from server.environment import EpisodeStateError
from server.guards import GuardedWebSocket, RequestGuardMiddleware, SitePolicy, error_body, logger
from server.logs import redact_tokens
from server.mcp_http import MCPDispatch, NoStandardMCP, StreamableMCP
from server.mcp_tools import HospitalMCPEnvironment
from server.models import (
    SESSION_ID_REQUEST_DOC,
    ErrorResponse,
    HospitalAction,
    HospitalObservation,
    HospitalResetRequest,
    HospitalState,
    HospitalStepRequest,
    HospitalStepResponse,
    SessionsResponse,
)
from server.radiotherapy import RTAction, RTEnvironment, RTObservation, RTResetRequest, RTState, RTStepRequest
from server.sessions import (
    ClientLedger,
    CreationLimiter,
    SessionBudget,
    SessionCapacityError,
    SessionStore,
    client_share,
)
from server.settings import ServerSettings
from server.web_guard import GradioGuard, LivePages, mounted_blocks

SESSION_HEADER = "X-Session-Id"
SESSION_COOKIE = "hospital_session"
WS_TRY_AGAIN_LATER = 1013  # RFC 6455 close code: server overloaded, retry later

_NO_SESSION = (
    "no HTTP session: plain HTTP episodes are stateful through a session. POST /reset returns a "
    f"session_id (also in the {SESSION_HEADER} header and the {SESSION_COOKIE} cookie); send it with "
    f"/step and /state as the session_id body field / query parameter, the {SESSION_HEADER} header, "
    "or the cookie. Or use the WebSocket /ws (OpenEnv's EnvClient) for a session per connection."
)

_ERROR = {"model": ErrorResponse}
_BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "the body is not UTF-8 (`INVALID_UTF8`)"},
    413: {"model": ErrorResponse, "description": "the body is over the size limit (`PAYLOAD_TOO_LARGE`)"},
}
_SESSION_HEADERS = {
    SESSION_HEADER: {"description": "the HTTP session's id", "schema": {"type": "string"}},
}
_SessionHeader = Annotated[
    str | None,
    Header(alias=SESSION_HEADER, min_length=1, max_length=255, description="the HTTP session's id"),
]
_SessionCookie = Annotated[
    str | None,
    # No length bounds here: a browser or client cookie jar may add its own stored cookie of the
    # same name, which then wins; an empty or unknown id is simply no session / 404 anyway.
    Cookie(alias=SESSION_COOKIE, description="the HTTP session's id"),
]


def _error(status: int, code: str, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail={"code": code, "message": message})


def _client(connection: Request | WebSocket) -> str:
    """Who holds a session, for the per-client cap: the peer's address."""
    return connection.client.host if connection.client else ""


# ----------------------------------------------------------- OpenEnv's pool
POOL = "WebSocket/MCP"
"""The ledger's name for OpenEnv's pool (``/ws``, ``/mcp`` WebSockets, HTTP MCP sessions)."""


class OpenEnvPool:
    """OpenEnv's session pool (``/ws``, ``/mcp`` WebSocket, HTTP MCP sessions), as this app sees it.

    openenv-core 0.3 keeps the pool inside the ``HTTPEnvServer`` its
    ``create_app`` builds and does not return; its route handlers close over
    it, which is where this finds it. HTTP MCP sessions never end by
    themselves there (OpenEnv's own reaper would also end live WebSocket
    sessions): this tracks them in a :class:`SessionStore` and ends the idle
    ones before any new session is admitted and whenever ``/sessions`` is read.
    """

    def __init__(
        self,
        ws_endpoint: Callable[..., Any],
        settings: ServerSettings,
        ledger: ClientLedger,
        clock: Callable[[], float],
    ) -> None:
        cells = [c.cell_contents for c in (ws_endpoint.__closure__ or ())]
        servers = [c for c in cells if hasattr(c, "_create_session") and hasattr(c, "_destroy_session")]
        if len(servers) != 1:
            raise RuntimeError("openenv-core's /ws handler holds no HTTPEnvServer: unsupported version")
        self._server = servers[0]
        self.max_sessions = settings.max_sessions
        # Nobody holds a connection to an HTTP MCP session: it expires on the shorter timeout, and
        # such sessions hold at most half the pool, so live WebSockets always find room (sessions
        # kept fresh from rotated addresses filled the pool and locked /ws out: issue 43).
        self.http_cap = client_share(settings.max_sessions)
        self.mcp_http = SessionStore[str](
            None,
            self.http_cap,
            settings.http_session_ttl_s,
            clock,
            ledger,
            name="MCP session",
            source=POOL,
            evict_idle_s=settings.evict_idle_s,
        )
        self.connections: dict[str, int] = {"ws": 0, "mcp": 0}

    @property
    def active(self) -> int:
        return int(self._server.active_sessions)

    async def make_room(self) -> None:
        """A full pool ends its longest-idle HTTP MCP session (idle ``evict_idle_s`` at least) for
        a newcomer: live WebSockets are never ended, sessions nobody holds a connection to are."""
        if self.active >= self.max_sessions:
            await self._evict_longest_idle("the pool was full")

    async def make_room_for_http(self) -> None:
        """Before an HTTP MCP session opens: at ``http_cap`` (half the pool) end the longest-idle
        one (idle ``evict_idle_s`` at least), else refuse; the other half stays the WebSockets'."""
        if len(self.mcp_http) < self.http_cap:
            return
        if not await self._evict_longest_idle("HTTP MCP sessions at half the pool"):
            raise SessionCapacityError(
                f"HTTP MCP sessions hold {len(self.mcp_http)}/{self.http_cap} of the pool's "
                f"{self.max_sessions} slots (at most half: the rest is kept for WebSocket clients), all "
                f"used within the last {self.mcp_http.evict_idle_s or 0:g} s: retry in a moment, close "
                "one you hold, or connect over the /mcp WebSocket",
                code="CAPACITY_REACHED",
            )

    async def _evict_longest_idle(self, why: str) -> bool:
        """End the longest-idle HTTP MCP session (idle ``evict_idle_s`` at least) in the store and in
        OpenEnv's pool; False if none may go."""
        sid = self.mcp_http.evict_longest_idle()
        if sid is None:
            return False
        logger.info("MCP session evicted for a newcomer (%s)", why)
        await self._server._destroy_session(sid)
        return True

    async def reap(self) -> None:
        """End the HTTP MCP sessions idle past the timeout (their slots return to the pool)."""
        for sid in self.mcp_http.expire():
            logger.info("MCP session idle past %g s: closed", self.mcp_http.ttl_s)
            await self._server._destroy_session(sid)


def _ws_error(code: str, message: str) -> str:
    return WSErrorResponse(data={"message": message, "code": code}).model_dump_json()


_RPC_KIND = {
    "VALIDATION_ERROR": JsonRpcErrorCode.INVALID_REQUEST,
    "UNKNOWN_SESSION": JsonRpcErrorCode.INVALID_PARAMS,
    "NOT_ALLOWED": JsonRpcErrorCode.INVALID_REQUEST,
}


def _rpc_error(code: str, message: str, request_id: Any = None) -> JsonRpcResponse:
    kind = _RPC_KIND.get(code, JsonRpcErrorCode.SERVER_ERROR)
    return JsonRpcResponse.error_response(kind, message, data={"code": code}, request_id=request_id)


_WS_CLOSE_REFUSED = (
    "openenv/session/close is for HTTP MCP sessions: a WebSocket's session ends when its "
    "connection closes, and no connection may close another's session"
)


def _screen_ws(message: dict[str, Any]) -> str | None:
    """``/ws``: refuse MCP messages that reach beyond this connection's own session."""
    data = message.get("data")
    if (
        message.get("type") == "mcp"
        and isinstance(data, dict)
        and data.get("method") == "openenv/session/close"
    ):
        answer = _rpc_error("NOT_ALLOWED", _WS_CLOSE_REFUSED, data.get("id"))
        return json.dumps({"type": "mcp", "data": answer.model_dump()})
    return None


def _screen_mcp_ws(message: dict[str, Any]) -> str | None:
    """``/mcp`` WebSocket: the same rule for its JSON-RPC messages."""
    if message.get("method") == "openenv/session/close":
        return _rpc_error("NOT_ALLOWED", _WS_CLOSE_REFUSED, message.get("id")).model_dump_json()
    return None


class _SessionGate:
    """Wraps one of OpenEnv's WebSocket endpoints (``/ws`` or ``/mcp``): a connection is
    admitted only if the pool and the client's cap have room (else a readable error and
    close 1013), its messages are guarded, and it is closed when idle."""

    def __init__(
        self,
        endpoint: Callable[[Any], Awaitable[None]],
        kind: Literal["ws", "mcp"],
        pool: OpenEnvPool,
        ledger: ClientLedger,
        settings: ServerSettings,
    ) -> None:
        self._endpoint = endpoint
        self._kind = kind
        self._pool = pool
        self._ledger = ledger
        self._settings = settings
        self._reply_error = _ws_error if kind == "ws" else lambda c, m: _rpc_error(c, m).model_dump_json()

    async def __call__(self, websocket: WebSocket) -> None:
        await self._pool.reap()
        client = _client(websocket)
        await self._pool.make_room()
        if self._pool.active >= self._pool.max_sessions:
            await self._refuse(
                websocket,
                "CAPACITY_REACHED",
                (
                    f"Server at capacity: {self._pool.active}/{self._pool.max_sessions} sessions active "
                    "(WebSocket and MCP together); retry later"
                ),
            )
            return
        try:
            self._ledger.acquire(client, POOL, self._pool.max_sessions)
        except SessionCapacityError as exc:
            await self._refuse(websocket, exc.code, str(exc))
            return
        guarded = GuardedWebSocket(
            websocket,
            self._settings.max_message_bytes,
            self._settings.idle_timeout_s,
            self._reply_error,
            screen=_screen_ws if self._kind == "ws" else _screen_mcp_ws,
        )
        self._pool.connections[self._kind] += 1
        guarded.watch()
        try:
            await self._endpoint(guarded)
        finally:
            guarded.stop()
            self._pool.connections[self._kind] -= 1
            self._ledger.release(client, POOL)

    async def _refuse(self, websocket: WebSocket, code: str, message: str) -> None:
        await websocket.accept()
        if self._kind == "ws":
            data: dict[str, Any] = {"message": message, "code": code}
            if code == "CAPACITY_REACHED":
                data |= {
                    "code": WSErrorCode.CAPACITY_REACHED,
                    "active_sessions": self._pool.active,
                    "max_sessions": self._pool.max_sessions,
                }
            text = WSErrorResponse(data=data).model_dump_json()
        else:
            text = _rpc_error(code, message).model_dump_json()
        await websocket.send_text(text)
        await websocket.close(code=WS_TRY_AGAIN_LATER, reason=message[:120])


def _code_tool_error(answer: dict[str, Any]) -> None:
    """Give a tool error OpenEnv left uncoded (-32603, ``data: null``) the documented
    ``error.data.code``: ``VALIDATION_ERROR`` (-32602) for arguments outside the tool's schema or
    an unknown tool, ``EXECUTION_ERROR`` for a refusal (an illegal action, no shift yet)."""
    error = answer.get("error")
    if not isinstance(error, dict) or error.get("data") is not None:
        return
    message = str(error.get("message", ""))
    invalid = "validation error" in message or message.startswith("Unknown tool")
    error["data"] = {"code": "VALIDATION_ERROR" if invalid else "EXECUTION_ERROR"}
    if invalid:
        error["code"] = JsonRpcErrorCode.INVALID_PARAMS.value


def _add_mcp_http_route(
    app: FastAPI,
    openenv_mcp: Callable[[Request], Awaitable[dict[str, Any]]],
    pool: OpenEnvPool,
    ledger: ClientLedger,
) -> None:
    @app.post(
        "/mcp",
        tags=["MCP"],
        summary="MCP JSON-RPC (tools, and OpenEnv's session methods)",
        responses=_BODY_ERRORS,
    )
    async def mcp(request: Request) -> dict[str, Any]:
        """OpenEnv's MCP endpoint. ``openenv/session/create`` opens a session from the same pool
        as ``/ws``: it counts against ``max_sessions`` (such sessions at most half of it) and the
        per-client cap, and ends after
        ``http_session_ttl_s`` without a call that names its ``session_id`` (nobody holds a
        connection to it, so the shorter timeout)."""
        await pool.reap()
        try:
            payload = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError):
            payload = None
        method = payload.get("method") if isinstance(payload, dict) else None
        params = payload.get("params") if isinstance(payload, dict) else None
        named = params.get("session_id") if isinstance(params, dict) else None
        client = _client(request)
        request_id = payload.get("id") if isinstance(payload, dict) else None
        if method == "openenv/session/create":
            try:
                ledger.admit(client)
                await pool.make_room_for_http()
                await pool.make_room()
                ledger.acquire(client, POOL, pool.max_sessions)
            except SessionCapacityError as exc:
                return _rpc_error(exc.code, str(exc), request_id).model_dump()
            answer = await openenv_mcp(request)
            sid = (answer.get("result") or {}).get("session_id")
            if isinstance(sid, str):
                pool.mcp_http.add(sid, sid, client)
            else:
                ledger.release(client, POOL)
            return answer
        # Only this client's own HTTP MCP sessions: never a WebSocket's, never another client's.
        if named is not None and (not isinstance(named, str) or pool.mcp_http.get(named, client) is None):
            return _rpc_error(
                "UNKNOWN_SESSION",
                f"no MCP session {named!r} of this client: it never existed, was closed, expired "
                f"after {pool.mcp_http.ttl_s:g} s idle, or belongs to another connection. "
                "Call openenv/session/create for a new one.",
                request_id,
            ).model_dump()
        answer = await openenv_mcp(request)
        if method == "tools/call":
            _code_tool_error(answer)
        if method == "openenv/session/close" and isinstance(named, str) and answer.get("error") is None:
            pool.mcp_http.close(named)
        return answer


# ----------------------------------------------------------------- routes
def _pop_route(app: FastAPI, path: str, method: str | None) -> Any:
    """Remove OpenEnv's route for ``method path`` (``None``: the WebSocket) and return it."""
    for i, route in enumerate(app.router.routes):
        if getattr(route, "path", None) != path:
            continue
        if method is None and isinstance(route, (APIWebSocketRoute, WebSocketRoute)):
            return app.router.routes.pop(i)
        if method is not None and isinstance(route, APIRoute) and method in route.methods:
            return app.router.routes.pop(i)
    raise RuntimeError(
        f"openenv-core's create_app registered no {method or 'WebSocket'} {path}: "
        "unsupported openenv-core version"
    )


@dataclass(frozen=True)
class ServedEnv:
    """What differs between the environments one app can serve; everything else is shared.

    The wire models (OpenEnv's action / observation / state, and this app's HTTP
    request bodies) and the session factory are per environment; the guards, the
    session stores and limits, ``/sessions`` and the web view's mount are not.
    """

    name: str
    """OpenEnv's ``env_name``."""
    factory: Callable[[], Any]
    """One OpenEnv ``Environment`` per session."""
    action: type[BaseModel]
    observation: type[BaseModel]
    state: type[BaseModel]
    reset_request: type[BaseModel]
    step_request: type[BaseModel]
    tab_name: str
    title: str


def served_env(settings: ServerSettings) -> ServedEnv:
    """The environment ``settings.env`` names, with its session factory."""
    if settings.env == "radiotherapy":
        return ServedEnv(
            name="radiotherapy_planning",
            factory=functools.partial(RTEnvironment, settings.rt_task),
            action=RTAction,
            observation=RTObservation,
            state=RTState,
            reset_request=RTResetRequest,
            step_request=RTStepRequest,
            tab_name="Radiotherapy planning",
            title="hospital_marl: radiotherapy treatment planning, live",
        )
    return ServedEnv(
        name="hospital_marl",
        # Each session's environment also serves the MCP tools (server/mcp_tools.py) at /mcp.
        factory=functools.partial(HospitalMCPEnvironment, scenario=settings.scenario),
        action=HospitalAction,
        observation=HospitalObservation,
        state=HospitalState,
        reset_request=HospitalResetRequest,
        step_request=HospitalStepRequest,
        tab_name="Emergency department",
        title="hospital_marl: the emergency department, live",
    )


def _add_streamable_mcp(app: FastAPI, streamable: StreamableMCP) -> None:
    """Standard MCP at ``/mcp`` beside OpenEnv's JSON-RPC (:mod:`server.mcp_http`); its session
    manager runs for as long as the app does."""
    app.add_middleware(MCPDispatch, mcp=streamable)
    openenv_lifespan = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(asgi_app: Any) -> AsyncIterator[Any]:
        async with streamable.running(), openenv_lifespan(asgi_app) as state:
            yield state

    app.router.lifespan_context = lifespan
    app.state.streamable_mcp = streamable
    _document_mcp_delete(app)


_JSON_RPC_ERROR = {
    "description": "a JSON-RPC error (`error.data.code` says which)",
    "content": {"application/json": {"schema": {"type": "object"}}},
}


def _document_mcp_delete(app: FastAPI) -> None:
    """``DELETE /mcp`` ends a standard MCP session: :class:`~server.mcp_http.MCPDispatch` serves it
    before any route is reached; this route puts it in the OpenAPI document (an undocumented
    method must be a 405, and this one is real)."""

    @app.delete(
        "/mcp",
        operation_id="end_mcp_session",
        tags=["MCP"],
        summary="End a standard MCP session (streamable HTTP)",
        response_class=Response,
        responses={
            200: {"description": "the session ended"},
            400: _JSON_RPC_ERROR | {"description": "no `Mcp-Session-Id` header"},
            404: _JSON_RPC_ERROR | {"description": "unknown, expired, closed or another client's session"},
        },
    )
    async def end_mcp_session(
        mcp_session_id: Annotated[str, Header(alias="Mcp-Session-Id", min_length=1)],
    ) -> Response:  # pragma: no cover - MCPDispatch answers first
        raise _error(404, "UNKNOWN_SESSION", "no MCP session")


def warm_up(served: ServedEnv) -> None:
    """Play one tick of one session's environment: the kernel compiles (or loads from its cache)
    here, before the app exists and so before the server accepts a connection, not during the
    first client's reset while every other client waits (0.9-2.4 s measured)."""
    if served.action is HospitalAction:
        compile_kernel()  # every kernel entry point (reset alone compiles only some)
    env = served.factory()
    try:
        env.reset(seed=0)
    finally:
        env.close()


def _typed(handler: Callable[..., Any], **annotations: Any) -> Callable[..., Any]:
    """Give a route handler the served env's models (FastAPI reads its parameters' annotations)."""
    handler.__annotations__.update(annotations)
    return handler


def _lookup(store: SessionStore[Any], request: Request, sid: str | None) -> tuple[str, Any]:
    """The caller's HTTP session ``sid`` (400 without an id; 404 unknown, expired or another's)."""
    if not sid:
        raise _error(400, "NO_SESSION", _NO_SESSION)
    env = store.get(sid, _client(request))
    if env is None:
        raise _error(
            404,
            "UNKNOWN_SESSION",
            f"no HTTP session {sid!r}: it never existed, was closed, or expired after "
            f"{store.ttl_s:g} s idle. POST /reset to start a new one.",
        )
    return sid, env


def _answer(response: Response, sid: str, obs: Any) -> HospitalStepResponse:
    """An observation with its session id (body field and header)."""
    response.headers[SESSION_HEADER] = sid
    return HospitalStepResponse(**serialize_observation(obs), session_id=sid)


_OK = {"description": "the observation and the session id", "headers": _SESSION_HEADERS}
_SESSION_OF_RESET = "$response.body#/session_id"
_RESET_LINKS = {
    # How a client goes on from a reset: documented, and schemathesis' stateful phase follows them.
    "StepSession": {"operationId": "step", "parameters": {f"header.{SESSION_HEADER}": _SESSION_OF_RESET}},
    "SessionState": {"operationId": "state", "parameters": {"query.session_id": _SESSION_OF_RESET}},
    "CloseSession": {"operationId": "close_session", "parameters": {"path.session_id": _SESSION_OF_RESET}},
}


def _add_http_session_routes(app: FastAPI, store: SessionStore[Any], served: ServedEnv) -> None:
    """Stateful HTTP episodes: ``POST /reset``, ``POST /step``, ``GET /state``, ``DELETE /sessions/{id}``."""
    _add_reset_route(app, store, served)
    _add_step_route(app, store, served)
    _add_state_route(app, store, served)
    _add_close_route(app, store)


def _add_reset_route(app: FastAPI, store: SessionStore[Any], served: ServedEnv) -> None:
    empty_reset_body = Body(default_factory=served.reset_request)  # no body: reset with defaults (as OpenEnv)

    async def reset(
        request: Request,
        response: Response,
        body: Any = empty_reset_body,
        x_session_id: _SessionHeader = None,
        hospital_session: _SessionCookie = None,
    ) -> HospitalStepResponse:
        """OpenEnv's reset, plus a session: the returned ``session_id`` continues the episode
        with ``POST /step``. A known session id (body, header or cookie) is reset in place;
        otherwise a new session opens."""
        sid = body.session_id or x_session_id or hospital_session
        env = store.get(sid, _client(request)) if sid else None
        if env is None:
            try:
                sid, env = store.open(_client(request))
            except SessionCapacityError as exc:
                raise _error(429, exc.code, str(exc)) from None
        assert sid is not None
        obs = env.reset(**body.model_dump(exclude={"session_id"}))
        response.set_cookie(SESSION_COOKIE, sid, httponly=True, samesite="lax")
        return _answer(response, sid, obs)

    app.post(
        "/reset",
        operation_id="reset",
        response_model=HospitalStepResponse,
        tags=["Environment Control"],
        summary="Start an episode (opens or reuses a stateful HTTP session)",
        responses={
            200: _OK
            | {
                "links": _RESET_LINKS,
                "headers": _SESSION_HEADERS
                | {
                    "Set-Cookie": {
                        "description": f"{SESSION_COOKIE}=<session id>",
                        "schema": {"type": "string"},
                    }
                },
            },
            **_BODY_ERRORS,
            422: {"description": "bad seed, scenario/task or extra field"},
            429: {
                "model": ErrorResponse,
                "description": "session limit (`SESSION_LIMIT`, `CLIENT_SESSION_LIMIT`)",
            },
        },
    )(_typed(reset, body=served.reset_request))


def _add_step_route(app: FastAPI, store: SessionStore[Any], served: ServedEnv) -> None:
    async def step(
        request: Request,
        response: Response,
        body: Any,
        x_session_id: _SessionHeader = None,
        hospital_session: _SessionCookie = None,
    ) -> HospitalStepResponse:
        """One step of the session's episode: ``{"action": {...}}`` in the served env's action form
        (ED: ``{"action": n}`` flat or ``{"triage": a, "bed_manager": b, "ventilator_officer": c}``
        team; RT: ``{"action": n}``). The session id: body ``session_id``, else the header, else
        the cookie."""
        sid, env = _lookup(store, request, body.session_id or x_session_id or hospital_session)
        try:
            obs = env.step(body.action)
        except EpisodeStateError as exc:
            raise _error(409, exc.code, str(exc)) from None
        return _answer(response, sid, obs)

    app.post(
        "/step",
        operation_id="step",
        response_model=HospitalStepResponse,
        tags=["Environment Control"],
        summary="Take one step in an HTTP session's episode",
        responses={
            200: _OK,
            400: {
                "model": ErrorResponse,
                "description": "no session id given (`NO_SESSION`), "
                "or the body is not UTF-8 (`INVALID_UTF8`)",
            },
            404: {"model": ErrorResponse, "description": "unknown or expired session"},
            409: {"model": ErrorResponse, "description": "episode ended, or a step on the other track"},
            413: _BODY_ERRORS[413],
            422: {"description": "malformed action: not exactly one of the two forms, or out of range"},
        },
    )(_typed(step, body=served.step_request))


def _add_state_route(app: FastAPI, store: SessionStore[Any], served: ServedEnv) -> None:
    async def state(
        request: Request,
        session_id: Annotated[
            str | None, Query(min_length=1, max_length=255, description=SESSION_ID_REQUEST_DOC)
        ] = None,
        x_session_id: _SessionHeader = None,
        hospital_session: _SessionCookie = None,
    ) -> Any:
        _, env = _lookup(store, request, session_id or x_session_id or hospital_session)
        return env.state

    app.get(
        "/state",
        operation_id="state",
        response_model=served.state,
        tags=["State Management"],
        summary="The HTTP session's episode state",
        responses={400: _ERROR, 404: _ERROR},
    )(_typed(state, **{"return": served.state}))


def _add_close_route(app: FastAPI, store: SessionStore[Any]) -> None:
    @app.delete(
        "/sessions/{session_id}",
        operation_id="close_session",
        status_code=204,
        tags=["State Management"],
        summary="Close an HTTP session",
        responses={404: _ERROR},
    )
    async def close_session(request: Request, session_id: str) -> Response:
        if not store.close(session_id, _client(request)):
            raise _error(404, "UNKNOWN_SESSION", f"no HTTP session {session_id!r}")
        response = Response(status_code=204)
        response.delete_cookie(SESSION_COOKIE)
        return response


def _add_sessions_route(
    app: FastAPI,
    settings: ServerSettings,
    http: SessionStore[Any],
    pool: OpenEnvPool,
    ledger: ClientLedger,
    web: SessionStore[Any] | None,
    mcp: SessionStore[Any] | None,
) -> None:
    @app.get(
        "/sessions",
        response_model=SessionsResponse,
        tags=["Health"],
        summary="Session counts and limits, every source (never ids)",
    )
    async def sessions() -> SessionsResponse:
        await pool.reap()
        return SessionsResponse.model_validate(
            {
                "http": {"active": len(http), "max": http.max_sessions, "idle_timeout_s": http.ttl_s},
                "websocket": {
                    "active": pool.active,
                    "max": pool.max_sessions,
                    "idle_timeout_s": settings.idle_timeout_s,
                    "ws": pool.connections["ws"],
                    "mcp_websocket": pool.connections["mcp"],
                    "mcp_http": len(pool.mcp_http),
                },
                "web": None
                if web is None
                else {"active": len(web), "max": web.max_sessions, "idle_timeout_s": web.ttl_s},
                "mcp": None
                if mcp is None
                else {"active": len(mcp), "max": mcp.max_sessions, "idle_timeout_s": mcp.ttl_s},
                "per_client": {"max": ledger.per_client, "clients": ledger.clients()},
            }
        )


# -------------------------------------------------------------------- app
_OPENENV_WEB_ROUTES = (("/web/reset", "POST"), ("/web/step", "POST"), ("/web/state", "GET"), ("/ws/ui", None))
"""OpenEnv's default web routes drive ONE shared environment for every visitor, outside
any session limit; this app's web view keeps one session per browser tab instead."""


@contextmanager
def _web_interface(enabled: bool) -> Iterator[None]:
    """``create_app`` reads OpenEnv's switch from the environment: set it for the call."""
    saved = os.environ.get("ENABLE_WEB_INTERFACE")
    os.environ["ENABLE_WEB_INTERFACE"] = "true" if enabled else "false"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["ENABLE_WEB_INTERFACE"]
        else:
            os.environ["ENABLE_WEB_INTERFACE"] = saved


def _close_tab(episodes: Any) -> None:
    """A web session ended (tab closed, idle timeout): release what it holds (its agent's process)."""
    close = getattr(episodes, "close", None)
    if callable(close):
        close()


def _web_view(
    settings: ServerSettings,
    ledger: ClientLedger,
    clock: Callable[[], float],
    budget: SessionBudget,
    live: LivePages,
) -> tuple[SessionStore[Any], Callable[..., Any], Any]:
    """The web view's tab sessions, the page builder ``create_app`` mounts (ED or RT page), and
    the web host (:mod:`server.web_host`: where its tabs' days or plans and agents run, ED and
    RT alike), stopped when the app stops."""
    if settings.env == "radiotherapy":
        from server.rt_web import rt_web_view_builder as view_builder
        from server.web_host import RemoteRTTab, WebHost

        default = settings.rt_task
        host = WebHost()  # the tabs' plans and agents run there, as the ED's days do
        factory: Callable[[], Any] = functools.partial(RemoteRTTab, host, default)
    else:
        from server.web import web_view_builder as view_builder  # type: ignore[assignment]
        from server.web_host import RemoteTab, WebHost

        default = settings.scenario
        host = WebHost()
        factory = functools.partial(RemoteTab, host, default)
    store = SessionStore[Any](
        factory,
        settings.max_web_sessions,
        settings.idle_timeout_s,
        clock,
        ledger,
        close=_close_tab,
        name="web session",
        evict_idle_s=settings.evict_idle_s,
        rate_limited=True,
        budget=budget,
        # A tab whose page is loaded holds its heartbeat open; one made by API calls alone does not,
        # and expires as soon as an HTTP episode would (it held a slot 600 s: "server is full").
        # A tab in the middle of an event is in use, however long the event runs (a planner day).
        connected=lambda episodes: getattr(episodes, "session_hash", None) in live or episodes.lock.locked(),
        unconnected_ttl_s=settings.http_session_ttl_s,
    )
    return store, view_builder(store, default), host


_ALL_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"})


def _web_routes_405(app: FastAPI) -> None:
    """A method the app's own routes under ``/web/`` (OpenEnv's ``/web/metadata``) do not serve is a
    405, as docs/server.md says of every ``/web/...`` route: Starlette remembers the path's partial
    match, but the Gradio mount at ``/web`` matches the path in full and answered 404."""
    routes = app.router.routes
    for index in range(len(routes) - 1, -1, -1):
        route = routes[index]
        methods = getattr(route, "methods", None)
        path = getattr(route, "path", "")
        if not methods or not path.startswith("/web/") or "{" in path:
            continue
        allow = ", ".join(sorted(methods))

        async def not_allowed(request: Request, allow: str = allow) -> JSONResponse:
            return JSONResponse(
                error_body("METHOD_NOT_ALLOWED", f"{request.method} {request.url.path}: allowed {allow}"),
                status_code=405,
                headers={"allow": allow},
            )

        app.add_api_route(path, not_allowed, methods=sorted(_ALL_METHODS - methods), include_in_schema=False)
        routes.insert(index + 1, routes.pop())  # before the mount, which would answer 404


def _on_lifespan(app: FastAPI, start: Callable[[], None] | None, stop: Callable[[], None]) -> None:
    """Call ``start`` (if given) when the app's lifespan begins and ``stop`` when it ends
    (OpenEnv's lifespan replaces ``on_startup`` / ``on_shutdown``)."""
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(asgi_app: Any) -> AsyncIterator[Any]:
        try:
            async with inner(asgi_app) as state:
                if start is not None:
                    start()
                yield state
        finally:
            stop()

    app.router.lifespan_context = lifespan


def _gate_openenv_sessions(
    app: FastAPI, settings: ServerSettings, ledger: ClientLedger, clock: Callable[[], float]
) -> OpenEnvPool:
    """OpenEnv's ``/ws``, ``/mcp`` WebSocket and HTTP ``/mcp`` routes behind this app's session
    gate (counted, capped, owned, expiring); returns the pool they share."""
    openenv_ws = _pop_route(app, "/ws", None)
    pool = OpenEnvPool(openenv_ws.endpoint, settings, ledger, clock)
    app.add_api_websocket_route(
        "/ws", _SessionGate(openenv_ws.endpoint, "ws", pool, ledger, settings), name="ws"
    )
    openenv_mcp_ws = _pop_route(app, "/mcp", None)
    app.add_api_websocket_route(
        "/mcp", _SessionGate(openenv_mcp_ws.endpoint, "mcp", pool, ledger, settings), name="mcp_ws"
    )
    _add_mcp_http_route(app, _pop_route(app, "/mcp", "POST").endpoint, pool, ledger)
    return pool


def _add_schema_route(app: FastAPI, served: ServedEnv) -> None:
    """``/schema`` with the served env's real models (OpenEnv reports its base ``State``)."""

    @app.get(
        "/schema",
        response_model=SchemaResponse,
        tags=["Schema"],
        summary="Action, observation and state schemas",
    )
    async def schema() -> SchemaResponse:
        return SchemaResponse(
            action=served.action.model_json_schema(),
            observation=served.observation.model_json_schema(),
            state=served.state.model_json_schema(),
        )


WEB_OFF = (
    "the web view is off: start the server with `hospital-marl serve --web` (or ENABLE_WEB_INTERFACE=true)"
)
"""The 404 of ``/web`` on a server without the web view (a bare "Not Found" left users guessing)."""


def _add_web_off_hint(app: FastAPI) -> None:
    """``/web`` and below answer 404 with :data:`WEB_OFF` when the view is not served."""

    async def web_off(path: str = "") -> Response:
        raise HTTPException(status_code=404, detail=WEB_OFF)

    for route in ("/web", "/web/{path:path}"):
        app.add_api_route(route, web_off, methods=["GET"], include_in_schema=False)


def build_app(
    settings: ServerSettings | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    warm: bool = False,
) -> FastAPI:
    """The FastAPI app: OpenEnv's ``create_app`` plus sessions, limits and the web view.

    Args:
        settings: the environment served (ED or radiotherapy), scenario or task, limits, web
            view (default: from the ``HOSPITAL_*`` variables and ``ENABLE_WEB_INTERFACE``).
        clock: monotonic seconds for the expiry of HTTP, HTTP MCP and web sessions
            (tests inject a fake one; WebSocket idleness uses the event loop's clock).
        warm: start the standard MCP transport's process and the web host with the app, so the
            first MCP client or page does not wait for them (the served app does; a test's
            short-lived app starts each only when a request needs it).
    """
    settings = settings or ServerSettings.from_env()
    redact_tokens()  # uvicorn's access line quotes ?token=: never the secret itself
    served = served_env(settings)
    warm_up(served)
    ledger = ClientLedger(
        settings.max_sessions_per_client,
        CreationLimiter(settings.session_rate_per_client or None, settings.session_rate or None, clock),
    )
    budget = SessionBudget(settings.max_unconnected_sessions)
    live = LivePages()
    web_store, builder, web_host = (
        _web_view(settings, ledger, clock, budget, live) if settings.web else (None, None, None)
    )
    with _web_interface(settings.web):
        app = create_app(
            served.factory,
            served.action,
            served.observation,
            env_name=served.name,
            max_concurrent_envs=settings.max_sessions,
            gradio_builder=builder,
            custom_tab_name=served.tab_name,
            show_default_tab=False,
            title_override=served.title,
        )
    app.title = "hospital_marl OpenEnv server"
    # app.version stays OpenEnv's HTTP API version: `openenv validate` reads it as the standard.

    for path, method in (("/reset", "POST"), ("/step", "POST"), ("/state", "GET"), ("/schema", "GET")):
        _pop_route(app, path, method)
    if settings.web:
        for path, method in _OPENENV_WEB_ROUTES:
            _pop_route(app, path, method)
    pool = _gate_openenv_sessions(app, settings, ledger, clock)

    store = SessionStore[Any](
        served.factory,
        settings.max_http_sessions,
        settings.http_session_ttl_s,
        clock,
        ledger,
        close=lambda env: env.close(),
        close_hint=" with DELETE /sessions/{id}",
        evict_idle_s=settings.evict_idle_s,
        rate_limited=True,
        budget=budget,
    )
    _add_http_session_routes(app, store, served)
    # The ED has MCP tools; RT none.
    streamable = (
        StreamableMCP(settings, ledger, clock, settings.scenario, warm=warm, budget=budget)
        if served.action is HospitalAction
        else None
    )
    _add_sessions_route(app, settings, store, pool, ledger, web_store, streamable and streamable.episodes)
    _add_schema_route(app, served)
    if not settings.web:
        _add_web_off_hint(app)
    if streamable is not None:
        _add_streamable_mcp(app, streamable)
    else:
        app.add_middleware(MCPDispatch, mcp=NoStandardMCP())
    if settings.web:
        _web_routes_405(app)
        app.add_middleware(GradioGuard, blocks=mounted_blocks(app), live=live)
    app.add_middleware(  # outermost: every request is checked before anything else sees it
        RequestGuardMiddleware,
        max_bytes=settings.max_message_bytes,
        site=SitePolicy(settings.allowed_hosts, settings.allowed_origins, settings.token),
    )
    app.state.settings = settings
    app.state.served = served
    app.state.http_sessions = store
    app.state.session_budget = budget
    app.state.live_pages = live
    app.state.web_sessions = web_store
    app.state.web_host = web_host
    if web_host is not None:  # the served app starts it with itself: the first page need not wait
        _on_lifespan(app, web_host.start_in_background if warm else None, web_host.close)
    app.state.pool = pool
    return app
