"""The OpenEnv server: ``server.app:app`` (built by openenv-core's ``create_app``) and ``main``.

Run it::

    server --port 8000                      # the console script OpenEnv's tooling expects
    hospital-marl serve --port 8000         # the same, from the package CLI
    uvicorn server.app:app --port 8000      # settings from HOSPITAL_* variables only

OpenEnv's ``create_app`` builds the app: its routes (``/health``,
``/metadata``, ``/mcp``, ``/docs``) and its WebSocket session machinery at
``/ws`` (one :class:`~server.environment.HospitalEnvironment` per connection,
up to ``max_sessions``) serve as they are. This module replaces ``/reset``,
``/step``, ``/state`` and ``/schema`` with compatible supersets (same request
and response fields, plus a session id), wraps ``/ws``, and so adds what
OpenEnv lacks:

- **Stateful HTTP episodes.** OpenEnv's plain ``/reset`` and ``/step`` build a
  fresh environment per call. Here ``POST /reset`` opens an HTTP session and
  returns its ``session_id`` (body field, ``X-Session-Id`` header and
  ``hospital_session`` cookie); ``POST /step`` and ``GET /state`` continue it
  when given the id (body field or query parameter, header, or cookie, in that
  order). A step with no session is a 400 with instructions, never a silent
  fresh episode; an unknown or expired id is a 404. Sessions expire after
  ``http_session_ttl_s`` idle seconds; at most ``max_http_sessions`` live at
  once (then 429); ``DELETE /sessions/{id}`` closes one.
- **A capacity error the client sees.** When all WebSocket sessions are taken, a
  new connection gets OpenEnv's ``CAPACITY_REACHED`` error message and a close
  with code 1013 (try again later) whose reason says so, not a bare close.
- **Bounded messages.** HTTP bodies above ``max_message_bytes`` get 413;
  WebSocket messages above it get an error reply and the session lives on;
  frames above ``ws_frame_limit_bytes`` close the socket with 1009.
- **The real state schema** at ``/schema`` (OpenEnv reports its base ``State``).

Errors never stop the server or touch other sessions: bad input is a 4xx (or
a WebSocket ``error`` message) for that request only.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import Body, FastAPI, HTTPException, Query, Request, Response, WebSocket, WebSocketDisconnect
from fastapi.routing import APIRoute, APIWebSocketRoute
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import SchemaResponse, WSErrorCode, WSErrorResponse
from starlette.routing import WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.environment import EpisodeStateError, HospitalEnvironment
from server.mcp_tools import HospitalMCPEnvironment
from server.models import (
    ErrorDetail,
    HospitalAction,
    HospitalObservation,
    HospitalResetRequest,
    HospitalState,
    HospitalStepRequest,
    HospitalStepResponse,
    SessionsResponse,
)
from server.sessions import HTTPSessionStore, SessionCapacityError
from server.settings import ServerSettings, add_server_arguments, settings_from_args

SESSION_HEADER = "X-Session-Id"
SESSION_COOKIE = "hospital_session"
WS_TRY_AGAIN_LATER = 1013  # RFC 6455 close code: server overloaded, retry later

_NO_SESSION = (
    "no HTTP session: plain HTTP episodes are stateful through a session. POST /reset returns a "
    f"session_id (also in the {SESSION_HEADER} header and the {SESSION_COOKIE} cookie); send it with "
    f"/step and /state as the session_id body field / query parameter, the {SESSION_HEADER} header, "
    "or the cookie. Or use the WebSocket /ws (OpenEnv's EnvClient) for a session per connection."
)


def _error(status: int, code: str, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail=ErrorDetail(code=code, message=message).model_dump())


# ------------------------------------------------------------- middleware
class BodySizeLimitMiddleware:
    """HTTP request bodies above ``max_bytes`` get 413 before any route sees them."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._too_large(send)
                return
        # Read the (bounded) body up front, then replay it: chunked uploads are capped too.
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send) -> None:
        body = json.dumps(
            {"detail": {"code": "PAYLOAD_TOO_LARGE", "message": f"request body over {self.max_bytes} bytes"}}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


# -------------------------------------------------------------- websocket
class _BoundedWebSocket:
    """The WebSocket as OpenEnv's session loop sees it: oversized or binary
    messages are answered with an error message and skipped, so the session
    (and its episode) lives on."""

    def __init__(self, websocket: WebSocket, max_bytes: int) -> None:
        self._ws = websocket
        self._max_bytes = max_bytes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ws, name)

    async def receive_text(self) -> str:
        while True:
            message = await self._ws.receive()
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000), message.get("reason"))
            text = message.get("text")
            if text is None:
                await self._reply_error("MESSAGE_NOT_TEXT", "binary frames are not supported: send JSON text")
                continue
            n = len(text)
            if n > self._max_bytes or (4 * n > self._max_bytes and len(text.encode()) > self._max_bytes):
                await self._reply_error("MESSAGE_TOO_LARGE", f"message over {self._max_bytes} bytes ignored")
                continue
            return text

    async def _reply_error(self, code: str, message: str) -> None:
        await self._ws.send_text(WSErrorResponse(data={"message": message, "code": code}).model_dump_json())

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        # OpenEnv closes the socket after the client already did; Starlette then
        # raises WebSocketDisconnect (OpenEnv expects RuntimeError), which would
        # log a spurious "Exception in ASGI application" for every normal goodbye.
        with contextlib.suppress(WebSocketDisconnect):
            await self._ws.close(code, reason)


