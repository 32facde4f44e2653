"""The OpenAPI document matches every response: schemathesis, every check, on a live server.

Its four phases run: the documented examples, boundary values of every schema
(coverage), fuzzed requests, and stateful sequences that follow the document's
links (reset -> step / state / close, then use-after-close). Examples are
bounded so the run stays a few seconds; ``HOSPITAL_SCHEMATHESIS_EXAMPLES``
raises it for a deeper local run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")
pytest.importorskip("schemathesis", reason="schemathesis is in the `dev` extra")

from server.settings import ServerSettings
from tests.server.live import live_server

pytestmark = pytest.mark.server

CONFIG = Path(__file__).with_name("schemathesis.toml")
EXAMPLES = int(os.environ.get("HOSPITAL_SCHEMATHESIS_EXAMPLES", "20"))


def test_schemathesis_all_checks_find_nothing(tmp_path: Path) -> None:
    # Session limits well above what the run opens, so 429s stay the exception they are.
    settings = ServerSettings(max_sessions=64, max_http_sessions=512, max_message_bytes=4096)
    with live_server(settings) as url:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "schemathesis.cli",
                "--config-file",
                str(CONFIG),
                "run",
                f"{url}/openapi.json",
                "--checks",
                "all",
                "--max-examples",
                str(EXAMPLES),
                "--seed",
                "20261201",
                "--no-color",
            ],
            cwd=tmp_path,  # its hypothesis database and reports stay out of the repository
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " failed" not in result.stdout.split("SUMMARY")[-1], result.stdout[-3000:]
    for phase in ("Coverage", "Fuzzing", "Stateful"):
        assert f"✅  {phase}" in result.stdout, phase  # every phase ran (and passed)
