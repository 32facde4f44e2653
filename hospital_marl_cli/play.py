"""``evaluate``, ``compare``, ``demo``, ``agents``, ``scenarios``: grading and playing policies."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import policies
from grading import SCORE_FORMULA, grade
from grading import radiotherapy as rt_tables
from grading import tables as ed_tables
from grading.grader import SealedPolicy
from grading.isolated import TIME_LIMIT, PolicyFault, SandboxUnavailable
from hospital_marl.core.hospital import Seal
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS, DISTRIBUTIONS, SCENARIOS, get_scenario
from hospital_marl.envs.composed import HospitalEDEnv
from hospital_marl_cli import radiotherapy
from hospital_marl_cli.common import CLIError, console, nonnegative_float, nonnegative_int, positive_int

DEFAULT_COMPARE_AGENTS = ("random", "greedy", "fifo_severity", "heuristic", "ppo", "ppo_pruned", "planner")
DEFAULT_TEAM_AGENTS = ("random", "team_heuristic", "team_ppo")
SCORE_TERMS = "0-100 = 40 survival + 20 critical survival + 20 wait + 10 utilisation + 10 valid actions"
SCORE_EPILOG = f"""score (0-100, per episode, averaged over episodes and scenarios):
  {SCORE_FORMULA}
columns: survival, critical (survival of patients who were ever critical), util (bed occupancy)
and invalid (actions the mask forbade) in percent; wait = avg_wait_time in ticks of 14.4 minutes
(a shift is up to 100 ticks, 24 h; it ends early when deaths reach the scenario's max_deaths).
radiotherapy (--env radiotherapy): a plan score from 0 to 1, pass mark 0.60."""
DEMO_DELAY = 0.2
"""``demo``'s default seconds between frames on a terminal: slow enough to watch (at 0 a shift
scrolled its ~1,700 lines at once); piped, no delay."""
AGENT_HELP = "a policy name (`hospital-marl agents`), a model path or run directory, or module:attribute"


def check_scenarios(names: Sequence[str] | None) -> list[str] | None:
    if not names:
        return None
    for name in names:
        if name not in SCENARIOS and name not in DISTRIBUTIONS:
            valid = ", ".join([*SCENARIOS, *DISTRIBUTIONS])
            raise CLIError(f"unknown scenario {name!r}; valid names: {valid}")
    return list(names)


def load_policy(spec: str) -> Any:
    """``policies.load(spec)``, its errors as one line (what was looked for, what to install)."""
    try:
        return policies.load(spec)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        raise CLIError(str(exc)) from None


@contextmanager
def progress(total: int, label: str, quiet: bool) -> Iterator[Callable[[str, int], None]]:
    """A live progress bar on a terminal's stderr; piped, one line when done; nothing with --quiet."""
    if quiet:
        yield lambda scenario, episode: None
        return
    err = console(stderr=True)
    if not err.is_terminal:
        started = time.perf_counter()
        yield lambda scenario, episode: None
        print(f"{label}: {total} episodes, {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[now]}"),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total, now="")
        yield lambda scenario, episode: bar.update(task, advance=1, now=f"{scenario} #{episode}")


def grade_agent(
    agent: str,
    track: str,
    episodes: int,
    seed: int,
    scenarios: list[str] | None,
    quiet: bool,
    isolated: bool = False,
    time_limit: float = TIME_LIMIT,
    isolation: str = "sandbox",
) -> dict[str, Any]:
    """Grade one agent; ``isolated``: in a sandboxed process of its own, loaded only there (SPEC §13)."""
    if isolated:
        policy, label = agent, agent
    else:
        policy = load_policy(agent)
        if track not in policy.tracks:
            raise CLIError(f"agent {agent!r} plays the {'/'.join(policy.tracks)} track, not {track!r}")
        label = policy.name
    n = episodes * len(scenarios or BUILTIN_SCENARIOS)
    with progress(n, f"{label} ({track})", quiet) as advance:
        try:
            return grade(
                policy, episodes=episodes, seed=seed, scenarios=scenarios, track=track, progress=advance,
                isolate=isolated, time_limit=time_limit, isolation=isolation,
            )  # fmt: skip
        except (ValueError, TypeError, PolicyFault, SandboxUnavailable) as exc:
            raise CLIError(str(exc)) from None


def write_json(data: Any, path: str | None) -> None:
    if path:
        Path(path).write_text(json.dumps(data, indent=2) + "\n")


def unique_names(reports: list[dict[str, Any]]) -> None:
    """Two rows never share a name: a repeated name gets `` #2``, `` #3``... (in the report too)."""
    seen: dict[str, int] = {}
    for report in reports:
        name = report["agent"]
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            report["agent"] = f"{name} #{seen[name]}"


