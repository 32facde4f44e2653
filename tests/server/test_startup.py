"""Start-up (issue 24): a busy port fails at once with a one-line hint; the kernel compiles
before the server accepts a connection."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

from tests.server.live import loopback_socket

pytestmark = pytest.mark.server

PROBE = """
import runpy
import sys
try:
    if sys.argv[1] == "server":
        from server.app import main
        main(sys.argv[2:])
    else:  # what `python -m hospital_marl_cli serve ...` runs
        sys.argv = ["hospital_marl_cli", "serve", *sys.argv[2:]]
        runpy.run_module("hospital_marl_cli", run_name="__main__")
finally:
    # What was loaded before the refusal: the port is checked before fastapi, openenv-core,
    # Gradio, the kernel's compile (which took ~24 s before failing, measured) and even the
    # simulator package's import (numba, gymnasium: most of a refusal's 3.7 s under load).
    heavy = ("fastapi", "gradio", "openenv.core", "uvicorn", "hospital_marl", "numba", "gymnasium")
    loaded = [m for m in heavy if m in sys.modules]
    print("loaded:", ",".join(loaded), file=sys.stderr)
"""


@pytest.mark.parametrize("command", ["server", "cli"])
def test_a_busy_port_fails_before_any_slow_start_up_with_a_one_line_hint(command: str) -> None:
    with loopback_socket() as taken:
        taken.listen()
        port = str(taken.getsockname()[1])
        argv = ["--host", "127.0.0.1", "--port", port]
        run = [sys.executable, "-c", PROBE, command, *argv]
        started = time.monotonic()
        done = subprocess.run(run, capture_output=True, text=True, timeout=120)
        elapsed = time.monotonic() - started
    lines = [line for line in done.stderr.splitlines() if not line.startswith("loaded:")]
    assert done.returncode != 0 and done.stdout == ""
    assert len(lines) == 1, done.stderr  # one line: no traceback, no "Application startup complete"
    assert f"127.0.0.1:{port}" in lines[0] and "in use" in lines[0] and "--port" in lines[0]
    loaded = [line for line in done.stderr.splitlines() if line.startswith("loaded:")]
    assert loaded == ["loaded: "], done.stderr
    print(f"{command}: refused in {elapsed:.2f} s")  # a figure for the record, not a threshold


def test_the_kernel_is_compiled_before_the_app_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    from server import routes
    from server.settings import ServerSettings

    calls: list[str] = []
    monkeypatch.setattr(routes, "compile_kernel", lambda: calls.append("compiled"))
    real_create_app = routes.create_app
    monkeypatch.setattr(routes, "create_app", lambda *a, **k: calls.append("app") or real_create_app(*a, **k))
    routes.build_app(ServerSettings())
    assert calls == ["compiled", "app"]
