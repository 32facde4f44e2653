"""The web view at ``/web``: watch a shift, play it yourself, or race an agent on the same day.

OpenEnv mounts it (``create_app(..., gradio_builder=...)`` with the web
interface enabled: ``hospital-marl serve --web`` or ``ENABLE_WEB_INTERFACE``),
in place of its generic Playground tab. The page shows:

- your ED and the agent's, side by side, as the env's own ``rgb_array`` frames
  (:func:`hospital_marl.envs.render.render_frame`): the same scenario and seed,
  so both face the same arrivals (common random numbers make the race fair);
- the legal actions of this tick as buttons (flat track: one of the 39 flat
  actions, from THE action table) or one choice per role (team track, carried
  out in role order as :class:`hospital_marl.HospitalEDTeamEnv` does);
- the agent (heuristic, planner, shipped PPO when the ``train`` extra is
  installed) keeps pace with your ticks, or plays one tick or the rest of its
  shift on its own;
- live metrics and a per-tick chart of queue length, occupancy, deaths and
  score for both.

Each browser tab is its own web session (two simulators) in a
:class:`~server.sessions.SessionStore`: counted in ``GET /sessions``, bounded
by ``max_web_sessions`` and the per-client cap, ended when the tab closes or
after the idle timeout. Handlers are plain functions, which Gradio runs in
worker threads: the page never blocks the API's event loop. The tab's
:class:`WebEpisodes` (both simulators, the day's loop, the boards' PNGs) run in
the web host, a process of their own (:mod:`server.web_host`): an event is one
round trip there, a :class:`TabView` of plain data back. The agent decides in
yet another process (:mod:`server.agents`, the grader's isolated mode, a small
pool shared by every tab, in the host): its thinking never holds either
interpreter.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gradio as gr
import numpy as np
import pandas as pd
from gradio.data_classes import ImageData
from PIL import Image

import policies
from grading.grader import policy_seed
from grading.isolated import PolicyFault
from hospital_marl.core.actions import ACTION_TABLE, N_FLAT_ACTIONS, ROLE_FLAT, ROLES
from hospital_marl.core.hospital import Hospital, Seal
from hospital_marl.core.scenarios import SCENARIOS
from hospital_marl.envs.aec import HospitalAECEnv
from hospital_marl.envs.composed import HospitalEDEnv, HospitalEDTeamEnv
from hospital_marl.envs.infos import OUTCOME_NAMES
from hospital_marl.envs.render import render_frame
from server.agents import AgentPool, AgentsBusyError, PooledAgent
from server.models import MAX_SEED
from server.sessions import SessionCapacityError, SessionStore

AGENTS: tuple[str, ...] = ("heuristic", "planner", "ppo", "team_heuristic", "team_planner", "team_ppo")
"""Agents the page offers, those :func:`policies.load` can build here. One that plays the flat
track does (through the composed env, as the grader's flat runner); a team-only one plays
the team track (each role in turn through the AEC env, as the grader's team runner)."""

TRACKS: tuple[str, ...] = ("flat", "team")
CHARTS: tuple[tuple[str, str], ...] = (
    ("queue", "patients waiting"),
    ("occupancy", "beds occupied (%)"),
    ("deaths", "deaths"),
    ("score", "score so far (0-100)"),
)
"""(history column, chart title) of the per-tick charts."""

WEB_CONCURRENCY = 4
"""Gradio events run at once per handler (each in a worker thread)."""

PNG_CACHE_ENTRIES = 64
"""Encoded frames kept in memory (least recently used first out): the image cache's bound."""

GRADIO_CACHE_SWEEP: tuple[int, int] = (300, 600)
"""Gradio's ``delete_cache`` (every, older than; seconds): any file Gradio itself writes for the
page is removed on this schedule. The boards write none (:func:`in_memory`)."""

logger = logging.getLogger("server.web")

WEB_QUEUE_POLL_S: tuple[float, float] = (0.01, 0.1)
"""How often Gradio's queue looks for new events and for progress to send (seconds; its own
defaults on Linux: 0.001 and 0.01)."""

BOARD_SCALE = 2
"""The 240 × 480 frame is drawn at this integer zoom (crisp cells, no smoothing)."""


def available_agents() -> list[str]:
    """The agents of :data:`AGENTS` that load here (PPO needs the ``train`` extra's torch)."""
    names = set(policies.names())
    return [name for name in AGENTS if name in names]


@functools.cache
def _role_choices(role: str) -> tuple[tuple[str, int], ...]:
    """(label, role action) of every action of ``role``, from the action table."""
    return tuple(
        (f"{k} · {ACTION_TABLE[flat].label}" if k else "0 · no-op", k)
        for k, flat in enumerate(ROLE_FLAT[role])
    )


def _flat_label(flat: int) -> str:
    return f"{flat} · {ACTION_TABLE[flat].label}"


def _board(h: Hospital) -> np.ndarray:
    """The env's ``rgb_array`` frame as it is (the boards' pictures scale it: :data:`BOARD_SCALE`)."""
    frame = render_frame(h, "rgb_array")
    assert isinstance(frame, np.ndarray)
    return frame


def _figures(h: Hospital) -> dict[str, float]:
    census = h.census()
    beds = h.scenario.general_beds + h.scenario.icu_beds
    return {
        "tick": h.tick_count,
        "queue": len(h.queue),
        "occupancy": round(100.0 * (census["general"] + census["icu"]) / beds, 1),
        "deaths": h.counters.deaths,
        "score": round(h.score(), 2),
        "reward": round(h.counters.cumulative_reward, 2),
    }


class WebError(ValueError):
    """A request the page cannot carry out (shown to the user; nothing changes)."""


@dataclass(frozen=True)
class TabView:
    """What the page shows of a tab's day, as plain data: made where the tab's episodes run (the
    web host's process, :mod:`server.web_host`), drawn by the page in the server's."""

    started: bool
    status: str = ""
    """The status line when there is no message: the last move's outcome, or the day."""
    track: str = "flat"
    you_board: str | None = None
    """Your board as a PNG ``data:`` URL (:data:`FRAMES`)."""
    you_metrics: str = ""
    agent_board: str | None = None
    agent_metrics: str = ""
    legal: tuple[bool, ...] = ()
    """Your legal flat actions this tick (all False on the team track or once the shift is over)."""
    roles: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    """Your legal (label, action) choices per role (team track)."""
    history: tuple[dict[str, Any], ...] = ()
    """Per-tick figures of both episodes (the charts)."""


ACTS = frozenset({"new_day", "ensure_day", "play_flat", "play_team", "agent_step", "agent_finish"})
"""What a page's event may ask of a tab's episodes (:meth:`WebEpisodes.perform`)."""


_DEFAULT_AGENTS: AgentPool | None = None
_DEFAULT_LOCK = threading.Lock()


def default_agents() -> AgentPool:
    """The process's agent pool for episodes made without one (the app gives each page its own)."""
    global _DEFAULT_AGENTS
    with _DEFAULT_LOCK:
        if _DEFAULT_AGENTS is None:
            _DEFAULT_AGENTS = AgentPool()
        return _DEFAULT_AGENTS


@dataclass
class WebEpisodes:
    """One browser tab's day: your episode and the agent's, same scenario and seed."""

    default_scenario: str
    scenario: str = ""
    seed: int = 0
    track: str = "flat"
    agent_name: str = "heuristic"
    you: HospitalEDEnv | HospitalEDTeamEnv | None = None
    agent_env: HospitalEDEnv | HospitalAECEnv | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    last_outcome: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    agents: AgentPool | None = None
    """Where the agent's process comes from (None: :func:`default_agents`)."""
    client: str = ""
    """Whose tab this is (the agent pool's per-client share)."""

    def __post_init__(self) -> None:
        self.scenario = self.scenario or self.default_scenario
        self._policy: PooledAgent | None = None
        self._agent_obs: Any = None
        self._agent_mask: Any = None

    # ----------------------------------------------------------- episodes
    def new_day(self, scenario: str, seed: Any, track: str, agent: str) -> None:
        """Start both episodes on one day (raises :class:`WebError` on a bad choice)."""
        if scenario not in SCENARIOS:
            raise WebError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
        if isinstance(seed, float) and seed.is_integer():
            seed = int(seed)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise WebError(f"the seed is a whole number in 0..{MAX_SEED}, got {seed!r}")
        if track not in TRACKS:
            raise WebError(f"the track is flat or team, got {track!r}")
        if agent not in available_agents():
            raise WebError(f"unknown agent {agent!r}; choose one of {', '.join(available_agents())}")
        policy = self._policy
        if policy is None or policy.name != agent:
            # In a process of its own, it sees the sealed present only (SPEC §12).
            pool = self.agents if self.agents is not None else default_agents()
            policy = pool.agent(agent, self.client)
        tracks = policy.tracks  # raises AgentsBusyError / PolicyFault before anything changes
        if policy is not self._policy:
            if self._policy is not None:
                self._policy.close()
            self._policy = policy
        self.scenario, self.seed, self.track, self.agent_name = scenario, seed, track, agent
        self.you = (HospitalEDTeamEnv if track == "team" else HospitalEDEnv)(scenario=scenario)
        self.you.reset(seed=seed)
        if "flat" in tracks:
            self.agent_env = HospitalEDEnv(scenario=scenario)
            self._agent_obs, info = self.agent_env.reset(seed=seed)
            self._agent_mask = info["action_mask"]
        else:
            self.agent_env = HospitalAECEnv(scenario=scenario)
            self.agent_env.reset(seed=seed)
        self._policy.start(policy_seed(seed), Seal(self.agent_env.hospital))
        self.history = [
            {**_figures(self.you.hospital), "who": "you"},
            {**_figures(self.agent_env.hospital), "who": "agent"},
        ]
        self.last_outcome = ""

    def ensure_day(self, scenario: str, seed: Any, track: str, agent: str) -> None:
        """Start a day unless one is under way (a page (re)loading)."""
        if not self.started:
            self.new_day(scenario, seed, track, agent)

    @property
    def started(self) -> bool:
        return self.you is not None

    def _your_hospital(self) -> Hospital:
        if self.you is None:
            raise WebError("no day yet: press New day")
        return self.you.hospital

    def play_flat(self, action: int) -> None:
        """Your tick on the flat track; the agent keeps pace."""
        h = self._your_hospital()
        if self.track != "flat":
            raise WebError("this day is on the team track: choose one action per role")
        if h.done:
            raise WebError("your shift is over: press New day")
        if not 0 <= action < N_FLAT_ACTIONS:
            raise WebError(f"no action {action}")
        _, _, _, _, info = self.you.step(action)  # type: ignore[union-attr]
        self.last_outcome = f"{_flat_label(action)}: {OUTCOME_NAMES[info['outcome']]}"
        self._after_your_tick()

    def play_team(self, joint: dict[str, Any]) -> None:
        """Your tick on the team track (one action per role, in role order); the agent keeps pace."""
        h = self._your_hospital()
        if self.track != "team":
            raise WebError("this day is on the flat track: press one action")
        if h.done:
            raise WebError("your shift is over: press New day")
        actions = [joint.get(role) or 0 for role in ROLES]
        for role, a in zip(ROLES, actions):
            if not isinstance(a, int) or not 0 <= a < len(ROLE_FLAT[role]):
                raise WebError(f"no {role} action {a!r}")
        _, _, _, _, info = self.you.step(np.array(actions))  # type: ignore[union-attr]
        self.last_outcome = ", ".join(
            f"{role}: {OUTCOME_NAMES[code]}" for role, code in zip(ROLES, info["outcomes"])
        )
        self._after_your_tick()

    def _after_your_tick(self) -> None:
        h = self._your_hospital()
        self.history.append({**_figures(h), "who": "you"})
        if self.agent_hospital.done or self.agent_hospital.tick_count >= h.tick_count:
            return
        with self._agent().holding():  # one process for the whole event
            while not self.agent_hospital.done and self.agent_hospital.tick_count < h.tick_count:
                self.agent_step()

    def _agent(self) -> PooledAgent:
        if self._policy is None:
            raise WebError("no day yet: press New day")
        return self._policy

    def close(self) -> None:
        """The tab's session ended: its agent's process stops."""
        if self._policy is not None:
            self._policy.close()

    @property
    def agent_hospital(self) -> Hospital:
        if self.agent_env is None:
            raise WebError("no day yet: press New day")
        return self.agent_env.hospital

    def agent_step(self) -> None:
        """One tick of the agent's episode (nothing once its shift is over)."""
        if self.agent_hospital.done:
            return
        env, policy = self.agent_env, self._agent()
        if isinstance(env, HospitalAECEnv):
            with policy.holding():
                for role in ROLES:  # one turn each, then the tick (the env runs it after the last role)
                    seen = env.observe(role)
                    env.step(policy.act_role(role, seen["observation"], seen["action_mask"]))
        else:
            action = policy.act(self._agent_obs, self._agent_mask)
            self._agent_obs, _, _, _, info = env.step(action)  # type: ignore[union-attr]
            self._agent_mask = info["action_mask"]
        self.history.append({**_figures(self.agent_hospital), "who": "agent"})

    def agent_finish(self) -> None:
        """The agent plays the rest of its shift."""
        if self.agent_hospital.done:
            return
        with self._agent().holding():  # one process for the whole event
            while not self.agent_hospital.done:
                self.agent_step()

    def perform(self, act: str, args: tuple[Any, ...] = ()) -> tuple[str | None, str, TabView]:
        """One page event: ``act`` (one of :data:`ACTS`) with ``args`` under the tab's lock, then
        the view; a refusal comes back as ``("refused" | "agent", why, view)``, not raised, so one
        round trip serves an event when the episodes run in another process."""
        if act not in ACTS:
            raise ValueError(f"no web action {act!r}; one of {sorted(ACTS)}")
        with self.lock:
            try:
                getattr(self, act)(*args)
            except WebError as exc:
                return "refused", str(exc), self.view()
            except (AgentsBusyError, PolicyFault) as exc:
                return "agent", str(exc), self.view()
            return None, "", self.view()

    def view(self) -> TabView:
        """What the page shows now (boards encoded as PNG URLs here, where the frames are)."""
        if not self.started:
            return TabView(started=False)
        you, agent = self._your_hospital(), self.agent_hospital
        status = (
            f"Last move: {self.last_outcome}"
            if self.last_outcome
            else f"Day: **{self.scenario}**, seed **{self.seed}**, track **{self.track}**, agent "
            f"**{self.agent_name}**."
        )
        return TabView(
            started=True,
            status=status,
            track=self.track,
            you_board=FRAMES.data_url(_board(you), BOARD_SCALE),
            you_metrics=metrics_markdown(you, "You"),
            agent_board=FRAMES.data_url(_board(agent), BOARD_SCALE),
            agent_metrics=metrics_markdown(agent, f"Agent ({self.agent_name})"),
            legal=tuple(self.legal_flat()),
            roles=self.legal_roles(),
            history=tuple(self.history),
        )

    # --------------------------------------------------------------- views
    def legal_flat(self) -> list[bool]:
        h = self._your_hospital()
        return [False] * N_FLAT_ACTIONS if h.done or self.track != "flat" else list(h.flat_mask())

    def legal_roles(self) -> dict[str, list[tuple[str, int]]]:
        h = self._your_hospital()
        if h.done or self.track != "team":
            return {role: [] for role in ROLES}
        flat = h.flat_mask()
        return {
            role: [c for c, ok in zip(_role_choices(role), h.role_mask(role, flat)) if ok] for role in ROLES
        }


def metrics_markdown(h: Hospital, who: str) -> str:
    """The live figures of one board, as a small Markdown table."""
    f = _figures(h)
    state = "shift over" if h.truncated else "too many deaths: stopped" if h.terminated else "playing"
    return (
        f"**{who}** — tick **{f['tick']}** / {h.max_ticks} ({state})\n\n"
        "| queue | occupancy | deaths | score | reward |\n|---|---|---|---|---|\n"
        f"| {f['queue']} | {f['occupancy']:.1f}% | {f['deaths']} | {f['score']:.1f} | {f['reward']:+.1f} |"
    )


# ------------------------------------------------------------ tab sessions
class TabSessions:
    """Each browser tab's web session in a :class:`SessionStore` (any environment's page).

    A handler's first event opens the tab's session (counted, capped, per client); a
    session that expired is replaced with a note; the tab's unload closes it. Handlers
    run the episode action under the episodes' own lock, in Gradio's worker threads.
    """

    def __init__(self, store: SessionStore[Any]) -> None:
        self.store = store
        self._tabs: dict[str, str] = {}  # Gradio's per-tab session hash -> web session id
        self._lock = threading.Lock()

    def session(self, sid: str | None, request: gr.Request | None) -> tuple[str, Any, str]:
        """The tab's web session, opening a fresh one if it has none or it expired."""
        store = self.store
        client = request.client.host if request is not None and request.client else ""
        if sid is not None:
            with store.lock:
                episodes = store.get(sid, client)  # a tab's session is its client's, as every session
            if episodes is not None:
                return sid, episodes, ""
        with store.lock:
            new_sid, episodes = store.open(client)
        episodes.client = client
        episodes.session_hash = request.session_hash if request is not None else None  # its page
        if request is not None and request.session_hash:
            with self._lock:
                self._tabs[request.session_hash] = new_sid
        note = (
            f"(Your previous session ended after {store.ttl_s:g} s idle: a new one started.) " if sid else ""
        )
        return new_sid, episodes, note

    def run(
        self,
        view: Callable[..., list[Any]],
        act: Callable[..., None],
        sid: str | None,
        args: tuple[Any, ...],
        request: gr.Request,
    ) -> list[Any]:
        """Carries out ``act`` on the tab's episodes (opening its session), then ``view(sid, episodes,
        message)``; a full server or a :class:`WebError` is shown on the page, nothing changes."""
        try:
            sid, episodes, note = self.session(sid, request)
        except SessionCapacityError as exc:
            return view(sid, None, f"**The server is full:** {exc}")
        try:
            with episodes.lock:
                try:
                    act(episodes, *args)
                except WebError as exc:
                    return view(sid, episodes, f"**Not done:** {exc}")
                except (AgentsBusyError, PolicyFault) as exc:
                    logger.warning("web view: the agent could not play: %s", str(exc)[:200])
                    return view(sid, episodes, f"**The agent could not play:** {exc}")
                return view(sid, episodes, note)
        finally:
            with self.store.lock:  # idle from the event's end, not its start (a day may take long)
                self.store.get(sid, episodes.client)

    def close_tab(self, request: gr.Request) -> None:
        with self._lock:
            sid = self._tabs.pop(request.session_hash, None) if request.session_hash else None
        if sid is not None:
            client = request.client.host if request.client else ""
            with self.store.lock:
                self.store.close(sid, client)


# ------------------------------------------------------------------ page
class PNGCache:
    """Frames encoded as PNG ``data:`` URLs, at most ``entries`` of them, in memory (thread-safe).

    Boards repeat (the agent's while it waits, an unchanged day on reload): a repeat costs a
    hash of the frame as rendered, not an encode (a frame is enlarged by ``scale`` only when it
    is encoded: hashing and enlarging the shown size cost ~3 ms a board, on every event). Nothing
    is written to disk, so nothing is shared between requests."""

    def __init__(self, entries: int = PNG_CACHE_ENTRIES) -> None:
        self.entries = entries
        self._urls: OrderedDict[bytes, str] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._urls)

    def data_url(self, frame: np.ndarray, scale: int = 1) -> str:
        """``frame`` (H, W, 3 uint8), each pixel shown as ``scale`` x ``scale``, as a PNG URL."""
        frame = np.ascontiguousarray(frame, dtype=np.uint8)
        key = hashlib.blake2b(
            frame.tobytes(), digest_size=16, person=repr((scale, *frame.shape)).encode()[:16]
        ).digest()
        with self._lock:
            url = self._urls.get(key)
            if url is not None:
                self._urls.move_to_end(key)
                return url
        if scale != 1:
            frame = frame.repeat(scale, axis=0).repeat(scale, axis=1)
        buffer = io.BytesIO()
        Image.fromarray(frame).save(buffer, format="PNG", compress_level=3)
        url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
        with self._lock:
            self._urls[key] = url
            while len(self._urls) > self.entries:
                self._urls.popitem(last=False)
        return url


FRAMES = PNGCache()
"""The process's encoded frames (every page and tab; bounded)."""


def in_memory(image: gr.Image, scale: int = 1) -> gr.Image:
    """``image`` with its numpy frames sent inside the event's reply, as a PNG ``data:`` URL from
    :data:`FRAMES`. Gradio's own ``gr.Image`` writes each frame to one file named by its content
    hash and serves that file: two tabs showing the same board rewrite the same file while the
    other's download reads it (truncated images, tracebacks), and the cache directory grows with
    every new board (~1 MB per 90 ticks measured). (Set on the instance: a ``gr.Image``
    subclass would make Gradio write a ``.pyi`` stub beside this module at import.)"""
    to_file = image.postprocess

    def postprocess(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            value = FRAMES.data_url(value, scale)
        if isinstance(value, str) and value.startswith("data:image/png;base64,"):  # encoded already
            return ImageData(url=value, mime_type="image/png", orig_name="board.png")
        return to_file(value)

    image.postprocess = postprocess  # type: ignore[method-assign]
    return image


class WebPage(gr.Blocks):
    """The pages' ``gr.Blocks``: Gradio's temporary files swept on a schedule, and input Gradio
    cannot even convert (a seed ``"abc"``, too few values) refused with one log line, not a
    traceback per request (it still reaches the browser as an error)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(delete_cache=GRADIO_CACHE_SWEEP, **kwargs)

    def run_startup_events(self) -> None:
        """Gradio's queue polls for new events (:data:`WEB_QUEUE_POLL_S`) instead of every 1 ms:
        ~900 wake-ups a second of the server's event loop with no page open (5 % of a CPU), each
        one a chance to delay a WebSocket step; a click now waits up to 10 ms more to start."""
        self._queue.sleep_when_free, self._queue.progress_update_sleep_when_free = WEB_QUEUE_POLL_S
        super().run_startup_events()

    async def preprocess_data(self, block_fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().preprocess_data(block_fn, *args, **kwargs)
        except gr.Error:
            raise
        except Exception as exc:  # Gradio's own validation: the request's fault, not the server's
            reason = next(
                (line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__
            )
            logger.warning(
                "web view: bad input to %s refused: %s", getattr(block_fn, "name", "?"), reason[:200]
            )
            raise gr.Error(f"Bad input: {reason}", print_exception=False) from None


def picture(label: str, elem_id: str, scale: int = 1) -> gr.Image:
    """A read-only picture of an env's ``rgb_array`` frame (numpy in, PNG in the reply; each
    pixel ``scale`` x ``scale``)."""
    return in_memory(
        gr.Image(
            label=label,
            show_label=False,
            buttons=[],
            type="numpy",
            interactive=False,
            elem_id=elem_id,
            format="png",
        ),
        scale,
    )


def gradio_builder(
    build_page: Callable[[Any, str, str], gr.Blocks], store: Any, choice: str
) -> Callable[..., gr.Blocks]:
    """The ``gradio_builder`` OpenEnv's ``create_app`` calls (with its web manager, action
    fields, metadata, chat flag, title and quick-start text; a page needs only the title):
    ``build_page(store, choice, title)`` for the served env's page (``choice``: scenario or task)."""

    def build(
        web_manager: Any,
        action_fields: Any,
        metadata: Any,
        is_chat_env: bool,
        title: str,
        quick_start_md: str,
    ) -> gr.Blocks:
        return build_page(store, choice, title)

    return build


