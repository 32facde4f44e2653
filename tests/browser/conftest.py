"""A real headless Chromium (Debian's ``chromium`` package) driven by Playwright.

Never ``playwright install``: the browser is the system package, which
``.ci/run`` installs (``apt-get install chromium``). Without it these tests
FAIL with that instruction; they never skip. Screenshots go to
``test-artifacts/web/`` (git-ignored), one per test step worth seeing.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "web"


def chromium_path() -> str:
    """``$HOSPITAL_CHROMIUM``, else ``chromium`` on the PATH; a test failure if neither."""
    path = os.environ.get("HOSPITAL_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.fail(
            "the browser tests need Debian's chromium: apt-get install -y chromium "
            "(.ci/run installs it), or set HOSPITAL_CHROMIUM to a Chromium binary"
        )
    return path


@pytest.fixture(scope="module")
def web_url() -> Iterator[str]:
    """A live server with the web view on (small session limits)."""
    from server.settings import ServerSettings
    from tests.server.live import live_server

    with live_server(ServerSettings(web=True, max_web_sessions=8)) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Any:
    """``shots(page, "name")`` saves a full-page screenshot as a test artefact."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def save(page: Any, name: str) -> Path:
        path = ARTIFACTS / f"{request.node.name}__{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
