"""What stands between a client's bytes and OpenEnv's handlers: no input breaks a session.

- :class:`RequestGuardMiddleware` (HTTP): a body over the size limit is a 413;
  a JSON body that is not UTF-8 is a 400; one that nests deeper than
  :data:`MAX_JSON_DEPTH` or holds a non-finite or out-of-range number
  (``NaN``, ``Infinity``, ``1e400``, a 5000-digit integer) is a 422 in
  FastAPI's own validation-error shape. (Left to the routes, a ``NaN`` ended
  in a 500: the 422 that echoed it could not be written as JSON.)
- :class:`GuardedWebSocket` (``/ws`` and ``/mcp``): an oversized, binary,
  non-object (``[]``, ``1``, ``null``) or too deeply nested message is
  answered with an error and skipped, so the session and its episode live on
  (OpenEnv's loops would end the session on the last three); a connection
  idle for the timeout is closed, freeing its slot; a client that closed
  mid-step is logged at INFO, not as an ERROR traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
from collections.abc import Callable
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("server")

MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays/objects accepted in a body or message (ours need 3)."""

MAX_INT_DIGITS = 40
"""Longest integer literal accepted (a seed needs 19 digits)."""

JSON_CONTENT = re.compile(rb"^application/(?:[\w.+-]+\+)?json\b", re.IGNORECASE)
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")

ErrorReply = Callable[[str, str], str]
"""(code, message) -> the text of an error message in the endpoint's own protocol."""


class JSONProblem(ValueError):
    """A JSON text this server refuses: ``kind`` is its error type."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in a JSON text (strings ignored); no recursion."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub("", text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _too_deep(text: str) -> bool:
    # Fast path: fewer brackets than the limit cannot nest past it (every step message).
    return text.count("[") + text.count("{") > MAX_JSON_DEPTH and json_depth(text) > MAX_JSON_DEPTH


def _no_constant(name: str) -> Any:
    raise JSONProblem("finite_number", f"{name} is not a number this API accepts: numbers must be finite")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise JSONProblem(
            "finite_number", f"{literal} is out of range: numbers must be finite (|x| < 1.8e308)"
        )
    return value


def _bounded_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise JSONProblem("int_too_long", f"an integer of {len(literal)} digits is out of range")
    return int(literal)


def check_json(text: str) -> Any:
    """Parse a JSON text strictly (raises :class:`JSONProblem`, or ``json.JSONDecodeError``
    for text that is not JSON at all): nesting, finite floats, bounded integers."""
    if _too_deep(text):
        raise JSONProblem("json_too_deep", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int)


# ------------------------------------------------------------------- HTTP
def _json_response(status: int, body: dict[str, Any]) -> tuple[Message, Message]:
    payload = json.dumps(body).encode()
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
    }
    return start, {"type": "http.response.body", "body": payload}


def error_body(code: str, message: str) -> dict[str, Any]:
    """This server's own 4xx body: ``{"detail": {"code", "message"}}`` (``ErrorResponse``)."""
    return {"detail": {"code": code, "message": message}}


def validation_body(kind: str, message: str) -> dict[str, Any]:
    """A 422 body in FastAPI's ``HTTPValidationError`` shape, so one schema covers every 422."""
    return {"detail": [{"type": kind, "loc": ["body"], "msg": message, "input": None}]}


