"""The radiotherapy grader (SPEC-RT §6): rollouts -> a JSON-able report, and its tables.

Episode *i* of task *t* is seeded from ``(seed, t, i)`` (:func:`grading.common.episode_seed`,
as in the ED grader), which fixes the patient; the agent's own randomness is seeded
from the episode seed. Every agent is graded on the same patients, so differences
between agents are paired.

``agent`` may be:

- a name or path for :func:`policies.radiotherapy.load` (``"planner"``, ``"ppo"``, ...);
- an :class:`~policies.radiotherapy.RTPolicy` or any object with ``act(observation,
  action_mask)`` (the ED's flat-track policies qualify); ``reset(seed, plan=...)`` is
  called when it accepts a ``plan`` (a read-only view of a copy of the plan, SPEC §12), else
  ``reset(seed=...)``;
- the original's ``agent(obs, env) -> action`` callable (``env.action_space`` is seeded
  per episode, so ``env.action_space.sample()`` agents are reproducible).

A task's score is the mean over its episodes of the final plan score (with its
standard error); the aggregate is the mean of the task means.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.table import Table

from grading.common import check_count, episode_seed, mean, policy_seed, stderr
from grading.isolated import FAULTS, TIME_LIMIT, IsolatedRTPolicy
from grading.sandbox import Limits
from grading.tables import bar, markdown_table
from hospital_marl.radiotherapy.core.metrics import PASS_THRESHOLD, SCORE_FORMULA
from hospital_marl.radiotherapy.core.sealed import PlanSeal, PlanView
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, Task, get_task
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv

TUMOUR_METRICS = ("d95", "d98", "d2", "mean", "v95", "v107", "ci", "hi")


@dataclass(frozen=True)
class RTEpisode:
    seed: int
    score: float
    episode_return: float
    metrics: dict[str, Any]
    steps: int
    invalid_actions: int
    locked: bool


class _AgentEnv:
    """What the original's ``agent(obs, env)`` gets as ``env`` (SPEC §12): the spaces (its own
    action space, seeded per episode) and the read-only plan view, never the graded env."""

    def __init__(self, env: RadiotherapyPlanningEnv, plan: PlanView) -> None:
        self.action_space = copy.deepcopy(env.action_space)
        self.observation_space = env.observation_space
        self.plan = plan

    @property
    def unwrapped(self) -> _AgentEnv:
        return self


class _CallableAgent:
    """The original's ``agent(obs, env) -> action`` as a policy."""

    def __init__(self, fn: Callable[[Any, Any], Any]) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", type(fn).__name__)
        self.env: _AgentEnv | None = None

    def reset(self, seed: int | None = None, plan: Any = None) -> None:
        if self.env is not None:
            self.env.action_space.seed(seed)

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return int(self.fn(observation, self.env))


def as_agent(agent: Any) -> Any:
    """Anything :func:`grade_all` accepts -> an object with ``name``, ``reset`` and ``act``."""
    if isinstance(agent, str):
        from policies.radiotherapy import load

        return load(agent)
    if hasattr(agent, "act"):
        return agent
    if callable(agent):
        return _CallableAgent(agent)
    raise ValueError(f"agent must be a name, a policy with act(obs, mask) or agent(obs, env), got {agent!r}")


def reset_agent(agent: Any, seed: int, env: Any, plan: PlanView) -> None:
    """``reset`` with the read-only plan view when the agent takes a plan (SPEC §12). ``env``:
    the graded env, or anything with its ``action_space`` and ``observation_space`` (the
    isolated policy's process has only those)."""
    if isinstance(agent, _CallableAgent):
        agent.env = _AgentEnv(env, plan)
    reset = getattr(agent, "reset", None)
    if reset is None:
        return
    try:
        accepts_plan = "plan" in inspect.signature(reset).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        accepts_plan = False
    if accepts_plan:
        reset(seed=seed, plan=plan)
    else:
        reset(seed=seed)


def run_episode(agent: Any, task: Task, seed: int, split: str = "test_id") -> RTEpisode:
    """One graded episode on a patient of ``split``: reset with ``seed``, act until locked or truncated."""
    env = RadiotherapyPlanningEnv(task, split=split)
    obs, info = env.reset(seed=seed)
    seal = PlanSeal(env.plan)
    if isinstance(agent, IsolatedRTPolicy):
        agent.start(policy_seed(seed), env, seal)
    else:
        reset_agent(agent, policy_seed(seed), env, seal.view)
    total, done = 0.0, False
    while not done:
        seal.refresh()
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info["action_mask"]))
        total += reward
        done = terminated or truncated
    return RTEpisode(
        seed, info["score"], total, info["metrics"], info["steps"], info["invalid_actions"], env.plan.locked
    )