class _WebSocketGate:
    """Wraps OpenEnv's ``/ws`` endpoint: bounds messages and turns a full server
    into a capacity error the client can read."""

    def __init__(self, endpoint: Callable[[Any], Awaitable[None]], max_sessions: int, max_bytes: int) -> None:
        self._endpoint = endpoint
        self.max_sessions = max_sessions
        self._max_bytes = max_bytes
        self.active = 0

    async def __call__(self, websocket: WebSocket) -> None:
        if self.active >= self.max_sessions:
            await self._refuse(websocket)
            return
        self.active += 1  # no await since the check: the count cannot race
        try:
            await self._endpoint(_BoundedWebSocket(websocket, self._max_bytes))
        finally:
            self.active -= 1

    async def _refuse(self, websocket: WebSocket) -> None:
        message = (
            f"Server at capacity: {self.active}/{self.max_sessions} WebSocket sessions active; retry later"
        )
        await websocket.accept()
        error = WSErrorResponse(
            data={
                "message": message,
                "code": WSErrorCode.CAPACITY_REACHED,
                "active_sessions": self.active,
                "max_sessions": self.max_sessions,
            }
        )
        await websocket.send_text(error.model_dump_json())
        await websocket.close(code=WS_TRY_AGAIN_LATER, reason=message[:120])


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


_EMPTY_RESET_BODY = Body(default_factory=HospitalResetRequest)
"""``POST /reset`` with no body resets with defaults (as OpenEnv's)."""


def _session_id(request: Request, explicit: str | None) -> str | None:
    return explicit or request.headers.get(SESSION_HEADER) or request.cookies.get(SESSION_COOKIE)


def _add_http_session_routes(app: FastAPI, store: HTTPSessionStore, gate: _WebSocketGate) -> None:
    def lookup(request: Request, explicit: str | None) -> tuple[str, HospitalEnvironment]:
        sid = _session_id(request, explicit)
        if not sid:
            raise _error(400, "NO_SESSION", _NO_SESSION)
        env = store.get(sid)
        if env is None:
            raise _error(
                404,
                "UNKNOWN_SESSION",
                f"no HTTP session {sid!r}: it never existed, was closed, or expired after "
                f"{store.ttl_s:g} s idle. POST /reset to start a new one.",
            )
        return sid, env

    def answer(response: Response, sid: str, obs: HospitalObservation) -> HospitalStepResponse:
        response.headers[SESSION_HEADER] = sid
        return HospitalStepResponse(**serialize_observation(obs), session_id=sid)

    @app.post(
        "/reset",
        response_model=HospitalStepResponse,
        tags=["Environment Control"],
        summary="Start an episode (opens or reuses a stateful HTTP session)",
        responses={422: {"description": "bad seed, scenario or extra field"}, 429: {"model": ErrorDetail}},
    )
    async def reset(
        request: Request,
        response: Response,
        body: HospitalResetRequest = _EMPTY_RESET_BODY,
    ) -> HospitalStepResponse:
        """OpenEnv's reset, plus a session: the returned ``session_id`` continues the episode
        with ``POST /step``. A known session id (body, header or cookie) is reset in place;
        otherwise a new session opens."""
        sid = _session_id(request, body.session_id)
        env = store.get(sid) if sid else None
        if env is None:
            try:
                sid, env = store.open()
            except SessionCapacityError as exc:
                raise _error(429, "SESSION_LIMIT", str(exc)) from None
        assert sid is not None
        obs = env.reset(**body.model_dump(exclude={"session_id"}))
        response.set_cookie(SESSION_COOKIE, sid, httponly=True, samesite="lax")
        return answer(response, sid, obs)

    @app.post(
        "/step",
        response_model=HospitalStepResponse,
        tags=["Environment Control"],
        summary="Take one step in an HTTP session's episode",
        responses={
            400: {"model": ErrorDetail, "description": "no session id given"},
            404: {"model": ErrorDetail, "description": "unknown or expired session"},
            409: {"model": ErrorDetail, "description": "episode ended, or a step on the other track"},
            422: {"description": "malformed action"},
        },
    )
    async def step(request: Request, response: Response, body: HospitalStepRequest) -> HospitalStepResponse:
        """One tick of the session's episode. ``{"action": {"action": n}}`` (flat) or
        ``{"action": {"triage": a, "bed_manager": b, "ventilator_officer": c}}`` (team)."""
        sid, env = lookup(request, body.session_id)
        try:
            obs = env.step(body.action)
        except EpisodeStateError as exc:
            raise _error(409, exc.code, str(exc)) from None
        return answer(response, sid, obs)

    @app.get(
        "/state",
        response_model=HospitalState,
        tags=["State Management"],
        summary="The HTTP session's episode state",
        responses={400: {"model": ErrorDetail}, 404: {"model": ErrorDetail}},
    )
    async def state(
        request: Request, session_id: str | None = Query(default=None, max_length=255)
    ) -> HospitalState:
        _, env = lookup(request, session_id)
        return env.state

    @app.delete(
        "/sessions/{session_id}",
        status_code=204,
        tags=["State Management"],
        summary="Close an HTTP session",
        responses={404: {"model": ErrorDetail}},
    )
    async def close_session(session_id: str) -> Response:
        if not store.close(session_id):
            raise _error(404, "UNKNOWN_SESSION", f"no HTTP session {session_id!r}")
        response = Response(status_code=204)
        response.delete_cookie(SESSION_COOKIE)
        return response

    @app.get(
        "/sessions", response_model=SessionsResponse, tags=["Health"], summary="Session counts and limits"
    )
    async def sessions() -> SessionsResponse:
        return SessionsResponse.model_validate(
            {
                "http": {"active": len(store), "max": store.max_sessions, "idle_timeout_s": store.ttl_s},
                "websocket": {"active": gate.active, "max": gate.max_sessions},
            }
        )


