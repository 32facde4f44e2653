"""What every subcommand shares: the user-error type, argument types whose errors name the flag."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console


class CLIError(Exception):
    """A user error: printed as one line (``hospital-marl: error: ...``), exit status 2."""


def error(message: str) -> int:
    """Print a user error the way :class:`CLIError` is printed; returns the exit status 2."""
    print(f"hospital-marl: error: {message}", file=sys.stderr)
    return 2


def console(stderr: bool = False) -> Console:
    """A rich console; piped or captured, 150 columns rather than squeezing tables into 80."""
    out = Console(stderr=stderr)
    return out if out.is_terminal else Console(stderr=stderr, width=150)


def _number(kind: type, minimum: float, what: str) -> Any:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    convert.__name__ = what
    return convert


positive_int = _number(int, 1, "a positive integer")
nonnegative_int = _number(int, 0, "an integer >= 0")
nonnegative_float = _number(float, 0.0, "a number of seconds >= 0")
