"""The standard MCP transport's process: the ``mcp`` SDK's session manager and the episodes.

A standard MCP session's ``initialize``, tool calls and teardown are milliseconds of Python
each. On the server's event loop every WebSocket step waited behind them (issue 24: one client
cycling MCP sessions raised a ``/ws`` user's p99 from 3 ms to ~100 ms); on an event loop of
their own in a thread they still shared the interpreter, and one ``/ws`` session's median step
doubled beside such a client (0.56-0.66 ms against 0.30-0.33 ms with the MCP client served by
another process, same box, same run). So the SDK's ``StreamableHTTPSessionManager``, the FastMCP
tools and one :class:`~server.mcp_tools.HospitalMCPEnvironment` per session live in a process of
their own (``spawn``: it inherits nothing of the server's objects), and the server's loop only
hands each request over a socket pair and sends the reply back.

What stays in the server (:class:`server.mcp_http.StreamableMCP`) is every decision about who may
do what: session ownership, the shared caps and idle expiry, protocol versions. The process
answers only what the server forwards, and closes an episode when the server says so (a
``DELETE``, an idle expiry, the app's end). If it dies, the server forgets its sessions (their
slots come back), answers 503 meanwhile, and starts a fresh process at the next request.

The wire between them: frames of a 4-byte big-endian length and a pickle (both ends are this
module; nothing a client sends is unpickled: its request travels as the bytes it sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import pickle
import signal
import socket
import struct
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from starlette.types import Message, Receive, Scope

logger = logging.getLogger("server.mcp")

START_LIMIT_S = 120.0
"""Seconds the transport's process may take to import its libraries and report ready."""
STOP_LIMIT_S = 10.0
"""Seconds it has to stop cleanly before it is terminated."""
SESSION_HEADER = b"mcp-session-id"
_SCOPE_KEYS = (
    "type", "asgi", "http_version", "server", "client", "scheme", "method", "root_path", "path",
    "raw_path", "query_string", "headers",
)  # fmt: skip
"""What of an HTTP request's ASGI scope crosses to the process (the app's own objects do not)."""
_LENGTH = struct.Struct("!I")


class TransportUnavailable(RuntimeError):
    """The transport's process could not answer (not started in time, or it ended)."""


def _frame(message: Any) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(payload)) + payload


async def _read(reader: asyncio.StreamReader) -> Any:
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    return pickle.loads(await reader.readexactly(length))


def replay(body: bytes) -> Receive:
    """An ASGI ``receive`` that gives one request's whole body, then a disconnect."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


# ------------------------------------------------------------------ the process
def _serve(conn: Connection, scenario: str, ttl_s: float, max_sessions: int) -> None:
    """The process's entry point (``spawn``): serve the server's frames until told to stop or the
    server goes away. Interrupts are the server's to handle (it stops this process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    conn.close()
    try:  # the loop uvicorn picks for the server when it is installed (the `server` extra)
        from uvloop import run
    except ImportError:
        run = asyncio.run
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        run(_transport(sock, scenario, ttl_s, max_sessions))


async def _transport(sock: socket.socket, scenario: str, ttl_s: float, max_sessions: int) -> None:
    from fastmcp.exceptions import ToolError
    from fastmcp.server.dependencies import get_http_request
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from server.mcp_tools import HospitalMCPEnvironment, build_tools

    episodes: dict[str, HospitalMCPEnvironment] = {}

    def episode() -> HospitalMCPEnvironment:
        """The episode of the MCP session the current tool call belongs to."""
        sid = get_http_request().headers.get("mcp-session-id")
        env = episodes.get(sid) if sid else None
        if env is None:
            raise ToolError("no MCP session: initialize first (the episode lives in the session)")
        return env

    tools = build_tools(episode)
    manager = StreamableHTTPSessionManager(
        tools._mcp_server, json_response=True, session_idle_timeout=ttl_s, max_sessions=max_sessions
    )
    reader, writer = await asyncio.open_connection(sock=sock)
    running: set[asyncio.Task[None]] = set()

    async def answer(rid: int, scope: Scope, body: bytes, opening: bool) -> None:
        replies: list[Message] = []
        opened: str | None = None

        async def keep(message: Message) -> None:
            nonlocal opened
            if opening and message["type"] == "http.response.start":
                sid = dict(message.get("headers", ())).get(SESSION_HEADER)
                opened = sid.decode("latin-1") if sid else None
            replies.append(message)

        try:
            await manager.handle_request(scope, replay(body), keep)
            if opened:
                episodes[opened] = HospitalMCPEnvironment(scenario=scenario)
        except Exception:
            logger.exception("the MCP transport failed a request")
            opened, replies = None, _error_reply()
        writer.write(_frame((rid, replies, opened)))

    async with manager.run():
        writer.write(_frame((0, "ready", None)))
        await writer.drain()
        while True:
            rid, kind, *args = await _read(reader)
            if kind == "stop":
                break
            if kind == "close":
                env = episodes.pop(args[0], None)
                if env is not None:
                    env.close()
                continue
            task = asyncio.create_task(answer(rid, *args))
            running.add(task)
            task.add_done_callback(running.discard)
    for env in episodes.values():
        env.close()
    writer.close()


