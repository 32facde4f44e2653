"""Isolated evaluation (SPEC §12, §13): the policy runs in a sandboxed process of its own.

The grader keeps the episode; the policy's process (:mod:`grading.sandbox`: under bubblewrap by
default, started from a fixed command line and an empty environment) receives only what
crosses the protocol (:mod:`grading.frames`): the policy spec, a seed of its own at each
episode's start, each decision's observation and mask, and the sealed present
(:meth:`~hospital_marl.core.hospital.Seal.export`, from which it makes its own ``imagine()``
copies) or, in radiotherapy, a copy of the plan and its state before each decision.

**Lockstep.** The grader plays every episode of a scenario at once (:meth:`_Isolated.play_many`):
each step, one request frame carries every live episode's decision (observation, mask, present)
and the policy's process answers each as soon as it has it, one small JSON frame per decision,
while the grader already plays the answers it has. Episode ``i`` has a policy instance of its own
in that process (a copy of the loaded policy, reset at the episode's start), so each episode is
played exactly as alone, and faults, deadlines and the budget stay per episode. The one-at-a-time
calls (:meth:`IsolatedPolicy.start`, ``act``, ``act_role``) remain, for the web view's agents and RT.

**Faults.** Every decision has a deadline (``time_limit`` seconds from the request's writing,
or from the answer before it in the same frame, to its answer). Each of these is a counted
fault (``policy_faults`` in the report) and plays the invalid action for the policy (the no-op,
counted as an invalid action, SPEC §3):

- ``errors``: the policy raised (its process goes on);
- ``garbage``: it answered something that is not an action of the mask's range (``2**70``,
  ``-1``, a string);
- ``timeouts``: no answer within the deadline;
- ``crashes``: its process ended (an exit, a signal, a resource limit);
- ``protocol``: its process sent a frame that is oversized, malformed or not the answer asked for.

After a timeout, a crash or a protocol fault the process is killed (with everything it started)
and a fresh one continues every live episode after a new ``reset`` (the policy's memory of them
is lost: its own doing); the decisions of that frame not yet answered are asked again there.
**Fault budget**: at :data:`MAX_FAULTS` faults in one episode the policy is dropped for the rest
of it: not asked again in it; every decision left is played as the no-op (counted as an invalid
action) and counted in the report's ``policy_dropped``. So a policy that hangs or crashes in a
loop costs the grader at most ``MAX_FAULTS`` time limits or process starts per episode. The
in-process grader applies the same budget (same scores).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import pickle
import subprocess
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

import numpy as np

from grading import sandbox
from grading.frames import FrameError, pack
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


class Budget:
    """One episode's share of the fault budget: its faults so far, and whether the policy was
    dropped for the rest of it."""

    __slots__ = ("dropped", "faults")

    def __init__(self) -> None:
        self.faults, self.dropped = 0, False


class FaultBudget:
    """Counting faults and the per-episode budget: shared by the in-process and isolated graders.
    A method given no ``episode`` applies to the current one (the sequential graders)."""

    def __init__(self) -> None:
        self.faults = dict.fromkeys(FAULTS, 0)
        self.messages: list[str] = []
        self.dropped = {"episodes": 0, "decisions": 0}
        self._episode = Budget()

    @property
    def _dropped(self) -> bool:
        return self._episode.dropped

    def _new_episode(self) -> Budget:
        self._episode = Budget()
        return self._episode

    def _say(self, message: str) -> None:
        if len(self.messages) < MESSAGES:
            self.messages.append(message)

    def _count(self, key: str, detail: Any, episode: Budget | None = None) -> None:
        episode = episode if episode is not None else self._episode
        self.faults[key] += 1
        episode.faults += 1
        if detail:
            self._say(f"{key}: {str(detail)[:500]}")
        if episode.faults >= MAX_FAULTS and not episode.dropped:
            episode.dropped = True
            self.dropped["episodes"] += 1
            self._say(
                f"dropped: {MAX_FAULTS} faults in one episode; the policy was not asked again in it "
                "(its decisions left were played as the no-op)"
            )

    def _drop(self, episode: Budget) -> None:
        """Drop the policy for the rest of ``episode`` (its process could not be restarted)."""
        if not episode.dropped:
            episode.dropped = True
            self.dropped["episodes"] += 1

    def _skip(self, episode: Budget | None = None) -> bool:
        """Whether this decision is skipped (the policy was dropped for the episode)."""
        episode = episode if episode is not None else self._episode
        if episode.dropped:
            self.dropped["decisions"] += 1
        return episode.dropped


def _answer(raw: bytes, number: int, slot: int) -> tuple[str, Any] | None:
    """The answer ``[number, slot, status, payload]`` to item ``slot`` of request ``number``, as
    (status, payload), or None if it is not that (read as JSON, never a pickle)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, list) or len(value) != 4:
        return None
    if value[0] != number or value[1] != slot or type(value[0]) is not int or type(value[1]) is not int:
        return None
    if value[2] not in ("ok", "error", "garbage"):
        return None
    return value[2], value[3]


