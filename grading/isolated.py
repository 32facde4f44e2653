"""Isolated evaluation (SPEC §12, §13): the policy runs in a sandboxed process of its own.

The grader keeps the episode; the policy's process (:mod:`grading.sandbox`: under bubblewrap by
default, started from a fixed command line and an empty environment) receives only what
crosses the protocol (:mod:`grading.frames`): the policy spec, a seed of its own at each
episode's start, each decision's observation and mask, and the sealed present
(:meth:`~hospital_marl.core.hospital.Seal.export`, from which it makes its own ``imagine()``
copies) or, in radiotherapy, a copy of the plan and its state before each decision.

**Faults.** Every request has a deadline (``time_limit`` seconds, the request's writing and its
answer's reading together). Each of these is a counted fault (``policy_faults`` in the report)
and plays the invalid action for the policy (the no-op, counted as an invalid action, SPEC §3):

- ``errors``: the policy raised (its process goes on);
- ``garbage``: it answered something that is not an action of the mask's range (``2**70``,
  ``-1``, a string);
- ``timeouts``: no answer within the deadline;
- ``crashes``: its process ended (an exit, a signal, a resource limit);
- ``protocol``: its process sent a frame that is oversized, malformed or not the answer asked for.

After a timeout, a crash or a protocol fault the process is killed (with everything it started)
and a fresh one continues the episode after a new ``reset`` (the policy's memory of the episode
is lost: its own doing). **Fault budget**: at :data:`MAX_FAULTS` faults in one episode the
policy is dropped for the rest of it: not restarted, not asked; every decision left is played
as the no-op (counted as an invalid action) and counted in the report's ``policy_dropped``. So a
policy that hangs or crashes in a loop costs the grader at most ``MAX_FAULTS`` time limits or
process starts per episode. The in-process grader applies the same budget (same scores).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import pickle
import subprocess
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from grading import sandbox
from grading.frames import FrameError
from grading.sandbox import Limits, SandboxUnavailable
from hospital_marl.core.hospital import warm_up

TIME_LIMIT = 10.0
"""Seconds a policy may take per decision (and per episode start) by default."""
START_LIMIT = 300.0
"""Seconds the policy's process may take to start and load the policy (models, imports)."""
MAX_FAULTS = 5
"""Faults in one episode after which the policy is dropped for the rest of it (the budget)."""
MAX_TIMEOUTS = MAX_FAULTS
"""(The budget's former name, when only timeouts counted towards it.)"""
INVALID = -1
"""The action played for a fault: the environments count it as invalid and play the no-op."""
FAULTS = ("timeouts", "errors", "garbage", "crashes", "protocol")
MESSAGES = 20
"""Fault messages kept in a report (each cut to 500 characters)."""


def as_action(value: Any) -> int | None:
    """An integer action (int, NumPy integer, one-element integer array), or None for garbage."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.ndarray) and value.size == 1 and np.issubdtype(value.dtype, np.integer):
        return int(value.reshape(()).item())
    return None


def in_range(action: Any, action_mask: Any) -> bool:
    """Whether ``action`` is an int naming one of the mask's entries (legal or not)."""
    return isinstance(action, int) and not isinstance(action, bool) and 0 <= action < len(action_mask)


class PolicyFault(RuntimeError):
    """The policy's process could not start or load the policy."""


class FaultBudget:
    """Counting faults and the per-episode budget: shared by the in-process and isolated graders."""

    def __init__(self) -> None:
        self.faults = dict.fromkeys(FAULTS, 0)
        self.messages: list[str] = []
        self.dropped = {"episodes": 0, "decisions": 0}
        self._episode_faults = 0
        self._dropped = False

    def _new_episode(self) -> None:
        self._episode_faults, self._dropped = 0, False

    def _count(self, key: str, detail: Any) -> None:
        self.faults[key] += 1
        self._episode_faults += 1
        if len(self.messages) < MESSAGES and detail:
            self.messages.append(f"{key}: {str(detail)[:500]}")
        if self._episode_faults >= MAX_FAULTS and not self._dropped:
            self._dropped = True
            self.dropped["episodes"] += 1
            if len(self.messages) < MESSAGES:
                self.messages.append(
                    f"dropped: {MAX_FAULTS} faults in one episode; the policy was not asked again in it "
                    "(its decisions left were played as the no-op)"
                )

    def _skip(self) -> bool:
        """Whether this decision is skipped (the policy was dropped for the episode)."""
        if self._dropped:
            self.dropped["decisions"] += 1
        return self._dropped


