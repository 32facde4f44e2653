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
answers only what the server forwards or asks it about, and closes an episode when the server says
so (a ``DELETE``, an idle expiry, the app's end). If it dies, the server forgets its sessions
(their slots come back), answers 503 meanwhile, and a ready standby takes over (or a fresh process
starts at the next request). The connections it held are still the server's to answer
(:meth:`TransportProcess._rescue`): none is dropped without a response.

Forwarding each request still cost the server's loop ~0.3 ms of CPU (uvicorn, the guards, the
hand-over, the reply), so under ``serve`` a connection whose first request is standard MCP is
handed over whole (:mod:`server.mcp_handoff`): the process reads and answers its requests, and asks
the server only for each one's decision (:class:`Rules`). Requests on connections the server kept
are forwarded as above.

The wire between them: frames of a 4-byte big-endian length and a pickle (both ends are this
module; nothing a client sends is unpickled: its request travels as the bytes it sent), and a Unix
socket pair that carries the handed-over connections each way.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import logging.config
import multiprocessing
import os
import pickle
import signal
import socket
import struct
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from typing import Any, Protocol

from starlette.types import Message, Receive, Scope, Send

from server import mcp_handoff
from server.guards import json_reply, replay

logger = logging.getLogger("server.mcp")

START_LIMIT_S = 120.0
"""Seconds the transport's process may take to import its libraries and report ready."""
PROCESS_NICE = 10
"""Niceness added to the transport's process (POSIX), as to the web host's and the agents': the
MCP SDK's work (~2 ms of Python per standard MCP request) yields to the server's own loop on a
busy machine, which decides every request of every channel, MCP's included (issue 24: one ``/ws``
session's median step beside a client cycling MCP sessions and a planner tab, 0.27-0.38 ms with
this process at the server's priority, 0.25-0.27 ms with it here). Unloaded, it changes nothing."""
STANDBY_DELAY_S = 30.0
"""Seconds after :meth:`TransportProcess.keep_standby` before the first standby is spawned."""
STOP_LIMIT_S = 10.0
"""Seconds it has to stop cleanly before it is terminated."""
SESSION_HEADER = mcp_handoff.SESSION_HEADER
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


# ------------------------------------------------------------------ the process
def _serve(conn: Connection, channel: socket.socket, args: TransportArgs) -> None:
    """The process's entry point (``spawn``): serve the server's frames and the connections it
    hands over until told to stop or the server goes away. Interrupts are the server's to handle
    (it stops this process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError, AttributeError):  # best effort: not on every platform
        os.nice(PROCESS_NICE)
    if args.access_log:
        from server.logs import log_config

        logging.config.dictConfig(log_config())
    from server.logs import redact_tokens

    redact_tokens()
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    conn.close()
    channel.setblocking(False)
    try:  # the loop uvicorn picks for the server when it is installed (the `server` extra)
        from uvloop import run
    except ImportError:
        run = asyncio.run
    try:
        run(_transport(sock, channel, args))
    except Exception as exc:  # the server went away: its end of the pipe closed
        if not _server_gone(exc):
            raise


def _server_gone(exc: BaseException) -> bool:
    """Whether ``exc`` says only that the server's end of the pipe closed (alone, or every one of
    an exception group's: the SDK's task group wraps what it sees)."""
    if isinstance(exc, (ConnectionError, asyncio.IncompleteReadError)):
        return True
    group = getattr(exc, "exceptions", None)
    return bool(group) and all(_server_gone(inner) for inner in group)


async def _transport(sock: socket.socket, channel: socket.socket, args: TransportArgs) -> None:
    """Serve the server's frames and the handed-over connections (see :class:`_Worker`)."""
    worker = _Worker(channel, args)
    await worker.run(*(await asyncio.open_connection(sock=sock)))


