"""The web view at ``/web`` when the server serves radiotherapy planning (``--env radiotherapy --web``).

The page shows your plan and an agent's plan for the same patient (task and seed),
side by side, each as the env's own ``rgb_array`` frame (dose wash with its colour bar in Gy,
isodose lines, contours with a legend, axes in cm, A/P/R/L and beams beside the DVH,
:func:`hospital_marl.radiotherapy.envs.render.render_rgb_array`);
the legal actions as buttons (THE action table, :data:`~hospital_marl.radiotherapy.core.plan.ACTIONS`,
shown as the env's exact mask allows); an agent (evenly spaced beams, the planner, the
shipped PPO) that plans step by step or to the end; live plan metrics (score, D95, V95,
CI, HI, each OAR's constraint).

Sessions are the ED page's (:class:`server.web.TabSessions`): each tab its own counted,
capped, expiring web session; handlers run in Gradio's worker threads. As the ED's, each tab's
plans and agent run in the web host's process (:mod:`server.web_host`, :class:`RemoteRTTab`): three
tabs running the planner in the server's process raised one ``/ws`` client's step p50 from 0.89
to 10.5 ms and its p99 from 4.9 to 124 ms (issue 43). An event is one round trip there
(:meth:`RTWebEpisodes.perform`), its view (:class:`RTTabView`, pictures as PNG URLs) plain data.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gradio as gr
import numpy as np

import policies.radiotherapy as rt_policies
from grading.common import policy_seed
from hospital_marl.radiotherapy import RadiotherapyPlanningEnv
from hospital_marl.radiotherapy.core.fmo import FMOResult, optimise_fluence
from hospital_marl.radiotherapy.core.plan import ACTIONS, N_ACTIONS
from hospital_marl.radiotherapy.core.sealed import PlanSeal
from hospital_marl.radiotherapy.core.tasks import TASKS
from server.models import MAX_SEED
from server.sessions import SessionStore
from server.web import FRAMES, WEB_CONCURRENCY, TabSessions, WebError, WebPage, gradio_builder, picture

AGENTS: tuple[str, ...] = ("planner", "anatomy_aware", "evenly_spaced", "ppo")
"""Agents the page offers, those :func:`policies.radiotherapy.load` can build here."""

PICTURE_SCALE = 2
"""The 256 × 512 frame is drawn at this integer zoom."""


def available_agents() -> list[str]:
    names = set(rt_policies.names())
    return [name for name in AGENTS if name in names]


def _frame(env: RadiotherapyPlanningEnv) -> np.ndarray:
    """The env's ``rgb_array`` frame as it is (enlarged by :data:`PICTURE_SCALE` when encoded)."""
    frame = env.render()
    assert isinstance(frame, np.ndarray)
    return frame


def action_label(action: int) -> str:
    return f"{action} · {ACTIONS[action].name.replace('_', ' ')}"


@dataclass(frozen=True)
class RTTabView:
    """What the page shows of a tab's two plans, as plain data: made where the plans run (the web
    host's process), drawn by the page in the server's."""

    started: bool
    status: str = ""
    """The status line when there is no message: the last move's outcome, or the patient."""
    you_picture: str | None = None
    """Your plan's frame as a PNG ``data:`` URL (:data:`~server.web.FRAMES`)."""
    agent_picture: str | None = None
    you_metrics: str = ""
    agent_metrics: str = ""
    legal: tuple[bool, ...] = ()


RT_ACTS = frozenset({"new_plan", "ensure_plan", "play", "agent_step", "agent_finish"})
"""What a page's event may ask of a tab's plans (:meth:`RTWebEpisodes.perform`)."""


