"""The OpenEnv server: ``server.app:app`` (built by openenv-core's ``create_app``) and ``main``.

Run it::

    server --port 8000                      # the console script OpenEnv's tooling expects
    hospital-marl serve --port 8000         # the same, from the package CLI
    uvicorn server.app:app --port 8000 --no-proxy-headers --http server.mcp_handoff:RoutingProtocol
                                            # settings from HOSPITAL_* variables only

OpenEnv's ``create_app`` builds the app: its routes (``/health``,
``/metadata``, ``/mcp``, ``/docs``) and its WebSocket session machinery at
``/ws`` (one :class:`~server.environment.HospitalEnvironment` per connection,
up to ``max_sessions``) serve as they are. This module replaces ``/reset``,
``/step``, ``/state`` and ``/schema`` with compatible supersets (same request
and response fields, plus a session id), wraps ``/ws``, and so adds what
OpenEnv lacks:

- **Stateful HTTP episodes.** OpenEnv's plain ``/reset`` and ``/step`` build a
  fresh environment per call. Here ``POST /reset`` opens an HTTP session and
  returns its ``session_id`` (body field, ``X-Session-Id`` header and
  ``hospital_session`` cookie); ``POST /step`` and ``GET /state`` continue it
  when given the id (body field or query parameter, header, or cookie, in that
  order). A step with no session is a 400 with instructions, never a silent
  fresh episode; an unknown or expired id is a 404. Sessions expire after
  ``http_session_ttl_s`` idle seconds; at most ``max_http_sessions`` live at
  once (then 429); ``DELETE /sessions/{id}`` closes one.
- **A capacity error the client sees.** When all WebSocket sessions are taken, a
  new connection gets OpenEnv's ``CAPACITY_REACHED`` error message and a close
  with code 1013 (try again later) whose reason says so, not a bare close.
- **Every session counted, bounded and expiring.** ``/ws`` and ``/mcp``
  WebSocket connections and MCP sessions opened over HTTP
  (``openenv/session/create``) share OpenEnv's pool of ``max_sessions``
  environments; stateful HTTP episodes and web-view tabs have their own
  stores. Each expires when idle; an optional per-client cap spans them all;
  ``GET /sessions`` reports every one (see :mod:`server.sessions`).
- **Bounded, well-formed messages** (:mod:`server.guards`): HTTP bodies above
  ``max_message_bytes`` get 413, invalid UTF-8 400, non-finite numbers or deep
  nesting 422; a bad WebSocket message gets an error reply and the session
  lives on; frames above ``ws_frame_limit_bytes`` close the socket with 1009.
- **The web view** at ``/web`` (``--web`` / ``ENABLE_WEB_INTERFACE``), OpenEnv's
  Gradio mount with this package's tab (:mod:`server.web`).
- **The real state schema** at ``/schema`` (OpenEnv reports its base ``State``).

- **One environment per process, chosen at start** (``--env`` / ``HOSPITAL_ENV``): the
  emergency department (default) or radiotherapy planning (:mod:`server.radiotherapy`,
  SPEC-RT §7). Only the wire models and the session factory differ (:class:`ServedEnv`);
  every guard, limit and session store above is the same code.

Errors never stop the server or touch other sessions: bad input is a 4xx (or
a WebSocket ``error`` message) for that request only.

Safe by default (see docs/server.md): loopback ``Host`` names and browser ``Origin`` s only
(``--allow-host``, ``--allow-origin``), JSON routes take ``application/json`` only, every
session belongs to the client and channel that opened it, and one client holds at most
``max_sessions_per_client`` sessions and half of any pool.

This module stays light (the settings, the port check, ``main``); the app is built by
:mod:`server.routes` on first use, so ``server --port N`` on a busy port fails at once.
"""

from __future__ import annotations

import argparse
import errno
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI

    from server.settings import ServerSettings

_FROM_ROUTES = ("SESSION_COOKIE", "SESSION_HEADER", "ServedEnv", "served_env", "OpenEnvPool")


def build_app(
    settings: ServerSettings | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    warm: bool = False,
) -> FastAPI:
    """The FastAPI app (:func:`server.routes.build_app`), described by this module's docstring."""
    from server import routes

    app = routes.build_app(settings, clock=clock, warm=warm)
    app.description = __doc__ or ""
    return app


def make_rt_app(task: str | None = None, **settings: Any) -> FastAPI:
    """The app serving the radiotherapy env (SPEC-RT §7), with every guard and limit of the ED's."""
    from server.settings import ServerSettings

    return build_app(ServerSettings(env="radiotherapy", task=task, **settings))


def __getattr__(name: str) -> Any:
    """``app`` (what ``uvicorn server.app:app`` serves, settings from the ``HOSPITAL_*``
    variables) is built on first access; the routes' constants are forwarded."""
    if name == "app":
        value: Any = build_app(warm=True)
    elif name in _FROM_ROUTES:
        from server import routes

        value = getattr(routes, name)
    else:
        raise AttributeError(f"module 'server.app' has no attribute {name!r}")
    globals()[name] = value
    return value