class _Worker:
    """The process's side: the SDK's session manager, one episode per MCP session, the frames to
    and from the server (requests it forwards, the :class:`Rules` questions asked of it) and the
    connections it hands over. One event loop; nothing here is shared with another thread."""

    def __init__(self, channel: socket.socket, args: TransportArgs) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        from server.guards import RequestGuardMiddleware, SitePolicy
        from server.mcp_tools import HospitalMCPEnvironment, build_tools

        self._channel = channel
        self._args = args
        self._make_episode = functools.partial(HospitalMCPEnvironment, scenario=args.scenario)
        self.episodes: dict[str, HospitalMCPEnvironment] = {}
        tools = build_tools(self.episode)
        self.manager = StreamableHTTPSessionManager(
            tools._mcp_server,
            json_response=True,
            session_idle_timeout=args.ttl_s,
            max_sessions=args.max_sessions,
        )
        self._running: set[asyncio.Task[None]] = set()
        self._asked: dict[int, asyncio.Future[tuple[str, Any]]] = {}
        self._questions = itertools.count(1)
        self._writer: asyncio.StreamWriter | None = None
        self._app = RequestGuardMiddleware(
            _HandedOver(self.ask, self.tell, self.sdk),
            args.max_bytes,
            site=SitePolicy(args.hosts, args.origins, args.token),
        )

    def episode(self) -> Any:
        """The episode of the MCP session the current tool call belongs to."""
        from fastmcp.exceptions import ToolError
        from fastmcp.server.dependencies import get_http_request

        sid = get_http_request().headers.get("mcp-session-id")
        env = self.episodes.get(sid) if sid else None
        if env is None:
            raise ToolError("no MCP session: initialize first (the episode lives in the session)")
        return env

    def _write(self, frame: tuple[Any, ...]) -> None:
        assert self._writer is not None
        self._writer.write(_frame(frame))

    def _spawn_task(self, work: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(work)  # type: ignore[arg-type]
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def sdk(self, scope: Scope, body: bytes, opening: bool) -> tuple[list[Message], str | None]:
        """The SDK's answer to one request, and the session it opened (the episode made here)."""
        replies: list[Message] = []
        opened: list[str | None] = [None]

        async def keep(message: Message) -> None:
            if opening and message["type"] == "http.response.start":
                sid = dict(message.get("headers", ())).get(SESSION_HEADER)
                opened[0] = sid.decode("latin-1") if sid else None
            replies.append(message)

        try:
            await self.manager.handle_request(scope, replay(body), keep)
            if opened[0]:
                self.episodes[opened[0]] = self._make_episode()
        except Exception:
            logger.exception("the MCP transport failed a request")
            return mcp_handoff.error_reply(), None
        return replies, opened[0]

    async def answer(self, rid: int, scope: Scope, body: bytes, opening: bool) -> None:
        """Answer a request the server forwarded (a frame back with the SDK's reply)."""
        replies, opened = await self.sdk(scope, body, opening)
        self._write(("reply", rid, replies, opened))

    async def ask(self, *question: Any) -> tuple[str, Any]:
        """The server's decision on a request this process was handed (see :class:`Rules`)."""
        qid = next(self._questions)
        future: asyncio.Future[tuple[str, Any]] = asyncio.get_running_loop().create_future()
        self._asked[qid] = future
        self._write(("ask", qid, *question))
        try:
            return await future
        finally:
            self._asked.pop(qid, None)

    def tell(self, *news: Any) -> None:
        """News for the server's :class:`Rules` (a session opened or ended)."""
        self._write(("tell", *news))

    def _send_back(self, conn: socket.socket, data: bytes) -> bool:
        return mcp_handoff.send_connection(self._channel, conn.fileno(), data)

    def _news(self, cid: int, state: str) -> None:
        """Where a handed-over connection is (the server answers it if this process dies)."""
        self._write(("conn", cid, state))

    def _arrived(self) -> None:
        """Connections the server handed over: serve each on a task of its own."""
        received = mcp_handoff.receive_connections(self._channel)
        if received is None:
            asyncio.get_running_loop().remove_reader(self._channel.fileno())
            return
        for conn, prefix, cid in received:
            self._spawn_task(
                mcp_handoff.serve_connection(
                    conn,
                    prefix,
                    self._app,
                    self._args.max_bytes,
                    self._send_back,
                    functools.partial(self._news, cid),
                )
            )

    def _on_frame(self, rid: int, kind: str, rest: list[Any]) -> bool:
        """Act on one frame of the server's; False when told to stop."""
        if kind == "stop":
            return False
        if kind == "close":
            env = self.episodes.pop(rest[0], None)
            if env is not None:
                env.close()
        elif kind == "answer":
            future = self._asked.get(rid)
            if future is not None and not future.done():
                future.set_result(rest[0])
        else:
            self._spawn_task(self.answer(rid, *rest))
        return True

    async def run(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve until the server says stop (or goes away: the read raises)."""
        self._writer = writer
        loop = asyncio.get_running_loop()
        async with self.manager.run():
            loop.add_reader(self._channel.fileno(), self._arrived)
            self._write(("ready",))
            await writer.drain()
            while True:
                rid, kind, *rest = await _read(reader)
                if not self._on_frame(rid, kind, rest):
                    break
            loop.remove_reader(self._channel.fileno())
        for env in self.episodes.values():
            env.close()
        writer.close()


class _HandedOver:
    """The process's ASGI app for requests on connections it was handed (behind the guards): the
    server decides (:class:`Rules`), the SDK answers, the server hears what came of it."""

    def __init__(
        self,
        ask: Callable[..., Awaitable[tuple[str, Any]]],
        tell: Callable[..., None],
        sdk: Callable[[Scope, bytes, bool], Awaitable[tuple[list[Message], str | None]]],
    ) -> None:
        self._ask, self._tell, self._sdk = ask, tell, sdk

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = (await receive()).get("body", b"")
        client = scope["client"][0] if scope.get("client") else ""
        sid = mcp_handoff.header(scope, SESSION_HEADER)
        version = mcp_handoff.header(scope, mcp_handoff.VERSION_HEADER)
        kind, detail = await self._ask(client, scope["method"], version, sid)
        if kind == "refuse":
            status, payload = detail
            await json_reply(send, status, payload)
            return
        replies, opened = await self._sdk(scope, body, kind == "open")
        if kind == "open":
            self._tell("opened", client, opened)  # before the client has the reply (frames keep order)
        elif scope["method"] == "DELETE":
            self._tell("ended", client, sid)
        for message in replies:
            await send(message)


# ------------------------------------------------------------------- the server's end
@dataclass(frozen=True)
class TransportArgs:
    """What the process's episodes, session manager and guards use (the server's settings)."""

    scenario: str
    ttl_s: float
    max_sessions: int
    max_bytes: int
    hosts: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()
    token: str | None = field(default=None, repr=False)
    access_log: bool = False
    """Write uvicorn's access-log lines for the requests the process answers (set at its start:
    whether the server writes them)."""


class Rules(Protocol):
    """What the server decides for a request the process answers on a handed-over connection
    (:class:`server.mcp_http.StreamableMCP`)."""

    def decide(self, client: str, method: str, version: str | None, sid: str | None) -> tuple[str, Any]:
        """``("refuse", (status, body))``, ``("open", None)`` (a slot held for the client until
        :meth:`opened`) or ``("serve", None)``."""
        ...

    def opened(self, client: str, sid: str | None) -> None:
        """What came of an ``open``: the new session's id, or None (the slot comes back)."""
        ...

    def ended(self, client: str, sid: str | None) -> None:
        """A ``DELETE`` of the client's session was answered."""
        ...