def _error_reply() -> list[Message]:
    body = b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32603, "message": "internal error"}}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return [
        {"type": "http.response.start", "status": 500, "headers": headers},
        {"type": "http.response.body", "body": body},
    ]


# ------------------------------------------------------------------- the server's end
class TransportProcess:
    """The server's handle on the transport's process: started on demand (or by
    :meth:`started`), one request in flight per caller, many callers at once.

    Args:
        scenario, ttl_s, max_sessions: what the process's episodes and session manager use.
        lost: called on the server's loop when the process ends unasked (its sessions are gone).
    """

    def __init__(self, scenario: str, ttl_s: float, max_sessions: int, lost: Callable[[], None]) -> None:
        self._args = (scenario, ttl_s, max_sessions)
        self._lost = lost
        self._process: Any = None
        self._writer: asyncio.StreamWriter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading: asyncio.Task[None] | None = None
        self._starting: asyncio.Lock | None = None
        self._pending: dict[int, asyncio.Future[tuple[list[Message], str | None]]] = {}
        self._ids = itertools.count(1)
        self._stopping = False

    @property
    def pid(self) -> int | None:
        """The process's id while it runs."""
        return self._process.pid if self._writer is not None else None

    async def started(self) -> None:
        """Start the process if it is not running, and wait until it is ready."""
        if self._writer is not None:
            return
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._writer is None:
                await self._start()

    async def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        process = context.Process(
            target=_serve, args=(theirs, *self._args), name="mcp-transport", daemon=True
        )
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, process.start)
        theirs.close()
        sock = socket.socket(fileno=os.dup(ours.fileno()))
        ours.close()
        reader, writer = await asyncio.open_connection(sock=sock)
        try:
            ready = await asyncio.wait_for(_read(reader), START_LIMIT_S)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            writer.close()
            process.terminate()
            raise TransportUnavailable(f"it did not start ({type(exc).__name__})") from exc
        if ready[1] != "ready":
            writer.close()
            process.terminate()
            raise TransportUnavailable(f"it did not start: {ready!r}")
        self._process, self._writer, self._loop = process, writer, loop
        self._stopping = False
        self._reading = asyncio.create_task(self._read_replies(reader, writer))

    async def _read_replies(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                rid, replies, opened = await _read(reader)
                future = self._pending.pop(rid, None)
                if future is not None and not future.done():
                    future.set_result((replies, opened))
        except (asyncio.IncompleteReadError, ConnectionError, OSError, pickle.UnpicklingError):
            pass
        finally:
            if self._writer is writer:
                self._writer = None
                writer.close()
                for future in self._pending.values():
                    if not future.done():
                        future.set_exception(TransportUnavailable("it ended"))
                self._pending.clear()
                if not self._stopping:
                    logger.error("the MCP transport's process ended; its sessions are closed")
                    self._lost()

    async def request(self, scope: Scope, body: bytes, opening: bool) -> tuple[list[Message], str | None]:
        """The ASGI messages of the SDK's answer to one request, and the session it opened."""
        try:
            await self.started()
        except OSError as exc:  # the process could not even be spawned
            raise TransportUnavailable(str(exc)) from exc
        writer = self._writer
        if writer is None:
            raise TransportUnavailable("it ended")
        rid = next(self._ids)
        future: asyncio.Future[tuple[list[Message], str | None]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        slim = {key: scope[key] for key in _SCOPE_KEYS if key in scope}
        writer.write(_frame((rid, "request", slim, body, opening)))
        try:
            return await future
        finally:
            self._pending.pop(rid, None)

    def close_episode(self, sid: str) -> None:
        """End a session's episode in the process (from any thread; nothing if it is not running)."""
        writer, loop = self._writer, self._loop
        if writer is None or loop is None or loop.is_closed():
            return
        frame = _frame((0, "close", sid))
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: so did the process
            loop.call_soon_threadsafe(_write, writer, frame)

    async def stop(self) -> None:
        """Stop the process (its episodes end with it)."""
        writer, process, reading = self._writer, self._process, self._reading
        if writer is None or process is None:
            return
        self._stopping = True
        with contextlib.suppress(ConnectionError, OSError):
            writer.write(_frame((0, "stop")))
            await writer.drain()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, process.join, STOP_LIMIT_S)
        if process.is_alive():
            process.terminate()
            await loop.run_in_executor(None, process.join, STOP_LIMIT_S)
        if reading is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await reading
        self._process = self._reading = None


def _write(writer: asyncio.StreamWriter, frame: bytes) -> None:
    if not writer.is_closing():
        writer.write(frame)