def _answer(raw: bytes) -> tuple[int, str, Any] | None:
    """An answer from the policy's process, or None if it is not one (read as JSON, never a pickle)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, list) or len(value) != 3:
        return None
    number, status, payload = value
    if (
        not isinstance(number, int)
        or isinstance(number, bool)
        or status not in ("ok", "error", "garbage", "ready")
    ):
        return None
    return number, status, payload


class _Isolated(FaultBudget):
    """A policy in a sandboxed process, asked over the frame protocol (see the module docstring)."""

    env = "ed"

    def __init__(
        self,
        policy: Any,
        track: str = "flat",
        time_limit: float = TIME_LIMIT,
        isolation: str = "sandbox",
        limits: Limits | None = None,
    ) -> None:
        if not isinstance(time_limit, (int, float)) or isinstance(time_limit, bool) or not time_limit > 0:
            raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
        if not math.isfinite(time_limit):
            raise ValueError(f"time_limit must be finite, got {time_limit!r}")
        if isolation not in sandbox.ISOLATIONS:
            raise ValueError(f"isolation must be one of {sandbox.ISOLATIONS}, got {isolation!r}")
        super().__init__()
        self.spec, self.track, self.time_limit = policy, track, float(time_limit)
        self.isolation, self.limits = isolation, limits or Limits()
        self._process: sandbox.Started | None = None
        self._numbers = itertools.count(1)
        self._started = False  # an episode is under way (a restart resets the policy on it)
        if isolation == "sandbox":
            sandbox.check_sandbox()  # (before the warm-up: a missing bwrap says so at once)
        self._warm_up()
        self.name, self.tracks = self._start()

    def _warm_up(self) -> None:
        """Compile the environment's kernels here first: the sandbox copies the grader's compiled
        code, but cannot write to its cache (what it compiles is lost when it ends)."""
        warm_up()

    # ------------------------------------------------------------ process
    def _start(self) -> tuple[str, tuple[str, ...]]:
        started = sandbox.start(self.spec, self.isolation, self.limits)
        self._process = started
        channel = started.channel
        deadline = time.monotonic() + START_LIMIT
        try:
            channel.send(
                sandbox.hello(self.spec, self.limits, self.track, self.env, self.isolation), START_LIMIT
            )
            raw = channel.receive(max(0.0, deadline - time.monotonic()))
        except FrameError as error:
            words = started.last_words().strip().splitlines()
            self._kill()
            last = f": {words[-1]}" if words else ""
            raise PolicyFault(f"the policy's process did not start ({error}){last}") from None
        answer = _answer(raw)
        if answer is None or answer[1] != "ready" or not _ready(answer[2]):
            self._kill()
            detail = str(answer[2] if answer else "a malformed answer").strip().splitlines() or ["no answer"]
            raise PolicyFault(f"the policy could not be loaded in its process: {detail[-1][:500]}")
        name, tracks = answer[2]
        return name, tuple(tracks)

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process = None

    def close(self) -> None:
        """End the policy's process and everything it started."""
        if self._process is not None:
            with contextlib.suppress(FrameError, subprocess.TimeoutExpired):
                self._process.channel.send(pickle.dumps(("stop",)), 1.0)
                self._process.process.wait(timeout=1.0)  # its own end (then the sandbox's, below)
        self._kill()

    def __enter__(self) -> _Isolated:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        with contextlib.suppress(Exception):
            self._kill()

    # -------------------------------------------------------------- calls
    def _ask(self, kind: str, *args: Any) -> tuple[str, Any]:
        """Send a request, read its answer before the deadline: (status, payload), where status
        is ``ok``/``error``/``garbage`` or a fault that ended the process."""
        if self._process is None:
            return "crashes", "no process"
        number = next(self._numbers)
        channel = self._process.channel
        deadline = time.monotonic() + self.time_limit
        try:
            channel.send(
                pickle.dumps((kind, number, *args), protocol=pickle.HIGHEST_PROTOCOL), self.time_limit
            )
            raw = channel.receive(max(0.0, deadline - time.monotonic()))
        except FrameError as error:
            if error.kind == "timeout":
                return "timeouts", f"no answer within {self.time_limit:g} s"
            if error.kind == "oversized":
                return "protocol", str(error)
            code = self._process.process.poll()
            return "crashes", f"the policy's process ended (exit status {code})"
        answer = _answer(raw)
        if answer is None:
            return "protocol", "a malformed answer"
        if answer[0] != number or answer[1] == "ready":
            return "protocol", f"an answer that was not asked for ({answer[1]!r} #{answer[0]})"
        return answer[1], answer[2]

    def _fault(self, status: str, detail: Any) -> int:
        key = {"error": "errors"}.get(status, status)
        self._count(key, detail)
        if key in ("timeouts", "crashes", "protocol") or self._dropped:
            self._kill()  # stuck, gone or lying: its process (and all it started) ends
            if not self._dropped:
                self._restart()
        return INVALID

    def _restart(self) -> None:
        """A fresh process, reset on the episode so far (a start that fails drops the episode)."""
        try:
            self._start()
        except (PolicyFault, SandboxUnavailable) as error:
            self._kill()
            if len(self.messages) < MESSAGES:
                self.messages.append(f"restart failed: {str(error)[:500]}")
            if not self._dropped:
                self._dropped = True
                self.dropped["episodes"] += 1
            return
        if self._started:
            self._begin()

    def _begin(self) -> None:
        raise NotImplementedError

    def _decide(self, kind: str, action_mask: Any, *args: Any) -> int:
        if self._skip():
            return INVALID
        status, payload = self._ask(kind, *args)
        if status == "ok" and in_range(payload, action_mask):
            return payload
        if status == "ok":
            return self._fault("garbage", f"not an action of the mask's range: {str(payload)[:200]}")
        return self._fault(status, payload)

    def _new(self) -> None:
        """A new episode: a fresh budget, a process if the last one was ended."""
        self._new_episode()
        self._started = True
        if self._process is None:
            self._restart()
        else:
            self._begin()


