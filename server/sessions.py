"""Session bookkeeping: bounded pools that expire idle sessions, and a per-client cap.

Every way a client can hold server memory is a session of some *source*, and
each source is bounded twice — a capacity and an idle timeout:

- stateful HTTP episodes (``POST /reset``), web-view tabs (``/web``) and MCP
  sessions opened over HTTP (``openenv/session/create`` on ``POST /mcp``) live
  in a :class:`SessionStore`: a full store refuses (HTTP 429 / an error
  message), a session idle for ``ttl_s`` expires. Expiry is checked on every
  access, least recently used first, so no background task is needed and
  memory stays bounded;
- WebSocket connections (``/ws``, ``/mcp``) hold one slot of OpenEnv's pool for
  as long as they are open; ``server.app`` closes one idle for the timeout.

A :class:`ClientLedger` counts the sessions of every source per client (IP
address): with a per-client cap (on by default) a client holds at most that many
in all and at most half of any one source, so no client can fill a pool.

A :class:`SessionBudget` bounds the sessions of every such store together (an address is no
identity, so per-client caps alone let many addresses fill every store): opening one when the
budget is full evicts the longest-idle session of any store that nobody holds a live connection
to. A store's ``connected`` test names the sessions that have one (a web tab whose page is open):
those are never evicted, and expire after ``ttl_s``; the others after ``unconnected_ttl_s``.

A session belongs to the client that opened it: :meth:`SessionStore.get` and
:meth:`SessionStore.close` given another client's address answer as for an
unknown id, so an id seen elsewhere (a log, a shared screen) drives nothing.

Not thread-safe by design: the app calls these from the event loop only, with
no ``await`` between looking a session up and using it. (The web view's
handlers run in worker threads; they call the web store under its own lock.)
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SessionCapacityError(RuntimeError):
    """No slot left: the source is full (HTTP 429), or the client holds its cap."""

    def __init__(self, message: str, code: str = "SESSION_LIMIT") -> None:
        super().__init__(message)
        self.code = code


def client_share(capacity: int) -> int:
    """Slots of a source of ``capacity`` one client may hold under a per-client cap: half."""
    return max(1, capacity // 2)


class _Bucket:
    """A token bucket: ``rate`` tokens a second, at most ``burst`` saved."""

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate, self.burst, self.tokens, self.stamp = rate, burst, burst, now

    def take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class CreationLimiter:
    """How fast sessions may be *opened*: per client (address) and over all clients together.

    An address is no identity on loopback (every local user may bind any 127.x.y.z), so the
    per-client bucket slows one careless script and the global bucket bounds everyone together:
    with pools that evict their longest-idle session when full, it is the global rate that
    decides how long an idle session survives a flood. ``None`` rates: no limit.
    """

    MAX_CLIENTS = 4096
    """Buckets kept at most (the oldest dropped: a fresh bucket is full, never stricter)."""

    def __init__(
        self,
        per_client: float | None,
        overall: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_client, self.overall, self._clock = per_client, overall, clock
        now = clock()
        self._global = _Bucket(overall, 2 * overall, now) if overall else None
        self._clients: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, client: str) -> None:
        """Count one creation for ``client`` (raises :class:`SessionCapacityError`
        ``RATE_LIMITED`` if it is one too many)."""
        with self._lock:
            now = self._clock()
            if self.per_client:
                bucket = self._clients.get(client)
                if bucket is None:
                    bucket = self._clients[client] = _Bucket(self.per_client, 2 * self.per_client, now)
                    while len(self._clients) > self.MAX_CLIENTS:
                        self._clients.popitem(last=False)
                self._clients.move_to_end(client)
                if not bucket.take(now):
                    raise SessionCapacityError(
                        f"this client opens sessions too fast (at most {self.per_client:g} a second): "
                        "retry in a moment, or reuse a session (a reset restarts its episode)",
                        code="RATE_LIMITED",
                    )
            if self._global is not None and not self._global.take(now):
                raise SessionCapacityError(
                    f"sessions are being opened too fast on this server (at most {self.overall:g} a "
                    "second for all clients together): retry in a moment",
                    code="RATE_LIMITED",
                )


class ClientLedger:
    """Sessions held per client across every source; refuses a client at ``per_client`` in all,
    or at half of one source's capacity.

    ``per_client=None`` turns both caps off (the counts are still kept, for ``/sessions``).
    """

    def __init__(self, per_client: int | None = None, limiter: CreationLimiter | None = None) -> None:
        self.per_client = per_client
        self.limiter = limiter
        """How fast sessions without a live connection may be opened (:meth:`admit`); None: any."""
        self._held: Counter[str] = Counter()
        self._by_source: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()  # the web view's handlers count from worker threads

    def acquire(self, client: str, source: str = "", capacity: int | None = None) -> None:
        """Count one more session of ``source`` (of ``capacity`` slots) for ``client``.

        Raises :class:`SessionCapacityError` (``CLIENT_SESSION_LIMIT``) at either cap."""
        with self._lock:
            if self.per_client is not None:
                if self._held[client] >= self.per_client:
                    raise SessionCapacityError(
                        f"per-client session limit reached: this client holds {self._held[client]}/"
                        f"{self.per_client} sessions (HTTP, WebSocket, MCP and web together). Close one, "
                        "or wait until an idle one expires.",
                        code="CLIENT_SESSION_LIMIT",
                    )
                share = None if capacity is None else client_share(capacity)
                if share is not None and self._by_source[client, source] >= share:
                    raise SessionCapacityError(
                        f"per-client session limit reached: this client holds {share} of the {capacity} "
                        f"{source} slots, the most one client may hold (half), so others can still "
                        "connect. Close one, or wait until an idle one expires.",
                        code="CLIENT_SESSION_LIMIT",
                    )
            self._held[client] += 1
            self._by_source[client, source] += 1

    def admit(self, client: str) -> None:
        """Rate-limit one new session for ``client`` (raises ``RATE_LIMITED``)."""
        if self.limiter is not None:
            self.limiter.admit(client)

    def release(self, client: str, source: str = "") -> None:
        with self._lock:
            self._held[client] -= 1
            if self._held[client] <= 0:
                del self._held[client]
            self._by_source[client, source] -= 1
            if self._by_source[client, source] <= 0:
                del self._by_source[client, source]

    @contextmanager
    def holding(self, client: str, source: str = "", capacity: int | None = None) -> Iterator[None]:
        """Hold one session for ``client`` for the duration of the block."""
        self.acquire(client, source, capacity)
        try:
            yield
        finally:
            self.release(client, source)

    def clients(self) -> int:
        """Clients holding at least one session."""
        return len(self._held)


class SessionBudget:
    """How many sessions the stores registered with it may hold together (see the module docstring).

    Stores register themselves (``SessionStore(budget=...)``). Making room never blocks on another
    store's lock (a store busy in another thread is passed over), so stores opened from the event
    loop and from the web view's threads cannot deadlock each other.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.stores: list[SessionStore[Any]] = []
        self._lock = threading.Lock()

    def held(self) -> int:
        """Sessions held in the registered stores (expired ones not yet dropped included)."""
        return sum(store.held() for store in self.stores)

    def make_room(self, opening: SessionStore[Any]) -> None:
        """Before ``opening`` opens one more session: evict the longest-idle unconnected session
        of any store while the budget is full (raises :class:`SessionCapacityError` if none may go)."""
        with self._lock:
            while self.held() >= self.limit:
                if not self._evict_one(opening):
                    raise SessionCapacityError(
                        f"the server holds {self.held()}/{self.limit} sessions without a live connection "
                        "(HTTP, web and MCP together), all in use within the last "
                        f"{opening.evict_idle_s or 0:g} s: retry in a moment, or close one you hold",
                        code="SERVER_SESSION_LIMIT",
                    )

    def _evict_one(self, opening: SessionStore[Any]) -> bool:
        best: tuple[float, SessionStore[Any], str] | None = None
        for store in self.stores:
            if store is not opening and not store.lock.acquire(blocking=False):
                continue  # busy in another thread: never wait for it here
            try:
                found = store.evictable()
            finally:
                if store is not opening:
                    store.lock.release()
            if found is not None and (best is None or found[1] < best[0]):
                best = (found[1], store, found[0])
        if best is None:
            return False
        _, store, sid = best
        if store is not opening and not store.lock.acquire(blocking=False):
            return False
        try:
            return store.evict(sid)
        finally:
            if store is not opening:
                store.lock.release()


