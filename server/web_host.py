"""The ED web view's tabs play their days in a process of their own (issue 24's latency target).

A planner tab's day in the server's process (both simulators stepping, the agent's pipe round
trip per tick, the boards' PNGs: ~70 ms of Python per day, in Gradio's worker threads) held the
server's interpreter in slices, and one ``/ws`` session's median step rose from 0.23 ms (the same
tab served by another process) to 0.30-0.34 ms. So each tab's :class:`~server.web.WebEpisodes`
lives in the *web host*, a spawned process (a :class:`multiprocessing.managers.BaseManager`
server: a thread per calling thread, over an authenticated local socket), with the agents' pool
(:mod:`server.agents`) beside it. The page stays in the server (Gradio, its queue, the boards'
``<img>`` data, the charts), and so do the rules: a tab is a session of the server's web store,
counted, capped per client, owned and expired there (:class:`~server.sessions.SessionStore`). An
event is one round trip: the action's name and arguments out, a :class:`~server.web.TabView` of
plain data back (:meth:`WebEpisodes.perform`).

The host starts with the app (in the background) or at the first event that needs it; it stops
with the app, and on its own if the server's process disappears. If it dies, a tab's next event
says so and its next day starts a new host.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from multiprocessing.managers import BaseManager
from typing import Any

from server.agents import AGENT_NICE, AGENT_SPECS, AgentsBusyError
from server.web import TabView, WebEpisodes, WebError

logger = logging.getLogger("server.web")

PARENT_CHECK_S = 1.0
"""How often the host looks for the server's process (it exits once that is gone)."""


class _Manager(BaseManager):
    """The host's manager: one registered type, a tab's episodes."""


_Manager.register("Tab", WebEpisodes, exposed=("perform", "close"))


def _rt_tab(default_task: str) -> Any:
    """A radiotherapy tab's plans (imported in the host only when an RT server asks for one)."""
    from server.rt_web import RTWebEpisodes

    return RTWebEpisodes(default_task)


_Manager.register("RTTab", _rt_tab, exposed=("perform", "close"))


def _host_started(parent: int, specs: dict[str, str]) -> None:
    """In the host, first: the server's :data:`~server.agents.AGENT_SPECS` (what an agent's name
    loads) as they were when it started; run at :data:`~server.agents.AGENT_NICE` as the agents
    do (on a busy machine every API client's step comes first, the tabs' days get what is left);
    and exit once the server's process has gone (killed, crashed): no orphan host keeps agents
    running."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the server's to handle: it stops us
    AGENT_SPECS.clear()
    AGENT_SPECS.update(specs)
    with contextlib.suppress(OSError, AttributeError):  # best effort: not on every platform
        os.nice(AGENT_NICE)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)

    threading.Thread(target=watch, name="web-host-parent", daemon=True).start()


class WebHost:
    """The web host process, started on demand (thread-safe); :meth:`tab` makes a tab in it."""

    def __init__(self) -> None:
        self._manager: _Manager | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The host's process id while it runs."""
        manager = self._manager
        process = getattr(manager, "_process", None)
        return process.pid if process is not None and process.is_alive() else None

    def start(self) -> None:
        """Start the host unless it runs (a new one if the last one died)."""
        with self._lock:
            if self._manager is not None and self.pid is not None:
                return
            self._forget()
            manager = _Manager(ctx=multiprocessing.get_context("spawn"))
            manager.start(_host_started, (os.getpid(), dict(AGENT_SPECS)))
            self._manager = manager

    def start_in_background(self) -> None:
        """Start the host without waiting (the app's startup): the first page need not."""

        def start() -> None:
            try:
                self.start()
            except Exception as exc:  # the first event tries again, and says why
                logger.warning("web view: the web host did not start: %s", exc)

        threading.Thread(target=start, name="web-host-start", daemon=True).start()

    def tab(self, default_scenario: str, client: str) -> Any:
        """A new tab's episodes in the host (a proxy: ``perform``, ``close``)."""
        self.start()
        manager = self._manager
        if manager is None:  # closed meanwhile (the app stopping)
            raise WebError("the server is stopping")
        return manager.Tab(default_scenario, client=client)  # type: ignore[attr-defined]

    def rt_tab(self, default_task: str) -> Any:
        """A new radiotherapy tab's plans in the host (a proxy: ``perform``, ``close``)."""
        self.start()
        manager = self._manager
        if manager is None:
            raise WebError("the server is stopping")
        return manager.RTTab(default_task)  # type: ignore[attr-defined]

    def lost(self) -> None:
        """A call failed: if the host has died, the next :meth:`start` makes a new one."""
        with self._lock:
            if self._manager is not None and self.pid is None:
                self._forget()

    def _forget(self) -> None:
        manager, self._manager = self._manager, None
        if manager is not None:
            with contextlib.suppress(Exception):
                manager.shutdown()

    def close(self) -> None:
        """Stop the host and every tab's episodes and agents in it (the app's shutdown; as the
        agents' pool, a later event starts a new one: an app may run more than one lifespan)."""
        with self._lock:
            self._forget()


