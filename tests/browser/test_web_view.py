"""The web view in a real headless Chromium: it loads, shows the board, plays, and races an agent.

Expected values come from the in-process envs and the grader on the same
scenario and seed (the web view must show the same day), never from the page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

pytest.importorskip("openenv.core", reason="the web view needs the `server` extra")

from grading.grader import run_flat_episode
from hospital_marl import SCENARIOS, HospitalEDEnv
from hospital_marl.core.actions import N_FLAT_ACTIONS, ROLES
from hospital_marl.envs.infos import OUTCOME_NAMES
from hospital_marl.envs.render import FRAME_SHAPE
from policies import HeuristicPolicy
from policies.planner import PlannerPolicy
from server.agents import AGENT_SPECS
from server.settings import ServerSettings
from server.web import BOARD_SCALE
from tests.server.live import live_server
from tests.server.remote_policies import GATE_DIR

pytestmark = [pytest.mark.server, pytest.mark.browser]

SCENARIO = "normal_day"  # the server's default, which the page starts with
EVENT_TIMEOUT_MS = 60_000  # generous: CI shares two cores with other jobs


def settle(page: Any) -> None:
    """Wait until Gradio has no event in flight (no component marked pending)."""
    page.wait_for_function("document.querySelectorAll('.pending').length === 0", timeout=EVENT_TIMEOUT_MS)


def open_page(browser: Any, url: str, boards: bool = True) -> Any:
    page = browser.new_page(viewport={"width": 1300, "height": 1050})
    page.goto(f"{url}/web/")
    if boards:
        page.wait_for_selector("#board-you img", timeout=EVENT_TIMEOUT_MS)
        page.wait_for_selector("#board-agent img", timeout=EVENT_TIMEOUT_MS)
    else:
        page.wait_for_function(
            "(document.querySelector('#status')?.innerText || '').trim().length > 0", timeout=EVENT_TIMEOUT_MS
        )
    settle(page)
    return page


def tick_of(page: Any, who: str) -> tuple[int, int]:
    text = page.inner_text(f"#metrics-{who}")
    match = re.search(r"tick (\d+) / (\d+)", text)
    assert match, text
    return int(match[1]), int(match[2])


def click_and_wait(page: Any, selector: str, who: str, until_tick: int) -> None:
    page.locator(selector).click()
    page.wait_for_function(
        f"document.querySelector('#metrics-{who}').innerText.includes('tick {until_tick} /')",
        timeout=EVENT_TIMEOUT_MS,
    )
    settle(page)


def board_pixels(page: Any, who: str) -> np.ndarray:
    from io import BytesIO

    from PIL import Image

    png = page.locator(f"#board-{who} img").screenshot()
    return np.asarray(Image.open(BytesIO(png)).convert("RGB"))


def visible_actions(page: Any) -> list[int]:
    return [i for i in range(N_FLAT_ACTIONS) if page.locator(f"#act-{i}").is_visible()]


def in_process_mask(seed: int) -> list[int]:
    _, info = HospitalEDEnv(scenario=SCENARIO).reset(seed=seed)
    return [i for i, ok in enumerate(info["action_mask"]) if ok]


def test_page_loads_with_both_boards_drawn_by_the_env_renderer(
    browser: Any, web_url: str, shots: Any
) -> None:
    page = open_page(browser, web_url)
    try:
        shots(page, "loaded")
        for who in ("you", "agent"):
            size = page.eval_on_selector(f"#board-{who} img", "i => [i.naturalHeight, i.naturalWidth]")
            assert size == [FRAME_SHAPE[0] * BOARD_SCALE, FRAME_SHAPE[1] * BOARD_SCALE]
            pixels = board_pixels(page, who)
            colours = np.unique(pixels.reshape(-1, 3) // 16, axis=0)  # coarse: ignore compression noise
            assert len(colours) >= 4, f"the {who} board looks blank: {len(colours)} colours"
            assert pixels.std() > 20
        assert tick_of(page, "you") == (0, SCENARIOS[SCENARIO].episode_length)
        # The legal actions of tick 0 are exactly the in-process mask's (seed 0 is the page default).
        assert visible_actions(page) == in_process_mask(0)
    finally:
        page.close()


def test_clicking_an_action_advances_the_episode_and_updates_the_metrics(
    browser: Any, web_url: str, shots: Any
) -> None:
    page = open_page(browser, web_url)
    try:
        env = HospitalEDEnv(scenario=SCENARIO)
        env.reset(seed=0)  # the page's default day, played in process alongside
        tick = 0
        while visible_actions(page) == [0]:  # nobody to admit yet: wait a tick on both sides
            tick += 1
            click_and_wait(page, "#act-0", "you", tick)
            env.step(0)
        before = page.inner_text("#metrics-you")
        first_admission = next(i for i in visible_actions(page) if i != 0)
        click_and_wait(page, f"#act-{first_admission}", "you", tick + 1)
        assert tick_of(page, "you")[0] == tick + 1
        assert tick_of(page, "agent")[0] == tick + 1  # the agent keeps pace on the same day
        assert page.inner_text("#metrics-you") != before
        assert "Last move" in page.inner_text("#status")
        _, _, _, _, info = env.step(first_admission)
        assert OUTCOME_NAMES[info["outcome"]] in page.inner_text(
            "#status"
        )  # the in-process outcome of that action
        assert visible_actions(page) == [i for i, ok in enumerate(info["action_mask"]) if ok]
        click_and_wait(page, "#act-0", "you", tick + 2)
        shots(page, "after_two_ticks")
    finally:
        page.close()


def test_the_agent_finishes_a_shift_with_the_graders_score(browser: Any, web_url: str, shots: Any) -> None:
    page = open_page(browser, web_url)
    try:
        length = SCENARIOS[SCENARIO].episode_length
        your_moves = visible_actions(page)
        assert your_moves == in_process_mask(0)
        your_board = page.locator("#board-you img").get_attribute("src")
        page.locator("#agent-finish").click()
        page.wait_for_function(
            "/shift over|stopped/.test(document.querySelector('#metrics-agent').innerText)",
            timeout=EVENT_TIMEOUT_MS,
        )
        settle(page)
        shots(page, "agent_finished")
        expected = run_flat_episode(HeuristicPolicy(), SCENARIOS[SCENARIO], 0)
        ticks, total = tick_of(page, "agent")
        assert total == length and (ticks == length or "stopped" in page.inner_text("#metrics-agent"))
        row = page.inner_text("#metrics-agent").split("\n")[-1].split("\t")
        assert float(row[3]) == pytest.approx(expected.score, abs=0.051)  # shown to one decimal
        assert tick_of(page, "you")[0] == 0  # your episode did not move
        # ... and your side of the page neither: the same moves offered, the same board shown
        assert visible_actions(page) == your_moves
        assert page.locator("#board-you img").get_attribute("src") == your_board
    finally:
        page.close()


def test_team_track_one_choice_per_role(browser: Any, web_url: str, shots: Any) -> None:
    page = open_page(browser, web_url)
    try:
        page.locator("#track").get_by_text("team").click()
        page.locator("#new-day").click()
        page.wait_for_selector("#team-play", state="visible", timeout=EVENT_TIMEOUT_MS)
        settle(page)
        assert not page.locator("#act-0").is_visible()
        for role in ROLES:
            assert page.locator(f"#role-{role}").is_visible()
        click_and_wait(page, "#team-play", "you", 1)
        assert all(role in page.inner_text("#status") for role in ROLES)  # each role's outcome
        shots(page, "team_tick")
    finally:
        page.close()


def test_each_tab_is_its_own_counted_session_and_the_api_stays_responsive(
    browser: Any, shots: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The page's planner is the planner held at a gate before its first decision (in its own
    # process, which inherits the gate's directory from this test's environment).
    monkeypatch.setenv(GATE_DIR, str(tmp_path))
    monkeypatch.setitem(AGENT_SPECS, "planner", "tests.server.remote_policies:GatedPlanner")
    # One browser (one client) fills the view here: per-client caps off (test_safety tests them).
    with live_server(ServerSettings(web=True, max_web_sessions=2, max_sessions_per_client=0)) as url:
        first, second = open_page(browser, url), open_page(browser, url)
        try:
            assert httpx.get(f"{url}/sessions").json()["web"]["active"] == 2
            click_and_wait(first, "#act-0", "you", 1)
            assert tick_of(second, "you")[0] == 0  # the other tab's day is untouched
            third = open_page(browser, url, boards=False)
            assert "server is full" in third.inner_text("#status")
            assert not third.locator("#board-you img").is_visible()
            third.close()
            # The slowest agent finishes a shift in its own process; the API answers meanwhile.
            pick = second.locator("#agent input")
            pick.click()
            pick.fill("planner")
            pick.press("Enter")
            second.locator("#new-day").click()
            second.wait_for_function(
                "document.querySelector('#metrics-agent').innerText.includes('planner')",
                timeout=EVENT_TIMEOUT_MS,
            )
            settle(second)
            # The planner finishes a shift in well under a second, so the shift is held at a gate
            # until the API has answered: the answer provably came while the event ran.
            second.locator("#agent-finish").click()
            started = tmp_path / "started"
            for _ in range(600):
                if started.exists():
                    break
                second.wait_for_timeout(100)
            assert started.exists(), "the finish event never reached the planner"
            assert httpx.get(f"{url}/health", timeout=30).status_code == 200
            # The page shows the finished shift only when the event returns: still unfinished here.
            assert tick_of(second, "agent")[0] < SCENARIOS[SCENARIO].episode_length
            (tmp_path / "open").touch()
            second.wait_for_function(
                "/shift over|stopped/.test(document.querySelector('#metrics-agent').innerText)",
                timeout=120_000,
            )
            shots(second, "planner_finished")
            # The planner's own day under the grader (seed 0, the page's default): the same score.
            expected = run_flat_episode(PlannerPolicy(), SCENARIOS[SCENARIO], 0)
            row = second.inner_text("#metrics-agent").split("\n")[-1].split("\t")
            assert float(row[3]) == pytest.approx(expected.score, abs=0.051)  # shown to one decimal
            # Closing a tab ends its session (Gradio's unload event): the slot is free again.
            first.close()
            for _ in range(120):
                if httpx.get(f"{url}/sessions").json()["web"]["active"] == 1:
                    break
                second.wait_for_timeout(250)
            assert httpx.get(f"{url}/sessions").json()["web"]["active"] == 1
        finally:
            first.close()
            second.close()