@dataclass
class _Session(Generic[T]):
    value: T
    client: str
    last_used: float


class SessionStore(Generic[T]):
    """Session id -> value, with a size limit, an idle timeout and per-client accounting.

    Args:
        factory: builds a session's value (an environment, a web episode pair, ...);
            ``None`` for a store that only tracks ids whose values live elsewhere.
        max_sessions: live sessions at most.
        ttl_s: idle seconds before a session expires.
        clock: monotonic seconds (injected by tests).
        ledger: the per-client counts shared by every source (default: a private one, no cap).
        close: releases a value when its session closes or expires.
        name: how errors name this source ("HTTP session", "web session", ...).
        close_hint: how a client closes one of its sessions, for the error at capacity.
        source: the ledger's name for the pool these sessions take slots of (default ``name``;
            ``capacity`` the pool's size, default ``max_sessions``): the per-client share is of it.
    """

    def __init__(
        self,
        factory: Callable[[], T] | None,
        max_sessions: int,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
        ledger: ClientLedger | None = None,
        close: Callable[[T], object] | None = None,
        name: str = "HTTP session",
        close_hint: str = "",
        source: str | None = None,
        capacity: int | None = None,
        evict_idle_s: float | None = None,
        rate_limited: bool = False,
        budget: SessionBudget | None = None,
        connected: Callable[[T], bool] | None = None,
        unconnected_ttl_s: float | None = None,
    ) -> None:
        self._factory = factory
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self._clock = clock
        self._ledger = ledger or ClientLedger()
        self._close = close
        self.name = name
        self.close_hint = close_hint
        self.source = source or name
        self.capacity = capacity or max_sessions
        self.evict_idle_s = evict_idle_s
        self.rate_limited = rate_limited
        self._sessions: OrderedDict[str, _Session[T]] = OrderedDict()  # least recently used first
        self.lock = threading.RLock()
        self.budget = budget
        self._connected = connected
        self.unconnected_ttl_s = min(ttl_s, unconnected_ttl_s) if unconnected_ttl_s else ttl_s
        if budget is not None:
            budget.stores.append(self)

    def __len__(self) -> int:
        """Live sessions (after dropping the expired ones)."""
        self.expire()
        return len(self._sessions)

    def held(self) -> int:
        """Sessions held, without expiring any (lock-free: a budget counts every store)."""
        return len(self._sessions)

    def connected(self, value: T) -> bool:
        """Whether someone holds a live connection to the session (never evicted; long ttl)."""
        return self._connected is not None and self._connected(value)

    def expire(self) -> list[T]:
        """Drop sessions idle longer than their ttl (``ttl_s`` for a connected one, else
        ``unconnected_ttl_s``); returns their values."""
        with self.lock:
            now = self._clock()
            dropped: list[tuple[str, T]] = []
            for sid, session in self._sessions.items():  # least recently used first
                idle = now - session.last_used
                if idle < self.unconnected_ttl_s:
                    break  # every later session is fresher still
                if idle < self.ttl_s and self.connected(session.value):
                    continue
                dropped.append((sid, session.value))
            for sid, _ in dropped:
                self._forget(sid)
            return [value for _, value in dropped]

    def evictable(self) -> tuple[str, float] | None:
        """The longest-idle session nobody holds a connection to, if idle ``evict_idle_s`` or more:
        (its id, when it was last used); None if there is none (or this store never evicts)."""
        with self.lock:
            if self.evict_idle_s is None:
                return None
            cutoff = self._clock() - self.evict_idle_s
            for sid, session in self._sessions.items():
                if session.last_used > cutoff:
                    return None
                if not self.connected(session.value):
                    return sid, session.last_used
            return None

    def evict(self, sid: str) -> bool:
        """Close one session to make room for a newcomer (see :meth:`evictable`)."""
        with self.lock:
            return self._forget(sid) is not None

    def open(self, client: str = "", value: T | None = None) -> tuple[str, T]:
        """A new session for ``client`` (raises :class:`SessionCapacityError` when full).

        ``value`` registers one made elsewhere (a store without a factory)."""
        with self.lock:
            self.expire()
            if len(self._sessions) >= self.max_sessions:
                self.evict_longest_idle()
            if len(self._sessions) < self.max_sessions and self.budget is not None:
                self.budget.make_room(self)
            if len(self._sessions) >= self.max_sessions:
                raise SessionCapacityError(
                    f"{self.name} limit reached: {len(self._sessions)}/{self.max_sessions} open. Close "
                    f"yours when done{self.close_hint}, or wait: idle sessions expire after {self.ttl_s:g} s."
                )
            if self.rate_limited:
                self._ledger.admit(client)
            self._ledger.acquire(client, self.source, self.capacity)
            try:
                if value is None:
                    if self._factory is None:
                        raise TypeError("this store has no factory: give the session's value")
                    value = self._factory()
            except BaseException:
                self._ledger.release(client, self.source)
                raise
            sid = str(uuid.uuid4())
            self._sessions[sid] = _Session(value, client, self._clock())
            return sid, value

    def evict_longest_idle(self) -> str | None:
        """Close the least recently used unconnected session if idle ``evict_idle_s`` or more
        (a full store makes room for a newcomer instead of refusing it: an address is no
        identity, so sessions left behind from many addresses must not lock everyone out).
        Returns the evicted session's id (None: nothing was)."""
        found = self.evictable()
        if found is None:
            return None
        self.evict(found[0])
        return found[0]

    def add(self, sid: str, value: T, client: str = "") -> None:
        """Track a session whose id was made elsewhere (e.g. by OpenEnv's MCP pool).

        The caller has already counted it with ``ledger.acquire(client, store.source, ...)``."""
        with self.lock:
            self._sessions[sid] = _Session(value, client, self._clock())

    def get(self, sid: str, client: str | None = None) -> T | None:
        """The session's value (marking it used), or None if unknown, expired, or (given
        ``client``) another client's."""
        with self.lock:
            self.expire()
            session = self._sessions.get(sid)
            if session is None or (client is not None and session.client != client):
                return None
            session.last_used = self._clock()
            self._sessions.move_to_end(sid)
            return session.value

    def close(self, sid: str, client: str | None = None) -> bool:
        """Forget a session (releasing its value); False if there was none (or, given ``client``,
        it is another client's)."""
        with self.lock:
            session = self._sessions.get(sid)
            if session is None or (client is not None and session.client != client):
                return False
            return self._forget(sid) is not None

    def ids(self) -> list[str]:
        """The live sessions' ids (for shutting a source down)."""
        with self.lock:
            return list(self._sessions)

    def owns(self, sid: str, client: str) -> bool:
        """Whether ``sid`` is a live session of ``client`` (without marking it used)."""
        with self.lock:
            session = self._sessions.get(sid)
            return session is not None and session.client == client

    def _forget(self, sid: str) -> _Session[T] | None:
        session = self._sessions.pop(sid, None)
        if session is not None:
            self._ledger.release(session.client, self.source)
            if self._close is not None:
                self._close(session.value)
        return session


HTTPSessionStore = SessionStore
"""The stateful HTTP episodes' store (a :class:`SessionStore` of environments)."""
