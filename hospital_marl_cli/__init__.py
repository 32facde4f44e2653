"""The ``hospital-marl`` command (also ``python -m hospital_marl`` / ``python -m hospital_marl_cli``).

The top layer: it imports the envs, ``policies``, ``grading``, ``training`` and ``server``,
and nothing imports it (``hospital_marl/__main__.py``, the ``python -m hospital_marl`` entry
point, is the one documented exception in the import contract).

Adding a subcommand: write a module here with ``add_commands(subparsers)`` (one function per
command, set with ``set_defaults(func=...)``; raise :class:`CLIError` for a user error) and
append its ``add_commands`` to :data:`hospital_marl_cli.app.COMMANDS`.
"""

from hospital_marl_cli.app import COMMANDS, build_parser, main
from hospital_marl_cli.common import CLIError

__all__ = ["COMMANDS", "CLIError", "build_parser", "main"]
