"""Regenerate the README's and the docs site's generated sections from their single sources of truth.

    python tools/readme.py            # rewrite README.md and the docs pages in place
    python tools/readme.py --check    # exit 1 if any of them is stale (the test suite runs this)

Every generated section is listed in :data:`DOCUMENTS` (path -> marker -> renderer). Static
sections (actions, roles, observations, rewards, scenarios, the radiotherapy tables) come from
the code and live on the docs site's pages; ``first-run`` and ``test-install`` from
``docs/first_run.json`` (``python benchmarks/first_run.py --write`` measures both commands on a
fresh clone); server/README.md's load figures from ``docs/server_load.json`` (written by
``python -m benchmarks.server_load --write``). The scoreboard sections (:data:`SCOREBOARD_PAGES`:
the README's and docs/results.md's) come from the grader and are slow (the planner), so they are
refreshed only with ``--scoreboards``. The benchmarks' ``--write`` scripts fill the performance
and results pages' other sections.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

SCOREBOARD_COMMANDS = {
    "scoreboard-flat": "hospital-marl -q compare --agents random masked_random greedy fifo_severity "
    "heuristic ppo ppo_pruned planner --markdown",
    "scoreboard-team": "hospital-marl -q compare --track team --agents random masked_random team_heuristic "
    "team_ppo team_planner --markdown",
}
"""Marker -> the one documented command whose output the section shows."""

SCOREBOARD_DOCUMENTS: dict[Path, dict[str, str]] = {
    DOCS / "results.md": {
        "scoreboard-rt": "hospital-marl -q compare --env radiotherapy --agents random masked_random "
        "six_full evenly_spaced anatomy_aware ppo option_selector ranked_selector planner --markdown",
    },
}
"""Other documents' grader sections (slow, like the scoreboards): path -> marker -> command."""

SCOREBOARD_PAGES = {
    README: ("scoreboard-flat", "scoreboard-team"),
    DOCS / "results.md": ("scoreboard-flat", "scoreboard-team"),
}
"""Where each of :data:`SCOREBOARD_COMMANDS`' sections is shown (one command, run once, shown on each)."""


from grading.tables import replace_marked  # noqa: E402


def actions_section() -> str:
    from hospital_marl.core.actions import action_table_markdown

    return action_table_markdown()


def roles_section() -> str:
    from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
    from hospital_marl.core.hospital import Hospital
    from hospital_marl.envs.observations import ROLE_BLOCKS, role_space

    h = Hospital()
    rows = ["| role (turn order) | action space | observation | sees |", "|---|---|---|---|"]
    for role in ROLES:
        size = role_space(role, h).shape[0]
        blocks = ", ".join(f"`{b}`" for b in ROLE_BLOCKS[role])
        rows.append(
            f"| `{role}` | `Discrete({ROLE_ACTION_COUNTS[role]})` | `Box({size},)` float32 + int8 mask "
            f"| {blocks} |"
        )
    return "\n".join(rows)


def observations_section() -> str:
    from hospital_marl.envs.observations import BLOCKS

    rows = ["| key | shape | meaning |", "|---|---|---|"]
    rows += [f"| `{b.key}` | `{b.shape}` | {b.doc} |" for b in BLOCKS]
    return "\n".join(rows)


def rewards_section() -> str:
    from hospital_marl.core.rewards import RewardTable

    rows = ["| `RewardTable` field | default | event |", "|---|---|---|"]
    for f in fields(RewardTable):
        doc = _field_doc(RewardTable, f.name)
        rows.append(f"| `{f.name}` | {getattr(RewardTable(), f.name):g} | {doc} |")
    return "\n".join(rows)


def _field_doc(cls: type, name: str) -> str:
    import inspect

    source = inspect.getsource(cls)
    match = re.search(rf"^[ \t]+{name}: [^\n]*\n[ \t]+\"\"\"(.*?)\"\"\"", source, re.M | re.S)
    return " ".join(match.group(1).split()) if match else name.replace("_", " ")