@dataclass
class RTWebEpisodes:
    """One browser tab's patient: your plan and the agent's, same task and seed."""

    default_task: str
    task: str = ""
    seed: int = 0
    agent_name: str = ""
    you: RadiotherapyPlanningEnv | None = None
    agent_env: RadiotherapyPlanningEnv | None = None
    last_action: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.task = self.task or self.default_task
        self._policy: Any = None
        self._agent_obs: Any = None
        self._agent_info: dict[str, Any] = {}
        self._your_info: dict[str, Any] = {}
        self.fmo: FMOResult | None = None

    @property
    def started(self) -> bool:
        return self.you is not None

    def new_plan(self, task: Any, seed: Any, agent: Any) -> None:
        """Start both plans on one patient (raises :class:`WebError` on a bad choice)."""
        if task not in TASKS:
            raise WebError(f"unknown task {task!r}; valid names: {', '.join(TASKS)}")
        if isinstance(seed, float) and seed.is_integer():
            seed = int(seed)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise WebError(f"the seed must be a whole number in 0..{MAX_SEED}, got {seed!r}")
        if agent not in available_agents():
            raise WebError(f"unknown agent {agent!r}; available: {', '.join(available_agents())}")
        policy = rt_policies.load(agent)
        you = RadiotherapyPlanningEnv(task, render_mode="rgb_array")
        agent_env = RadiotherapyPlanningEnv(task, render_mode="rgb_array")
        _, self._your_info = you.reset(seed=seed)
        self._agent_obs, self._agent_info = agent_env.reset(seed=seed)
        self._seal = PlanSeal(agent_env.plan)  # the policy reads a copy (SPEC §12)
        policy.reset(seed=policy_seed(seed), plan=self._seal.view)  # as the RT grader seeds it
        self.task, self.seed, self.agent_name = task, seed, agent
        self.you, self.agent_env, self._policy = you, agent_env, policy
        self.last_action = ""
        self.fmo = optimise_fluence(agent_env.plan)  # the reference on this patient (seconds)

    def ensure_plan(self, task: Any, seed: Any, agent: Any) -> None:
        """:meth:`new_plan` unless the tab has one (the page's load: a reload keeps the plans)."""
        if not self.started:
            self.new_plan(task, seed, agent)

    def perform(self, act: str, args: tuple[Any, ...] = ()) -> tuple[str | None, str, RTTabView]:
        """One page event: ``act`` (one of :data:`RT_ACTS`) with ``args`` under the tab's lock, then
        the view; a refusal comes back as ``("refused", why, view)``, not raised, so one round trip
        serves an event when the plans live in another process."""
        if act not in RT_ACTS:
            raise ValueError(f"no web action {act!r}; one of {sorted(RT_ACTS)}")
        with self.lock:
            try:
                getattr(self, act)(*args)
            except WebError as exc:
                return "refused", str(exc), self.view()
            return None, "", self.view()

    def view(self) -> RTTabView:
        """What the page shows now (pictures encoded as PNG URLs here, where the frames are)."""
        if self.you is None or self.agent_env is None:
            return RTTabView(started=False)
        status = (
            f"Last move: {self.last_action}"
            if self.last_action
            else f"Patient: **{self.task}**, seed **{self.seed}**, agent **{self.agent_name}**."
        )
        return RTTabView(
            started=True,
            status=status,
            you_picture=FRAMES.data_url(_frame(self.you), PICTURE_SCALE),
            agent_picture=FRAMES.data_url(_frame(self.agent_env), PICTURE_SCALE),
            you_metrics=metrics_markdown(self.you, self._your_info, "You"),
            agent_metrics=metrics_markdown(self.agent_env, self._agent_info, f"Agent ({self.agent_name})")
            + "\n\n"
            + fmo_markdown(self.fmo, self.agent_env.task.rx_gy),
            legal=tuple(self.legal()),
        )

    def close(self) -> None:
        """The tab's session ended (nothing held beyond memory: the agents plan in-process here)."""
        self.you = self.agent_env = self._policy = None

    def legal(self) -> list[bool]:
        """Your plan's exact action mask (all False once locked)."""
        if self.you is None or self.you.plan.done:
            return [False] * N_ACTIONS
        return [bool(ok) for ok in self.you.action_masks()]

    def play(self, action: int) -> None:
        if self.you is None:
            raise WebError("no plan yet: press New plan")
        if not self.legal()[action]:
            raise WebError(f"{action_label(action)} is not legal now (the plan changed, or it is locked)")
        _, reward, *_, self._your_info = self.you.step(action)
        self.last_action = f"{action_label(action)} (reward {reward:+.3f})"

    def agent_step(self) -> None:
        if self.agent_env is None:
            raise WebError("no plan yet: press New plan")
        if self.agent_env.plan.done:
            raise WebError("the agent's plan is locked: press New plan for another patient")
        self._seal.refresh()
        action = int(self._policy.act(self._agent_obs, self._agent_info["action_mask"]))
        self._agent_obs, _, _, _, self._agent_info = self.agent_env.step(action)

    def agent_finish(self) -> None:
        self.agent_step()
        while self.agent_env is not None and not self.agent_env.plan.done:
            self.agent_step()