def uvicorn_options(settings: ServerSettings) -> dict[str, Any]:
    """What :func:`serve` gives uvicorn besides host, port and logging.

    No permessage-deflate: compressing one small JSON observation costs more CPU on
    both ends than it saves on loopback or a LAN, and adds latency to every step. The HTTP
    protocol is :class:`server.mcp_handoff.RoutingProtocol` (uvicorn's own, except that a
    standard MCP connection is served by the MCP transport's process). No proxy headers:
    clients are their TCP addresses (the per-client caps and ownership key on them), while
    uvicorn by default believes any ``X-Forwarded-For`` a loopback client sends.
    """
    from server.mcp_handoff import RoutingProtocol

    return {
        "ws_max_size": settings.ws_frame_limit_bytes,
        "ws_per_message_deflate": False,
        "http": RoutingProtocol,
        "proxy_headers": False,
    }


GIL_SWITCH_INTERVAL_S = 0.0001
"""``sys.setswitchinterval`` while serving. Threads share the event loop's interpreter: the
web view's Gradio workers (boards, charts; the agents themselves decide in processes of their own,
:mod:`server.agents`, and standard MCP runs in one too, :mod:`server.mcp_transport`). At
Python's default 5 ms such a thread can hold the interpreter that long each time the event loop
wants it back, and a WebSocket step waits that long at each of its handovers (wake-up, receive,
send). 0.1 ms bounds each wait; beside a client cycling MCP sessions it measured (one /ws
session, 3000 steps, two runs each on a loaded 2-core box) p90 0.70 / 0.74 ms and p99 3.2 /
1.5 ms, against 6.0 / 3.3 ms and 10.5 / 8.1 ms at 0.5 ms. The threads lose a little
throughput only while they contend (``benchmarks/server_load.py`` measures both)."""


class PortInUseError(OSError):
    """The address to serve on is taken (or not ours to bind): said before any slow start-up."""


def check_port(host: str, port: int) -> None:
    """Bind and release ``host:port`` as uvicorn will (raises :class:`PortInUseError` with a hint).

    Run before importing the app's dependencies and compiling the kernel, so a busy port
    fails in well under a second instead of after the whole start-up."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: TIME_WAIT is no error
        try:
            sock.bind((host, port))
        except OSError as exc:
            busy = exc.errno == errno.EADDRINUSE
            raise PortInUseError(
                exc.errno,
                f"cannot serve on {host}:{port}: "
                + (
                    f"the port is in use (another server?); stop it or pick another with --port {port + 1}"
                    if busy
                    else f"{exc.strerror}; check --host/--port"
                ),
            ) from None


def precheck_port(argv: Sequence[str], prog: str) -> None:
    """Exit at once, with :func:`check_port`'s one line, if the ``--host`` / ``--port`` that
    ``argv`` asks for (defaults 127.0.0.1:8000) cannot be bound: run before the settings'
    import, which loads the simulator package (numba, gymnasium) and took most of a busy-port
    refusal's time under load. Arguments it cannot read are left to the real parser."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    try:
        known, _ = parser.parse_known_args(list(argv))
    except (SystemExit, ValueError):
        return
    if not 0 <= known.port <= 65535:
        return
    try:
        check_port(known.host, known.port)
    except PortInUseError as exc:
        print(f"{prog}: error: {exc.strerror}", file=sys.stderr)
        sys.exit(1 if prog == "server" else 2)
    except (OSError, UnicodeError):
        return  # an unusable host: the real parser and check_port say so


def serve(
    settings: ServerSettings,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    access_log: bool = True,
) -> None:
    """Run the server in the foreground until interrupted (:class:`PortInUseError` at once if
    the port is taken)."""
    check_port(host, port)
    started = time.perf_counter()
    _progress("starting: loading the environment, compiling the simulation kernel on first use")
    import uvicorn

    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)

    from server.logs import log_config

    app = build_app(settings, warm=True)
    web = f", web view at http://{host}:{port}/web" if settings.web else " (no web view: --web)"
    _progress(f"app built in {time.perf_counter() - started:.1f} s; starting on http://{host}:{port}{web}")
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_config=log_config(),  # follows sys.stderr: safe to call under a captured or redirected stream
        log_level=log_level,
        access_log=access_log,
        **uvicorn_options(settings),
    )


def _progress(message: str) -> None:
    """A start-up line on stderr: the first start compiles for a while before uvicorn says anything."""
    print(f"hospital-marl serve: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """The ``server`` console script (OpenEnv's entry point): ``server --host --port --scenario ...``."""
    precheck_port(sys.argv[1:] if argv is None else argv, "server")
    from server.settings import add_server_arguments, settings_from_args

    parser = argparse.ArgumentParser(prog="server", description="Run the hospital_marl OpenEnv server.")
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        serve(settings, args.host, args.port, args.log_level, access_log=not args.no_access_log)
    except PortInUseError as exc:
        print(f"server: error: {exc.strerror}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
