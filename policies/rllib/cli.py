"""``hospital-marl train rllib``: registered on the ``train`` subcommand group by :func:`add_rllib_parser`.

Importing this module is cheap (no ray, no torch), so ``hospital-marl --help``
stays fast and works without the ``rllib`` extra; the command itself says what
to install when ray is missing. The flags are generated from
:class:`policies.rllib.train.Args` (its field docstrings are the help).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import MISSING, fields
from typing import Any

from hospital_marl.core.scenarios import SCENARIOS

_METAVARS = {"address": "ADDRESS", "save": "DIR", "scenario": "S", "num_cpus": "N"}
_OPTIONAL_INTS = ("num_cpus",)  # fields defaulting to None whose values are ints


def _add_args_flags(parser: argparse.ArgumentParser) -> None:
    from policies.rllib.train import Args, field_docs

    docs = field_docs(Args)
    scenario_group = parser.add_mutually_exclusive_group()  # --scenario S | --all-scenarios
    for f in fields(Args):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not MISSING else None
        doc = docs.get(f.name, "").replace("%", "%%")
        target: Any = scenario_group if f.name in ("scenario", "all_scenarios") else parser
        if isinstance(default, bool):
            if default:
                no_flag = "--no-" + f.name.replace("_", "-")
                target.add_argument(no_flag, dest=f.name, action="store_false", help=doc)
            else:
                target.add_argument(flag, dest=f.name, action="store_true", help=doc)
        elif isinstance(default, tuple):
            target.add_argument(
                flag, dest=f.name, type=int, nargs="+", default=default, metavar="N", help=doc
            )
        elif f.name == "reward_mode":
            target.add_argument(flag, dest=f.name, choices=("team", "role"), default=default, help=doc)
        else:
            kind = int if f.name in _OPTIONAL_INTS else (str if default is None else type(default))
            if default is not None:
                doc = f"{doc} (default {default})"
            target.add_argument(
                flag, dest=f.name, type=kind, default=default, metavar=_METAVARS.get(f.name), help=doc
            )


def _error(message: str) -> int:
    print(f"hospital-marl: error: {message}", file=sys.stderr)
    return 2


def cmd_train_rllib(args: argparse.Namespace) -> int:
    """Train, then print a JSON summary; exit 1 if the masked-action audit is not 0."""
    from policies.rllib.train import METADATA_FILE, Args, train

    if args.scenario not in SCENARIOS:
        return _error(f"unknown scenario {args.scenario!r}; valid: {', '.join(SCENARIOS)}")
    values = {f.name: getattr(args, f.name) for f in fields(Args) if hasattr(args, f.name)}
    values["hidden"] = tuple(values["hidden"])
    if getattr(args, "quiet", False):
        values["progress"] = False
    try:
        run_args = Args(**values)
    except ValueError as exc:
        return _error(str(exc))
    started = time.perf_counter()
    try:
        run_dir = train(run_args)
    except ImportError as exc:
        return _error(str(exc))
    meta = json.loads((run_dir / METADATA_FILE).read_text())
    summary = {
        "run_dir": str(run_dir),
        "iterations": run_args.iterations,
        "env_steps": meta["env_steps"],
        "wall_time_s": round(time.perf_counter() - started, 1),
        "audit": meta["audit"],
        "command": meta["command"],
    }
    print(json.dumps(summary, indent=2))
    audit = meta["audit"]
    if audit["masked_actions_taken"] or audit["env_invalid_actions"]:
        print(
            "hospital-marl: masked-action audit FAILED: "
            f"{audit['masked_actions_taken']} masked actions taken, "
            f"{audit['env_invalid_actions']} invalid actions counted by the env (both must be 0)",
            file=sys.stderr,
        )
        return 1
    return 0


def add_rllib_parser(train_subparsers: Any) -> argparse.ArgumentParser:
    """Register ``rllib`` on the ``hospital-marl train`` subparsers (``train rllib ...``)."""
    parser = train_subparsers.add_parser(
        "rllib",
        help="one masked PPO policy per role with Ray RLlib on the AEC env (needs the `rllib` extra)",
        description="Train masked PPO with Ray RLlib, one module per role; saves an RLlib checkpoint, "
        "rllib.json and a learning curve with the masked-action audit in a run directory "
        "(see policies/rllib/README.md). Local by default; --address auto joins a Ray cluster.",
    )
    _add_args_flags(parser)
    parser.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS)
    parser.set_defaults(func=cmd_train_rllib)
    return parser
