"""``evaluate`` / ``compare`` with ``--env radiotherapy``: the RT planning env."""

from __future__ import annotations

import argparse
from typing import Any

from grading.radiotherapy import grade_all
from hospital_marl.radiotherapy.core.tasks import TASKS
from hospital_marl_cli.common import CLIError

DEFAULT_RT_COMPARE_AGENTS = ("random", "masked_random", "six_full", "evenly_spaced", "ppo", "planner")
ENV_DEFAULTS = {"ed": (10, 0), "radiotherapy": (20, 42)}
"""--env -> (episodes, seed) when not given: the ED grader's and the RT grader's (grade_all) defaults."""


def fill_env_defaults(args: argparse.Namespace) -> None:
    episodes, seed = ENV_DEFAULTS[args.env]
    args.episodes = episodes if args.episodes is None else args.episodes
    args.seed = seed if args.seed is None else args.seed


def default_agents() -> list[str]:
    from policies.radiotherapy import names

    return [a for a in DEFAULT_RT_COMPARE_AGENTS if a in names()]


def rt_grade(agent: str, args: argparse.Namespace, progress: Any) -> dict[str, Any]:
    from policies.radiotherapy import load

    tasks = args.tasks or None
    for name in tasks or ():
        if name not in TASKS:
            raise CLIError(f"unknown task {name!r}; valid names: {', '.join(TASKS)}")
    from grading.isolated import TIME_LIMIT, PolicyFault, SandboxUnavailable

    isolated = getattr(args, "isolated", False)
    try:
        policy = agent if isolated else load(agent)  # isolated: loaded only in the sandbox
        n = args.episodes * (len(tasks) if tasks else 3)
        with progress(n, f"{agent} (radiotherapy)", args.quiet) as advance:
            return grade_all(
                policy, n_episodes=args.episodes, seed=args.seed, tasks=tasks, progress=advance,
                isolate=isolated, time_limit=getattr(args, "time_limit", TIME_LIMIT),
                isolation=getattr(args, "isolation", "sandbox"),
            )  # fmt: skip
    except (ValueError, PolicyFault, SandboxUnavailable) as exc:
        raise CLIError(str(exc)) from None
