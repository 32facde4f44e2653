"""The web view's episodes without a browser: the same day as the grader, and bad input refused.

(The page itself is driven in headless Chromium by ``tests/browser/``.)
"""

from __future__ import annotations

import pytest

pytest.importorskip("gradio", reason="the web view needs gradio (openenv-core brings it)")

import policies
from grading.grader import RUNNERS
from hospital_marl import SCENARIOS, Hospital, HospitalEDEnv
from hospital_marl.core.actions import ROLES
from server.web import WebEpisodes, WebError, available_agents

pytestmark = pytest.mark.server

FAST_AGENTS = [a for a in available_agents() if a != "planner"]  # the planner: in the browser test


@pytest.mark.parametrize("agent", FAST_AGENTS)
def test_the_agent_plays_the_graders_episode(agent: str) -> None:
    web = WebEpisodes("normal_day")
    web.new_day("surge", 3, "flat", agent)
    web.agent_finish()
    policy = policies.load(agent)
    track = "flat" if "flat" in policy.tracks else "team"
    expected = RUNNERS[track](policy, SCENARIOS["surge"], 3)
    assert web.agent_hospital.done
    assert web.agent_hospital.score() == pytest.approx(expected.score)
    assert web.agent_hospital.counters.as_dict() == expected.counts


def test_your_ticks_are_the_in_process_envs_and_the_agent_keeps_pace() -> None:
    web = WebEpisodes("normal_day")
    web.new_day("mass_casualty", 8, "flat", "heuristic")
    env = HospitalEDEnv(scenario="mass_casualty")
    _, info = env.reset(seed=8)
    for _ in range(15):
        assert web.legal_flat() == list(info["action_mask"])
        action = max(i for i, ok in enumerate(info["action_mask"]) if ok)
        web.play_flat(action)
        _, _, _, _, info = env.step(action)
        assert info["outcome"] in web.last_outcome
        assert web.agent_hospital.tick_count == web.you.hospital.tick_count  # type: ignore[union-attr]
    assert web.you.hospital.counters.as_dict() == env.hospital.counters.as_dict()  # type: ignore[union-attr]
    ticks = [row["tick"] for row in web.history if row["who"] == "you"]
    assert ticks == list(range(16))


def test_team_track_plays_one_action_per_role() -> None:
    web = WebEpisodes("normal_day")
    hospital = Hospital("normal_day")
    seed = next(s for s in range(100) if hospital.reset(s) is None and hospital.queue)  # someone to admit
    web.new_day("normal_day", seed, "team", "team_heuristic")
    choices = web.legal_roles()
    assert set(choices) == set(ROLES) and all(choices[r][0][1] == 0 for r in ROLES)  # no-op first
    admit = choices["triage"][1][1]
    web.play_team({"triage": admit})
    assert web.you.hospital.tick_count == 1  # type: ignore[union-attr]
    assert "triage: done" in web.last_outcome
    with pytest.raises(WebError, match="team track"):
        web.play_flat(0)


@pytest.mark.parametrize(
    ("scenario", "seed", "track", "agent", "message"),
    [
        ("moon_base", 0, "flat", "heuristic", "unknown scenario"),
        ("surge", -1, "flat", "heuristic", "seed"),
        ("surge", 1.5, "flat", "heuristic", "seed"),
        ("surge", None, "flat", "heuristic", "seed"),
        ("surge", True, "flat", "heuristic", "seed"),
        ("surge", 0, "diagonal", "heuristic", "track"),
        ("surge", 0, "flat", "oracle", "unknown agent"),
    ],
)
def test_a_bad_choice_changes_nothing(
    scenario: str, seed: object, track: str, agent: str, message: str
) -> None:
    web = WebEpisodes("normal_day")
    web.new_day("normal_day", 4, "flat", "heuristic")
    web.play_flat(0)
    with pytest.raises(WebError, match=message):
        web.new_day(scenario, seed, track, agent)
    assert (web.scenario, web.seed, web.you.hospital.tick_count) == ("normal_day", 4, 1)  # type: ignore[union-attr]
    with pytest.raises(WebError, match="no action"):
        web.play_flat(39)
