"""The web view's episodes without a browser: the same day as the grader, the agent in a process of
its own, and bad input refused.

(The page itself is driven in headless Chromium by ``tests/browser/``.)
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("gradio", reason="the web view needs gradio (openenv-core brings it)")

import policies
from grading.grader import RUNNERS
from hospital_marl import SCENARIOS, Hospital, HospitalEDEnv
from hospital_marl.core.actions import ROLES
from hospital_marl.envs.infos import OUTCOME_NAMES
from server.agents import AGENT_NICE, AgentPool, AgentsBusyError
from server.web import WebEpisodes, WebError, available_agents
from tests.server.remote_policies import PID_FILE

pytestmark = pytest.mark.server

WHERE_AM_I = "tests.server.remote_policies:WhereAmI"


@pytest.fixture
def agents() -> Iterator[AgentPool]:
    """A pool of its own for each test (one process: the cap is reached at once)."""
    pool = AgentPool(max_processes=1, wait_s=0.5, specs={"heuristic": WHERE_AM_I})
    try:
        yield pool
    finally:
        pool.close()


@pytest.mark.parametrize("agent", available_agents())
def test_the_agent_plays_the_graders_episode(agent: str) -> None:
    # The planner too: its process plays the actions the grader's in-process run plays.
    pool = AgentPool(max_processes=1)
    try:
        web = WebEpisodes("normal_day", agents=pool)
        web.new_day("surge", 3, "flat", agent)
        web.agent_finish()
    finally:
        pool.close()
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
        assert OUTCOME_NAMES[info["outcome"]] in web.last_outcome
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


def test_the_agents_decisions_are_made_in_another_process(
    agents: AgentPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = tmp_path / "pids"
    monkeypatch.setenv(PID_FILE, str(pids))  # the spawned process inherits it
    web = WebEpisodes("normal_day", agents=agents)
    web.new_day("surge", 1, "flat", "heuristic")  # played by WhereAmI here
    for _ in range(3):
        web.agent_step()
    decided = [int(line) for line in pids.read_text().split()]
    assert len(decided) == 3
    assert os.getpid() not in decided
    assert set(decided) == set(agents.pids())  # the pool's one process made every decision
    assert web.agent_hospital.tick_count == 3
    # ... at a lower priority than the server's: the server's own work comes first.
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, decided[0]) == min(19, mine + AGENT_NICE)


def test_closing_a_tab_stops_its_agents_process(
    agents: AgentPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PID_FILE, str(tmp_path / "pids"))
    web = WebEpisodes("normal_day", agents=agents)
    web.new_day("surge", 1, "flat", "heuristic")
    web.agent_step()
    assert len(agents) == 1
    (pid,) = agents.pids()
    web.close()
    assert len(agents) == 0 and agents.pids() == []
    for _ in range(200):  # stopped in the background: the session store is not kept waiting
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (ended, not yet reaped by its parent) counts as gone.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    return True


def test_a_full_pool_is_shared_not_grown(
    agents: AgentPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tabs, one process: the second tab takes the idle process over (the pool never grows),
    and the first gets it back, reset on its own present, when it plays again."""
    monkeypatch.setenv(PID_FILE, str(tmp_path / "pids"))
    first, second = (WebEpisodes("normal_day", agents=agents) for _ in range(2))
    first.new_day("surge", 1, "flat", "heuristic")
    second.new_day("surge", 2, "flat", "heuristic")
    first.agent_step()
    second.agent_step()
    first.agent_step()
    assert len(agents) == 1
    assert (first.agent_hospital.tick_count, second.agent_hospital.tick_count) == (2, 1)


def test_one_client_holds_at_most_half_the_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PID_FILE, str(tmp_path / "pids"))
    pool = AgentPool(max_processes=2, wait_s=0.2, specs={"heuristic": WHERE_AM_I})
    try:
        mine, also_mine, theirs = (
            WebEpisodes("normal_day", agents=pool, client=c) for c in ("10.0.0.1", "10.0.0.1", "10.0.0.2")
        )
        for web in (mine, also_mine, theirs):
            web.new_day("surge", 1, "flat", "heuristic")
        assert mine._policy is not None
        with mine._policy.holding():  # an event of one tab of this client is running
            with pytest.raises(AgentsBusyError, match="1 per client"):
                also_mine.agent_step()
            theirs.agent_step()  # another client still gets the other process
        also_mine.agent_step()  # and once the event is over, so does this client's other tab
        assert len(pool) == 2
    finally:
        pool.close()