def fmo_markdown(fmo: FMOResult | None, rx: float) -> str:
    """The FMO reference on the tab's patient (:mod:`hospital_marl.radiotherapy.core.fmo`)."""
    if fmo is None:
        return ""
    m = fmo.metrics
    return (
        f"**FMO reference** on this patient (beamlet fluence optimisation, {fmo.open_angles} angles): "
        f"score **{fmo.score:.3f}**, D98 {m['d98'] * rx:.1f} Gy, D2 {m['d2'] * rx:.1f} Gy, CI {m['ci']:.2f}"
    )


def metrics_markdown(env: RadiotherapyPlanningEnv, info: dict[str, Any], who: str) -> str:
    """The plan's live figures in Gy: tumour (ICRU 83 D98 / D50 / D2, V95 as % of the tumour, CI,
    HI), then one row per clinical constraint (value against limit, the source in the task data)."""
    m, task = info["metrics"], env.task
    rx = task.rx_gy
    state = "locked" if env.plan.done else "planning"
    rows = []
    for o in task.oars:
        for c, (value, _limit, ok) in zip(o.constraints, m["oars"][o.name]["constraints"]):
            shown = f"{100 * value:.1f} %" if c.metric == "volume" else f"{value * rx:.1f} Gy"
            rows.append(
                f"| {o.name} (P{o.priority}) | {c.describe()} | {shown} | {'pass' if ok else '**FAIL**'} |"
            )
    apertures = ", ".join(f"{a}° ×{w:.1f} m{mm:g}" for a, w, mm in beam_rows(env))
    return (
        f"**{who}** — step **{info['steps']}** / {task.max_steps} ({state}), "
        f"score **{info['score']:.3f}** — Rx {rx:g} Gy in {task.fractions} fx\n\n"
        "| beams | D98 | D50 | D2 | V95 | CI | HI |\n|---|---|---|---|---|---|---|\n"
        f"| {m['n_beams']} | {m['d98'] * rx:.1f} Gy | {m['d50'] * rx:.1f} Gy | {m['d2'] * rx:.1f} Gy "
        f"| {100 * m['v95']:.1f}% | {m['ci']:.2f} | {m['hi']:.2f} |\n\n"
        f"beams (angle, weight, aperture margin mm): {apertures or 'none'}\n\n"
        f"| organ at risk | constraint | value | |\n|---|---|---|---|\n" + "\n".join(rows)
    )


def beam_rows(env: RadiotherapyPlanningEnv) -> list[tuple[int, float, float]]:
    """(angle °, weight, aperture margin in mm) per beam."""
    plan = env.plan
    margins = getattr(plan, "margins", None)
    return [
        (a, w, (float(margins[i]) if margins is not None else 0.0) * env.task.voxel_mm)
        for i, (a, w) in enumerate(plan.beams())
    ]


def rt_web_view_builder(store: SessionStore[RTWebEpisodes], task: str) -> Callable[..., gr.Blocks]:
    """The RT page's builder for ``create_app``."""
    return gradio_builder(build_rt_web_view, store, task)