def summarize_task(task: Task, results: Sequence[RTEpisode]) -> dict[str, Any]:
    """Per-task means: score ± standard error, pass rate, tumour metrics, OAR pass rates."""
    scores = [r.score for r in results]
    oar_names = task.oar_names
    return {
        "score": mean(scores),
        "score_stderr": stderr(scores),
        "pass_rate": mean([float(s >= PASS_THRESHOLD) for s in scores]),
        "critical_pass_rate": mean([float(r.metrics["critical_pass"]) for r in results]),
        "metrics": {m: mean([float(r.metrics[m]) for r in results]) for m in TUMOUR_METRICS},
        "oar_pass_rates": {
            o: mean([float(r.metrics["oars"][o]["pass"]) for r in results]) for o in oar_names
        },
        "oar_mean_dose": {o: mean([r.metrics["oars"][o]["mean"] for r in results]) for o in oar_names},
        "n_beams": mean([float(r.metrics["n_beams"]) for r in results]),
        "invalid_actions": sum(r.invalid_actions for r in results),
        "locked_rate": mean([float(r.locked) for r in results]),
        "steps": mean([float(r.steps) for r in results]),
        "episode_scores": scores,
        "episode_seeds": [r.seed for r in results],
    }


def split_seed(seed: int, task: str, split: str, i: int) -> int:
    """Episode ``i``'s seed: the patients of each (task, split) pair are their own stream."""
    return episode_seed(seed, f"{task}/{split}", i)


def grade_task(
    agent: Any, task: str | Task, n_episodes: int = 20, seed: int = 42, split: str = "test_id"
) -> dict[str, Any]:
    """One task's summary (:func:`summarize_task`) for ``n_episodes`` seeded episodes of ``split``."""
    check_count("n_episodes", n_episodes, 1)
    check_count("seed", seed, 0)
    resolved, policy = get_task(task), as_agent(agent)
    results = [
        run_episode(policy, resolved, split_seed(seed, resolved.name, split, i), split)
        for i in range(n_episodes)
    ]
    return summarize_task(resolved, results)


def grade_all(
    agent: Any,
    n_episodes: int = 20,
    seed: int = 42,
    tasks: Iterable[str | Task] | None = None,
    progress: Callable[[str, int], None] | None = None,
    split: str = "test_id",
    isolate: bool = False,
    time_limit: float = TIME_LIMIT,
    isolation: str = "sandbox",
    limits: Limits | None = None,
) -> dict[str, Any]:
    """Grade an agent on every task (default: the three built-ins) on the patients of ``split``
    (``test_id``: the training anatomy, held-out patients; ``test_ood``: outside the training
    ranges; ``validation``: model selection's).

    ``isolate``: run the agent in a sandboxed process of its own (as the ED grader's
    ``isolate``, :mod:`grading.isolated`): it gets its seed, a copy of the plan and the plan's
    state before each decision, within ``time_limit`` seconds; faults are counted in the
    report's ``policy_faults`` and played as invalid actions. ``agent`` is then a name, path or
    picklable object, loaded only in that process.

    Returns:
        ``{"agent", "env": "radiotherapy", "episodes", "seed", "aggregate_score",
        "aggregate_pass_rate", "task_scores", "tasks": {name: summary}, "score_formula"}``.
    """
    check_count("n_episodes", n_episodes, 1)
    check_count("seed", seed, 0)
    resolved = [get_task(t) for t in (tasks if tasks is not None else BUILTIN_TASKS)]
    if not resolved:
        raise ValueError("tasks must not be empty")
    policy = (
        IsolatedRTPolicy(agent, time_limit=time_limit, isolation=isolation, limits=limits)
        if isolate
        else as_agent(agent)
    )
    per_task: dict[str, dict[str, Any]] = {}
    try:
        for task in resolved:
            results = []
            for i in range(n_episodes):
                results.append(run_episode(policy, task, split_seed(seed, task.name, split, i), split))
                if progress is not None:
                    progress(task.name, i)
            per_task[task.name] = summarize_task(task, results)
    finally:
        if isolate:
            policy.close()
    isolated: dict[str, Any] = {"isolated": bool(isolate)}
    if isolate:
        isolated.update(
            isolation=isolation,
            policy_faults={k: policy.faults[k] for k in FAULTS},
            policy_fault_messages=list(policy.messages),
            policy_dropped=dict(policy.dropped),
        )
    return {
        "agent": getattr(policy, "name", str(agent)),
        "env": "radiotherapy",
        "split": split,
        "episodes": n_episodes,
        "seed": seed,
        "aggregate_score": mean([t["score"] for t in per_task.values()]),
        "aggregate_pass_rate": mean([t["pass_rate"] for t in per_task.values()]),
        "task_scores": {name: t["score"] for name, t in per_task.items()},
        "tasks": per_task,
        "score_formula": SCORE_FORMULA,
        **isolated,
    }


