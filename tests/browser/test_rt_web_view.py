"""The radiotherapy web view (``serve --env radiotherapy --web``) in a real headless Chromium.

Expected values come from the in-process env and the RT grader on the same task and seed
(the page must show the same patient), never from the page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from io import BytesIO
from typing import Any

import numpy as np
import pytest

pytest.importorskip("openenv.core", reason="the web view needs the `server` extra")

import policies.radiotherapy as rt_policies
from grading.radiotherapy import run_episode
from hospital_marl.radiotherapy import RadiotherapyPlanningEnv
from hospital_marl.radiotherapy.core.plan import ADD, N_ACTIONS
from hospital_marl.radiotherapy.core.tasks import get_task
from server.rt_web import PICTURE_SCALE
from server.settings import ServerSettings
from tests.browser.test_web_view import EVENT_TIMEOUT_MS, settle
from tests.server.live import live_server

pytestmark = [pytest.mark.server, pytest.mark.browser]

TASK = "head_neck"  # the server's default task, which the page starts with


@pytest.fixture(scope="module")
def rt_web_url() -> Iterator[str]:
    with live_server(ServerSettings(env="radiotherapy", task=TASK, web=True, max_web_sessions=4)) as url:
        yield url


def picture(page: Any, who: str) -> np.ndarray:
    from PIL import Image

    png = page.locator(f"#plan-{who} img").screenshot()
    return np.asarray(Image.open(BytesIO(png)).convert("RGB")).astype(int)


def score_of(page: Any, who: str) -> float:
    match = re.search(r"score (\d+\.\d+)", page.inner_text(f"#metrics-{who}"))
    assert match, page.inner_text(f"#metrics-{who}")
    return float(match[1])


def visible_actions(page: Any) -> list[int]:
    return [i for i in range(N_ACTIONS) if page.locator(f"#act-{i}").is_visible()]


def test_rt_page_shows_the_plan_plays_an_action_and_the_agent_plans_the_same_patient(
    browser: Any, rt_web_url: str, shots: Any
) -> None:
    env = RadiotherapyPlanningEnv(TASK, render_mode="rgb_array")
    _, info = env.reset(seed=0)  # seed 0 is the page default
    page = browser.new_page(viewport={"width": 1300, "height": 1100})
    try:
        page.goto(f"{rt_web_url}/web/")
        page.wait_for_selector("#plan-you img", timeout=EVENT_TIMEOUT_MS)
        settle(page)
        shots(page, "loaded")
        size = page.eval_on_selector("#plan-you img", "i => [i.naturalHeight, i.naturalWidth]")
        assert size == [s * PICTURE_SCALE for s in env.render().shape[:2]]
        before = picture(page, "you")
        assert len(np.unique(before.reshape(-1, 3) // 16, axis=0)) >= 4, "the plan picture looks blank"
        assert visible_actions(page) == [i for i, ok in enumerate(info["action_mask"]) if ok]
        assert score_of(page, "you") == round(info["score"], 3)

        # Add a beam: the dose wash appears, the score and the legal actions follow the env's.
        page.locator(f"#act-{ADD}").click()
        page.wait_for_function(
            "document.querySelector('#metrics-you').innerText.includes('step 1 /')", timeout=EVENT_TIMEOUT_MS
        )
        settle(page)
        _, _, _, _, info = env.step(ADD)
        assert score_of(page, "you") == round(info["score"], 3) > 0
        # The page's figures are in Gy (SPEC-RT §8): the env's D98, a fraction of the prescription.
        assert f"{info['metrics']['d98'] * env.task.rx_gy:.1f} Gy" in page.inner_text("#metrics-you")
        assert visible_actions(page) == [i for i, ok in enumerate(info["action_mask"]) if ok]
        assert np.abs(picture(page, "you") - before).mean() > 1, "the picture did not change"
        shots(page, "one_beam")

        # The agent (the page's first: the planner) plans the same patient as the grader would.
        page.locator("#agent-finish").click()
        page.wait_for_function(
            "document.querySelector('#metrics-agent').innerText.includes('locked')", timeout=EVENT_TIMEOUT_MS
        )
        settle(page)
        shots(page, "agent_locked")
        expected = run_episode(rt_policies.load("planner"), get_task(TASK), 0, split=env.plan.split)
        assert score_of(page, "agent") == round(expected.score, 3)
    finally:
        page.close()
