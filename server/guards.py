"""What stands between a client's bytes and OpenEnv's handlers: no input breaks a session.

- :class:`SitePolicy` (HTTP and WebSocket): a request whose ``Host`` is not on
  the allow-list is a 421 (a page on another site cannot reach a loopback
  server through a DNS name it controls); one whose browser ``Origin`` is
  neither loopback, the server's own, nor allowed is a 403 (a WebSocket
  handshake too).
- :class:`RequestGuardMiddleware` (HTTP): a body sent to a JSON route with
  another content type is a 415 (``text/plain`` and form bodies are what a
  browser sends cross-site without a preflight); a body over the size limit is a 413;
  a JSON body that is not UTF-8 is a 400; one that nests deeper than
  :data:`MAX_JSON_DEPTH` or holds a non-finite or out-of-range number
  (``NaN``, ``Infinity``, ``1e400``, a 5000-digit integer) or a lone surrogate
  escape (``"\\ud800"``: no UTF-8 reply can carry it back) is a 422 in
  FastAPI's own validation-error shape. (Left to the routes, a ``NaN`` ended
  in a 500: the 422 that echoed it could not be written as JSON.)
- :class:`GuardedWebSocket` (``/ws`` and ``/mcp``): an oversized, binary,
  non-object (``[]``, ``1``, ``null``) or too deeply nested message is
  answered with an error and skipped, as is one holding a non-finite number
  (``NaN``: OpenEnv's parser would take it), so the session and its episode live on
  (OpenEnv's loops would end the session on the last three); a connection
  idle for the timeout is closed, freeing its slot; a client that closed
  mid-step is logged at INFO, not as an ERROR traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import math
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit

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


_STRICT = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int)
"""One decoder for every message (``json.loads`` with hooks builds a new one per call: 2 us of 3)."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value: Any) -> str | None:
    """The first string (key or value) in a decoded JSON value holding a lone surrogate, or None.

    JSON's ``\\ud800`` escape decodes to a code point no UTF-8 text can carry: echoed in a reply
    (a 422 quoting its input, an id, an episode name) it cannot be encoded, so it ended in a 500.
    A valid pair (``\\ud83d\\ude00``) decodes to one character and passes."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return item
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def check_json(text: str) -> Any:
    """Parse a JSON text strictly (raises :class:`JSONProblem`, or ``json.JSONDecodeError``
    for text that is not JSON at all): nesting, finite floats, bounded integers, no lone
    surrogate (``"\\ud800"``) anywhere."""
    if _too_deep(text):
        raise JSONProblem("json_too_deep", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    if text.startswith("\ufeff"):  # as json.loads refuses it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    value = _STRICT.decode(text)
    if "\\u" in text and _lone_surrogate(value) is not None:  # fast path: no escape, no surrogate
        raise JSONProblem(
            "invalid_unicode",
            "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff not in a valid pair): "
            "not a Unicode character",
        )
    return value


# ----------------------------------------------------------- cross-site
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def _host_name(authority: str) -> str:
    """``example.org:8000`` -> ``example.org``; ``[::1]:8000`` -> ``::1`` (lower case)."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority[1:].partition("]")[0]
    return authority.rpartition(":")[0] if authority.count(":") == 1 else authority


TOKEN_COOKIE = "hospital_token"
"""The cookie a browser carries the token in (set by the server when a page is opened with ``?token=``)."""
TOKEN_QUERY = "token"