def web_view_builder(store: SessionStore[WebEpisodes], scenario: str) -> Callable[..., gr.Blocks]:
    """The ED page's builder for ``create_app``."""
    return gradio_builder(build_web_view, store, scenario)


@dataclass
class _EDPage:
    """The ED page's components, in the order every handler returns them (:meth:`outputs`)."""

    sid_state: Any
    scenario: Any
    seed: Any
    track: Any
    agent: Any
    new_day: Any
    status: Any
    you_board: Any
    you_metrics: Any
    agent_board: Any
    agent_metrics: Any
    flat_group: Any
    team_group: Any
    flat_buttons: list[Any]
    role_radios: list[Any]
    team_play: Any
    agent_tick: Any
    agent_finish: Any
    charts: list[Any]

    def outputs(self) -> list[Any]:
        return [
            self.sid_state,
            self.status,
            self.you_board,
            self.you_metrics,
            self.agent_board,
            self.agent_metrics,
            self.flat_group,
            self.team_group,
            *self.flat_buttons,
            *self.role_radios,
            *self.charts,
        ]

    def agent_outputs(self) -> list[Any]:
        """What the agent's buttons change (:func:`_agent_view` order): its board and figures, the
        status line and the charts. Your board and your legal moves stay as they are: each of the
        39 move buttons' updates makes Gradio build a component on the event loop (~0.1 ms each)."""
        return [self.sid_state, self.status, self.agent_board, self.agent_metrics, *self.charts]