# -------------------------------------------------------------------- app
def build_app(
    settings: ServerSettings | None = None, *, clock: Callable[[], float] = time.monotonic
) -> FastAPI:
    """The FastAPI app: OpenEnv's ``create_app`` plus stateful HTTP sessions and limits.

    Args:
        settings: scenario and limits (default: from the ``HOSPITAL_*`` variables).
        clock: monotonic seconds for HTTP session expiry (tests inject a fake one).
    """
    settings = settings or ServerSettings.from_env()
    # Each session's environment also serves the MCP tools (server/mcp_tools.py) at /mcp.
    factory = functools.partial(HospitalMCPEnvironment, scenario=settings.scenario)
    app = create_app(
        factory,
        HospitalAction,
        HospitalObservation,
        env_name="hospital_marl",
        max_concurrent_envs=settings.max_sessions,
    )
    app.title = "hospital_marl OpenEnv server"
    app.description = __doc__ or ""
    # app.version stays OpenEnv's HTTP API version: `openenv validate` reads it as the standard.

    for path, method in (("/reset", "POST"), ("/step", "POST"), ("/state", "GET"), ("/schema", "GET")):
        _pop_route(app, path, method)
    openenv_ws = _pop_route(app, "/ws", None)
    gate = _WebSocketGate(openenv_ws.endpoint, settings.max_sessions, settings.max_message_bytes)
    app.add_api_websocket_route("/ws", gate, name="ws")

    store = HTTPSessionStore(factory, settings.max_http_sessions, settings.http_session_ttl_s, clock)
    _add_http_session_routes(app, store, gate)

    @app.get(
        "/schema",
        response_model=SchemaResponse,
        tags=["Schema"],
        summary="Action, observation and state schemas",
    )
    async def schema() -> SchemaResponse:
        return SchemaResponse(
            action=HospitalAction.model_json_schema(),
            observation=HospitalObservation.model_json_schema(),
            state=HospitalState.model_json_schema(),
        )

    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_message_bytes)
    app.state.settings = settings
    app.state.http_sessions = store
    app.state.ws_gate = gate
    return app


app = build_app()
"""The app ``uvicorn server.app:app`` serves (settings from the ``HOSPITAL_*`` variables)."""


def uvicorn_options(settings: ServerSettings) -> dict[str, Any]:
    """What :func:`serve` gives uvicorn besides host, port and logging.

    No permessage-deflate: compressing a ~1 KB observation costs more CPU on
    both ends than it saves on loopback or a LAN, and adds latency to every step.
    """
    return {"ws_max_size": settings.ws_frame_limit_bytes, "ws_per_message_deflate": False}


def serve(
    settings: ServerSettings,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    access_log: bool = True,
) -> None:
    """Run the server in the foreground until interrupted."""
    import uvicorn

    uvicorn.run(
        build_app(settings),
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        **uvicorn_options(settings),
    )


def main(argv: Sequence[str] | None = None) -> None:
    """The ``server`` console script (OpenEnv's entry point): ``server --host --port --scenario ...``."""
    parser = argparse.ArgumentParser(prog="server", description="Run the hospital_marl OpenEnv server.")
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    serve(settings, args.host, args.port, args.log_level, access_log=not args.no_access_log)


if __name__ == "__main__":
    main()
