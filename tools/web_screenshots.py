"""Screenshots of the web view for the README, taken in headless Chromium (Debian's package).

Starts the server with the web view on a free loopback port, plays 30 ticks of
seed 0 by hand (the first legal admission each tick, else the no-op) while the
heuristic keeps pace, then 10 ticks on the team track (triage's first legal admission), and writes
``docs/web_view.png`` and ``docs/web_view_team.png``. With ``--rt`` it serves radiotherapy
instead (head_neck, seed 0): you add one beam, the planner finishes its plan, and it writes
``docs/web_view_rt.png``. Run from the repository root: ``python -m tools.web_screenshots [--rt]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

from server.settings import ServerSettings
from tests.browser.conftest import CHROMIUM_ARGS, chromium_path
from tests.browser.test_web_view import EVENT_TIMEOUT_MS, click_and_wait, open_page, settle, visible_actions
from tests.server.live import live_server

DOCS = Path(__file__).resolve().parents[1] / "docs"
TICKS = 30


def rt_main() -> None:
    """The radiotherapy page: one beam of yours against the planner's locked plan."""
    from hospital_marl.radiotherapy.core.plan import ADD

    settings = ServerSettings(env="radiotherapy", task="head_neck", web=True)
    with live_server(settings) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1050})
        page.goto(f"{url}/web/")
        page.wait_for_selector("#plan-you img", timeout=EVENT_TIMEOUT_MS)
        settle(page)
        page.locator(f"#act-{ADD}").click()
        page.wait_for_function(
            "document.querySelector('#metrics-you').innerText.includes('step 1 /')", timeout=EVENT_TIMEOUT_MS
        )
        settle(page)
        page.locator("#agent-finish").click()
        page.wait_for_function(
            "document.querySelector('#metrics-agent').innerText.includes('locked')", timeout=EVENT_TIMEOUT_MS
        )
        settle(page)
        page.wait_for_timeout(800)
        page.screenshot(path=str(DOCS / "web_view_rt.png"), full_page=True)
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rt", action="store_true", help="the radiotherapy page (docs/web_view_rt.png)")
    if parser.parse_args().rt:
        rt_main()
        return
    with live_server(ServerSettings(web=True)) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = open_page(browser, url)
        for tick in range(1, TICKS + 1):
            legal = visible_actions(page)
            action = next((a for a in legal if a != 0), 0)
            click_and_wait(page, f"#act-{action}", "you", tick)
        page.wait_for_timeout(800)  # let the charts draw
        page.screenshot(path=str(DOCS / "web_view.png"), full_page=True)
        page.locator("#track").get_by_text("team").click()
        page.locator("#new-day").click()
        page.wait_for_selector("#team-play", state="visible")
        settle(page)
        for tick in range(1, 11):
            options = page.locator("#role-triage label")
            if options.count() > 1:  # the first legal admission, as on the flat track
                options.nth(1).click()
            click_and_wait(page, "#team-play", "you", tick)
        page.wait_for_timeout(800)
        page.screenshot(path=str(DOCS / "web_view_team.png"), full_page=True)
        browser.close()


if __name__ == "__main__":
    main()