class SitePolicy:
    """Which ``Host`` names and browser ``Origin`` s a request may carry, and the token it must.

    Loopback hosts and origins are always allowed; so is an ``Origin`` equal to
    the request's own scheme and ``Host`` (a page the server itself served) when that host is
    loopback or named on the list. ``*`` in either list allows any; but a host let in by ``*``
    alone does not make its own pages same-origin: DNS rebinding is exactly a page whose Host and
    Origin are both the attacker's name, so under ``*`` such a browser request needs the token
    (or an allowed origin).

    ``token`` (``HOSPITAL_TOKEN``): every request, WebSocket handshakes included, must carry it
    (``Authorization: Bearer``, the ``hospital_token`` cookie, or a ``?token=`` query parameter),
    compared in constant time; else 401. A browser opening a page with ``?token=`` is redirected
    (303) to the URL without it, with the cookie set; the access log blanks it
    (:func:`server.logs.redact_tokens`).
    """

    def __init__(
        self, hosts: Iterable[str] = (), origins: Iterable[str] = (), token: str | None = None
    ) -> None:
        self.hosts = LOOPBACK | {h.lower() for h in hosts}
        self.origins = {o.lower().rstrip("/") for o in origins}
        self.token = token.encode() if token else None

    def host_ok(self, host: str | None) -> bool:
        return host is None or "*" in self.hosts or _host_name(host) in self.hosts

    def origin_ok(self, origin: str | None, host: str | None, token_checked: bool = False) -> bool:
        if origin is None or "*" in self.origins:
            return True
        origin = origin.strip().lower().rstrip("/")
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (sandboxed frames, file pages) and anything odd
        if _host_name(parts.netloc) in LOOPBACK:
            return True
        same = host is not None and parts.netloc == host.lower()
        return same and (token_checked or _host_name(host or "") in self.hosts)

    def token_ok(self, scope: Scope) -> bool:
        """Whether the request carries the token (always, with none configured)."""
        if self.token is None:
            return True
        return any(hmac.compare_digest(given, self.token) for given in _tokens_given(scope))

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        """(status, code, message) if the request's Host, token or Origin is refused, else None."""
        headers = {k: v.decode("latin-1") for k, v in scope.get("headers", ()) if k in (b"host", b"origin")}
        host, origin = headers.get(b"host"), headers.get(b"origin")
        if not self.host_ok(host):
            return (
                421,
                "HOST_NOT_ALLOWED",
                (
                    f"this server does not serve the host name {host!r} (allowed: loopback"
                    f"{', ' + ', '.join(sorted(self.hosts - LOOPBACK)) if self.hosts - LOOPBACK else ''}); "
                    "serve with --allow-host NAME (HOSPITAL_ALLOWED_HOSTS) to add it"
                ),
            )
        if not self.token_ok(scope):
            return (
                401,
                "TOKEN_REQUIRED",
                "this server requires its token (HOSPITAL_TOKEN): send 'Authorization: Bearer <token>', "
                f"or open a page once with ?{TOKEN_QUERY}=<token> (a browser then keeps it as a cookie)",
            )
        if not self.origin_ok(origin, host, token_checked=self.token is not None):
            return (
                403,
                "ORIGIN_NOT_ALLOWED",
                (
                    f"requests from the web origin {origin!r} are refused (cross-site; a page under a host "
                    "let in by '*' alone is not trusted as same-origin without the token); serve with "
                    "--allow-origin ORIGIN (HOSPITAL_ALLOWED_ORIGINS) to accept it"
                ),
            )
        return None


def _tokens_given(scope: Scope) -> list[bytes]:
    """Every token the request carries: the bearer header, the cookie, the query parameter."""
    given: list[bytes] = []
    for name, value in scope.get("headers", ()):
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            given.append(value[7:].strip())
        elif name == b"cookie":
            for part in value.split(b";"):
                key, _, cookie = part.strip().partition(b"=")
                if key == TOKEN_COOKIE.encode():
                    given.append(cookie)
    query = scope.get("query_string", b"")
    if query:
        for value in parse_qs(query.decode("latin-1")).get(TOKEN_QUERY, ()):
            given.append(value.encode("latin-1"))
    return given


def token_cookie(scope: Scope, policy: SitePolicy) -> bytes | None:
    """A ``Set-Cookie`` value keeping the token for a browser that sent it as ``?token=`` (None
    otherwise): the web view's own requests (Gradio's fetches, its WebSockets) then carry it."""
    if policy.token is None or not scope.get("query_string"):
        return None
    values = parse_qs(scope["query_string"].decode("latin-1")).get(TOKEN_QUERY, ())
    if not any(hmac.compare_digest(v.encode("latin-1"), policy.token) for v in values):
        return None
    return f"{TOKEN_COOKIE}={policy.token.decode()}; Path=/; HttpOnly; SameSite=Strict".encode()


