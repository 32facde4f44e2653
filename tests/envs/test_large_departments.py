"""Departments with more general beds than the board observation's 20 rows (issue #28: "one
policy can act in a 12-bed and a 30-bed department").

SPEC §3 addresses general-board patients by position: transfers the top five (most severe),
early discharges the bottom five (k = 0 the least severe). So a board longer than 20 is shown
as its 15 most severe and its 5 least severe positions: every patient an action addresses.
The expected boards below are sorted here from the SPEC's ordering rule (severity, then longest
stay, then patient id), not read from the simulator's own board.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import hospital_marl
from hospital_marl.core.clinical import ClinicalParams
from hospital_marl.core.constants import MAX_GENERAL_BEDS
from hospital_marl.core.scenarios import Scenario, ScenarioDistribution
from hospital_marl.core.types import AWAY, DISCHARGED, ICU

LONG_STAYS = ClinicalParams(  # general-bed stays longer than a shift, so 30 beds fill up
    treatment_general=((0, 0), (40, 60), (40, 60), (40, 60), (40, 60), (40, 60)),
    treatment_icu=((0, 0), (40, 60), (40, 60), (40, 60), (40, 60), (40, 60)),
)
BIG = Scenario(name="thirty_beds", general_beds=30, arrival_rate=2.0, severity_mix=(0.3, 0.4, 0.3, 0, 0))


def _sorted_board(h) -> list[int]:
    """SPEC §3's general board: occupied beds, most severe first, then longest stay, then id."""
    sev, admitted = h.severity, h.admitted_at
    occupied = [p for p in h.general if p >= 0]
    return sorted(occupied, key=lambda p: (-sev[p], admitted[p], p))


def _fill(env, ticks: int):
    """Admit the first waiting patient to a general bed every tick (action 1), else no-op."""
    obs, info = env.reset(seed=3)
    for _ in range(ticks):
        obs, _, _, _, info = env.step(1 if info["action_mask"][1] else 0)
    return obs, info


def test_board__over_20_beds_shows_the_15_most_and_5_least_severe() -> None:
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=BIG, clinical=LONG_STAYS)
    obs, info = env.reset(seed=3)
    h = env.unwrapped.hospital
    seen_long = False
    for _ in range(45):
        obs, _, _, _, info = env.step(1 if info["action_mask"][1] else 0)
        board = _sorted_board(h)
        shown = board if len(board) <= 20 else board[:15] + board[-5:]
        sev, left = h.severity, h.remaining
        expected = np.zeros(20, np.float32)
        expected[: len(shown)] = [sev[p] for p in shown]
        np.testing.assert_array_equal(obs["bed_occupancy"], expected)
        expected[: len(shown)] = [left[p] for p in shown]
        np.testing.assert_array_equal(obs["board_remaining"], expected)
        assert obs["capacity"][0] == 30 - len(board)
        seen_long |= len(board) > 20
    assert seen_long, "the scenario must fill more than 20 beds for this test to mean anything"


@pytest.mark.parametrize("k", range(5))
def test_early_discharge__addresses_the_kth_least_severe_of_a_long_board(k: int) -> None:
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=BIG, clinical=LONG_STAYS)
    obs, info = _fill(env, 40)
    h = env.unwrapped.hospital
    board = _sorted_board(h)
    assert len(board) > 20
    target = board[len(board) - 1 - k]
    assert obs["bed_occupancy"][19 - k] == h.severity[target], "row 19 - k shows the k-th least severe"
    assert info["action_mask"][29 + k]
    env.step(29 + k)
    assert h.location[target] in (AWAY, DISCHARGED) or target in h.queue  # bounced back at once
    assert target not in h.general


@pytest.mark.parametrize("k", range(5))
def test_transfer__addresses_the_kth_most_severe_of_a_long_board(k: int) -> None:
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=BIG, clinical=LONG_STAYS)
    obs, info = _fill(env, 40)
    h = env.unwrapped.hospital
    board = _sorted_board(h)
    target = board[k]
    assert obs["bed_occupancy"][k] == h.severity[target]
    assert info["action_mask"][24 + k]
    env.step(24 + k)
    assert h.location[target] == ICU


def test_sizes__up_to_the_state_width_and_no_further() -> None:
    Scenario(name="widest", general_beds=MAX_GENERAL_BEDS)
    with pytest.raises(ValueError, match="general_beds"):
        Scenario(name="too_wide", general_beds=MAX_GENERAL_BEDS + 1)
    with pytest.raises(ValueError, match="general_beds"):
        ScenarioDistribution("too_wide", general_beds=(10, MAX_GENERAL_BEDS + 1))


def test_presence__counts_beds_beyond_the_board_rows_in_every_view() -> None:
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=BIG, observation_layout="masked")
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert obs["general_present"].tolist() == [1.0] * 20 and obs["general_beds"].tolist() == [30.0]
    aec = hospital_marl.env(scenario=BIG, observation_layout="masked")
    aec.reset(seed=0)
    assert aec.state()[-1] == 30.0
    for role in hospital_marl.ROLES:
        assert aec.observe(role)["observation"][-1] == 30.0


def test_heuristics__play_a_long_board_with_no_invalid_action() -> None:
    """The reference rules read the board's rows (top five, bottom five, the mildest patient):
    on a 30-bed day whose board outgrows the 20 rows they still never pick an invalid action."""
    from policies import load

    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=BIG, clinical=LONG_STAYS)
    flat = load("heuristic")
    obs, info = env.reset(seed=5)
    flat.reset(seed=5, hospital=env.unwrapped.hospital)
    h, longest, done = env.unwrapped.hospital, 0, False
    while not done:
        obs, _, term, trunc, info = env.step(flat.act(obs, info["action_mask"]))
        longest, done = max(longest, len(h.board())), term or trunc
    assert longest > 20 and h.counters.invalid_actions == 0

    aec = hospital_marl.env(scenario=BIG, clinical=LONG_STAYS)
    team = load("team_heuristic")
    aec.reset(seed=5)
    team.reset(seed=5, hospital=aec.unwrapped.hospital)
    longest = 0
    for role in aec.agent_iter():
        obs, _, term, trunc, _ = aec.last()
        aec.step(None if term or trunc else team.act_role(role, obs["observation"], obs["action_mask"]))
        longest = max(longest, len(aec.unwrapped.hospital.board()))
    assert longest > 20 and aec.unwrapped.hospital.counters.invalid_actions == 0
