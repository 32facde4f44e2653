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
``HOSPITAL_HTTP_SESSION_TTL``  idle seconds before a session nobody holds  120
                               a connection to (HTTP episode, HTTP MCP)
                               expires
``HOSPITAL_MAX_MESSAGE_BYTES`` largest HTTP body / WebSocket message       65536
``HOSPITAL_IDLE_TIMEOUT``      idle seconds before a WebSocket, MCP or web 600
                               session ends
``HOSPITAL_MAX_WEB_SESSIONS``  concurrent web-view tabs (``/web``)         32
``HOSPITAL_MAX_SESSIONS_PER_   sessions one client (IP address) may hold,  16
CLIENT``                       all sources together, and at most half of
                               any one source (0 = no cap at all)
``HOSPITAL_ALLOWED_HOSTS``     ``Host`` names served besides loopback,     none
                               comma-separated (``*``: any; the DNS-
                               rebinding guard)
``HOSPITAL_ALLOWED_ORIGINS``   browser ``Origin`` s accepted besides       none
                               loopback and same-origin (``*``: any)
``ENABLE_WEB_INTERFACE``       serve the web view at ``/web`` (OpenEnv's   false
                               switch: true/1/yes)
``HOSPITAL_ENV``               the environment served: ``ed`` or           ed
                               ``radiotherapy`` (SPEC-RT §7)
``HOSPITAL_RT_TASK``           radiotherapy task of a reset that names     prostate
                               none (only with ``HOSPITAL_ENV=radiotherapy``)
``HOSPITAL_SESSION_RATE``      sessions without a live connection opened   50
                               per second, all clients (0: no limit)
``HOSPITAL_SESSION_RATE_PER_   the same per client address (0: no limit)   10
CLIENT``
``HOSPITAL_EVICT_IDLE``        a full store of such sessions closes its    5
                               longest-idle one, if idle this long, for a
                               newcomer
``HOSPITAL_HEADER_TIMEOUT``    seconds a new connection has to send its    10
                               first request's head
``HOSPITAL_MAX_PENDING_        connections waiting for their first         256
CONNECTIONS``                  request's head at once (the oldest closed)
``HOSPITAL_MAX_UNCONNECTED_    sessions nobody holds a live connection to  96
SESSIONS``                     (HTTP episodes, web tabs, standard MCP), all
                               stores together; when full the longest-idle
                               one is evicted
``HOSPITAL_TOKEN``             a secret every request must carry (bearer   none
                               header, cookie or ``?token=``); for servers
                               reachable beyond loopback
=============================  ==========================================  =======
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from hospital_marl.core.scenarios import DEFAULT_SCENARIO, SCENARIOS
from hospital_marl.radiotherapy.core.tasks import DEFAULT_TASK as DEFAULT_RT_TASK
from hospital_marl.radiotherapy.core.tasks import TASKS

SERVED_ENVS: tuple[str, ...] = ("ed", "radiotherapy")
"""What one server process can serve (chosen at start): the emergency department, or RT planning."""

ENV_VARS: dict[str, str] = {
    "scenario": "HOSPITAL_SCENARIO",
    "max_sessions": "HOSPITAL_MAX_SESSIONS",
    "max_http_sessions": "HOSPITAL_MAX_HTTP_SESSIONS",
    "http_session_ttl_s": "HOSPITAL_HTTP_SESSION_TTL",
    "max_message_bytes": "HOSPITAL_MAX_MESSAGE_BYTES",
    "idle_timeout_s": "HOSPITAL_IDLE_TIMEOUT",
    "max_web_sessions": "HOSPITAL_MAX_WEB_SESSIONS",
    "max_sessions_per_client": "HOSPITAL_MAX_SESSIONS_PER_CLIENT",
    "web": "ENABLE_WEB_INTERFACE",
    "env": "HOSPITAL_ENV",
    "task": "HOSPITAL_RT_TASK",
    "allowed_hosts": "HOSPITAL_ALLOWED_HOSTS",
    "allowed_origins": "HOSPITAL_ALLOWED_ORIGINS",
    "token": "HOSPITAL_TOKEN",
    "header_timeout_s": "HOSPITAL_HEADER_TIMEOUT",
    "session_rate": "HOSPITAL_SESSION_RATE",
    "session_rate_per_client": "HOSPITAL_SESSION_RATE_PER_CLIENT",
    "evict_idle_s": "HOSPITAL_EVICT_IDLE",
    "max_pending_connections": "HOSPITAL_MAX_PENDING_CONNECTIONS",
    "max_unconnected_sessions": "HOSPITAL_MAX_UNCONNECTED_SESSIONS",
}
"""Settings field -> the environment variable that sets it."""

LOOPBACK_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
"""The ``Host`` names served by default: a page on another site cannot reach a loopback server
through a DNS name it controls (DNS rebinding), because that name is not on this list."""

DEFAULT_PER_CLIENT = 16
"""Sessions one client may hold by default: room for a lab's scripts and tabs, far from any pool."""

TOKEN_PATTERN = re.compile(r"[A-Za-z0-9._~+/=-]{16,256}")
"""What a token may be: long enough not to guess, and safe in a header, a cookie and a URL."""

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


