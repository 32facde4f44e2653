"""Isolated evaluation (SPEC §12): the policy runs in a process of its own.

The grader keeps the episode; the policy's process (started with :mod:`multiprocessing`'s
``spawn`` method, so it shares no memory with the grader and inherits none of its objects)
receives only what crosses the pipe: its seed at each episode's start, each decision's
observation and mask, and the sealed present (:meth:`~hospital_marl.core.hospital.Seal.export`,
from which it makes its own ``imagine()`` copies). Whatever it does to its own interpreter
(frames, ``gc``, monkey-patching modules) touches nothing of the grader's.

Every request has a time limit. A policy that raises, returns something that is not an
action, or does not answer in time gets a counted fault (``errors``, ``garbage``, ``timeouts``
in the report's ``policy_faults``) and the invalid action is played for it (the no-op, counted
as an invalid action, SPEC §3). A process that timed out may be stuck: it is ended, and a fresh
one continues the episode after a new ``reset`` (the policy's memory of the episode is lost:
its own doing). After :data:`MAX_TIMEOUTS` timeouts in an episode the policy is not asked
again until the next episode (every decision left counts as a timeout), so a policy that hangs
costs the grader at most that many time limits per episode.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import time
import traceback
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from hospital_marl.core.hospital import Seal, mirror

TIME_LIMIT = 10.0
"""Seconds a policy may take per decision (and per episode start) by default."""
START_LIMIT = 300.0
"""Seconds the policy's process may take to start and load the policy (models, imports)."""
MAX_TIMEOUTS = 3
"""Timeouts in one episode after which the policy is no longer asked in that episode."""
INVALID = -1
"""The action played for a fault: the environments count it as invalid and play the no-op."""
FAULTS = ("timeouts", "errors", "garbage")


def as_action(value: Any) -> int | None:
    """An integer action (int, NumPy integer, one-element integer array), or None for garbage."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.ndarray) and value.size == 1 and np.issubdtype(value.dtype, np.integer):
        return int(value.reshape(()).item())
    return None


def _serve(conn: Connection, policy_spec: Any, track: str) -> None:
    """The policy's process: load the policy, then answer requests until told to stop."""
    try:
        from policies import as_policy, load

        policy = as_policy(load(policy_spec) if isinstance(policy_spec, str) else policy_spec, track)
        _reply(conn, 0, "ready", [str(policy.name), [str(t) for t in policy.tracks]])
    except BaseException:  # the policy could not even be loaded: say why, and stop
        _reply(conn, 0, "error", traceback.format_exc(limit=8))
        return
    handle = None
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        number, kind, args = request[0], request[1], request[2:]
        if kind == "stop":
            return
        try:
            if kind == "reset":
                seed, present = args
                handle = mirror(present)
                policy.reset(seed=seed, hospital=handle)
                _reply(conn, number, "ok", None)
                continue
            handle = mirror(args[-1], handle)
            value = policy.act(*args[:2]) if kind == "act" else policy.act_role(*args[:3])
            action = as_action(value)
            if action is None:
                _reply(conn, number, "garbage", repr(value)[:200])
            else:
                _reply(conn, number, "ok", action)
        except BaseException:
            _reply(conn, number, "error", traceback.format_exc(limit=8))


def _reply(conn: Connection, number: int, status: str, payload: Any) -> None:
    """Answers travel as JSON, never pickles: the grader unpickles nothing the policy wrote."""
    conn.send_bytes(json.dumps([number, status, payload]).encode())


def _read(conn: Connection) -> tuple[int, str, Any]:
    """An answer from the policy's process; anything malformed is that process's error."""
    try:
        number, status, payload = json.loads(conn.recv_bytes(1 << 20))
    except (ValueError, TypeError):
        return -1, "error", "the policy's process sent a malformed answer"
    if not isinstance(number, int) or status not in ("ok", "error", "garbage", "ready"):
        return -1, "error", "the policy's process sent a malformed answer"
    if status == "ok" and payload is not None and (not isinstance(payload, int) or isinstance(payload, bool)):
        return number, "garbage", repr(payload)[:200]
    return number, status, payload


class PolicyFault(RuntimeError):
    """The policy's process could not start or load the policy."""