class RequestGuardMiddleware:
    """Bounded, well-formed HTTP bodies before any route sees them (see the module docstring).

    Only JSON bodies (or bodies with no content type, which FastAPI reads as
    JSON) are parsed; paths under ``skip_prefix`` (the Gradio app, which
    speaks its own protocol) are only size-checked.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, skip_prefix: str = "/web/") -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.skip_prefix = skip_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        content_type = b""
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(send, 413, error_body("PAYLOAD_TOO_LARGE", self._too_large))
                return
            if name == b"content-type":
                content_type = value
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
                await self._refuse(send, 413, error_body("PAYLOAD_TOO_LARGE", self._too_large))
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        is_json = not content_type or JSON_CONTENT.match(content_type)
        if body and is_json and not scope["path"].startswith(self.skip_prefix):
            problem = self._problem(body)
            if problem is not None:
                await self._refuse(send, *problem)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @property
    def _too_large(self) -> str:
        return f"request body over {self.max_bytes} bytes"

    @staticmethod
    def _problem(body: bytes) -> tuple[int, dict[str, Any]] | None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return 400, error_body(
                "INVALID_UTF8", f"the request body is not UTF-8 ({exc.reason} at byte {exc.start})"
            )
        try:
            check_json(text)
        except JSONProblem as exc:
            return 422, validation_body(exc.kind, str(exc))
        except (json.JSONDecodeError, RecursionError, ValueError):
            return None  # not JSON: the route answers its usual 422 json_invalid
        return None

    @staticmethod
    async def _refuse(send: Send, status: int, body: dict[str, Any]) -> None:
        start, payload = _json_response(status, body)
        await send(start)
        await send(payload)


# -------------------------------------------------------------- websocket
class GuardedWebSocket:
    """The WebSocket as OpenEnv's session loops see it (``/ws`` and ``/mcp``).

    Bad messages get ``reply_error(code, message)`` and are skipped; an idle
    connection is closed after ``idle_timeout_s`` (call :meth:`watch` /
    :meth:`stop` around the session); sending to a client that already went
    away raises :class:`WebSocketDisconnect`, logged once at INFO.
    """

    def __init__(
        self, websocket: WebSocket, max_bytes: int, idle_timeout_s: float, reply_error: ErrorReply
    ) -> None:
        self._ws = websocket
        self._max_bytes = max_bytes
        self._idle_timeout_s = idle_timeout_s
        self._reply_error = reply_error
        self._last_message = 0.0
        self._watchdog: asyncio.Task[None] | None = None
        self._gone = False
        self.idle_closed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ws, name)

    # ------------------------------------------------------------- receive
    async def receive_text(self) -> str:
        loop = asyncio.get_running_loop()
        while True:
            message = await self._ws.receive()
            self._last_message = loop.time()
            if message["type"] == "websocket.disconnect":
                self._gone = True
                raise WebSocketDisconnect(message.get("code", 1000), message.get("reason"))
            text = message.get("text")
            if text is None:
                await self._error("MESSAGE_NOT_TEXT", "binary frames are not supported: send JSON text")
                continue
            n = len(text)
            if n > self._max_bytes or (4 * n > self._max_bytes and len(text.encode()) > self._max_bytes):
                await self._error("MESSAGE_TOO_LARGE", f"message over {self._max_bytes} bytes ignored")
                continue
            problem = self._problem(text)
            if problem is not None:
                await self._error("VALIDATION_ERROR", problem)
                continue
            return text

    @staticmethod
    def _problem(text: str) -> str | None:
        """Why a message is refused here, or None to hand it on (malformed JSON included:
        OpenEnv answers that itself)."""
        if _too_deep(text):
            return f"message nested deeper than {MAX_JSON_DEPTH} levels ignored"
        if text.lstrip().startswith("{"):
            return None
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError, ValueError):
            return None
        return (
            f'a message is a JSON object ({{"type": ..., "data": {{...}}}}), got {type(value).__name__}'
            if value is not None
            else 'a message is a JSON object ({"type": ..., "data": {...}}), got null'
        )

    # ---------------------------------------------------------------- send
    async def send_text(self, data: str) -> None:
        if self._gone:
            raise WebSocketDisconnect(1006)
        try:
            await self._ws.send_text(data)
        except (WebSocketDisconnect, RuntimeError, OSError):
            self._gone = True
            logger.info("client closed the WebSocket %s before its reply was sent", self._ws.url.path)
            raise WebSocketDisconnect(1006) from None

    async def _error(self, code: str, message: str) -> None:
        await self.send_text(self._reply_error(code, message))

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        # OpenEnv closes the socket after the client already did; Starlette then
        # raises (OpenEnv expects RuntimeError only), which would log a spurious
        # "Exception in ASGI application" for every normal goodbye.
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
            await self._ws.close(code, reason)

    # ---------------------------------------------------------------- idle
    def watch(self) -> None:
        """Start closing the connection once it has been idle for the timeout."""
        self._last_message = asyncio.get_running_loop().time()
        self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    def stop(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            remaining = self._last_message + self._idle_timeout_s - loop.time()
            if remaining > 0:
                await asyncio.sleep(remaining)
                continue
            message = f"session idle for {self._idle_timeout_s:g} s: closed to free its slot; reconnect"
            logger.info("closing idle WebSocket %s (%g s)", self._ws.url.path, self._idle_timeout_s)
            self.idle_closed = True
            with contextlib.suppress(WebSocketDisconnect):
                await self._error("IDLE_TIMEOUT", message)
            await self.close(1000, message[:120])
            return