def scenarios_section() -> str:
    from hospital_marl.core.scenarios import BUILTIN_SCENARIOS, SCENARIOS

    rows = [
        "| scenario | what it tests | λ rate / amp / peak | severity mix 1–5 | arrivals/day | burst "
        "| beds: general / ICU / ventilators | ends early at |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in BUILTIN_SCENARIOS:
        s = SCENARIOS[name]
        burst = (
            f"ticks {s.burst.start}–{s.burst.end}, Poisson {s.burst.rate:g}/tick"
            if s.burst is not None
            else "—"
        )
        mix = " ".join(f"{p:.2f}" for p in s.severity_mix)
        rows.append(
            f"| `{name}` | {s.description} | {s.arrival_rate:g} / {s.amplitude:g} / {s.peak:g} | {mix} "
            f"| ≈ {s.expected_arrivals:.0f} | {burst} | {s.general_beds} / {s.icu_beds} / {s.ventilators} "
            f"| {s.max_deaths} deaths |"
        )
    return "\n".join(rows)


def rt_tasks_section() -> str:
    from hospital_marl.radiotherapy import task_env_id
    from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, PRIORITIES, TASKS

    rows = [
        "| task | `gym.make` id | steps | Rx | OARs (priority: clinical constraints) | k |",
        "|---|---|---|---|---|---|",
    ]
    for name in BUILTIN_TASKS:
        t = TASKS[name]
        oars = "; ".join(
            f"{o.name} ({PRIORITIES[o.priority]}: {', '.join(c.describe() for c in o.constraints)})"
            for o in t.oars
        )
        rows.append(
            f"| `{name}` ({t.difficulty}): {t.description} | `{task_env_id(name)}` | {t.max_steps} "
            f"| {t.rx_gy:g} Gy / {t.fractions} fx, {t.voxel_mm:g} mm voxels | {oars} "
            f"| {t.dose_scale:.4f} |"
        )
    return "\n".join(rows)


def rt_actions_section() -> str:
    from hospital_marl.radiotherapy.core.plan import ACTIONS

    rows = ["| id | name | action | valid when |", "|---|---|---|---|"]
    rows += [f"| {a.id} | `{a.name}` | {a.doc} | {a.valid_when} |" for a in ACTIONS]
    return "\n".join(rows)


def rt_observations_section() -> str:
    from hospital_marl.radiotherapy.envs.planning import OBSERVATION_KEYS

    rows = ["| key | shape | meaning |", "|---|---|---|"]
    rows += [f"| `{key}` | `{shape}` | {doc} |" for key, (shape, doc) in OBSERVATION_KEYS.items()]
    return "\n".join(rows)


def first_run_section() -> str:
    import inspect
    import json

    from policies.planner import PlannerPolicy

    futures = inspect.signature(PlannerPolicy).parameters["rollouts"].default
    r = json.loads((DOCS / "first_run.json").read_text())
    mb = r["venv_bytes"] / 1e6
    slowest = sorted(r["agents_s"].items(), key=lambda kv: -kv[1])
    per_agent = ", ".join(
        f"{name} {secs:.0f} s" if secs >= 10 else f"{name} {secs:.1f} s" for name, secs in slowest
    )
    return (
        f"Measured on a fresh clone in a fresh venv, no pip cache, on the shared development machine "
        f"(other jobs running: an idle machine is faster; {r['machine']}, {r['measured']}; "
        f"`python benchmarks/first_run.py --command first --write`): **{mb:.0f} MB installed** "
        f"(target ≤ 1 GB; {'with' if r['torch_installed'] else 'no'} torch), `pip install -e .` "
        f"**{r['install_s']:.0f} s**, `hospital-marl compare` **{r['compare_s']:.0f} s** ({per_agent}): "
        f"**{r['total_s']:.0f} s** together (target ≤ 180 s: {'met' if r['total_s'] <= 180 else 'not met'}). "
        "The first agent's time includes the one-time numba compile of the simulation kernel "
        "(cached on disk for later runs); the rest is mostly the planner: per decision it makes "
        f"{futures} "
        "imagined futures and rolls its candidates out on each with the compiled heuristic (its "
        "own first use compiles those rollouts)."
    )


def test_install_section() -> str:
    """The second command's install, from ``docs/first_run.json``'s ``test`` entry."""
    import json

    r = json.loads((DOCS / "first_run.json").read_text())["test"]
    gb, gib = r["venv_bytes"] / 1e9, r["venv_bytes"] / 2**30
    load = f", load average {r['load_average']:.0f} on 2 cores" if "load_average" in r else ""
    build = "the CPU build" if r["torch_cuda"] == "none" else f"a CUDA {r['torch_cuda']} build"
    return (
        f"Measured on a fresh clone in a fresh venv, no pip cache, on the shared development machine "
        f"({r['machine']}, {r['measured']}{load}; `python benchmarks/first_run.py --command test --write`): "
        f"`{r['command']}` took **{r['install_s'] / 60:.1f} min** (target ≤ 5 min: "
        f"{'met' if r['install_s'] <= 300 else 'not met'}) and left **{gb:.2f} GB** ({gib:.2f} GiB) "
        "in the venv "
        f"(target ≤ 3 GB: {'met' if r['venv_bytes'] <= 3e9 else 'not met'}; {r['packages']} packages), "
        f"with torch {r['torch']}, {build} ({r['nvidia_packages']} `nvidia-*` packages)."
    )


def rt_constraints_section() -> str:
    """Every clinical constraint of the built-in RT tasks, with its source (the task data)."""
    from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, CONSTRAINT_METRICS, PRIORITIES, TASKS

    rows = ["| task (Rx) | organ | priority | constraint | type | source |", "|---|---|---|---|---|---|"]
    for name in BUILTIN_TASKS:
        t = TASKS[name]
        for o in t.oars:
            for c in o.constraints:
                kind = CONSTRAINT_METRICS[c.metric].split(": ")[-1]
                rows.append(
                    f"| `{name}` ({t.rx_gy:g} Gy / {t.fractions} fx) | {o.name} | {o.priority} "
                    f"({PRIORITIES[o.priority]}) | {c.describe()} | {kind} | {c.source} |"
                )
    return "\n".join(rows)


def rt_splits_section() -> str:
    """The anatomy distribution of every split of the built-in RT tasks."""
    from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, SPLITS, TASKS

    def ranges(intervals: tuple[tuple[float, float], ...]) -> str:
        return " ∪ ".join(f"[{lo:g}, {hi:g}]" for lo, hi in intervals)

    rows = ["| task | split | body | tumour | offset | layout |", "|---|---|---|---|---|---|"]
    for name in BUILTIN_TASKS:
        anatomy = TASKS[name].anatomy or {}
        for split in SPLITS:
            a = anatomy[split]
            rows.append(
                f"| `{name}` | {split} | {', '.join(f'{b:g}' for b in a.body)} | {ranges(a.tumour)} "
                f"| {ranges(a.offset)} | {ranges(a.layout)} |"
            )
    return "\n".join(rows)


SITE_SECTIONS = {
    DOCS / "simulation.md": {
        "roles": roles_section,
        "actions": actions_section,
        "observations": observations_section,
        "rewards": rewards_section,
        "scenarios": scenarios_section,
    },
    DOCS / "radiotherapy.md": {
        "rt-tasks": rt_tasks_section,
        "rt-constraints": rt_constraints_section,
        "rt-splits": rt_splits_section,
        "rt-actions": rt_actions_section,
        "rt-observations": rt_observations_section,
    },
    DOCS / "environments" / "rt-planning.md": {
        "rt-tasks": rt_tasks_section,
        "rt-actions": rt_actions_section,
        "rt-observations": rt_observations_section,
    },
    DOCS / "getting-started.md": {"first-run": first_run_section, "test-install": test_install_section},
}
"""The docs site's code-generated sections: page -> marker -> renderer."""

STATIC_SECTIONS = {marker: make for sections in SITE_SECTIONS.values() for marker, make in sections.items()}
"""Every code-generated section by marker (each is shown on one page only)."""


def server_load_section() -> str:
    """server/README.md's load figures, from ``docs/server_load.json`` (``server_load.py --write``)."""
    import json

    r = json.loads((ROOT / "docs" / "server_load.json").read_text())
    single, many, again = r["phases"]

    def paced(rate: float) -> str:
        return f"each session paced at {rate:g} steps/s" if rate else "closed loop"

    rows = ["| load | steps/s | p50 | p90 | p99 | errors |", "|---|---|---|---|---|---|"]
    for label, p, rate in (
        ("1 session", single, r["rate"]),
        (f"{many['sessions']} sessions", many, r.get("rate_many", r["rate"])),
        (f"{again['sessions']} sessions again", again, r.get("rate_many", r["rate"])),
    ):
        rows.append(
            f"| {label}, {paced(rate)} | {p['steps_per_s']:,.0f} | {p['p50_ms']:.2f} ms "
            f"| {p['p90_ms']:.2f} ms | {p['p99_ms']:.1f} ms | {p['errors']} |"
        )
    for key, label in (("echo_floor", "1 session"), ("echo_floor_many", f"{many['sessions']} sessions")):
        floor = r.get(key)
        if floor:
            rows.append(
                f"| echo floor, {label}: the same client against a server that only echoes a canned "
                f"reply | {floor['steps_per_s']:,.0f} | {floor['p50_ms']:.2f} ms | {floor['p90_ms']:.2f} ms "
                f"| {floor['p99_ms']:.1f} ms | {floor['errors']} |"
            )
    beside = r.get("background")
    if beside:
        rows.append(
            f"\nBeside them the whole time: a web-view tab whose agent is the planner ({beside['web_days']} "
            f"days played) and a client opening and closing MCP sessions ({beside['mcp_sessions']})."
        )
    verdicts = r.get("verdicts", {})
    targets = r.get("targets_ms", {})
    if verdicts:
        rows.append(
            "\nTargets: "
            + "; ".join(
                f"{name.replace('_', ' ')} ≤ {targets[name]:g} ms: {v}" for name, v in verdicts.items()
            )
            + ". A shared 2-CPU machine makes every figure noisy: compare runs on the same box only."
        )
    cartpole, in_process = r["cartpole_steps_per_s"], r["in_process_steps_per_s"]
    memory = ""
    if None not in r["server_rss_mb"]:
        m1, m2, m3 = r["server_rss_mb"]
        memory = (
            f" Server memory {m1:.0f} MB after 1 session, {m2:.0f} MB after {many['sessions']}, {m3:.0f} MB "
            f"after {again['sessions']} again ({m3 - m2:+.1f} MB between the two equal rounds)."
        )
    idle = r.get("server_idle")
    if idle:
        memory += (
            f" Idle (no client, the web view mounted) the server takes {idle['cpu_percent']:.1f} % of a CPU "
            f"and wakes {idle['wakeups_per_s']:,} times a second."
        )
    pieces = "; ".join(f"{name} {us:.0f}" for name, us in r["server_step_us"].items())
    load = r["load_average_1min"]
    p50 = single["p50_ms"]
    return (
        f"`{r['command']}` ({r['machine']}, {r['measured']}; load average {load:.1f} at the "
        "end: client, server and other jobs share the CPUs, so read every figure against CartPole, measured "
        "in the same run):\n\n"
        + "\n".join(rows)
        + f"\n\nGymnasium's CartPole in-process: {cartpole:,.0f} steps/s; the in-process "
        f"`HospitalEnvironment` {in_process:,.0f} ({in_process / cartpole:.3f}× CartPole); "
        f"{many['sessions']} WebSocket sessions together {many['steps_per_s'] / cartpole:.3f}× CartPole. "
        f"Single-session p50 {p50:.2f} ms (target 0.3 ms: {'met' if p50 <= 0.3 else 'not met'} in this run)."
        f"{memory} "
        f"Server-side cost of one WebSocket step, in-process, µs: {pieces} "
        f"({sum(r['server_step_us'].values()):.0f} in all)."
    )


def ppo_defaults_section() -> str:
    """policies/checkpoints/README.md's training hyperparameters: what the shipped dense-reward runs
    recorded (``ppo_team.json``'s ``args``; fields recorded later: ``training.ppo.Args``'s defaults).
    ``ppo_flat`` has its own recipe since issue 23 (a warm start; its command is in its ``.json``)."""
    import json
    from dataclasses import fields
    from types import SimpleNamespace

    from training.ppo import Args

    shown = [
        *("timesteps", "n_envs", "n_steps", "batch_size", "n_epochs", "learning_rate", "lr_final_fraction"),
        *("gamma", "gae_lambda", "clip_range", "ent_coef", "reward_scale", "network", "net_arch"),
        *("context_dim", "head_dim", "torch_threads", "eval_freq", "eval_episodes", "eval_seed", "select"),
    ]
    names = {f.name for f in fields(Args)}
    recorded = {}
    for file in ("ppo_team", "ppo_flat_nomask"):
        args = json.loads((ROOT / "policies" / "checkpoints" / f"{file}.json").read_text())["args"]
        recorded[file] = {**Args().as_json(), **{k: v for k, v in args.items() if k in names}}
    differ = [f for f in recorded if any(recorded[f][k] != recorded["ppo_team"][k] for k in shown)]
    if differ:
        raise SystemExit(f"policies/checkpoints: {differ} were trained with other hyperparameters")
    a = SimpleNamespace(**recorded["ppo_team"])
    lr_end = a.learning_rate * a.lr_final_fraction
    parts = [
        f"{a.timesteps:,} timesteps (`--timesteps`) over {a.n_envs} `DummyVecEnv` envs (`--n-envs`),",
        "each cycling through the five scenarios episode by episode (`--all-scenarios`);",
        f"`--n-steps` {a.n_steps}, `--batch-size` {a.batch_size}, `--n-epochs` {a.n_epochs},",
        f"Adam `--learning-rate` {a.learning_rate:g} decayed linearly to {lr_end:g}",
        f"(`--lr-final-fraction` {a.lr_final_fraction:g}), `--gamma` {a.gamma:g},",
        f"`--gae-lambda` {a.gae_lambda:g}, `--clip-range` {a.clip_range:g}, `--ent-coef` {a.ent_coef:g},",
        f"rewards × {a.reward_scale:g} (`--reward-scale`); the `{a.network}` network with a",
        f"{'-'.join(map(str, a.net_arch))} critic (`--net-arch`), context {a.context_dim} and heads",
        f"{a.head_dim} wide; torch on {a.torch_threads} thread. A periodic evaluation every",
        f"{a.eval_freq:,} steps (`--eval-freq`): the project's grader, {a.eval_episodes} episodes per",
        f"scenario (`--eval-episodes`) from seed **{a.eval_seed}** (`--eval-seed`), selected by",
        f"`--select {a.select}`.",
    ]
    return "\n".join(parts)


def generalisation_summary_section() -> str:
    """The README's in- and out-of-distribution columns: the splits table of
    docs/generalisation.md's generated block (``python -m benchmarks.generalisation --write``)."""
    text = (ROOT / "docs" / "generalisation.md").read_text()
    block = section(text, "generalisation")
    command = block.splitlines()[0]
    table = block.split("**Splits**", 1)[1].split("\n\n", 2)[1].strip()
    learners = []  # each learners block's mean row, in the splits table's columns
    for marker, name, track in (("generalisation-learners", "fast PPO", "flat"),
                                ("generalisation-learners-team", "fast MAPPO", "team")):  # fmt: skip
        rows = section(text, marker).strip().splitlines()
        runs = [r for r in rows if r.startswith("| `")]
        cells = [c.strip() for c in rows[-1].strip("|").split("|")]
        learners.append(
            f"| {name} (trained on `train`) | {track} | {len(runs)} seeds | " + " | ".join(cells[1:]) + " |"
        )
    return "\n".join(
        [
            f"{command}: the [procedural hospitals](docs/generalisation.md)' `validation` split (in "
            "distribution: the training ranges, unseen draws) and `test` split (out of distribution: "
            "smaller and larger departments, other arrival profiles, unseen shocks); mean ± standard "
            "error over episodes (the learners: over their training seeds, each graded on the same "
            "days; their runs in the page).",
            "",
            table,
            *learners,
        ]
    )


DOCUMENTS = {
    **SITE_SECTIONS,
    README: {"generalisation-summary": generalisation_summary_section},
    ROOT / "server" / "README.md": {"server-load": server_load_section},
    ROOT / "policies" / "checkpoints" / "README.md": {"ppo-defaults": ppo_defaults_section},
}
"""Every document with code-generated sections: path -> marker -> its renderer."""


def scoreboard_section(marker: str) -> str:
    command = SCOREBOARD_COMMANDS.get(marker) or next(
        c[marker] for c in SCOREBOARD_DOCUMENTS.values() if marker in c
    )
    argv = [sys.executable, "-m", "hospital_marl", *command.split()[1:]]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip()
    return f"`{command}`\n\n{out}"


def replace_section(text: str, marker: str, body: str, document: str = "README.md") -> str:
    start, end = f"<!-- BEGIN {marker} -->", f"<!-- END {marker} -->"
    try:
        return replace_marked(text, start, end, f"{start}\n{body}\n{end}")
    except ValueError as exc:
        raise SystemExit(f"{document}: {exc}") from None


def section(text: str, marker: str) -> str:
    match = re.search(rf"<!-- BEGIN {marker} -->\n(.*?)<!-- END {marker} -->", text, re.S)
    return match.group(1) if match else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the static sections are stale")
    parser.add_argument("--scoreboards", action="store_true", help="also rerun the (slow) scoreboards")
    parser.add_argument(
        "--scoreboard",
        action="append",
        choices=(*SCOREBOARD_COMMANDS, *(m for c in SCOREBOARD_DOCUMENTS.values() for m in c)),
        help="rerun only this scoreboard",
    )
    args = parser.parse_args()
    wanted = set(args.scoreboard or [])
    boards: dict[str, str] = {}

    def board(marker: str) -> str:  # each command runs once, however many pages show it
        if marker not in boards:
            boards[marker] = scoreboard_section(marker)
        return boards[marker]

    new = {}
    for path in {*DOCUMENTS, *SCOREBOARD_DOCUMENTS, *SCOREBOARD_PAGES}:
        old = body = path.read_text()
        name = str(path.relative_to(ROOT))
        for marker, make in DOCUMENTS.get(path, {}).items():
            body = replace_section(body, marker, make(), name)
        for marker in (*SCOREBOARD_DOCUMENTS.get(path, {}), *SCOREBOARD_PAGES.get(path, ())):
            if args.scoreboards or marker in wanted:
                body = replace_section(body, marker, board(marker), name)
        new[path] = (old, body)
    stale = sorted(path for path, (old, body) in new.items() if old != body)
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run `python tools/readme.py`", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(new[path][1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
