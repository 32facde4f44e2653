"""Server settings: one frozen value, read from the environment or the command line.

Kept free of fastapi / openenv imports, so ``hospital-marl --help`` works
without the ``server`` extra.

Environment variables (all optional):

=============================  ==========================================  =======
variable                       meaning                                     default
=============================  ==========================================  =======
``HOSPITAL_SCENARIO``          scenario of a reset that names none         normal_day
``HOSPITAL_MAX_SESSIONS``      concurrent WebSocket sessions               64
``HOSPITAL_MAX_HTTP_SESSIONS`` concurrent stateful HTTP sessions           64
``HOSPITAL_HTTP_SESSION_TTL``  idle seconds before an HTTP session expires 600
``HOSPITAL_MAX_MESSAGE_BYTES`` largest HTTP body / WebSocket message       65536
=============================  ==========================================  =======
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from hospital_marl.core.scenarios import DEFAULT_SCENARIO, SCENARIOS

ENV_VARS: dict[str, str] = {
    "scenario": "HOSPITAL_SCENARIO",
    "max_sessions": "HOSPITAL_MAX_SESSIONS",
    "max_http_sessions": "HOSPITAL_MAX_HTTP_SESSIONS",
    "http_session_ttl_s": "HOSPITAL_HTTP_SESSION_TTL",
    "max_message_bytes": "HOSPITAL_MAX_MESSAGE_BYTES",
}
"""Settings field -> the environment variable that sets it."""

MAX_SESSIONS_LIMIT = 4096
"""Sanity cap on either session limit (each session holds one simulator)."""


def default_scenario(environ: Mapping[str, str] | None = None) -> str:
    """``HOSPITAL_SCENARIO`` if set (and known), else the package default."""
    environ = os.environ if environ is None else environ
    name = environ.get("HOSPITAL_SCENARIO") or DEFAULT_SCENARIO
    check_scenario(name, "HOSPITAL_SCENARIO")
    return name


def check_scenario(name: str, source: str = "scenario") -> str:
    if name not in SCENARIOS:
        raise ValueError(f"{source}: unknown scenario {name!r}; valid names: {', '.join(SCENARIOS)}")
    return name


@dataclass(frozen=True)
class ServerSettings:
    """What one server process serves, and its limits."""

    scenario: str = DEFAULT_SCENARIO
    """Scenario of a reset that names none."""
    max_sessions: int = 64
    """Concurrent WebSocket sessions (OpenEnv's ``max_concurrent_envs``); one more gets a capacity error."""
    max_http_sessions: int = 64
    """Concurrent stateful HTTP sessions; a reset beyond it gets HTTP 429."""
    http_session_ttl_s: float = 600.0
    """An HTTP session idle this long expires (its id then answers 404)."""
    max_message_bytes: int = 64 * 1024
    """Largest HTTP request body (else 413) or WebSocket message (else an error message)."""

    def __post_init__(self) -> None:
        check_scenario(self.scenario)
        for name in ("max_sessions", "max_http_sessions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SESSIONS_LIMIT:
                raise ValueError(f"{name} must be an int in 1..{MAX_SESSIONS_LIMIT}, got {value!r}")
        if not isinstance(self.http_session_ttl_s, (int, float)) or not self.http_session_ttl_s > 0:
            raise ValueError(f"http_session_ttl_s must be > 0 seconds, got {self.http_session_ttl_s!r}")
        if (
            isinstance(self.max_message_bytes, bool)
            or not isinstance(self.max_message_bytes, int)
            or not (1024 <= self.max_message_bytes <= 16 * 1024 * 1024)
        ):
            raise ValueError(
                f"max_message_bytes must be an int in 1024..16777216, got {self.max_message_bytes!r}"
            )

    @property
    def ws_frame_limit_bytes(self) -> int:
        """uvicorn's hard WebSocket frame cap: above it the socket closes with 1009.

        Between ``max_message_bytes`` and this, a message gets an error reply and
        the session lives on.
        """
        return max(1024 * 1024, 4 * self.max_message_bytes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ServerSettings:
        """Defaults, then the ``HOSPITAL_*`` variables, then ``overrides`` (None = not given)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        types = {f.name: f.type for f in fields(cls)}
        for name, var in ENV_VARS.items():
            raw = environ.get(var)
            if raw in (None, ""):
                continue
            try:
                values[name] = (
                    float(raw) if types[name] == "float" else int(raw) if types[name] == "int" else raw
                )
            except ValueError:
                raise ValueError(f"{var} must be a number, got {raw!r}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        return replace(cls(), **values)


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags shared by ``server`` (the OpenEnv entry point) and ``hospital-marl serve``."""
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to bind (default 127.0.0.1; "
        "0.0.0.0 to serve other machines, as the Docker image does)",
    )
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    parser.add_argument(
        "--scenario",
        default=None,
        help="scenario of a reset that names none "
        f"(default: $HOSPITAL_SCENARIO or {DEFAULT_SCENARIO}; one of {', '.join(SCENARIOS)})",
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=None,
        help="concurrent WebSocket sessions (default: $HOSPITAL_MAX_SESSIONS or 64)",
    )
    parser.add_argument(
        "--max-http-sessions",
        type=int,
        default=None,
        help="concurrent stateful HTTP sessions (default: $HOSPITAL_MAX_HTTP_SESSIONS or 64)",
    )
    parser.add_argument(
        "--http-session-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help="idle seconds before an HTTP session expires (default: $HOSPITAL_HTTP_SESSION_TTL or 600)",
    )
    parser.add_argument(
        "--log-level", default="info", choices=("critical", "error", "warning", "info", "debug")
    )
    parser.add_argument("--no-access-log", action="store_true", help="do not log every HTTP request")


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ServerSettings:
    return ServerSettings.from_env(
        environ,
        scenario=args.scenario,
        max_sessions=args.max_sessions,
        max_http_sessions=args.max_http_sessions,
        http_session_ttl_s=args.http_session_ttl,
    )