def _ready(payload: Any) -> bool:
    return (
        isinstance(payload, list)
        and len(payload) == 2
        and isinstance(payload[0], str)
        and isinstance(payload[1], list)
        and all(isinstance(t, str) for t in payload[1])
    )


class IsolatedPolicy(_Isolated):
    """An ED policy in a sandboxed process (see the module docstring).

    ``policy`` is a name / path / ``"module:attribute"`` (loaded in the policy's process only:
    untrusted code never runs in the grader's) or a picklable object :func:`policies.as_policy`
    accepts. ``isolation``: ``"sandbox"`` (bubblewrap; :func:`grading.sandbox.check_sandbox`
    raises if it cannot run here) or, by name only, the weaker ``"process"``. Use it as a
    context manager (or call :meth:`close`)."""

    def __init__(
        self,
        policy: Any,
        track: str = "flat",
        time_limit: float = TIME_LIMIT,
        isolation: str = "sandbox",
        limits: Limits | None = None,
    ) -> None:
        self._seal: Any = None
        self._seed: int | None = None
        self._shape: Any = None
        super().__init__(policy, track, time_limit, isolation, limits)

    def _begin(self) -> None:
        """``reset(seed, hospital=<the present>)`` in the policy's process (a fault is counted)."""
        present = self._seal.export()
        self._shape = present["shape"]
        status, detail = self._ask("reset", self._seed, present)
        if status != "ok":
            self._fault(status, detail)

    def start(self, seed: int, seal: Any) -> None:
        """A new episode: ``reset(seed, hospital=<the sealed present>)`` in the policy's process."""
        self._seal, self._seed = seal, seed
        self._new()

    def _present(self) -> dict[str, Any]:
        present = self._seal.export(full=False)
        if present["shape"] != self._shape:  # the present grew: its layout crosses again
            present = self._seal.export()
            self._shape = present["shape"]
        return present

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        if self._dropped:
            return self._decide("act", action_mask)
        return self._decide("act", action_mask, observation, action_mask, self._present())

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        if self._dropped:
            return self._decide("act_role", action_mask)
        return self._decide("act_role", action_mask, role, observation, action_mask, self._present())


class IsolatedRTPolicy(_Isolated):
    """A radiotherapy policy in a sandboxed process: at each episode's start it gets its seed, a
    copy of the plan (read through a :class:`~hospital_marl.radiotherapy.core.sealed.PlanView`,
    as in-process) and the env's spaces; before each decision the plan's state."""

    env = "radiotherapy"

    def __init__(
        self,
        agent: Any,
        time_limit: float = TIME_LIMIT,
        isolation: str = "sandbox",
        limits: Limits | None = None,
    ) -> None:
        self._seal: Any = None
        self._seed: int | None = None
        self._spaces: tuple[Any, Any] | None = None
        super().__init__(agent, "radiotherapy", time_limit, isolation, limits)

    def _warm_up(self) -> None:
        from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv

        env = RadiotherapyPlanningEnv("prostate")
        _, info = env.reset(seed=0)
        env.step(int(np.flatnonzero(info["action_mask"])[0]))

    def _begin(self) -> None:
        status, detail = self._ask("reset", self._seed, self._seal.export(), self._spaces)
        if status != "ok":
            self._fault(status, detail)

    def start(self, seed: int, env: Any, seal: Any) -> None:
        """A new episode on ``env`` (its spaces cross), whose plan ``seal`` guards."""
        self._seal, self._seed, self._spaces = seal, seed, (env.action_space, env.observation_space)
        self._new()

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        if self._dropped:
            return self._decide("act", action_mask)
        return self._decide("act", action_mask, observation, action_mask, self._seal.snapshot())


__all__ = [
    "FAULTS",
    "MAX_FAULTS",
    "TIME_LIMIT",
    "FaultBudget",
    "IsolatedPolicy",
    "IsolatedRTPolicy",
    "PolicyFault",
    "SandboxUnavailable",
]