_TRUE = {"true", "1", "yes"}  # OpenEnv's reading of ENABLE_WEB_INTERFACE
_FALSE = {"false", "0", "no"}


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SESSIONS_LIMIT:
        raise ValueError(f"{name} must be an int in 1..{MAX_SESSIONS_LIMIT}, got {value!r}")


@dataclass(frozen=True)
class ServerSettings:
    """What one server process serves, and its limits."""

    scenario: str = DEFAULT_SCENARIO
    """Scenario of a reset that names none."""
    max_sessions: int = 64
    """Concurrent WebSocket sessions (OpenEnv's ``max_concurrent_envs``); one more gets a capacity error."""
    max_http_sessions: int = 64
    """Concurrent stateful HTTP sessions; a reset beyond it gets HTTP 429."""
    http_session_ttl_s: float = 120.0
    """A session nobody holds a connection to (HTTP episode, HTTP MCP session, a web tab whose page
    is not connected: web-view API calls) idle this long
    expires (its id then answers 404). Shorter than ``idle_timeout_s``: nothing tells the server
    such a client has gone."""
    max_message_bytes: int = 64 * 1024
    """Largest HTTP request body (else 413) or WebSocket message (else an error message)."""
    idle_timeout_s: float = 600.0
    """A WebSocket (``/ws``, ``/mcp``), HTTP MCP or web-view session idle this long ends."""
    max_web_sessions: int = 32
    """Concurrent web-view tabs; each holds two episodes (yours and the agent's)."""
    max_sessions_per_client: int | None = DEFAULT_PER_CLIENT
    """Sessions one client (IP address) may hold over every source together, and never more than
    half of any one source, so no client fills a pool; None (or 0): no cap at all. Behind a reverse
    proxy every client has the proxy's address: raise it or turn it off there."""
    web: bool = False
    """Serve the web view at ``/web`` (OpenEnv's ``ENABLE_WEB_INTERFACE``)."""
    env: str = "ed"
    """The environment every session of this process serves: ``ed`` or ``radiotherapy``."""
    task: str | None = None
    """Radiotherapy task of a reset that names none (None: prostate); an error with ``env="ed"``."""
    allowed_hosts: tuple[str, ...] = ()
    """``Host`` names served (any port) besides the loopback ones, which always are; ``("*",)``:
    any. A request naming another host gets 421, a WebSocket 403 (DNS rebinding)."""
    allowed_origins: tuple[str, ...] = ()
    """Browser ``Origin`` s accepted besides loopback ones and the server's own (same-origin);
    ``("*",)``: any. A request or WebSocket from another origin gets 403."""

    session_rate: float = 50.0
    """Sessions without a live connection (HTTP episodes, web tabs, HTTP and standard MCP sessions)
    that may be opened per second by all clients together (twice that in a burst); 0: no limit."""
    session_rate_per_client: float = 10.0
    """The same per client address (twice that in a burst); 0: no limit."""
    evict_idle_s: float = 5.0
    """A full store of sessions without a live connection closes its longest-idle session, if idle
    at least this long, to open a newcomer's (instead of refusing it); 0: always evict the LRU."""
    max_unconnected_sessions: int = 96
    """One budget for the sessions nobody holds a live connection to, every store together (HTTP
    episodes, web tabs, standard MCP sessions): when it is full, opening one evicts the longest-idle
    such session of any store (idle ``evict_idle_s`` at least), else refuses. A WebSocket session, or
    a web tab whose page is connected, is never evicted. Per-store caps still apply."""
    header_timeout_s: float = 10.0
    """Seconds a new connection has to send its first request's head; then it is closed (a
    slowloris client held every connection it opened)."""
    max_pending_connections: int = 256
    """Connections that may be waiting for their first request's head at once; a new one beyond
    it closes the oldest such (never the newcomer, which may be an honest client)."""
    token: str | None = field(default=None, repr=False)
    """A secret every request must carry (``Authorization: Bearer``, the ``hospital_token`` cookie
    or ``?token=``), WebSocket handshakes included; None: no token. For a server reachable beyond
    loopback; from the environment only (a flag would show in the process list)."""

    def __post_init__(self) -> None:
        if self.token is not None and not TOKEN_PATTERN.fullmatch(self.token):
            raise ValueError(
                "HOSPITAL_TOKEN must be 16-256 characters of A-Z a-z 0-9 and . _ ~ + / = - "
                "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        check_scenario(self.scenario)
        if self.env not in SERVED_ENVS:
            raise ValueError(f"env: unknown environment {self.env!r}; valid names: {', '.join(SERVED_ENVS)}")
        if self.task is not None:
            if self.env != "radiotherapy":
                raise ValueError(
                    f"task {self.task!r} is a radiotherapy task: "
                    "serve with --env radiotherapy (HOSPITAL_ENV=radiotherapy)"
                )
            if self.task not in TASKS:
                raise ValueError(f"task: unknown task {self.task!r}; valid names: {', '.join(TASKS)}")
        if self.max_sessions_per_client == 0:
            object.__setattr__(self, "max_sessions_per_client", None)
        if self.max_sessions_per_client is not None:
            _check_count("max_sessions_per_client", self.max_sessions_per_client)
        for name in ("max_sessions", "max_http_sessions", "max_web_sessions", "max_unconnected_sessions"):
            _check_count(name, getattr(self, name))
        _check_count("max_pending_connections", self.max_pending_connections)
        for name in ("session_rate", "session_rate_per_client", "evict_idle_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e7:
                raise ValueError(f"{name} must be a number in [0, 1e7), got {value!r}")
        for name in ("http_session_ttl_s", "idle_timeout_s", "header_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e7:
                raise ValueError(f"{name} must be a number of seconds in (0, 1e7), got {value!r}")
        for name in ("allowed_hosts", "allowed_origins"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = tuple(v.strip() for v in value.split(",") if v.strip())
            if not isinstance(value, (tuple, list)) or not all(isinstance(v, str) and v for v in value):
                raise ValueError(f"{name} must be names separated by commas, got {value!r}")
            object.__setattr__(self, name, tuple(v.lower().rstrip("/") for v in value))
        if not isinstance(self.web, bool):
            raise ValueError(f"web must be a bool, got {self.web!r}")
        if (
            isinstance(self.max_message_bytes, bool)
            or not isinstance(self.max_message_bytes, int)
            or not (1024 <= self.max_message_bytes <= 16 * 1024 * 1024)
        ):
            raise ValueError(
                f"max_message_bytes must be an int in 1024..16777216, got {self.max_message_bytes!r}"
            )

    @property
    def rt_task(self) -> str:
        """The radiotherapy task of a reset that names none."""
        return self.task or DEFAULT_RT_TASK

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
            kind = types[name]
            if kind == "bool":
                if raw.lower() not in _TRUE | _FALSE:
                    raise ValueError(f"{var} must be true/false (1/0, yes/no), got {raw!r}")
                values[name] = raw.lower() in _TRUE
                continue
            if "tuple" in kind:
                values[name] = raw
                continue
            try:
                values[name] = float(raw) if kind == "float" else int(raw) if "int" in kind else raw
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
        help="idle seconds before a session nobody holds a connection to (HTTP episode, HTTP MCP "
        "session) expires (default: $HOSPITAL_HTTP_SESSION_TTL or 120)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="idle seconds before a WebSocket, MCP or web session ends "
        "(default: $HOSPITAL_IDLE_TIMEOUT or 600)",
    )
    parser.add_argument(
        "--max-web-sessions",
        type=int,
        default=None,
        help="concurrent web-view tabs (default: $HOSPITAL_MAX_WEB_SESSIONS or 32)",
    )
    parser.add_argument(
        "--max-sessions-per-client",
        type=int,
        default=None,
        help="sessions one client IP may hold, all sources together, never more than half of one "
        f"source (default: $HOSPITAL_MAX_SESSIONS_PER_CLIENT or {DEFAULT_PER_CLIENT}; 0 = no cap)",
    )
    parser.add_argument(
        "--session-rate",
        type=float,
        default=None,
        metavar="PER_S",
        help="sessions without a live connection (HTTP, web, HTTP/standard MCP) opened per second by "
        "all clients together (default: $HOSPITAL_SESSION_RATE or 50; 0 = no limit)",
    )
    parser.add_argument(
        "--session-rate-per-client",
        type=float,
        default=None,
        metavar="PER_S",
        help="the same per client address (default: $HOSPITAL_SESSION_RATE_PER_CLIENT or 10; 0 = no limit)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=None,
        metavar="NAME",
        help="also serve requests whose Host is NAME, besides localhost, 127.0.0.1 and ::1 "
        "(repeatable; * = any; default: $HOSPITAL_ALLOWED_HOSTS or none)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=None,
        metavar="ORIGIN",
        help="also accept browser requests from ORIGIN, e.g. https://lab.example.org (repeatable; "
        "* = any; default: $HOSPITAL_ALLOWED_ORIGINS; loopback and same-origin always)",
    )
    parser.add_argument(
        "--web",
        action="store_true",
        default=None,
        help="serve the web view at /web (default: $ENABLE_WEB_INTERFACE, else off)",
    )
    parser.add_argument(
        "--env",
        choices=SERVED_ENVS,
        default=None,
        help="the environment served: ed (the emergency department) or radiotherapy "
        "(default: $HOSPITAL_ENV or ed)",
    )
    parser.add_argument(
        "--task",
        default=None,
        help="with --env radiotherapy: task of a reset that names none "
        f"(default: $HOSPITAL_RT_TASK or {DEFAULT_RT_TASK}; one of {', '.join(TASKS)})",
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
        idle_timeout_s=args.idle_timeout,
        max_web_sessions=args.max_web_sessions,
        max_sessions_per_client=args.max_sessions_per_client,
        session_rate=args.session_rate,
        session_rate_per_client=args.session_rate_per_client,
        web=args.web,
        env=args.env,
        task=args.task,
        allowed_hosts=tuple(args.allow_host) if args.allow_host else None,
        allowed_origins=tuple(args.allow_origin) if args.allow_origin else None,
    )