class IsolatedPolicy:
    """A policy in a process of its own, asked over a pipe (see the module docstring).

    ``policy`` is a name / path / ``"module:attribute"`` (loaded in the policy's process only:
    untrusted code never runs in the grader's) or a picklable object :func:`policies.as_policy`
    accepts. Use it as a context manager (or call :meth:`close`)."""

    def __init__(self, policy: Any, track: str = "flat", time_limit: float = TIME_LIMIT) -> None:
        if not isinstance(time_limit, (int, float)) or isinstance(time_limit, bool) or time_limit <= 0:
            raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
        self.spec, self.track, self.time_limit = policy, track, float(time_limit)
        self.faults = dict.fromkeys(FAULTS, 0)
        self.messages: list[str] = []
        self._process: Any = None
        self._conn: Connection | None = None
        self._seal: Seal | None = None
        self._seed: int | None = None
        self._episode_timeouts = 0
        self._shape: Any = None
        self._numbers = itertools.count(1)
        self.name, self.tracks = self._start()

    # ------------------------------------------------------------ process
    def _start(self) -> tuple[str, tuple[str, ...]]:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: none of our memory
        parent, child = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(child, self.spec, self.track), daemon=True, name="hospital-marl-policy"
        )
        self._process.start()
        child.close()
        self._conn = parent
        if not parent.poll(START_LIMIT):
            self._stop()
            raise PolicyFault(f"the policy's process did not start within {START_LIMIT:g} s")
        try:
            _, status, payload = _read(parent)
        except (EOFError, OSError) as error:
            self._stop()
            raise PolicyFault(f"the policy's process died while loading the policy: {error!r}") from None
        if status != "ready" or not isinstance(payload, list) or len(payload) != 2:
            self._stop()
            last = str(payload).strip().splitlines()[-1:] or ["no answer"]
            raise PolicyFault(f"the policy could not be loaded in its process: {last[0]}")
        return str(payload[0]), tuple(str(t) for t in payload[1])

    def _stop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError, ValueError):
                self._conn.send((0, "stop"))
            self._conn.close()
            self._conn = None
        if self._process is not None:
            self._process.join(timeout=1.0)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
            self._process = None

    def close(self) -> None:
        self._stop()

    def __enter__(self) -> IsolatedPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        with contextlib.suppress(Exception):
            self._stop()

    # -------------------------------------------------------------- calls
    def _ask(self, request: tuple) -> tuple[str, Any]:
        """Send a request, wait for its answer within the time limit: (status, payload). A late
        answer to an earlier request is read and dropped (requests are numbered)."""
        conn = self._conn
        if conn is None:
            return "timeout", None
        number = next(self._numbers)
        deadline = time.monotonic() + self.time_limit
        try:
            conn.send((number, *request))
            while conn.poll(max(0.0, deadline - time.monotonic())):
                answer, status, payload = _read(conn)
                if answer == number or answer < 0:  # its answer, or a malformed one (a fault)
                    return status, payload
        except (EOFError, OSError):
            return "error", "the policy's process ended"
        return "timeout", None

    def _fault(self, status: str, detail: Any) -> int:
        key = {"timeout": "timeouts", "error": "errors", "garbage": "garbage"}[status]
        self.faults[key] += 1
        if len(self.messages) < 20 and detail:
            self.messages.append(f"{key}: {detail}")
        if status == "timeout":
            self._episode_timeouts += 1
            self._stop()  # it may be stuck: a fresh process takes over
            if self._episode_timeouts < MAX_TIMEOUTS and self._seal is not None:
                self._restart()
        elif self._process is None or not self._process.is_alive():
            self._stop()  # it died: a fresh process takes over
            self._restart()
        return INVALID

    def _restart(self) -> None:
        """A fresh process, reset on the episode so far."""
        try:
            self._start()
        except PolicyFault as error:  # it will not come back: no more questions this episode
            self.messages.append(str(error)[:500])
            self._episode_timeouts = MAX_TIMEOUTS
            return
        self._begin()

    def _begin(self) -> None:
        """``reset(seed, hospital=<the present>)`` in the policy's process (a fault is counted)."""
        present = self._seal.export()
        self._shape = present["shape"]
        status, detail = self._ask(("reset", self._seed, present))
        if status != "ok":
            self._fault(status, detail)

    def start(self, seed: int, seal: Seal) -> None:
        """A new episode: ``reset(seed, hospital=<the sealed present>)`` in the policy's process."""
        self._seal, self._seed, self._episode_timeouts = seal, seed, 0
        if self._conn is None:
            self._restart()
        else:
            self._begin()

    def _decide(self, request: tuple) -> int:
        if self._episode_timeouts >= MAX_TIMEOUTS:
            self.faults["timeouts"] += 1
            return INVALID
        present = self._seal.export(full=False)
        if present["shape"] != self._shape:  # the present grew: its layout crosses again
            present = self._seal.export()
            self._shape = present["shape"]
        status, payload = self._ask((*request, present))
        if status == "ok":
            return payload
        return self._fault(status, payload)

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return self._decide(("act", observation, action_mask))

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return self._decide(("act_role", role, observation, action_mask))


__all__ = ["FAULTS", "MAX_TIMEOUTS", "TIME_LIMIT", "IsolatedPolicy", "PolicyFault"]
