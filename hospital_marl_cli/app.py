"""The parser and ``main``: every subcommand comes from one ``add_commands`` in :data:`COMMANDS`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from hospital_marl_cli import datasets, play, serve, train
from hospital_marl_cli.agents import llm as llm_agent
from hospital_marl_cli.common import CLIError, error

COMMANDS: list[Callable[[Any], None]] = [
    play.add_commands,
    train.add_commands,
    serve.add_commands,
    datasets.add_commands,  # `hospital-marl datasets create|list` (offline RL, training/offline/)
    llm_agent.add_commands,  # `hospital-marl llm` (the agent script: hospital_marl_cli/agents/llm.py)
]
"""Each registers its subcommands on the ``hospital-marl`` subparsers; add yours here."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hospital-marl", description="Emergency-department multi-agent RL benchmark."
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress display or chatter")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_commands in COMMANDS:
        add_commands(sub)
    return parser


def importable_here() -> None:
    """Let ``--agent my_module:policy`` import ``my_module.py`` from the current directory.

    ``python -m`` puts the current directory first on ``sys.path``; a console script puts its own
    bin directory there instead. Appended last, the directory never shadows an installed package.
    """
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.append(here)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a user error prints one line and returns 2 (argparse's own errors exit 2 too)."""
    args = build_parser().parse_args(argv)
    importable_here()
    if not hasattr(args, "quiet"):
        args.quiet = False
    try:
        return int(args.func(args) or 0)
    except CLIError as exc:
        return error(str(exc))