# ----------------------------------------------------------------- commands
def cmd_evaluate(args: argparse.Namespace) -> int:
    radiotherapy.fill_env_defaults(args)
    if args.env == "radiotherapy":
        report = radiotherapy.rt_grade(args.agent, args, progress)
    else:
        scenarios = check_scenarios(args.scenarios)
        isolated = (args.isolated, args.time_limit, args.isolation)
        report = grade_agent(
            args.agent, args.track, args.episodes, args.seed, scenarios, args.quiet, *isolated
        )
    write_json(report, args.output)
    print(json.dumps(report, indent=2))
    return failed([report])


def failed(reports: list[dict[str, Any]]) -> int:
    """Exit status 1, each reason on stderr, when a report says its policy mostly faulted
    (``grading.grader.FAULT_LIMIT``): that score is the no-op's, never a silent number."""
    reasons = [r["failed"] for r in reports if r.get("failed")]
    for reason in reasons:
        print(f"hospital-marl: failed: {reason}", file=sys.stderr)
    return 1 if reasons else 0


def cmd_compare(args: argparse.Namespace) -> int:
    radiotherapy.fill_env_defaults(args)
    rt = args.env == "radiotherapy"
    scenarios = None if rt else check_scenarios(args.scenarios)
    if args.agents:
        agents = list(args.agents)
    else:
        agents = radiotherapy.default_agents() if rt else default_agents(args.track)
    reports = []
    started = time.perf_counter()
    for agent in agents:
        t0 = time.perf_counter()
        if rt:
            report = radiotherapy.rt_grade(agent, args, progress)
        else:
            report = grade_agent(agent, args.track, args.episodes, args.seed, scenarios, args.quiet)
        report["wall_time_s"] = round(time.perf_counter() - t0, 2)
        reports.append(report)
    unique_names(reports)
    tables = rt_tables if rt else ed_tables
    if args.markdown:
        print(tables.comparison_markdown(reports))
    else:
        out = console()
        for table in tables.comparison_tables(reports):
            out.print(table)
        if not args.quiet:
            where_text = "per task, radiotherapy" if rt else f"per scenario, {args.track} track"
            score_text = "0-1 plan score (pass mark 0.60)" if rt else SCORE_TERMS
            out.print(
                f"[dim]{args.episodes} episodes {where_text}, seed {args.seed}, "
                f"{time.perf_counter() - started:.1f} s. Score: {score_text}. "
                "The formula: hospital-marl compare --help.[/dim]",
                highlight=False,
            )
    where = {"env": "radiotherapy"} if rt else {"track": args.track}
    write_json({**where, "episodes": args.episodes, "seed": args.seed, "reports": reports}, args.output)
    return failed(reports)


def default_agents(track: str) -> list[str]:
    available = set(policies.names())
    wanted = DEFAULT_TEAM_AGENTS if track == "team" else DEFAULT_COMPARE_AGENTS
    return [a for a in wanted if a in available]


def cmd_demo(args: argparse.Namespace) -> int:
    check_scenarios([args.scenario])
    policy = load_policy(args.agent)
    if "flat" not in policy.tracks:
        raise CLIError(f"demo plays the flat track; {args.agent!r} plays {'/'.join(policy.tracks)}")
    env = HospitalEDEnv(scenario=args.scenario, render_mode="ansi")
    obs, info = env.reset(seed=args.seed)
    agent = SealedPolicy(policy)  # the policy sees the present only (SPEC §12)
    delay = args.delay if args.delay is not None else (DEMO_DELAY if sys.stdout.isatty() else 0.0)
    agent.start(args.seed, Seal(env.hospital))
    done = False
    while not done:
        print(env.render(), flush=True)
        if delay:
            time.sleep(delay)
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info["action_mask"]))
        done = terminated or truncated
    print(env.render())
    print(json.dumps({"score": info["score"], **info["metrics"]}, indent=2))
    return 0


def agent_tracks(name: str) -> str:
    """The tracks a named policy plays: its class's ``tracks`` when the name is a class (no
    settings needed, e.g. ``llm``), else the loaded policy's (cheap for every shipped name)."""
    factory = getattr(policies, "_lazy_registry", dict)().get(name)
    tracks = getattr(factory, "tracks", None) if isinstance(factory, type) else None
    if not isinstance(tracks, tuple):
        try:
            tracks = policies.load(name).tracks
        except Exception as exc:
            return f"? ({type(exc).__name__}: {str(exc).splitlines()[0][:60]})"
    return "/".join(tracks)


def cmd_agents(args: argparse.Namespace) -> int:
    """Every name with its tracks; team-only names are marked (they cannot play the flat track).
    ``--env radiotherapy``: the names ``evaluate`` / ``compare --env radiotherapy`` accept."""
    if args.env == "radiotherapy":
        from policies.radiotherapy import SCRIPTED
        from policies.radiotherapy import names as rt_names

        for name in rt_names():
            note = "   scripted baseline" if name in SCRIPTED else ""
            print(f"{name:16s} radiotherapy{note}")
        return 0
    for name in policies.names():
        tracks = agent_tracks(name)
        note = "   team track only" if tracks == "team" else ""
        print(f"{name:16s} {tracks}{note}")
    return 0


