"""The ``hospital-marl`` command (also ``python -m hospital_marl``).

This module is the application layer: it imports ``policies``, ``grading``
(and, per subcommand, the trainers and the server) lazily, inside the
commands, so that ``import hospital_marl`` never imports upward.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hospital_marl.core.scenarios import SCENARIOS, get_scenario

DEFAULT_COMPARE_AGENTS = ("random", "heuristic", "ppo", "ppo_pruned", "planner")


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""


# ---------------------------------------------------------------- utilities
def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    console = Console(stderr=stderr)
    if not console.is_terminal:  # piped or captured: don't squeeze tables into 80 columns
        console = Console(stderr=stderr, width=150)
    return console


def _check_scenarios(names: Sequence[str] | None) -> list[str] | None:
    if not names:
        return None
    for name in names:
        if name not in SCENARIOS:
            raise CLIError(f"unknown scenario {name!r}; valid names: {', '.join(SCENARIOS)}")
    return list(names)


def _load_policy(spec: str) -> Any:
    import policies

    try:
        return policies.load(spec)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


@contextmanager
def _progress(total: int, label: str, quiet: bool) -> Iterator[Callable[[str, int], None]]:
    """A rich progress bar on stderr (nothing with --quiet)."""
    if quiet:
        yield lambda scenario, episode: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[now]}"),
        TimeRemainingColumn(),
        console=_console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task(label, total=total, now="")

        def advance(scenario: str, episode: int) -> None:
            progress.update(task, advance=1, now=f"{scenario} #{episode}")

        yield advance


def _grade(
    agent: str, track: str, episodes: int, seed: int, scenarios: list[str] | None, quiet: bool
) -> dict:
    from grading import grade

    policy = _load_policy(agent)
    if track not in policy.tracks:
        raise CLIError(f"agent {agent!r} plays the {'/'.join(policy.tracks)} track, not {track!r}")
    n = episodes * (len(scenarios) if scenarios else len(_builtin()))
    with _progress(n, f"{agent} ({track})", quiet) as advance:
        try:
            return grade(
                policy, episodes=episodes, seed=seed, scenarios=scenarios, track=track, progress=advance
            )
        except ValueError as exc:
            raise CLIError(str(exc)) from None


def _builtin() -> tuple[str, ...]:
    from hospital_marl.core.scenarios import BUILTIN_SCENARIOS

    return BUILTIN_SCENARIOS


def _write_json(data: Any, path: str | None) -> None:
    text = json.dumps(data, indent=2)
    if path:
        Path(path).write_text(text + "\n")


# ------------------------------------------------------- radiotherapy (--env)
DEFAULT_RT_COMPARE_AGENTS = ("random", "masked_random", "six_full", "evenly_spaced", "ppo", "planner")
ENV_DEFAULTS = {"ed": (10, 0), "radiotherapy": (20, 42)}
"""--env -> (episodes, seed) when not given: the ED grader's and SPEC-RT §6's grade_all defaults."""


def _fill_env_defaults(args: argparse.Namespace) -> None:
    episodes, seed = ENV_DEFAULTS[args.env]
    args.episodes = episodes if args.episodes is None else args.episodes
    args.seed = seed if args.seed is None else args.seed


def _rt_grade(agent: str, args: argparse.Namespace) -> dict:
    from grading.radiotherapy import grade_all
    from hospital_marl.radiotherapy.core.tasks import TASKS

    tasks = args.tasks or None
    for name in tasks or ():
        if name not in TASKS:
            raise CLIError(f"unknown task {name!r}; valid names: {', '.join(TASKS)}")
    try:
        from policies.radiotherapy import load

        policy = load(agent)
        n = args.episodes * (len(tasks) if tasks else 3)
        with _progress(n, f"{agent} (radiotherapy)", args.quiet) as advance:
            return grade_all(policy, n_episodes=args.episodes, seed=args.seed, tasks=tasks, progress=advance)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _rt_compare(args: argparse.Namespace) -> int:
    from grading.radiotherapy import comparison_markdown, comparison_tables
    from policies.radiotherapy import names

    agents = list(args.agents) if args.agents else [a for a in DEFAULT_RT_COMPARE_AGENTS if a in names()]
    reports = [_rt_grade(agent, args) for agent in agents]
    if args.markdown:
        print(comparison_markdown(reports))
    else:
        console = _console()
        for table in comparison_tables(reports):
            console.print(table)
    _write_json(
        {"env": "radiotherapy", "episodes": args.episodes, "seed": args.seed, "reports": reports}, args.output
    )
    return 0


# ----------------------------------------------------------------- commands
def cmd_evaluate(args: argparse.Namespace) -> int:
    _fill_env_defaults(args)
    if args.env == "radiotherapy":
        report = _rt_grade(args.agent, args)
        _write_json(report, args.output)
        print(json.dumps(report, indent=2))
        return 0
    report = _grade(
        args.agent, args.track, args.episodes, args.seed, _check_scenarios(args.scenarios), args.quiet
    )
    _write_json(report, args.output)
    print(json.dumps(report, indent=2))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from grading.tables import comparison_tables

    _fill_env_defaults(args)
    if args.env == "radiotherapy":
        return _rt_compare(args)
    scenarios = _check_scenarios(args.scenarios)
    agents = list(args.agents) if args.agents else _default_agents(args.track)
    reports = []
    started = time.perf_counter()
    for agent in agents:
        t0 = time.perf_counter()
        report = _grade(agent, args.track, args.episodes, args.seed, scenarios, args.quiet)
        report["wall_time_s"] = round(time.perf_counter() - t0, 2)
        reports.append(report)
    if args.markdown:
        from grading.tables import comparison_markdown

        print(comparison_markdown(reports))
    else:
        console = _console()
        for table in comparison_tables(reports):
            console.print(table)
    if not args.quiet and not args.markdown:
        console.print(
            f"[dim]{args.episodes} episodes per scenario, seed {args.seed}, {args.track} track, "
            f"{time.perf_counter() - started:.1f} s. Score: 0-100 composite (SPEC §7).[/dim]"
        )
    _write_json(
        {"track": args.track, "episodes": args.episodes, "seed": args.seed, "reports": reports}, args.output
    )
    return 0


def _default_agents(track: str) -> list[str]:
    import policies

    available = set(policies.names())
    wanted = ("random", "team_heuristic", "team_ppo") if track == "team" else DEFAULT_COMPARE_AGENTS
    return [a for a in wanted if a in available]


def cmd_demo(args: argparse.Namespace) -> int:
    from hospital_marl.envs.composed import HospitalEDEnv

    _check_scenarios([args.scenario])
    policy = _load_policy(args.agent)
    if "flat" not in policy.tracks:
        raise CLIError(f"demo plays the flat track; {args.agent!r} plays {policy.tracks}")
    env = HospitalEDEnv(scenario=args.scenario, render_mode="ansi")
    obs, info = env.reset(seed=args.seed)
    policy.reset(seed=args.seed, hospital=env.hospital)
    done = False
    while not done:
        print(env.render(), flush=True)
        if args.delay:
            time.sleep(args.delay)
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info["action_mask"]))
        done = terminated or truncated
    print(env.render())
    print(json.dumps({"score": info["score"], **info["metrics"]}, indent=2))
    return 0


# ------------------------------------------------------------------- parser
def _nonneg_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _pos_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hospital-marl", description="Emergency-department multi-agent RL benchmark."
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bars or chatter")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--track",
            choices=("flat", "team"),
            default="flat",
            help="flat: one Discrete(39) action per tick; team: one action per role per tick",
        )
        p.add_argument(
            "--env",
            choices=tuple(ENV_DEFAULTS),
            default="ed",
            help="ed: the emergency department (default); radiotherapy: RT treatment planning (SPEC-RT)",
        )
        p.add_argument("--tasks", nargs="+", metavar="T", help="radiotherapy tasks (default: all three)")
        p.add_argument(
            "--episodes",
            type=_pos_int,
            default=None,
            help="episodes per scenario or task (default 10; RT 20)",
        )
        p.add_argument("--seed", type=_nonneg_int, default=None, help="base seed (default 0; RT 42)")
        p.add_argument("--scenarios", nargs="+", metavar="S", help=f"default: all of {', '.join(_builtin())}")
        p.add_argument("--output", "-o", metavar="FILE", help="also write the JSON here")
        p.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS)

    p = sub.add_parser("evaluate", help="grade one agent; prints the JSON report")
    p.add_argument("--agent", required=True, help="policy name or model path (see `hospital-marl agents`)")
    common(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("compare", help="grade several agents; prints the scoreboard")
    p.add_argument(
        "--agents",
        nargs="+",
        metavar="A",
        help=f"default: {' '.join(DEFAULT_COMPARE_AGENTS)} (those available)",
    )
    p.add_argument("--markdown", action="store_true", help="print Markdown tables (the README's)")
    common(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("demo", help="play one episode, printing the ansi frame each tick")
    p.add_argument("--agent", default="heuristic")
    p.add_argument("--scenario", default="normal_day")
    p.add_argument("--seed", type=_nonneg_int, default=0)
    p.add_argument("--delay", type=float, default=0.0, help="seconds between frames")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("agents", help="list the policy names `--agent` accepts")
    p.set_defaults(func=lambda args: print("\n".join(__import__("policies").names())) or 0)

    p = sub.add_parser("scenarios", help="list the scenarios")
    p.set_defaults(func=cmd_scenarios)

    _add_extension_commands(sub)
    return parser


def cmd_scenarios(args: argparse.Namespace) -> int:
    for name in SCENARIOS:
        s = get_scenario(name)
        print(f"{name:18s} ~{s.expected_arrivals:5.1f} arrivals/day  {s.description}")
    return 0


def _add_extension_commands(sub: Any) -> None:
    """Subcommands of optional parts (training, plots, server) register here when present."""
    for module in ("policies.train_cli", "server.cli", "server.llm_agent"):
        try:
            add = __import__(module, fromlist=["add_commands"]).add_commands
        except ImportError:
            continue
        add(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "quiet"):
        args.quiet = False
    try:
        return int(args.func(args) or 0)
    except CLIError as exc:
        print(f"hospital-marl: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
