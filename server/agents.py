"""The web view's agents, each in a process of its own: the planner never holds the server's GIL.

A web tab's agent (the planner above all: ~3 ms of pure Python and NumPy per decision) run in
the server's interpreter held the GIL for milliseconds at a time, and every WebSocket step of
every other client waited for it (issue 24: p99 ~120 ms beside one planner tab). Here each agent
is a :class:`~grading.isolated.IsolatedPolicy`, the grader's isolated mode: a spawned process
that receives only the observation, the mask and the sealed present (SPEC §12), with the same
per-decision time limit and the same fault accounting. So a tab's agent plays exactly the
actions it plays under the grader, and the server's interpreter only waits on a pipe.

The processes are a bounded pool shared by every tab (:class:`AgentPool`):

- at most :data:`AGENT_PROCESSES` at once, whatever the number of tabs or clients (each holds
  ~170 MB: a Python with NumPy, numba's cached kernel and the policies, measured on Linux);
- started lazily (the first time a page picks an agent, or when a tab that lost its process plays
  again), and stopped when the tab's session closes (page closed, idle timeout) and when the
  server shuts down;
- a tab *holds* its process only while one of its events runs (:meth:`PooledAgent.holding`).
  Between events the process stays the tab's, warm, unless another tab needs one and none is
  free: then the least recently used idle one is taken over (reused if it runs the same agent,
  else replaced). The tab that lost it gets a fresh one at its next event, reset on the present
  (its policy's memory of the day is lost, as after a timeout under the grader);
- each runs at a lower priority than the server (:data:`AGENT_NICE`): on a busy machine the
  server's own work, every API client's step, comes first;
- one client holds at most half of the processes at once (as every session pool here), so one
  client's tabs cannot starve the rest; a tab that finds none free waits up to
  :data:`AGENT_WAIT_S` and is then told the agents are busy.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping

import numpy as np

from grading.isolated import IsolatedPolicy, PolicyFault
from hospital_marl.core.hospital import Seal
from server.sessions import client_share

AGENT_PROCESSES = 2
"""Agents' processes at most (the machine this was tuned on has 2 cores: more processes than
cores add memory, not throughput)."""

AGENT_NICE = 10
"""Niceness added to each agent process (POSIX): the server's own work (every API client's step)
always comes first on a busy machine, the agents' thinking gets what is left (at niceness 10 about
a tenth of a contended core, far inside the per-decision time limit)."""

AGENT_WAIT_S = 30.0
"""Seconds a tab's event waits for a free agent process before it is refused."""

AGENT_TIME_LIMIT_S = 30.0
"""Per-decision time limit of an agent process (the grader's isolated mode allows 10 s): a fresh
process's first decision may compile the planner's rollouts, at :data:`AGENT_NICE` on a busy
machine; a stuck agent still costs a tab at most three such limits per shift."""

AGENT_SPECS: dict[str, str] = {}
"""What a page's agent name loads in its process when it is not the name itself (a pool copies it
when made, the web host takes the server's when it starts; tests point ``planner`` at an
instrumented planner here)."""

logger = logging.getLogger("server.web")


class AgentsBusyError(RuntimeError):
    """No agent process became free in time (the page says so; nothing changes)."""


class _Process:
    """One pool process: the isolated policy, which tab it belongs to, whether an event runs."""

    def __init__(self, policy: IsolatedPolicy, spec: str) -> None:
        self.policy = policy
        self.spec = spec
        self.owner: PooledAgent | None = None
        self.client = ""
        self.busy = 0
        self.last_used = time.monotonic()