# ------------------------------------------------------------------- HTTP
async def json_reply(
    send: Send, status: int, body: dict[str, Any], extra: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    """A JSON response in two ASGI messages (every middleware's own answers: one shape)."""
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def read_body(receive: Receive) -> bytes | None:
    """A request's whole body (None if the client went away first)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, more_body: bool = False, then: Receive | None = None) -> Receive:
    """An ASGI ``receive`` that gives a body already read (``more_body``: only its beginning),
    then what ``then`` receives (a disconnect, the app's to notice), or a disconnect."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more_body}
        return await then() if then is not None else {"type": "http.disconnect"}

    return receive


def error_body(code: str, message: str) -> dict[str, Any]:
    """This server's own 4xx body: ``{"detail": {"code", "message"}}`` (``ErrorResponse``)."""
    return {"detail": {"code": code, "message": message}}


def validation_body(kind: str, message: str) -> dict[str, Any]:
    """A 422 body in FastAPI's ``HTTPValidationError`` shape, so one schema covers every 422."""
    return {"detail": [{"type": kind, "loc": ["body"], "msg": message, "input": None}]}


class RequestGuardMiddleware:
    """Allowed sites, bounded, well-formed JSON bodies, before any route sees them (see the module
    docstring).

    Every body outside ``skip_prefix`` must be JSON (``application/json``, or no content type
    with an empty body) and is parsed strictly; paths under ``skip_prefix`` (the Gradio app, which
    speaks its own protocol) are only size-checked. Host and Origin are checked everywhere,
    WebSocket handshakes included.
    """

    def __init__(
        self, app: ASGIApp, max_bytes: int, skip_prefix: str = "/web/", site: SitePolicy | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.skip_prefix = skip_prefix
        self.site = site or SitePolicy()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.site.refusal(scope)
        if refusal is not None:
            status, code, message = refusal
            logger.warning("refused %s %s: %s", scope["type"], scope["path"], code)
            if scope["type"] == "websocket":  # closed before the handshake: the client sees HTTP 403
                await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
            else:
                await self._refuse(send, status, error_body(code, message))
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cookie = token_cookie(scope, self.site)
        if cookie is not None:
            if _page_visit(scope):  # the token leaves the address bar (history, a shared link)
                await send(_token_redirect(scope, cookie))
                await send({"type": "http.response.body", "body": b""})
                return
            send = _with_cookie(send, cookie)
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
        is_json = JSON_CONTENT.match(content_type) is not None or (not content_type and not body)
        checked = not scope["path"].startswith(self.skip_prefix)
        if checked and not is_json and (body or content_type):
            await self._refuse(
                send,
                415,
                error_body(
                    "UNSUPPORTED_MEDIA_TYPE",
                    f"this route takes JSON: send Content-Type: application/json "
                    f"(got {content_type.decode('latin-1') or 'none'!r})",
                ),
            )
            return
        if body and checked:
            problem = self._problem(body)
            if problem is not None:
                await self._refuse(send, *problem)
                return
        await self.app(scope, replay(body, then=receive), send)

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

    _refuse = staticmethod(json_reply)


def _page_visit(scope: Scope) -> bool:
    """Whether a request is a browser opening a page (a ``GET`` navigation, or one asking for HTML)."""
    if scope.get("method") != "GET":
        return False
    headers = dict(scope.get("headers", ()))
    return headers.get(b"sec-fetch-mode") == b"navigate" or b"text/html" in headers.get(b"accept", b"")


def _token_redirect(scope: Scope, cookie: bytes) -> Message:
    """A 303 to the same URL without ``?token=``, setting the token's cookie: the page a browser
    then loads (and keeps in its history, and shows in its address bar) carries no secret."""
    kept = [
        (name, value)
        for name, value in parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        if name != TOKEN_QUERY
    ]
    location = quote(scope.get("root_path", "") + scope["path"]) + (f"?{urlencode(kept)}" if kept else "")
    headers = [(b"location", location.encode("latin-1")), (b"set-cookie", cookie), (b"content-length", b"0")]
    return {"type": "http.response.start", "status": 303, "headers": headers}


def _with_cookie(send: Send, cookie: bytes) -> Send:
    """``send`` adding a ``Set-Cookie`` header to the response's start."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), (b"set-cookie", cookie)]}
        await send(message)

    return sending


# -------------------------------------------------------------- websocket
class _Answer:
    """A screened message's whole reply (the screen's own protocol), sent instead of handling it."""

    def __init__(self, text: str) -> None:
        self.text = text


class GuardedWebSocket:
    """The WebSocket as OpenEnv's session loops see it (``/ws`` and ``/mcp``).

    Bad messages get ``reply_error(code, message)`` and are skipped; an idle
    connection is closed after ``idle_timeout_s`` (call :meth:`watch` /
    :meth:`stop` around the session); sending to a client that already went
    away raises :class:`WebSocketDisconnect`, logged once at INFO.
    """

    def __init__(
        self,
        websocket: WebSocket,
        max_bytes: int,
        idle_timeout_s: float,
        reply_error: ErrorReply,
        screen: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> None:
        self._ws = websocket
        self._screen = screen
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
            if isinstance(problem, _Answer):
                await self.send_text(problem.text)
                continue
            if problem is not None:
                await self._error("VALIDATION_ERROR", problem)
                continue
            return text

    def _problem(self, text: str) -> str | _Answer | None:
        """Why a message is refused here, or None to hand it on (malformed JSON included:
        OpenEnv answers that itself)."""
        try:
            value = check_json(text)
        except JSONProblem as exc:
            return f"{exc}: message ignored"
        except (json.JSONDecodeError, RecursionError, ValueError):
            return None
        if isinstance(value, dict):
            answer = self._screen(value) if self._screen is not None else None
            return None if answer is None else _Answer(answer)
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