def cmd_scenarios(args: argparse.Namespace) -> int:
    """The ED's scenarios and distributions; ``--env radiotherapy``: the planning tasks."""
    if args.env == "radiotherapy":
        from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, get_task

        for name in BUILTIN_TASKS:
            task = get_task(name)
            print(f"{name:18s} {task.max_steps:3d} steps          {task.description}")
        return 0
    for name in SCENARIOS:
        s = get_scenario(name)
        print(f"{name:18s} ~{s.expected_arrivals:5.1f} arrivals/day  {s.description}")
    for name, d in DISTRIBUTIONS.items():
        print(f"{name:18s} distribution         {d.description}")
    return 0


# ------------------------------------------------------------------- parser
def add_grading_options(p: argparse.ArgumentParser) -> None:
    """The options of every grading command (``evaluate``, ``compare``)."""
    p.add_argument(
        "--track",
        choices=("flat", "team"),
        default="flat",
        help="flat: one Discrete(39) action per tick; team: one action per role per tick",
    )
    p.add_argument(
        "--env",
        choices=tuple(radiotherapy.ENV_DEFAULTS),
        default="ed",
        help="ed: the emergency department (default); radiotherapy: RT treatment planning",
    )
    p.add_argument("--tasks", nargs="+", metavar="T", help="radiotherapy tasks (default: all three)")
    p.add_argument(
        "--episodes", type=positive_int, default=None, help="episodes per scenario/task (default 10; RT 20)"
    )
    p.add_argument("--seed", type=nonnegative_int, default=None, help="base seed (default 0; RT 42)")
    p.add_argument(
        "--scenarios", nargs="+", metavar="S", help=f"default: all of {', '.join(BUILTIN_SCENARIOS)}"
    )
    p.add_argument("--output", "-o", metavar="FILE", help="also write the JSON here")
    p.add_argument(
        "--quiet", "-q", action="store_true", default=argparse.SUPPRESS, help="no progress display"
    )


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "evaluate",
        help="grade one agent; prints the JSON report",
        epilog=SCORE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--agent", required=True, help=AGENT_HELP)
    p.add_argument(
        "--isolated",
        action="store_true",
        help="run the agent in a bubblewrap sandbox (its own user, PID, IPC and network namespaces, no "
        "capabilities, a read-only view of the packages, resource limits) that sees only observations, "
        "masks and the sealed present, with a time limit per decision: code you do not trust "
        "(docs/sealed-evaluation.md); needs the `bubblewrap` package",
    )
    p.add_argument(
        "--isolation",
        choices=("sandbox", "process"),
        default="sandbox",
        help="with --isolated: `sandbox` (default, bubblewrap) or `process`, a plain child process "
        "WITHOUT the sandbox: it still counts crashes, hangs and floods, but a hostile policy can read "
        "the grader's command line (--seed), environment, memory and files, signal it and use the network",
    )
    p.add_argument(
        "--time-limit",
        type=nonnegative_float,
        default=TIME_LIMIT,
        metavar="S",
        help=f"with --isolated: seconds per decision (default {TIME_LIMIT:g}); timeouts: counted no-ops",
    )
    add_grading_options(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser(
        "compare",
        help="grade several agents; prints the scoreboard",
        description="Grade several agents on the same days and print the scoreboard.",
        epilog=SCORE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--agents", nargs="+", metavar="A", help=f"{AGENT_HELP}; default: {' '.join(DEFAULT_COMPARE_AGENTS)}"
    )
    p.add_argument("--markdown", action="store_true", help="print Markdown tables (the README's)")
    add_grading_options(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("demo", help="play one episode, printing the ansi frame each tick")
    p.add_argument("--agent", default="heuristic", help=f"{AGENT_HELP} (default heuristic)")
    p.add_argument("--scenario", default="normal_day", metavar="S", help="default normal_day")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="the day's seed (default 0)")
    p.add_argument(
        "--delay",
        type=nonnegative_float,
        default=None,
        help=f"seconds between frames (default on a terminal {DEMO_DELAY:g}, piped 0)",
    )
    p.set_defaults(func=cmd_demo)

    envs = tuple(radiotherapy.ENV_DEFAULTS)
    p = sub.add_parser("agents", help="list the policy names `--agent` accepts, with their tracks")
    p.add_argument("--env", choices=envs, default="ed", help="ed (default) or radiotherapy's agents")
    p.set_defaults(func=cmd_agents)

    p = sub.add_parser("scenarios", help="list the scenarios (radiotherapy: the tasks)")
    p.add_argument("--env", choices=envs, default="ed", help="ed (default) or radiotherapy's tasks")
    p.set_defaults(func=cmd_scenarios)