class TransportProcess:
    """The server's handle on the transport's process: started on demand (or by
    :meth:`started`), one request in flight per caller, many callers at once; it takes whole
    connections too (:meth:`hand_over`, :mod:`server.mcp_handoff`) and serves those it sends back.

    Args:
        args: what the process's episodes, session manager and guards use.
        rules: the server's decisions for requests on handed-over connections.
        lost: called on the server's loop when the process ends unasked (its sessions are gone).
    """

    def __init__(self, args: TransportArgs, rules: Rules, lost: Callable[[], None]) -> None:
        self._args = args
        self._rules = rules
        self._lost = lost
        self._process: Any = None
        self._writer: asyncio.Transport | None = None
        self._channel: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ended: asyncio.Future[None] | None = None
        self._starting: asyncio.Lock | None = None
        self._pending: dict[int, asyncio.Future[tuple[list[Message], str | None]]] = {}
        self._ids = itertools.count(1)
        self._stopping = False
        self._uvicorn: dict[str, Any] | None = None
        self._opening: Counter[str] = Counter()  # per client: opens decided, not yet reported
        self._keep_standby = False
        self._standby: asyncio.Task[_Spawned] | None = None
        self._handed: dict[int, _Handed] = {}  # connections the process holds, by id
        self._cids = itertools.count(1)

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
        standby, self._standby = self._standby, None
        spawned: _Spawned | None = None
        if standby is not None:
            with contextlib.suppress(TransportUnavailable, OSError, asyncio.CancelledError):
                spawned = await standby
            if spawned is not None and not spawned.process.is_alive():
                spawned.discard()
                spawned = None
        if spawned is None:
            spawned = await self._spawn()
        self._adopt(spawned)

    def keep_standby(self) -> None:
        """From now on keep a second process started and ready, taken over at once if the running
        one dies (so new sessions wait for no start-up: 18-41 s measured, most of it imports under
        load). Costs that process's memory; the served app asks for it, tests' apps do not."""
        self._keep_standby = True
        # Not at once: spawned during the server's start-up its imports compete with it (a warm
        # app's first health answer, loaded 2-core box: 20-44 s without a standby, 56-58 s with
        # one spawned at once, 35-48 s with this delay; noisy).
        asyncio.get_running_loop().call_later(STANDBY_DELAY_S, self._refill_standby)

    def _refill_standby(self) -> None:
        if self._keep_standby and self._standby is None and not self._stopping:
            self._standby = asyncio.get_running_loop().create_task(self._spawn())

    def _adopt(self, spawned: _Spawned) -> None:
        process, writer, frames, channel = spawned.process, spawned.writer, spawned.frames, spawned.channel
        loop = asyncio.get_running_loop()
        self._process, self._writer, self._loop, self._channel = process, writer, loop, channel
        self._stopping = False
        self._ended = loop.create_future()
        frames.serve(self._on_frame, functools.partial(self._on_lost, writer))
        loop.add_reader(channel.fileno(), self._returned, channel)
        self._refill_standby()

    async def _spawn(self) -> _Spawned:
        """Start a process and wait until it is ready (not yet serving: see :meth:`_adopt`)."""
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        channel, their_channel = mcp_handoff.channel_pair()
        access = logging.getLogger("uvicorn.access")
        args = replace(self._args, access_log=access.isEnabledFor(logging.INFO) and bool(access.handlers))
        process = context.Process(
            target=_serve, args=(theirs, their_channel, args), name="mcp-transport", daemon=True
        )
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, process.start)
        finally:
            theirs.close()
            their_channel.close()
        sock = socket.socket(fileno=os.dup(ours.fileno()))
        ours.close()
        ready: asyncio.Future[Any] = loop.create_future()
        frames = _Frames(ready)
        writer, _ = await loop.create_connection(lambda: frames, sock=sock)
        try:
            first = await asyncio.wait_for(ready, START_LIMIT_S)
        except (TimeoutError, ConnectionError) as exc:
            writer.close()
            channel.close()
            process.terminate()
            raise TransportUnavailable(f"it did not start ({type(exc).__name__})") from exc
        if first != ("ready",):
            writer.close()
            channel.close()
            process.terminate()
            raise TransportUnavailable(f"it did not start: {first!r}")
        return _Spawned(process, writer, frames, channel)

    def _returned(self, channel: socket.socket) -> None:
        """Connections the process sent back (a request on them that is not standard MCP)."""
        if not mcp_handoff.accept_returned(channel, lambda: self._uvicorn):
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(channel.fileno())

    def takes_connections(self) -> bool:
        """Whether :meth:`hand_over` can give the process a connection now."""
        return self._writer is not None and self._channel is not None

    def hand_over(self, transport: asyncio.Transport, data: bytes, uvicorn: dict[str, Any]) -> bool:
        """Give the process a client connection (its socket and the bytes read from it), or say
        it cannot (False: the caller serves it)."""
        sock = transport.get_extra_info("socket")
        if self._channel is None or sock is None or transport.get_extra_info("sslcontext") is not None:
            return False  # (a TLS connection's state is the server's: it stays)
        self._uvicorn = uvicorn  # to serve the connections the process sends back
        cid = next(self._cids)
        # Our own copy of the socket until the process is done with it: were it to die, the
        # connection is still ours to answer (a request it never read is served here, one it was
        # answering gets a 503), where before it was dropped with no response.
        kept = socket.socket(fileno=os.dup(sock.fileno()))
        if not mcp_handoff.send_connection(self._channel, sock.fileno(), data, cid):
            kept.close()
            return False
        self._handed[cid] = _Handed(kept, bytes(data))
        return True

    def _on_frame(self, frame: tuple[Any, ...]) -> None:
        """A frame from the process: a reply to :meth:`request`, a question of :class:`Rules`, or
        news for them (answered at once, on the loop: no task per frame)."""
        kind, *rest = frame
        if kind == "reply":
            rid, replies, opened = rest
            future = self._pending.pop(rid, None)
            if future is not None and not future.done():
                future.set_result((replies, opened))
        elif kind == "ask":
            qid, *question = rest
            decision = self._rules.decide(*question)
            if decision[0] == "open":  # a slot held until the process says what came of it
                self._opening[question[0]] += 1
            if self._writer is not None:
                self._writer.write(_frame((qid, "answer", decision)))
        elif kind == "conn":
            cid, state = rest
            handed = self._handed.get(cid)
            if handed is not None:
                if state == "gone":
                    del self._handed[cid]
                    handed.sock.close()
                else:
                    handed.state = state
        elif kind == "tell":
            news, client, sid = rest
            if news == "opened":
                self._opening[client] -= 1
                if self._opening[client] <= 0:
                    del self._opening[client]
                self._rules.opened(client, sid)
            else:
                self._rules.ended(client, sid)

    def _on_lost(self, writer: asyncio.Transport) -> None:
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(None)
        if self._writer is not writer:
            return
        self._writer = None
        self._close_channel()
        writer.close()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(TransportUnavailable("it ended"))
        self._pending.clear()
        opening, self._opening = self._opening, Counter()
        for client, count in opening.items():  # opens it never reported: their slots come back
            for _ in range(count):
                self._rules.opened(client, None)
        handed, self._handed = self._handed, {}
        if not self._stopping:
            logger.error("the MCP transport's process ended; its sessions are closed")
            self._lost()
            self._rescue(handed)
            standby = self._standby
            if (
                standby is not None
                and standby.done()
                and not standby.cancelled()
                and standby.exception() is None
            ):
                self._standby = None
                spawned = standby.result()
                if spawned.process.is_alive():
                    self._adopt(spawned)  # at once: the next request finds a ready process
                    logger.info("the standby MCP transport process took over")
                else:
                    spawned.discard()
                    self._refill_standby()
        else:
            for connection in handed.values():
                connection.sock.close()

    def _rescue(self, handed: dict[int, _Handed]) -> None:
        """The connections the dead process held: one whose request it never read is served here
        (its bytes are all the server read; the request goes on to the next process), one it was
        answering gets a 503 with ``Retry-After``, one between requests is closed (a client opens
        another)."""
        served = 0
        for connection in handed.values():
            if connection.state == "sent":
                mcp_handoff.serve_here(connection.sock, connection.data, self._uvicorn)
                served += 1
            elif connection.state == "busy":
                mcp_handoff.unavailable(connection.sock)
            else:
                connection.sock.close()
        if handed:
            logger.info(
                "%d connections the MCP transport's process held: %d served here, %d answered 503",
                len(handed),
                served,
                sum(c.state == "busy" for c in handed.values()),
            )

    def _close_channel(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            if self._loop is not None and not self._loop.is_closed():
                with contextlib.suppress(ValueError, OSError):
                    self._loop.remove_reader(channel.fileno())
            channel.close()

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
        """Stop the process (its episodes, and the connections it was handed, end with it), and
        the standby if one is kept."""
        self._keep_standby = False
        standby, self._standby = self._standby, None
        if standby is not None:
            standby.cancel()
            with contextlib.suppress(BaseException):
                spawned = await standby
                spawned.discard()
        writer, process, ended = self._writer, self._process, self._ended
        if writer is None or process is None:
            return
        self._stopping = True
        with contextlib.suppress(ConnectionError, OSError):
            writer.write(_frame((0, "stop")))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, process.join, STOP_LIMIT_S)
        if process.is_alive():
            process.terminate()
            await loop.run_in_executor(None, process.join, STOP_LIMIT_S)
        if ended is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(ended, STOP_LIMIT_S)
        self._close_channel()
        self._process = self._ended = None


