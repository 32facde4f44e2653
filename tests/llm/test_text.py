"""Text observations: what a role sees and its numbered legal actions, from the blocks and the
action table; deterministic, the same in-process and over the server, and short."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.core.actions import ACTION_TABLE, FLAT_OF, N_FLAT_ACTIONS, ROLE_FLAT, ROLES, Kind
from hospital_marl.envs.composed import HospitalEDEnv
from hospital_marl.envs.observations import BLOCK_BY_KEY, ROLE_BLOCKS
from hospital_marl.envs.text import (
    LEGAL_HEADER,
    SECTIONS,
    estimate_tokens,
    legal_actions,
    render_observation,
    render_prompt,
)
from policies.heuristic import HeuristicPolicy


def _blocks() -> dict[str, np.ndarray]:
    """A hand-built state: 2 waiting, 3 on the general board, 2 ICU patients, 1 ventilator in use."""
    blocks = {b.key: np.zeros(b.shape, np.float32) for b in BLOCK_BY_KEY.values()}
    blocks["waiting_queue"][0] = [4, 1, 3]  # sev 4 cardiac, waited 3
    blocks["waiting_queue"][1] = [2, 4, 0]  # sev 2 infection
    blocks["bed_occupancy"][:3] = [5, 3, 1]
    blocks["board_remaining"][:3] = [9, 4, 2]
    blocks["icu_occupancy"][[0, 3]] = [5, 2]
    blocks["icu_remaining"][[0, 3]] = [7, 0]
    blocks["icu_needs_vent"][0] = 1
    blocks["icu_on_vent"][0] = 1
    blocks["icu_ready"][3] = 1
    blocks["ventilator_status"][1] = 1
    blocks["time_step"][0] = 42
    blocks["stats"][:] = [11, 2, 2]
    blocks["capacity"][:] = [17, 3, 2, 2]
    return blocks


def test_sections__every_observation_block_is_rendered_by_exactly_one_section() -> None:
    keys = [k for section_keys, _ in SECTIONS for k in section_keys]
    assert sorted(keys) == sorted(BLOCK_BY_KEY) and len(keys) == len(set(keys))


def test_render_observation__reads_the_hand_built_state() -> None:
    text = render_observation(_blocks(), episode_length=100)
    assert text.splitlines() == [
        "Tick 42 of 100 (1 tick = 14.4 min). Free: 17 general beds, 3 ICU beds, 2 ventilators. Waiting: 2.",
        "Waiting queue (slot: severity 1-5, condition, ticks waited):",
        "  [0] sev 4, cardiac, waited 3",
        "  [1] sev 2, infection, waited 0",
        "General ward, most severe first (severity/ticks left): sev 5/9t, sev 3/4t, sev 1/2t.",
        "ICU beds: [0] sev 5, 7 ticks left, needs vent, on vent; [1] empty; [2] empty; "
        "[3] sev 2, 0 ticks left, ready; [4] empty.",
        "Ventilators: [0] free, [1] in use, [2] free.",
        "So far: 11 discharged, 2 died.",
    ]


def test_legal_actions__flat_lists_exactly_the_mask_with_the_table_meanings() -> None:
    mask = np.zeros(N_FLAT_ACTIONS, bool)
    chosen = [
        0,
        FLAT_OF[(Kind.ADMIT_ICU, 0)],
        FLAT_OF[(Kind.TRANSFER_ICU, 0)],
        FLAT_OF[(Kind.DISCHARGE_ICU, 3)],
    ]
    mask[chosen] = True
    rows = legal_actions(mask)
    assert [n for n, _ in rows] == chosen
    assert [m for _, m in rows[1:]] == [ACTION_TABLE[f].label for f in chosen[1:]]
    assert rows[0] == (0, "wait (no-op)")


def test_legal_actions__name_the_patient_of_board_and_icu_actions() -> None:
    mask = np.zeros(N_FLAT_ACTIONS, bool)
    transfer, early, discharge = (
        FLAT_OF[(Kind.TRANSFER_ICU, 0)],
        FLAT_OF[(Kind.EARLY_DISCHARGE, 0)],
        FLAT_OF[(Kind.DISCHARGE_ICU, 3)],
    )
    mask[[transfer, early, discharge]] = True
    meanings = dict(legal_actions(mask, blocks=_blocks()))
    assert meanings[transfer].endswith("(sev 5, 9 ticks left)")  # board position 0: most severe
    assert meanings[early].endswith("(sev 1, 2 ticks left)")  # early discharge counts from the bottom
    assert meanings[discharge].endswith("(sev 2, 0 ticks left, ready)")


@pytest.mark.parametrize("role", ROLES)
def test_legal_actions__a_role_numbers_its_own_actions(role: str) -> None:
    role_mask = np.ones(len(ROLE_FLAT[role]), bool)
    rows = legal_actions(role_mask, role)
    assert [n for n, _ in rows] == list(range(len(ROLE_FLAT[role])))
    for number, meaning in rows[1:]:
        assert meaning == ACTION_TABLE[ROLE_FLAT[role][number]].label


def test_legal_actions__a_mask_of_the_wrong_length_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="21 entries for triage"):
        legal_actions(np.ones(39, bool), "triage")


def test_render_prompt__a_role_sees_only_its_blocks() -> None:
    blocks = _blocks()
    triage = render_prompt({k: blocks[k] for k in ROLE_BLOCKS["triage"]}, np.ones(21, bool), "triage")
    assert "Waiting queue" in triage and "ICU beds:" not in triage and "Ventilators:" not in triage
    vent = {k: blocks[k] for k in ROLE_BLOCKS["ventilator_officer"]}
    officer = render_prompt(vent, np.ones(4, bool), "ventilator_officer")
    assert "Ventilators:" in officer and "Waiting queue" not in officer and "General ward" not in officer
    assert officer.splitlines()[-5] == LEGAL_HEADER


def test_render_prompt__deterministic_and_identical_over_the_server() -> None:
    pytest.importorskip("openenv.core")
    from server.environment import HospitalEnvironment
    from server.mcp_tools import observation_blocks

    env, served = HospitalEDEnv(scenario="surge"), HospitalEnvironment()
    obs, info = env.reset(seed=5)
    wire = served.reset(seed=5, scenario="surge")
    policy = HeuristicPolicy()
    for _ in range(30):
        text = render_prompt(obs, info["action_mask"], None, 100)
        assert text == render_prompt(obs, info["action_mask"], None, 100)
        assert text == render_prompt(observation_blocks(wire), wire.action_mask, None, 100)
        action = policy.act(obs, info["action_mask"])
        obs, _, _, _, info = env.step(action)
        wire = served.step(action)


def test_render_prompt__fits_a_small_context_window_at_peak_load() -> None:
    """The largest flat prompt of a surge shift (the busiest scenario) stays under 1,000 tokens."""
    env = HospitalEDEnv(scenario="surge")
    obs, info = env.reset(seed=3)
    policy, peak, done = HeuristicPolicy(), 0, False
    while not done:
        peak = max(peak, estimate_tokens(render_prompt(obs, info["action_mask"], None, 100)))
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info["action_mask"]))
        done = terminated or truncated
    assert 300 < peak < 1000


def test_estimate_tokens__is_characters_over_four_rounded_up() -> None:
    assert [estimate_tokens(s) for s in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]


def test_render_observation__counts_read_as_english() -> None:
    blocks = _blocks()
    blocks["capacity"][:] = [1, 0, 1, 2]
    blocks["icu_remaining"][0] = 1
    text = render_observation(blocks)
    assert "Free: 1 general bed, 0 ICU beds, 1 ventilator." in text and "[0] sev 5, 1 tick left," in text


def test_readme__token_figures_are_what_the_benchmark_prints() -> None:
    """docs/llm-agents.md's "what a step costs" table is `python benchmarks/llm_tokens.py` verbatim."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("llm_tokens", root / "benchmarks" / "llm_tokens.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.table(seeds=3) in (root / "docs" / "llm-agents.md").read_text()
