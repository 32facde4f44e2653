"""``hospital-marl serve``: the package CLI's way to run the OpenEnv server.

Registered by :func:`hospital_marl.cli._add_extension_commands`. Importing this
module needs no fastapi or openenv (they load when the command runs), so the
CLI works without the ``server`` extra and says what to install if needed.
"""

from __future__ import annotations

import argparse
from typing import Any

from server.settings import add_server_arguments, settings_from_args


def cmd_serve(args: argparse.Namespace) -> int:
    from hospital_marl.cli import CLIError

    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    try:
        from server.app import serve
    except ImportError as exc:
        raise CLIError(
            f"the server needs the `server` extra ({exc.name or exc}): pip install 'hospital-marl[server]'"
        ) from None
    serve(settings, args.host, args.port, args.log_level, access_log=not args.no_access_log)
    return 0


def add_commands(sub: Any) -> None:
    """Add ``serve`` to the ``hospital-marl`` subcommands."""
    p = sub.add_parser(
        "serve",
        help="run the OpenEnv server (HTTP + WebSocket) until interrupted",
        description="Run the OpenEnv server: HTTP routes, stateful HTTP sessions and WebSocket sessions.",
    )
    add_server_arguments(p)
    p.set_defaults(func=cmd_serve)
