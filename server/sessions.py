"""Stateful HTTP episodes: what OpenEnv's plain HTTP routes lack.

OpenEnv's ``POST /reset`` and ``POST /step`` build a fresh environment per
call, so an episode cannot continue over plain HTTP. This store keeps one
:class:`~server.environment.HospitalEnvironment` per HTTP session id:
``POST /reset`` opens one (or reuses the caller's), ``POST /step`` and
``GET /state`` address it by id.

Bounded twice: at most ``max_sessions`` live at once (another reset gets
HTTP 429), and a session idle for ``ttl_s`` seconds expires (its id then
answers 404). Expiry is checked on every access, in LRU order, so no
background task is needed and memory stays bounded.

Not thread-safe by design: the app calls it from the event loop only, and
every call is synchronous (no ``await`` between looking a session up and
stepping it), so requests to one session never interleave.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from server.environment import HospitalEnvironment


class SessionCapacityError(RuntimeError):
    """All HTTP session slots are taken (HTTP 429)."""


@dataclass
class _Session:
    env: HospitalEnvironment
    last_used: float


class HTTPSessionStore:
    """Session id -> environment, with a size limit and an idle timeout.

    Args:
        factory: builds a session's environment.
        max_sessions: live sessions at most.
        ttl_s: idle seconds before a session expires.
        clock: monotonic seconds (injected by tests).
    """

    def __init__(
        self,
        factory: Callable[[], HospitalEnvironment],
        max_sessions: int,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = factory
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self._clock = clock
        self._sessions: OrderedDict[str, _Session] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        self.expire()
        return len(self._sessions)

    def expire(self) -> int:
        """Drop sessions idle longer than the ttl; returns how many."""
        deadline = self._clock() - self.ttl_s
        dropped = 0
        while self._sessions:
            sid, session = next(iter(self._sessions.items()))
            if session.last_used > deadline:
                break
            del self._sessions[sid]
            session.env.close()
            dropped += 1
        return dropped

    def open(self) -> tuple[str, HospitalEnvironment]:
        """A new session (raises :class:`SessionCapacityError` when full)."""
        self.expire()
        if len(self._sessions) >= self.max_sessions:
            raise SessionCapacityError(
                f"HTTP session limit reached: {len(self._sessions)}/{self.max_sessions} sessions open. "
                f"Close yours with DELETE /sessions/{{id}} when done, or wait: idle sessions expire after "
                f"{self.ttl_s:g} s. The WebSocket /ws has its own limit."
            )
        sid = str(uuid.uuid4())
        env = self._factory()
        self._sessions[sid] = _Session(env, self._clock())
        return sid, env

    def get(self, sid: str) -> HospitalEnvironment | None:
        """The session's environment (marking it used), or None if unknown or expired."""
        self.expire()
        session = self._sessions.get(sid)
        if session is None:
            return None
        session.last_used = self._clock()
        self._sessions.move_to_end(sid)
        return session.env

    def close(self, sid: str) -> bool:
        """Forget a session; False if there was none."""
        session = self._sessions.pop(sid, None)
        if session is None:
            return False
        session.env.close()
        return True