def _ed_layout(scenario: str, agents: list[str]) -> _EDPage:
    """The ED page's components (inside the page's ``gr.Blocks``): the day's pick, both boards,
    the moves of both tracks, the agent's buttons, the charts."""
    sid_state = gr.State(None)
    gr.Markdown(
        "## The emergency department, live\n"
        "Pick a day (scenario and seed), then play it tick by tick with the legal actions below, "
        "while an agent plays the same day beside you. Cells are patients coloured by severity "
        "(green 1 … red 5); rows: 20 general beds, 5 ICU beds and 3 ventilators, the waiting "
        "queue, then time, deaths and queue-length bars."
    )
    with gr.Row():
        scenario_pick = gr.Dropdown(list(SCENARIOS), value=scenario, label="Scenario", elem_id="scenario")
        seed = gr.Number(value=0, precision=0, minimum=0, label="Seed (the day)", elem_id="seed")
        track = gr.Radio(list(TRACKS), value="flat", label="Your track", elem_id="track")
        agent = gr.Dropdown(agents, value=agents[0], label="Agent", elem_id="agent")
        new_day = gr.Button("New day", variant="primary", elem_id="new-day")
    status = gr.Markdown(elem_id="status")
    with gr.Row():
        with gr.Column():
            you_board = picture("Your ED", "board-you", BOARD_SCALE)
            you_metrics = gr.Markdown(elem_id="metrics-you")
        with gr.Column():
            agent_board = picture("The agent's ED", "board-agent", BOARD_SCALE)
            agent_metrics = gr.Markdown(elem_id="metrics-agent")
    with gr.Group(visible=True) as flat_group:
        gr.Markdown("**Your move** — the legal actions this tick (flat track):")
        with gr.Row():
            flat_buttons = [
                gr.Button(_flat_label(i), size="sm", visible=False, elem_id=f"act-{i}", min_width=80)
                for i in range(N_FLAT_ACTIONS)
            ]
    with gr.Group(visible=False) as team_group:
        gr.Markdown("**Your move** — one legal action per role, carried out in this order (team track):")
        role_radios = [gr.Radio([], value=0, label=role, elem_id=f"role-{role}") for role in ROLES]
        team_play = gr.Button("Play this tick", variant="primary", elem_id="team-play")
    with gr.Row():
        agent_tick = gr.Button("Agent: one tick", elem_id="agent-tick")
        agent_finish = gr.Button("Agent: finish the shift", elem_id="agent-finish")
    with gr.Row():
        charts = [
            gr.LinePlot(
                x="tick",
                y=column,
                color="who",
                color_map={"you": "#1f77b4", "agent": "#ff7f0e"},
                title=chart_title,
                height=220,
                elem_id=f"chart-{column}",
            )
            for column, chart_title in CHARTS
        ]
    return _EDPage(
        sid_state, scenario_pick, seed, track, agent, new_day, status, you_board, you_metrics,
        agent_board, agent_metrics, flat_group, team_group, flat_buttons, role_radios, team_play,
        agent_tick, agent_finish, charts,
    )  # fmt: skip


