"""The ``hospital-marl`` command (also ``python -m hospital_marl`` / ``python -m hospital_marl_cli``).

The top layer: it imports the envs, ``policies``, ``grading``, ``training`` and ``server``,
and nothing imports it (``hospital_marl/__main__.py``, the ``python -m hospital_marl`` entry
point, is the one documented exception in the import contract).

Adding a subcommand: write a module here with ``add_commands(subparsers)`` (one function per
command, set with ``set_defaults(func=...)``; raise :class:`CLIError` for a user error) and
append its ``add_commands`` to :data:`hospital_marl_cli.app.COMMANDS`.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from hospital_marl_cli.common import CLIError

__all__ = ["COMMANDS", "CLIError", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """The ``hospital-marl`` command (:func:`hospital_marl_cli.app.main`). ``serve`` on a busy
    port is refused before the subcommands' imports (the simulator, policies, numba), which
    took most of the refusal's time under load."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["serve"]:
        from server.app import precheck_port

        precheck_port(args[1:], "hospital-marl")
    from hospital_marl_cli.app import main as run

    try:
        status = run(args)
        sys.stdout.flush()  # inside the try: a closed pipe raises here, not at shutdown
    except BrokenPipeError:
        # The reader went away (``hospital-marl agents | head -3``): stop quietly, as Unix tools do,
        # and keep Python's flush at exit from raising again on the dead pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    return status


def __getattr__(name: str) -> Any:
    """``COMMANDS`` and ``build_parser`` load the subcommands on first use."""
    if name in ("COMMANDS", "build_parser"):
        from hospital_marl_cli import app

        return getattr(app, name)
    raise AttributeError(f"module 'hospital_marl_cli' has no attribute {name!r}")