def _close_hosted(tab: Any) -> None:
    with contextlib.suppress(Exception):  # the host may be gone already
        tab.close()


class RemoteTab:
    """A tab's episodes as the server's web store holds them: the same calls as
    :class:`~server.web.WebEpisodes` (``new_day`` … ``agent_finish``, ``view``, ``close``), each
    carried out in the web host; the view of the last event is kept here for the page."""

    def __init__(self, host: WebHost, default_scenario: str) -> None:
        self.host = host
        self.default_scenario = default_scenario
        self.client = ""
        """Whose tab this is (the agents' per-client share, in the host)."""
        self.lock = threading.Lock()
        self._tab: Any = None
        self._view: Any = self._view_class(started=False)

    _view_class: Any = TabView

    @property
    def started(self) -> bool:
        return self._view.started

    def view(self) -> Any:
        """The view of the tab's last event (a :class:`~server.web.TabView`)."""
        return self._view

    def new_day(self, scenario: Any, seed: Any, track: Any, agent: Any) -> None:
        self._perform("new_day", scenario, seed, track, agent)

    def ensure_day(self, scenario: Any, seed: Any, track: Any, agent: Any) -> None:
        self._perform("ensure_day", scenario, seed, track, agent)

    def play_flat(self, action: Any) -> None:
        self._perform("play_flat", action)

    def play_team(self, joint: dict[str, Any]) -> None:
        self._perform("play_team", joint)

    def agent_step(self) -> None:
        self._perform("agent_step")

    def agent_finish(self) -> None:
        self._perform("agent_finish")

    def close(self) -> None:
        """The tab's session ended: its episodes and its agent's process go, in a thread of their
        own (the store may expire a tab on the event loop, under its lock: no round trip there)."""
        tab, self._tab = self._tab, None
        if tab is not None:
            threading.Thread(target=_close_hosted, args=(tab,), name="web-tab-close", daemon=True).start()

    def _make(self) -> Any:
        """The tab's episodes in the host."""
        return self.host.tab(self.default_scenario, self.client)

    def _perform(self, act: str, *args: Any) -> None:
        try:
            if self._tab is None:
                self._tab = self._make()
            refusal, why, self._view = self._tab.perform(act, args)
        except (EOFError, OSError) as exc:  # the host died (or could not start)
            self._tab, self._view = None, self._view_class(started=False)
            self.host.lost()
            logger.warning("web view: the web host failed: %s", exc)
            raise WebError("the web view's worker process stopped: press New day to start again") from None
        if refusal == "refused":
            raise WebError(why)
        if refusal == "agent":
            raise AgentsBusyError(why)


class RemoteRTTab(RemoteTab):
    """A radiotherapy tab's plans as the server's web store holds them: the calls of
    :class:`~server.rt_web.RTWebEpisodes` the page makes, each carried out in the web host (three
    planner tabs in the server's process slowed every other client's steps, issue 43)."""

    def __init__(self, host: WebHost, default_task: str) -> None:
        from server.rt_web import RTTabView

        self._view_class = RTTabView
        super().__init__(host, default_task)

    def _make(self) -> Any:
        return self.host.rt_tab(self.default_scenario)

    def new_plan(self, task: Any, seed: Any, agent: Any) -> None:
        self._perform("new_plan", task, seed, agent)

    def ensure_plan(self, task: Any, seed: Any, agent: Any) -> None:
        self._perform("ensure_plan", task, seed, agent)

    def play(self, action: int) -> None:
        self._perform("play", action)