def build_rt_web_view(
    store: SessionStore[RTWebEpisodes], task: str, title: str = "hospital_marl"
) -> gr.Blocks:
    """The page. Every handler takes the tab's session id and returns the whole view."""
    agents = available_agents()
    tabs = TabSessions(store)

    with WebPage(title=title) as page:
        sid_state = gr.State(None)
        gr.Markdown(
            "## Radiotherapy treatment planning, live\n"
            "Pick a patient (task and seed), then place, turn and weight beams with the legal actions "
            "below and lock the plan, while an agent plans the same patient beside you. Left of each "
            "picture: the dose wash over the tumour (outlined) and the organs at risk, with the beams; "
            "right: the dose-volume histograms. Doses are in Gy, against the task's prescription (Rx)."
        )
        with gr.Row():
            task_pick = gr.Dropdown(list(TASKS), value=task, label="Task", elem_id="task")
            seed = gr.Number(value=0, precision=0, minimum=0, label="Seed (the patient)", elem_id="seed")
            agent = gr.Dropdown(agents, value=agents[0], label="Agent", elem_id="agent")
            new_plan = gr.Button("New plan", variant="primary", elem_id="new-plan")
        status = gr.Markdown(elem_id="status")
        pictures, metrics = [], []
        with gr.Row():
            for who, label in (("you", "Your plan"), ("agent", "The agent's plan")):
                with gr.Column():
                    pictures.append(picture(label, f"plan-{who}"))
                    metrics.append(gr.Markdown(elem_id=f"metrics-{who}"))
        gr.Markdown("**Your move** — the legal actions now:")
        with gr.Row():
            buttons = [
                gr.Button(action_label(i), size="sm", visible=False, elem_id=f"act-{i}", min_width=100)
                for i in range(N_ACTIONS)
            ]
        with gr.Row():
            agent_step = gr.Button("Agent: one step", elem_id="agent-step")
            agent_finish = gr.Button("Agent: finish the plan", elem_id="agent-finish")

        outputs = [sid_state, status, *pictures, *metrics, *buttons]

        def view(sid: str | None, episodes: Any, message: str = "") -> list[Any]:
            shown: RTTabView = episodes.view() if episodes is not None else RTTabView(started=False)
            if not shown.started:
                return [sid, message, None, None, "", "", *[gr.update(visible=False)] * N_ACTIONS]
            return [
                sid,
                message or shown.status,
                shown.you_picture,
                shown.agent_picture,
                shown.you_metrics,
                shown.agent_metrics,
                *[gr.update(visible=ok) for ok in shown.legal],
            ]

        run = functools.partial(tabs.run, view)

        def handler(act: Callable[..., None]) -> Callable[..., list[Any]]:
            def on_click(sid: str | None, request: gr.Request) -> list[Any]:
                return run(act, sid, (), request)

            return on_click

        def plan_handler(only_if_new: bool) -> Callable[..., list[Any]]:
            def on_plan(
                sid: str | None, task_: Any, seed_: Any, agent_: Any, request: gr.Request
            ) -> list[Any]:
                def start(episodes: Any, *args: Any) -> None:
                    (episodes.ensure_plan if only_if_new else episodes.new_plan)(*args)

                return run(start, sid, (task_, seed_, agent_), request)

            return on_plan

        plan_inputs = [sid_state, task_pick, seed, agent]
        events = {"outputs": outputs, "concurrency_limit": WEB_CONCURRENCY}
        page.load(plan_handler(only_if_new=True), inputs=plan_inputs, **events)
        new_plan.click(plan_handler(only_if_new=False), inputs=plan_inputs, **events)
        for i, button in enumerate(buttons):
            button.click(handler(_act("play", i)), inputs=[sid_state], **events)
        agent_step.click(handler(_act("agent_step")), inputs=[sid_state], **events)
        agent_finish.click(handler(_act("agent_finish")), inputs=[sid_state], **events)
        page.unload(tabs.close_tab)
    return page


def _act(name: str, *args: Any) -> Callable[[Any], None]:
    """An event's act: ``episodes.<name>(*args)`` (the tab's plans here or in the web host alike)."""

    def act(episodes: Any) -> None:
        getattr(episodes, name)(*args)

    return act
