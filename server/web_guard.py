"""What stands between a client and the web view's Gradio API: every request a 4xx or an answer.

Gradio answered an unknown API name (``POST /web/gradio_api/call/nope``) and an unknown
function index (``queue/join`` with ``fn_index`` 9999 or -1) with a 500 and a traceback
(``FnIndexInferError``, ``KeyError``), and concurrent ``/call`` events on one session hash
shared one message queue: each event's stream took the others' messages, most never completed,
and the first to end deleted the queue under the rest (12 ``KeyError`` s). :class:`GradioGuard`
checks what Gradio would look up before it does:

- an API name the page does not have: **404** ``UNKNOWN_API_NAME``;
- an ``fn_index`` that is not one of the page's functions (or not an integer): **422**;
- a ``/call`` on a session hash whose previous ``/call`` event is still in flight (posted, its
  stream not yet read to the end), or a second stream of such an event: **409** ``SESSION_BUSY``
  (one event at a time per session hash, as the page itself sends them; send no session hash,
  or another, to run events side by side).

Everything else passes unchanged (the page's own traffic: ``queue/join`` with a valid index, one
``queue/data`` stream per tab).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.guards import error_body, json_reply, read_body, replay

_API = re.compile(r"^/(?:call|run|api)/([^/]+)/?(?:([^/]+)/?)?$")
BUSY_LIMIT_S = 120.0
"""A ``/call`` whose stream is never read frees its session hash after this long."""


class LivePages:
    """Which web-view tabs have their page connected: Gradio's page holds its heartbeat stream
    (``GET .../heartbeat/<session hash>``) open for as long as it is loaded. A tab driven only by
    API calls has none; its web session is one nobody holds a connection to."""

    def __init__(self) -> None:
        self._open: dict[str, int] = {}

    def __contains__(self, session_hash: object) -> bool:
        return isinstance(session_hash, str) and session_hash in self._open

    def opened(self, session_hash: str) -> None:
        self._open[session_hash] = self._open.get(session_hash, 0) + 1

    def closed(self, session_hash: str) -> None:
        left = self._open.get(session_hash, 0) - 1
        if left > 0:
            self._open[session_hash] = left
        else:
            self._open.pop(session_hash, None)


class GradioGuard:
    """ASGI middleware for the Gradio mount at ``prefix`` (see the module docstring).

    Args:
        app: the app (the mount is found in it at the first request).
        blocks: returns the page's ``gr.Blocks`` (None until mounted).
        prefix: where Gradio's API lives.
        clock: monotonic seconds.
        live: where the pages' open heartbeat streams are counted (see :class:`LivePages`).
    """

    def __init__(
        self,
        app: ASGIApp,
        blocks: Callable[[], Any],
        prefix: str = "/web/gradio_api",
        clock: Callable[[], float] = time.monotonic,
        live: LivePages | None = None,
    ) -> None:
        self.app = app
        self.live = live if live is not None else LivePages()
        self._blocks = blocks
        self._prefix = prefix
        self._clock = clock
        self._busy: dict[str, tuple[str | None, float]] = {}  # session hash -> (its event, since)
        self._event_hash: dict[str, str] = {}  # a /call event id -> its session hash
        self._streaming: set[str] = set()  # session hashes with a /call stream open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(self._prefix + "/"):
            await self.app(scope, receive, send)
            return
        blocks = self._blocks()
        if blocks is None:
            await self.app(scope, receive, send)
            return
        rest = path[len(self._prefix) :]
        method = scope["method"]
        if method == "GET" and rest.startswith("/heartbeat/"):
            await self._heartbeat(scope, receive, send, rest[len("/heartbeat/") :].strip("/"))
            return
        if (method == "POST" and rest.rstrip("/") in ("/queue/join",)) or (
            method == "POST" and _API.match(rest)
        ):
            await self._post(scope, receive, send, blocks, rest)
        elif method == "GET" and (match := _API.match(rest)) and rest.startswith("/call/") and match.group(2):
            await self._stream(scope, receive, send, blocks, match.group(1), match.group(2))
        else:
            await self.app(scope, receive, send)

    async def _heartbeat(self, scope: Scope, receive: Receive, send: Send, session_hash: str) -> None:
        """A page's heartbeat stream: its tab counts as connected while the stream is open."""
        self.live.opened(session_hash)
        try:
            await self.app(scope, receive, send)
        finally:
            self.live.closed(session_hash)

    # ----------------------------------------------------------------- checks
    @staticmethod
    def _api_names(blocks: Any) -> set[str]:
        return {fn.api_name for fn in blocks.fns.values() if isinstance(fn.api_name, str)}

    async def _post(self, scope: Scope, receive: Receive, send: Send, blocks: Any, rest: str) -> None:
        raw = await read_body(receive)
        if raw is None:
            return
        match = _API.match(rest)
        if match is not None:
            name = match.group(1)
            if match.group(2) is not None or (name not in self._api_names(blocks) and name != "predict"):
                await json_reply(
                    send, 404, error_body("UNKNOWN_API_NAME", f"this page has no API named {name!r}")
                )
                return
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None  # Gradio answers malformed JSON with its own 422
        if isinstance(body, dict):
            refusal = self._index_refusal(body, blocks, required=match is None or match.group(1) == "predict")
            if refusal is not None:
                await json_reply(send, 422, error_body("UNKNOWN_FN_INDEX", refusal))
                return
        session = body.get("session_hash") if isinstance(body, dict) else None
        if match is None or not rest.startswith("/call/") or not isinstance(session, str):
            await self.app(scope, replay(raw, then=receive), send)
            return
        self._expire()
        if session in self._busy:
            await json_reply(send, 409, error_body("SESSION_BUSY", _BUSY))
            return
        self._busy[session] = (None, self._clock())
        answer: list[bytes] = []
        status = 0

        async def keep(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                answer.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, replay(raw, then=receive), keep)
        finally:
            event = None
            if status == 200:
                try:
                    event = json.loads(b"".join(answer)).get("event_id")
                except (ValueError, AttributeError):
                    event = None
            if isinstance(event, str):
                self._busy[session] = (event, self._clock())
                self._event_hash[event] = session
            else:
                self._busy.pop(session, None)

    def _index_refusal(self, body: dict[str, Any], blocks: Any, required: bool) -> str | None:
        index = body.get("fn_index")
        if index is None and not required:
            return None
        if isinstance(index, bool) or not isinstance(index, int) or index not in blocks.fns:
            return (
                f"fn_index {index!r} is not one of this page's functions (0..{max(blocks.fns, default=-1)})"
            )
        return None

    async def _stream(
        self, scope: Scope, receive: Receive, send: Send, blocks: Any, name: str, event: str
    ) -> None:
        if name not in self._api_names(blocks):
            await json_reply(
                send, 404, error_body("UNKNOWN_API_NAME", f"this page has no API named {name!r}")
            )
            return
        session = self._event_hash.get(event)
        if session is None:
            await self.app(scope, receive, send)
            return
        if session in self._streaming:
            await json_reply(send, 409, error_body("SESSION_BUSY", _BUSY))
            return
        self._streaming.add(session)
        try:
            await self.app(scope, receive, send)
        finally:
            self._streaming.discard(session)
            self._event_hash.pop(event, None)
            if self._busy.get(session, (None, 0.0))[0] == event:
                del self._busy[session]

    def _expire(self) -> None:
        deadline = self._clock() - BUSY_LIMIT_S
        for session, (event, since) in list(self._busy.items()):
            if since < deadline and session not in self._streaming:
                del self._busy[session]
                if event is not None:
                    self._event_hash.pop(event, None)


_BUSY = (
    "an event of this session hash is still in flight: read its stream (GET .../call/<api>/<event_id>) "
    "to the end first; one event at a time per session hash (send another session hash, or none, "
    "to run events side by side)"
)


def mounted_blocks(app: Any, path: str = "/web") -> Callable[[], Any]:
    """A function returning the ``gr.Blocks`` mounted at ``path`` in ``app`` (None if none is)."""
    found: list[Any] = []

    def blocks() -> Any:
        if not found:
            for route in app.router.routes:
                if getattr(route, "path", None) == path and hasattr(
                    getattr(route, "app", None), "get_blocks"
                ):
                    found.append(route.app.get_blocks())
                    break
        return found[0] if found else None

    return blocks