class AgentPool:
    """At most ``max_processes`` agent processes, shared by every web tab (module docstring).

    ``specs`` maps an agent's name on the page to what :class:`IsolatedPolicy` loads in its
    process (default: :data:`AGENT_SPECS`, else the name itself, a :func:`policies.load` name)."""

    def __init__(
        self,
        max_processes: int = AGENT_PROCESSES,
        wait_s: float = AGENT_WAIT_S,
        specs: Mapping[str, str] | None = None,
    ) -> None:
        if max_processes < 1:
            raise ValueError(f"max_processes must be at least 1, got {max_processes}")
        self.max_processes = max_processes
        self.wait_s = wait_s
        self.specs = dict(AGENT_SPECS if specs is None else specs)
        self._processes: list[_Process] = []
        self._starting = 0
        self._tracks: dict[str, tuple[str, ...]] = {}  # spec -> the tracks its process reported
        self._changed = threading.Condition()
        self._generation = 0  # one more at each close(): a process started before it is not kept

    def __len__(self) -> int:
        """Live agent processes."""
        with self._changed:
            return len(self._processes)

    def pids(self) -> list[int]:
        """The live processes' ids (for tests and ``ps``)."""
        with self._changed:
            return [p.policy._process.pid for p in self._processes if p.policy._process is not None]

    def agent(self, name: str, client: str = "") -> PooledAgent:
        """A tab's agent ``name`` (no process yet: one is found at its first event)."""
        return PooledAgent(self, name, self.specs.get(name, name), client)

    # ------------------------------------------------------------ leasing
    def _busy_of(self, client: str) -> int:
        return sum(1 for p in self._processes if p.busy and p.client == client)

    def _acquire(self, agent: PooledAgent) -> _Process:
        """The agent's process, marked busy: its own if it still has it, else a free or taken-over
        one, else a new one (waits while the pool is full and busy; raises AgentsBusyError)."""
        deadline = time.monotonic() + self.wait_s
        share = client_share(self.max_processes)
        retired: _Process | None = None
        with self._changed:
            while True:
                own = agent._process
                if own is not None and own.owner is agent and own in self._processes:
                    if self._busy_of(agent.client) < share:
                        own.busy += 1
                        return own
                elif self._busy_of(agent.client) < share:
                    if len(self._processes) + self._starting < self.max_processes:
                        self._starting += 1
                        break  # start one, outside the lock
                    idle = [p for p in self._processes if not p.busy]
                    if idle:
                        taken = min(idle, key=lambda p: p.last_used)
                        if taken.owner is not None:
                            taken.owner._process = None
                            logger.info("web agent process taken over by another tab (pool full)")
                        if taken.spec == agent.spec:
                            self._assign(taken, agent)
                            return taken
                        self._processes.remove(taken)
                        self._starting += 1
                        retired = taken
                        break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AgentsBusyError(
                        f"every agent process is busy ({self.max_processes} at most, "
                        f"{share} per client): try again in a moment"
                    )
                self._changed.wait(remaining)
            generation = self._generation
        if retired is not None:
            retired.policy.close()
        try:
            policy = IsolatedPolicy(agent.spec, time_limit=AGENT_TIME_LIMIT_S, isolation="process")
        except BaseException:
            with self._changed:
                self._starting -= 1
                self._changed.notify_all()
            raise
        _lower_priority(policy)
        process = _Process(policy, agent.spec)
        with self._changed:
            self._starting -= 1
            self._tracks[agent.spec] = policy.tracks
            if self._generation != generation:
                self._changed.notify_all()
                policy.close()
                raise AgentsBusyError("the server is shutting down")
            self._processes.append(process)
            self._assign(process, agent)
        return process

    @staticmethod
    def _assign(process: _Process, agent: PooledAgent) -> None:
        """``process`` is now ``agent``'s, busy with its event; it has not seen the agent's day."""
        process.owner, process.client, process.busy = agent, agent.client, 1
        agent._process, agent._started = process, None

    def _release(self, process: _Process) -> None:
        with self._changed:
            process.busy -= 1
            process.last_used = time.monotonic()
            self._changed.notify_all()

    def _retire(self, agent: PooledAgent) -> None:
        """Stop the agent's process (its tab closed), without waiting for it: a session store may
        call this under its lock, or on the event loop when an idle session expires."""
        with self._changed:
            process = agent._process
            agent._process = None
            if process is None or process.owner is not agent or process not in self._processes:
                return
            self._processes.remove(process)
            self._changed.notify_all()
        threading.Thread(target=process.policy.close, name="agent-stop", daemon=True).start()

    def close(self) -> None:
        """Stop every process (server shutdown; a later event would start a new one)."""
        with self._changed:
            self._generation += 1
            processes, self._processes = self._processes, []
            for process in processes:
                if process.owner is not None:
                    process.owner._process = None
            self._changed.notify_all()
        for process in processes:
            process.policy.close()


def _lower_priority(policy: IsolatedPolicy) -> None:
    """Renice the policy's process by :data:`AGENT_NICE` (best effort: not on every platform)."""
    pid = getattr(policy._process, "pid", None)
    if pid is None or not hasattr(os, "setpriority"):
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, pid) + AGENT_NICE))


class PooledAgent:
    """One tab's agent: the episode runners' policy interface (``tracks``, ``start``, ``act``,
    ``act_role``), played by a process of its :class:`AgentPool`.

    Call its decisions inside :meth:`holding` (one tab event): the process is the tab's for that
    long. Outside it, each call holds the process for itself."""

    def __init__(self, pool: AgentPool, name: str, spec: str, client: str) -> None:
        self.pool = pool
        self.name = name
        self.spec = spec
        self.client = client
        self._process: _Process | None = None
        self._episode: tuple[int, Seal] | None = None  # the start() the tab asked for
        self._started: tuple[int, Seal] | None = None  # the start() its process has seen
        self._holding: _Process | None = None
        self._depth = 0

    @property
    def tracks(self) -> tuple[str, ...]:
        """The tracks the policy plays, as its process reports them (the process starts if needed)."""
        tracks = self.pool._tracks.get(self.spec)
        if tracks is None:
            with self.holding():
                tracks = self.pool._tracks[self.spec]
        return tracks

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Hold the tab's process for one event (re-entrant)."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        process = self.pool._acquire(self)
        self._holding, self._depth = process, 1
        try:
            yield
        finally:
            self._holding, self._depth = None, 0
            self.pool._release(process)

    def _policy(self) -> IsolatedPolicy:
        process = self._holding
        assert process is not None, "PooledAgent decisions run inside holding()"
        if self._episode is not None and self._started is not self._episode:
            process.policy.start(*self._episode)
            self._started = self._episode
        return process.policy

    def start(self, seed: int, seal: Seal) -> None:
        """A new day: its process is reset on it at the next decision (or now, when held)."""
        self._episode, self._started = (seed, seal), None
        if self._holding is not None:
            self._policy()

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        with self.holding():
            return self._policy().act(observation, action_mask)

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        with self.holding():
            return self._policy().act_role(role, observation, action_mask)

    @property
    def faults(self) -> dict[str, int]:
        return dict(self._process.policy.faults) if self._process is not None else {}

    def close(self) -> None:
        """The tab closed: its process stops."""
        self.pool._retire(self)


__all__ = [
    "AGENT_NICE",
    "AGENT_PROCESSES",
    "AGENT_SPECS",
    "AGENT_TIME_LIMIT_S",
    "AGENT_WAIT_S",
    "AgentPool",
    "AgentsBusyError",
    "PolicyFault",
    "PooledAgent",
]
