"""``hospital-marl serve``: the OpenEnv server (the ``server`` extra: fastapi, uvicorn).

Building the parser needs no fastapi or openenv (:mod:`server.settings` is plain), so the CLI
works without the ``server`` extra and says what to install if needed.
"""

from __future__ import annotations

import argparse
from typing import Any

from hospital_marl_cli.common import CLIError
from server.settings import add_server_arguments, settings_from_args


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    from server.app import PortInUseError, check_port, serve  # light: fastapi etc. load later

    try:
        check_port(args.host, args.port)  # before the slow imports and the kernel's compile
        serve(settings, args.host, args.port, args.log_level, access_log=not args.no_access_log)
    except PortInUseError as exc:
        raise CLIError(str(exc.strerror)) from None
    except ImportError as exc:
        raise CLIError(
            f"the server needs the `server` extra ({exc.name or exc}): "
            'pip install -e ".[server]" (from a clone)'
        ) from None
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