@dataclass
class _Handed:
    """A connection handed to the process, as the server keeps it until the process is done: its
    own copy of the socket, the bytes it had read, and the process's last news of it."""

    sock: socket.socket
    data: bytes
    state: str = "sent"
    """``sent`` (no request read there yet), ``busy`` (answering one), ``replying`` (writing)."""


@dataclass
class _Spawned:
    """A started, ready transport process and the server's ends of its pipe and channel."""

    process: Any
    writer: asyncio.Transport
    frames: _Frames
    channel: socket.socket

    def discard(self) -> None:
        """Stop it unused (a standby never taken over)."""
        with contextlib.suppress(Exception):
            self.writer.write(_frame((0, "stop")))
        with contextlib.suppress(Exception):
            self.writer.close()
        with contextlib.suppress(Exception):
            self.channel.close()
        with contextlib.suppress(Exception):
            self.process.terminate()


class _Frames(asyncio.Protocol):
    """The server's end of the frame pipe: the first frame resolves ``ready``; later ones go to
    the handler given by :meth:`serve`, in order, as they arrive."""

    def __init__(self, ready: asyncio.Future[Any]) -> None:
        self._ready = ready
        self._buffer = bytearray()
        self._handle: Callable[[Any], None] | None = None
        self._lost: Callable[[], None] | None = None
        self._early: list[Any] = []

    def serve(self, handle: Callable[[Any], None], lost: Callable[[], None]) -> None:
        self._handle, self._lost = handle, lost
        for frame in self._early:
            handle(frame)
        self._early.clear()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(self._buffer)
            end = _LENGTH.size + length
            if len(self._buffer) < end:
                return
            frame = pickle.loads(self._buffer[_LENGTH.size : end])
            del self._buffer[:end]
            if not self._ready.done():
                self._ready.set_result(frame)
            elif self._handle is not None:
                self._handle(frame)
            else:
                self._early.append(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._ready.done():
            self._ready.set_exception(ConnectionError("the transport's process ended"))
        if self._lost is not None:
            self._lost()


def _write(writer: asyncio.Transport, frame: bytes) -> None:
    if not writer.is_closing():
        writer.write(frame)
