"""The agent scripts' stdout protocol (SPEC §11), written in one place for every agent.

    [START] task=<task> env=<env id> model=<model name>
    [STEP] step=<n> action=<action> reward=<r:.2f> done=<true|false> error=<message|null>
    [END] success=<true|false> steps=<n> score=<s:.2f> rewards=<r1:.2f>,<r2:.2f>,...

Every free-text field passes through :func:`field`: a model's reply (a tool name, an
argument, an error naming either), a model name or a task name from the command line can
never add a line (``\\n``), end a field early (a space), or carry control characters, so
no reply can forge an ``[END]`` line. The ED agent (``hospital_marl_cli.agents.llm``) and
the radiotherapy agent both print through these functions; the one reply parser is
:func:`policies.llm.parse_action`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import TextIO

MAX_FIELD = 200
"""Longest free-text field printed (a longer one is cut, marked with ``...``)."""

_UNSAFE = re.compile(r"[^\x21-\x7e]")  # anything but printable ASCII without the space


def field(value: object) -> str:
    """``value`` as one protocol token: every space, line break, control or non-ASCII
    character becomes ``_``; at most :data:`MAX_FIELD` characters; never empty."""
    text = _UNSAFE.sub("_", str(value))
    if len(text) > MAX_FIELD:
        text = text[: MAX_FIELD - 3] + "..."
    return text or "_"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def start_line(task: str, env: str, model: str) -> str:
    return f"[START] task={field(task)} env={field(env)} model={field(model)}"


def step_line(step: int, action: object, reward: float, done: bool, error: str | None) -> str:
    return (
        f"[STEP] step={int(step)} action={field(action)} reward={float(reward):.2f} "
        f"done={_bool(done)} error={'null' if error is None else field(error)}"
    )


def end_line(success: bool, steps: int, score: float, rewards: Sequence[float]) -> str:
    return (
        f"[END] success={_bool(success)} steps={int(steps)} score={float(score):.2f} "
        f"rewards={','.join(f'{float(r):.2f}' for r in rewards)}"
    )


class Protocol:
    """Writes the protocol lines (and only them) to ``out`` (default stdout), flushing each."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def emit(self, line: str) -> None:
        assert "\n" not in line and "\r" not in line, "a protocol line is one line"
        print(line, file=self.out, flush=True)


__all__ = ["MAX_FIELD", "Protocol", "end_line", "field", "start_line", "step_line"]