def _ed_view(sid: str | None, episodes: Any, message: str = "") -> list[Any]:
    """Every output of the ED page (:meth:`_EDPage.outputs` order) for the tab's episodes (a
    :class:`WebEpisodes` or :class:`server.web_host.RemoteTab`: anything with ``view()``)."""
    view = _view_of(episodes)
    if not view.started:
        hidden = [gr.update(visible=False)] * N_FLAT_ACTIONS
        empty = [gr.update(choices=[], value=None)] * len(ROLES)
        return [
            sid,
            message,
            None,
            "",
            None,
            "",
            gr.update(),
            gr.update(),
            *hidden,
            *empty,
            *[None] * len(CHARTS),
        ]
    sid, line, agent_board, agent_metrics, *charts = _agent_outputs(sid, view, message)
    return [
        sid,
        line,
        view.you_board,
        view.you_metrics,
        agent_board,
        agent_metrics,
        gr.update(visible=view.track == "flat"),
        gr.update(visible=view.track == "team"),
        *[gr.update(visible=ok) for ok in view.legal],
        *[gr.update(choices=view.roles[role], value=0 if view.roles[role] else None) for role in ROLES],
        *charts,
    ]


def _view_of(episodes: Any) -> TabView:
    return episodes.view() if episodes is not None else TabView(started=False)


