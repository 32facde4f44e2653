"""Deployment: the Dockerfile's command really serves, `openenv validate` passes, manifests agree."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

import httpx
import yaml
from openenv.cli._validation import _has_main_guard_call
from packaging.requirements import Requirement

from tests.server.live import free_port, wait_healthy

pytestmark = pytest.mark.server

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
CLI_TIMEOUT_S = 120


def dockerfile_cmd() -> list[str]:
    match = re.search(r"^CMD\s+(\[.*\])\s*$", DOCKERFILE, re.MULTILINE)
    assert match, "the Dockerfile needs an exec-form CMD"
    return json.loads(match.group(1))


def dockerfile_env() -> dict[str, str]:
    return dict(re.findall(r"^ENV\s+(HOSPITAL_\w+|ENABLE_WEB_INTERFACE)=(\S+)\s*$", DOCKERFILE, re.MULTILINE))


def openenv_cli() -> list[str]:
    exe = shutil.which("openenv")
    return [exe] if exe else [sys.executable, "-m", "openenv.cli"]


def run_openenv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*openenv_cli(), *args], capture_output=True, text=True, timeout=CLI_TIMEOUT_S, cwd=REPO, check=False
    )


@pytest.fixture(scope="module")
def docker_cmd_process() -> Iterator[tuple[subprocess.Popen[str], str] | None]:
    """Exactly the Dockerfile's CMD, with --host/--port swapped for a free loopback port."""
    cmd = dockerfile_cmd()
    exe = shutil.which(cmd[0])
    if exe is None:  # the tests needing it skip
        yield None
        return
    port = free_port()
    args = list(cmd[1:])
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = str(port)
    env = {**os.environ, **dockerfile_env()}
    proc = subprocess.Popen(
        [exe, *args], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True
    )
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture(scope="module")
def static_validation() -> Iterator[subprocess.Popen[str]]:
    """`openenv validate --json` on the repository, running in the background."""
    proc = subprocess.Popen(
        [*openenv_cli(), "validate", "--json", str(REPO)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=15)


@pytest.fixture(scope="module", autouse=True)
def _start_subprocesses_together(docker_cmd_process: object, static_validation: object) -> None:
    """Both subprocesses start with the module: their slow imports overlap."""


@pytest.fixture(scope="module")
def docker_cmd_url(docker_cmd_process: tuple[subprocess.Popen[str], str] | None) -> str:
    if docker_cmd_process is None:
        pytest.skip(
            f"the {dockerfile_cmd()[0]!r} console script is not installed (pip install -e '.[server]')"
        )
    proc, url = docker_cmd_process
    wait_healthy(url, timeout_s=90, alive=lambda: proc.poll() is None)
    return url


def test_dockerfile__python_311_slim_server_extra_port_8000_healthcheck() -> None:
    assert re.search(r"^FROM python:3\.11-slim\s*$", DOCKERFILE, re.MULTILINE)
    assert 'pip install --no-cache-dir ".[server]"' in DOCKERFILE
    assert re.search(r"^EXPOSE 8000\s*$", DOCKERFILE, re.MULTILINE)
    assert re.search(r"^HEALTHCHECK .*\n?.*/health", DOCKERFILE, re.MULTILINE)
    cmd = dockerfile_cmd()
    assert (
        cmd[0] == "server"
        and cmd[cmd.index("--port") + 1] == "8000"
        and cmd[cmd.index("--host") + 1] == "0.0.0.0"
    )
    assert PYPROJECT["project"]["scripts"]["server"] == "server.app:main"


def test_openenv_validate__static_repository(static_validation: subprocess.Popen[str]) -> None:
    """`openenv validate` on the repository (the real CLI)."""
    stdout, stderr = static_validation.communicate(timeout=CLI_TIMEOUT_S)
    report = json.loads(stdout)
    assert report["issues"] == [], stdout + stderr
    assert static_validation.returncode == 0 and report["passed"], stdout + stderr


def test_dockerfile_cmd__serves_health_reset_step_state(docker_cmd_url: str) -> None:
    with httpx.Client(base_url=docker_cmd_url, timeout=10) as http:
        assert http.get("/health").json() == {"status": "healthy"}
        first = http.post("/reset", json={"seed": 0}).json()
        assert first["done"] is False and len(first["observation"]["action_mask"]) == 39
        step = http.post("/step", json={"action": {"action": 0}, "session_id": first["session_id"]}).json()
        assert step["observation"]["info"] == {
            "tick": 1,
            "scenario": dockerfile_env()["HOSPITAL_SCENARIO"],
            "outcome": "noop",
        }
        assert http.get("/state", params={"session_id": first["session_id"]}).json()["tick"] == 1
        # The image serves the web view (ENABLE_WEB_INTERFACE=true): OpenEnv's Gradio mount at /web.
        assert dockerfile_env()["ENABLE_WEB_INTERFACE"] == "true"
        page = http.get("/web/", follow_redirects=True)
        assert page.status_code == 200 and "gradio" in page.text.lower()
        assert http.get("/sessions").json()["web"]["max"] >= 1


def test_openenv_validate__runtime_against_the_dockerfile_cmd(docker_cmd_url: str) -> None:
    result = run_openenv("validate", "--url", docker_cmd_url)
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["passed"], result.stdout
    assert report["standard_profile"] == "openenv-http/1.x" and report["mode"] == "simulation"
    assert {c["id"] for c in report["criteria"] if c["passed"]} >= {
        "openapi_version_available", "health_endpoint", "metadata_endpoint",
        "schema_endpoint", "mcp_endpoint", "mode_endpoint_consistency",
    }  # fmt: skip


def test_openenv_yaml__agrees_with_the_app_and_the_dockerfile() -> None:
    manifest = yaml.safe_load((REPO / "openenv.yaml").read_text())
    assert manifest["spec_version"] == 1 and manifest["runtime"] == "fastapi"
    assert manifest["app"] == "server.app:app" and manifest["port"] == 8000
    assert manifest["name"] == "hospital_marl"
    assert _has_main_guard_call((REPO / "server" / "app.py").read_text())


def test_uv_lock__records_the_current_pyproject() -> None:
    """What `uv lock --check` verifies first: the lock was made from these requirements (re-run `uv lock`)."""
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    (project,) = [p for p in lock["package"] if p["name"] == PYPROJECT["project"]["name"]]

    def norm(req: Requirement, extra: str | None) -> tuple:
        return (req.name.lower(), tuple(sorted(req.extras)), str(req.specifier), extra)

    wanted = {norm(Requirement(r), None) for r in PYPROJECT["project"]["dependencies"]}
    for extra, reqs in PYPROJECT["project"]["optional-dependencies"].items():
        wanted |= {norm(Requirement(r), extra) for r in reqs}
    locked = set()
    for entry in project["metadata"]["requires-dist"]:
        marker = entry.get("marker", "")
        extra = re.search(r"extra == '([\w-]+)'", marker)  # beside e.g. a python_version marker
        locked.add(
            (
                entry["name"].lower(),
                tuple(sorted(entry.get("extras", []))),
                str(Requirement(f"x{entry.get('specifier', '')}").specifier),
                extra and extra.group(1),
            )
        )
    assert locked == wanted, "uv.lock is stale: run `uv lock`"


def test_cli__serve_subcommand_parses_and_rejects_bad_settings(capsys: pytest.CaptureFixture[str]) -> None:
    from hospital_marl_cli import build_parser, main
    from hospital_marl_cli.serve import cmd_serve

    args = build_parser().parse_args(
        ["serve", "--port", "9001", "--scenario", "surge", "--max-sessions", "40"]
    )
    assert (args.func, args.port, args.scenario, args.max_sessions, args.host) == (
        cmd_serve,
        9001,
        "surge",
        40,
        "127.0.0.1",
    )
    assert main(["serve", "--scenario", "moon_base"]) == 2
    assert "unknown scenario 'moon_base'" in capsys.readouterr().err
    assert main(["serve", "--max-sessions", "0"]) == 2


def test_cli__serve_web_turns_the_web_view_on_and_the_new_limits_parse() -> None:
    from hospital_marl_cli import build_parser
    from server.settings import settings_from_args

    args = build_parser().parse_args(
        [
            "serve",
            "--web",
            "--idle-timeout",
            "30",
            "--max-web-sessions",
            "5",
            "--max-sessions-per-client",
            "3",
        ]
    )
    settings = settings_from_args(args, environ={})
    assert (settings.web, settings.idle_timeout_s, settings.max_web_sessions) == (True, 30.0, 5)
    assert settings.max_sessions_per_client == 3
    off = settings_from_args(build_parser().parse_args(["serve"]), environ={})
    assert off.web is False and off.max_sessions_per_client == 16  # on by default (issue 24)
    # OpenEnv's own switch turns it on without the flag.
    on = settings_from_args(build_parser().parse_args(["serve"]), environ={"ENABLE_WEB_INTERFACE": "1"})
    assert on.web is True
    with pytest.raises(ValueError, match="ENABLE_WEB_INTERFACE"):
        settings_from_args(build_parser().parse_args(["serve"]), environ={"ENABLE_WEB_INTERFACE": "maybe"})