def _ready(raw: bytes) -> tuple[str, tuple[str, ...]] | str:
    """The ``[0, "ready", [name, tracks, imported]]`` frame as (name, tracks), or why it is not
    one. ``imported``, the top-level packages the policy's process imported, joins the packages
    whose trusted sources the grader compiles for the next start (only names, at most 2,000)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return "a malformed answer"
    if isinstance(value, list) and len(value) == 3 and value[0] == 0 and value[1] in ("ready", "error"):
        payload = value[2]
        if (
            value[1] == "ready"
            and isinstance(payload, list)
            and len(payload) == 3
            and isinstance(payload[0], str)
            and all(isinstance(v, list) and all(isinstance(t, str) for t in v) for v in payload[1:])
        ):
            sandbox.CHILD_PACKAGES.update(name for name in payload[2][:2000] if name.isidentifier())
            return payload[0], tuple(payload[1])
        return str(payload)
    return "a malformed answer"


class _Episode:
    """One episode as the isolated grader keeps it: its slot (its policy instance in the policy's
    process), its seed and seal, its budget, and whether the current process has been reset on it."""

    def __init__(self, slot: int, seed: int, seal: Any, spaces: Any = None) -> None:
        self.slot, self.seed, self.seal, self.spaces = slot, seed, seal, spaces
        self.budget = Budget()
        self.reset = False
        self.shape: Any = None
        self.sent: Any = None  # the present's bytes as the policy's process last got them


_Item = tuple[_Episode, str, tuple]
"""A decision to ask: its episode, ``act`` or ``act_role``, and its arguments."""


class _Isolated(FaultBudget):
    """A policy in a sandboxed process, asked over the frame protocol (see the module docstring).

    Subclasses say which environment (:attr:`env`, the default :attr:`track`), how to warm it up
    and what an episode's ``reset`` and a decision carry besides the observation and mask."""

    env = "ed"
    default_track = "flat"

    def __init__(
        self,
        policy: Any,
        track: str | None = None,
        *,
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
        self.spec, self.track, self.time_limit = policy, track or self.default_track, float(time_limit)
        self.isolation, self.limits = isolation, limits or Limits()
        self._process: sandbox.Started | None = None
        self._numbers = itertools.count(1)
        self._current: _Episode | None = None  # the episode of the one-at-a-time calls
        self._live: list[_Episode] = []  # episodes under way (reset again after a restart)
        if isolation == "sandbox":
            sandbox.check_sandbox()  # (before the warm-up: a missing bwrap says so at once)
        self._warm_up()
        self.name, self.tracks = self._start()

    def _warm_up(self) -> None:
        """Compile the environment's kernels here first: the sandbox copies the grader's compiled
        code, but cannot write to its cache (what it compiles is lost when it ends)."""
        warm_up()

    def _reset_args(self, episode: _Episode) -> tuple:
        raise NotImplementedError

    def _decision_args(self, episode: _Episode, args: tuple) -> tuple:
        raise NotImplementedError

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
        ready = _ready(raw)
        if isinstance(ready, str):
            self._kill()
            detail = ready.strip().splitlines() or ["no answer"]
            raise PolicyFault(f"the policy could not be loaded in its process: {detail[-1][:500]}")
        return ready

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process = None
        for episode in self._live:  # a new process knows none of them
            episode.reset = False

    def _restart(self, episodes: list[_Episode]) -> bool:
        """A fresh process (each episode is reset in it before its next decision); if it cannot
        start, ``episodes`` are dropped (a start is tried again at the next episode)."""
        try:
            self._start()
        except (PolicyFault, SandboxUnavailable) as error:
            self._kill()
            self._say(f"restart failed: {str(error)[:500]}")
            for episode in episodes:
                self._drop(episode.budget)
            return False
        return True

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
    def _ask(self, items: list[_Item], settled: Callable[[int, int], None] | None = None) -> list[int]:
        """Ask every item's decision in as few frames as faults allow: one request frame (an
        episode the process has not been reset on is reset in it first), one answer frame per
        entry, each within ``time_limit`` of the one before. A fault is counted for its
        episode and played as :data:`INVALID`; a fault that ends the process (timeout, crash,
        protocol) ends it, and the items after it are asked again in a fresh process.
        ``settled(i, action)`` is called as soon as item ``i``'s action is final (so the grader
        plays it while the policy's process works on the next)."""
        answers = [INVALID] * len(items)
        final = [False] * len(items)

        def settle(i: int, action: int) -> None:
            answers[i], final[i] = action, True
            if settled is not None:
                settled(i, action)

        pending = list(range(len(items)))
        while pending:
            batch: list[_Entry] = []
            for i in pending:
                episode, kind, args = items[i]
                if episode.budget.dropped:
                    self._skip(episode.budget)
                    settle(i, INVALID)
                    continue
                if not episode.reset:
                    batch.append((-1, episode, "reset", self._reset_args(episode)))
                batch.append((i, episode, kind, self._decision_args(episode, args)))
            if not batch:
                break
            if self._process is None and not self._restart([e for _, e, _, _ in batch]):
                for i, episode, _, _ in batch:
                    if i >= 0:
                        self._skip(episode.budget)
                        settle(i, INVALID)
                break
            self._exchange(batch, settle)
            pending = [i for i in pending if not final[i]]
        return answers

    def _exchange(self, batch: list[_Entry], settle: Callable[[int, int], None]) -> int:
        """Send ``batch`` as one frame and read its answers in order (each decision's action
        ``settle``-d); returns how many entries are done (all, or up to the one whose fault ended
        the process, which is played as :data:`INVALID`)."""
        assert self._process is not None
        number = next(self._numbers)
        channel = self._process.channel
        request = ("batch", number, [(e.slot, kind, tuple(map(pack, args))) for _, e, kind, args in batch])
        try:
            channel.send(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL), self.time_limit)
        except FrameError as error:
            return self._ended(batch, 0, error, settle)
        for position, (i, episode, _, args) in enumerate(batch):
            try:
                raw = channel.receive(self.time_limit)
            except FrameError as error:
                return self._ended(batch, position, error, settle)
            if episode.budget.dropped:  # dropped earlier in this frame: not asked any more
                if i >= 0:
                    self._skip(episode.budget)
                    settle(i, INVALID)
                continue
            answer = _answer(raw, number, episode.slot)
            if answer is None:
                malformed = FrameError("protocol", "a malformed answer, or one that was not asked for")
                return self._ended(batch, position, malformed, settle)
            status, payload = answer
            if i < 0:
                episode.reset = True  # (a reset that raised is a fault; the episode goes on)
            elif status == "ok" and in_range(payload, args[-2]):
                settle(i, payload)
                continue
            elif status == "ok":
                status, payload = "garbage", f"not an action of the mask's range: {str(payload)[:200]}"
            if status != "ok":
                self._count({"error": "errors"}.get(status, status), payload, episode.budget)
            if i >= 0:
                settle(i, INVALID)
        return len(batch)

    def _ended(
        self, batch: list[_Entry], position: int, error: FrameError, settle: Callable[[int, int], None]
    ) -> int:
        """The process failed entry ``position`` (a counted fault for its episode; a decision is
        played as :data:`INVALID`): it is ended. Returns how many entries are done."""
        i, episode, _, _ = batch[position]
        if error.kind == "timeout":
            self._count("timeouts", f"no answer within {self.time_limit:g} s", episode.budget)
        elif error.kind in ("oversized", "protocol"):
            self._count("protocol", str(error), episode.budget)
        else:
            code = self._process.process.poll() if self._process is not None else None
            self._count("crashes", f"the policy's process ended (exit status {code})", episode.budget)
        self._kill()
        if i >= 0:
            settle(i, INVALID)
        return position + 1

    # ------------------------------------------------------ one at a time
    def _begin(self, episode: _Episode) -> None:
        """A new episode for the one-at-a-time calls (reset in the process before its first decision)."""
        self._episode = episode.budget
        self._current, self._live = episode, [episode]

    def _decide(self, kind: str, *args: Any) -> int:
        if self._current is None:
            raise RuntimeError("start() an episode before asking for an action")
        return self._ask([(self._current, kind, args)])[0]

    # ------------------------------------------------------ many at once
    def play_many(self, episodes: Sequence[Generator[Any, Any, Any]]) -> list[Any]:
        """Play every episode (generators of :func:`grading.grader.flat_episode`'s requests) in
        lockstep: each step, one request frame with every live episode's decision, one answer
        frame per decision. Episode ``i`` is slot ``i`` in the policy's process (a policy
        instance of its own, reset at the episode's start), so each result equals the episode
        played alone; faults and the budget are per episode, as one at a time."""
        results: list[Any] = [None] * len(episodes)
        asking: dict[int, _Item] = {}

        def advance(slot: int, answer: Any) -> None:
            try:
                kind, *args = episodes[slot].send(answer)
            except StopIteration as end:
                results[slot] = end.value
                asking.pop(slot, None)
                return
            asking[slot] = (asking[slot][0], kind, tuple(args))

        for slot, episode in enumerate(episodes):
            _, seed, seal = next(episode)  # ("start", seed, seal): the reset goes with the first decision
            asking[slot] = (_Episode(slot, seed, seal), "", ())
            advance(slot, None)
        while asking:
            self._live = [item[0] for item in asking.values()]
            slots = list(asking)

            def settled(i: int, action: int, slots: list[int] = slots) -> None:
                advance(slots[i], action)

            self._ask([asking[s] for s in slots], settled)
        self._live = []
        return results