def _agent_view(sid: str | None, episodes: Any, message: str = "") -> list[Any]:
    """The outputs the agent's buttons change (:meth:`_EDPage.agent_outputs` order)."""
    return _agent_outputs(sid, _view_of(episodes), message)


def _agent_outputs(sid: str | None, view: TabView, message: str) -> list[Any]:
    if not view.started:
        return [sid, message, None, "", *[None] * len(CHARTS)]
    history = pd.DataFrame(list(view.history))
    return [
        sid,
        message or view.status,
        view.agent_board,
        view.agent_metrics,
        *[history[["tick", "who", column]] for column, _ in CHARTS],
    ]


def _play_team(episodes: Any, *choices: Any) -> None:
    episodes.play_team(dict(zip(ROLES, choices)))


def _named(act: str, *bound: Any) -> Callable[..., None]:
    """An event's action, called by name on the tab's episodes (local or in the web host)."""

    def call(episodes: Any, *args: Any) -> None:
        getattr(episodes, act)(*bound, *args)

    return call


def _wire_ed_events(page: gr.Blocks, parts: _EDPage, tabs: TabSessions) -> None:
    """Each control's event: the tab's session, the action, then the whole view."""
    run = functools.partial(tabs.run, _ed_view)

    # Gradio passes the request only to a parameter it can see: one wrapper per arity.
    View = Callable[..., list[Any]]

    def handler(act: Callable[..., None], view: View = _ed_view) -> View:
        def on_click(sid: str | None, request: gr.Request) -> list[Any]:
            return tabs.run(view, act, sid, (), request)

        return on_click

    def day_handler(act: Callable[..., None]) -> Callable[..., list[Any]]:
        def on_day(
            sid: str | None, scenario_: Any, seed_: Any, track_: Any, agent_: Any, request: gr.Request
        ) -> list[Any]:
            return run(act, sid, (scenario_, seed_, track_, agent_), request)

        return on_day

    def on_team(
        sid: str | None, triage: Any, bed_manager: Any, ventilator_officer: Any, request: gr.Request
    ) -> list[Any]:
        return run(_play_team, sid, (triage, bed_manager, ventilator_officer), request)

    day_inputs = [parts.sid_state, parts.scenario, parts.seed, parts.track, parts.agent]
    one = [parts.sid_state]
    events = {"outputs": parts.outputs(), "concurrency_limit": WEB_CONCURRENCY}
    page.load(day_handler(_named("ensure_day")), inputs=day_inputs, **events)
    parts.new_day.click(day_handler(_named("new_day")), inputs=day_inputs, **events)
    for i, button in enumerate(parts.flat_buttons):
        button.click(handler(_named("play_flat", i)), inputs=one, **events)
    parts.team_play.click(on_team, inputs=[parts.sid_state, *parts.role_radios], **events)
    agent_events = events | {"outputs": parts.agent_outputs()}
    parts.agent_tick.click(handler(_named("agent_step"), _agent_view), inputs=one, **agent_events)
    parts.agent_finish.click(handler(_named("agent_finish"), _agent_view), inputs=one, **agent_events)
    page.unload(tabs.close_tab)


def build_web_view(
    store: SessionStore[WebEpisodes], scenario: str, title: str = "hospital_marl"
) -> gr.Blocks:
    """The page. Every handler takes the tab's session id and returns the whole view."""
    tabs = TabSessions(store)
    with WebPage(title=title) as page:
        parts = _ed_layout(scenario, available_agents())
        _wire_ed_events(page, parts, tabs)
    return page
