"""Logging for ``serve``: uvicorn's formats, written to whatever ``sys.stderr`` is at each record.

uvicorn's own ``LOGGING_CONFIG`` binds its handlers to ``ext://sys.stderr`` and
``ext://sys.stdout`` *once*, when the server starts. A server started while those
streams are replaced (a test under pytest's capture, a notebook cell, a
``redirect_stderr`` block) keeps writing to the replacement after it is closed:
every later record then raises ``ValueError: I/O operation on closed file``,
and a test run can lose its ``sys.stderr``. :class:`CurrentStreamHandler` looks
the stream up on every record instead.

A ``?token=`` in a request line is blanked in uvicorn's access log (:func:`redact_tokens`).
"""

from __future__ import annotations

import copy
import logging
import re
import sys
from typing import IO, Any, Literal


class CurrentStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A ``StreamHandler`` on ``sys.<name>`` as it is when a record is written, never a stored stream."""

    def __init__(self, name: Literal["stderr", "stdout"] = "stderr") -> None:
        self._which = name
        super().__init__()

    @property  # type: ignore[override]
    def stream(self) -> IO[str]:
        return getattr(sys, self._which) or getattr(sys, f"__{self._which}__")

    @stream.setter
    def stream(self, value: Any) -> None:
        """Ignored: the stream is always the current one (``StreamHandler.__init__`` sets it)."""


def log_config() -> dict[str, Any]:
    """uvicorn's ``LOGGING_CONFIG`` with its two handlers made :class:`CurrentStreamHandler` s."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"] = {
        "default": {"formatter": "default", "()": CurrentStreamHandler, "name": "stderr"},
        "access": {"formatter": "access", "()": CurrentStreamHandler, "name": "stdout"},
    }
    return config


_TOKEN_IN_QUERY = re.compile(r"([?&]token=)[^&#\s\"]*", re.IGNORECASE)
REDACTED = "[redacted]"


class TokenRedactor(logging.Filter):
    """Blanks ``?token=<secret>`` in a record's message and arguments (uvicorn's access line
    quotes the full path, query included): a log must not hand the server's token to whoever
    reads it. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, str) and "token=" in a for a in record.args):
            record.args = tuple(
                _TOKEN_IN_QUERY.sub(rf"\g<1>{REDACTED}", a) if isinstance(a, str) else a for a in record.args
            )
        if isinstance(record.msg, str) and "token=" in record.msg:
            record.msg = _TOKEN_IN_QUERY.sub(rf"\g<1>{REDACTED}", record.msg)
        return True


def redact_tokens(logger_name: str = "uvicorn.access") -> None:
    """Put a :class:`TokenRedactor` on the logger (once): the server and the MCP transport's
    process call it, whatever logging configuration uvicorn was given (a logger's filters
    survive ``dictConfig``)."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, TokenRedactor) for f in logger.filters):
        logger.addFilter(TokenRedactor())