_Entry = tuple[int, _Episode, str, tuple]
"""An entry of a request frame: its item's index (-1: the episode's reset), episode, kind, arguments."""


class IsolatedPolicy(_Isolated):
    """An ED policy in a sandboxed process (see the module docstring).

    ``policy`` is a name / path / ``"module:attribute"`` (loaded in the policy's process only:
    untrusted code never runs in the grader's) or a picklable object :func:`policies.as_policy`
    accepts. ``isolation``: ``"sandbox"`` (bubblewrap; :func:`grading.sandbox.check_sandbox`
    raises if it cannot run here) or, by name only, the weaker ``"process"``. Use it as a
    context manager (or call :meth:`close`). :meth:`play_many` plays many episodes at once
    (the grader's way); :meth:`start` / :meth:`act` / :meth:`act_role` one at a time."""

    def _reset_args(self, episode: _Episode) -> tuple:
        """``reset(seed, hospital=<the present>)`` in the policy's process."""
        present = episode.seal.export()
        episode.shape, episode.sent = present["shape"], present["buffer"]
        return (episode.seed, present)

    def _decision_args(self, episode: _Episode, args: tuple) -> tuple:
        present = episode.seal.export(full=False)
        if present["shape"] != episode.shape or present["buffer"] is None or episode.sent is None:
            # the present grew (its layout crosses again), or it is not one packed buffer
            present = episode.seal.export()
            episode.shape, episode.sent = present["shape"], present["buffer"]
            return (*args, present)
        # Only the bytes that changed since the last present sent (a tick changes a few hundred
        # of the ~16 KB, mostly zeros): the policy's process patches its own copy.
        new = np.frombuffer(present["buffer"], np.uint8)
        changed = np.flatnonzero(new != np.frombuffer(episode.sent, np.uint8)).astype(np.uint32)
        episode.sent = present["buffer"]
        present["buffer"] = None
        present["changed"] = (changed.tobytes(), new[changed].tobytes())
        return (*args, present)

    def start(self, seed: int, seal: Any) -> None:
        """A new episode: ``reset(seed, hospital=<the sealed present>)`` in the policy's process."""
        self._begin(_Episode(0, seed, seal))

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return self._decide("act", observation, action_mask)

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return self._decide("act_role", role, observation, action_mask)


class IsolatedRTPolicy(_Isolated):
    """A radiotherapy policy in a sandboxed process: at each episode's start it gets its seed, a
    copy of the plan (read through a :class:`~hospital_marl.radiotherapy.core.sealed.PlanView`,
    as in-process) and the env's spaces; before each decision the plan's state."""

    env = "radiotherapy"
    default_track = "radiotherapy"

    def _warm_up(self) -> None:
        from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv

        env = RadiotherapyPlanningEnv("prostate")
        _, info = env.reset(seed=0)
        env.step(int(np.flatnonzero(info["action_mask"])[0]))

    def _reset_args(self, episode: _Episode) -> tuple:
        return (episode.seed, episode.seal.export(), episode.spaces)

    def _decision_args(self, episode: _Episode, args: tuple) -> tuple:
        return (*args, episode.seal.snapshot())

    def start(self, seed: int, env: Any, seal: Any) -> None:
        """A new episode on ``env`` (its spaces cross), whose plan ``seal`` guards."""
        self._begin(_Episode(0, seed, seal, (env.action_space, env.observation_space)))

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return self._decide("act", observation, action_mask)


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