# ------------------------------------------------------------------ tables
SUMMARY_HEADER = ["agent", "aggregate", "pass", "critical ok", "D95", "V95", "CI", "HI", "invalid", "bar"]


def summary_rows(reports: Sequence[dict[str, Any]]) -> list[list[str]]:
    """One row per agent; metrics are means over tasks of the task means."""
    rows = []
    for r in reports:
        tasks = r["tasks"].values()

        def avg(key: str, tasks: Iterable[dict[str, Any]] = tasks) -> float:
            return mean([t["metrics"][key] for t in tasks])

        rows.append(
            [
                r["agent"],
                f"{r['aggregate_score']:.3f}",
                f"{100 * r['aggregate_pass_rate']:.0f}%",
                f"{100 * mean([t['critical_pass_rate'] for t in tasks]):.0f}%",
                f"{avg('d95'):.2f}",
                f"{100 * avg('v95'):.0f}%",
                f"{avg('ci'):.2f}",
                f"{avg('hi'):.2f}",
                str(sum(t["invalid_actions"] for t in tasks)),
                bar(100 * r["aggregate_score"]),
            ]
        )
    return rows


def task_rows(reports: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Per-task score ± standard error (pass rate), one row per agent."""
    names = list(reports[0]["task_scores"]) if reports else []
    rows = [
        [r["agent"]]
        + [
            f"{r['tasks'][n]['score']:.3f} ± {r['tasks'][n]['score_stderr']:.3f} "
            f"({100 * r['tasks'][n]['pass_rate']:.0f}%)"
            for n in names
        ]
        for r in reports
    ]
    return ["agent", *names], rows


def oar_rows(reports: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """OAR constraint pass rates per task and agent (``task/oar``)."""
    columns = (
        [(t, o) for t, summary in reports[0]["tasks"].items() for o in summary["oar_pass_rates"]]
        if reports
        else []
    )
    header = ["agent"] + [f"{t}/{o}" for t, o in columns]
    rows = [
        [r["agent"]] + [f"{100 * r['tasks'][t]['oar_pass_rates'][o]:.0f}%" for t, o in columns]
        for r in reports
    ]
    return header, rows


def comparison_markdown(reports: Sequence[dict[str, Any]]) -> str:
    """The RT scoreboard as Markdown: summary, per task, OAR pass rates."""
    summary = markdown_table(SUMMARY_HEADER[:-1], [row[:-1] for row in summary_rows(reports)])
    return "\n\n".join([summary, markdown_table(*task_rows(reports)), markdown_table(*oar_rows(reports))])


def comparison_tables(reports: Sequence[dict[str, Any]]) -> list[Any]:
    """The RT scoreboard as rich tables."""
    tables = []
    header, rows = oar_rows(reports)
    per_task: dict[str, list[int]] = {}  # one OAR table per task: 150 columns truncated the headers
    for i, column in enumerate(header[1:], start=1):
        per_task.setdefault(column.split("/")[0], []).append(i)
    oar_tables = [
        (
            f"OAR constraint pass rate: {task}",
            (
                ["agent"] + [header[i].split("/", 1)[1] for i in columns],
                [[row[0]] + [row[i] for i in columns] for row in rows],
            ),
        )
        for task, columns in per_task.items()
    ]
    for title, (header, rows) in (
        ("radiotherapy planning — agent comparison", (SUMMARY_HEADER, summary_rows(reports))),
        ("score per task: mean ± standard error (pass rate)", task_rows(reports)),
        *oar_tables,
    ):
        table = Table(title=title)
        for i, col in enumerate(header):
            table.add_column(col, justify="left" if i == 0 or col == "bar" else "right")
        for row in rows:
            table.add_row(*row)
        tables.append(table)
    return tables
