"""Render modes (SPEC §5): the text and image frames show exactly the simulator's state."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from hospital_marl.core import BUILTIN_SCENARIOS, CONDITIONS, Hospital
from hospital_marl.core.hospital import EMPTY, QUEUE_SLOTS
from hospital_marl.envs.render import (
    FRAME_SHAPE,
    NEEDS_VENT_COLOUR,
    ON_VENT_COLOUR,
    READY_COLOUR,
    RENDER_MODES,
    SEVERITY_COLOURS,
    cell_box,
    render_ansi,
    render_frame,
    render_rgb_array,
)

ADMIT_GENERAL_0, ADMIT_ICU_0, VENTILATE_0, TRANSFER_0 = 1, 11, 21, 24


# ------------------------------------------------------------------ helpers
def play_random(h: Hospital, ticks: int, seed: int = 0) -> None:
    """One seeded random valid action per tick (no-op excluded when anything else is valid).

    One action per tick, like the composed env.
    """
    rng = np.random.default_rng(seed)
    for _ in range(ticks):
        if h.done:
            return
        valid = [a for a, ok in enumerate(h.flat_mask()) if ok and a != 0]
        if valid:
            h.act_flat(int(rng.choice(valid)))
        h.tick()


def play_busy(h: Hospital, ticks: int) -> None:
    """Fill the ICU and the ventilators first, then general beds: every ICU marker shows up."""
    for _ in range(ticks):
        if h.done:
            return
        for action in (
            VENTILATE_0,
            VENTILATE_0 + 1,
            VENTILATE_0 + 2,
            ADMIT_ICU_0,
            ADMIT_GENERAL_0,
            ADMIT_GENERAL_0,
        ):
            if h.flat_mask()[action]:
                h.act_flat(action)
        h.tick()


def fresh(scenario: str = "normal_day", seed: int | None = None) -> Hospital:
    """A reset hospital; without a seed, the first seed whose day starts with someone waiting."""
    h = Hospital(scenario)
    for s in range(100) if seed is None else (seed,):
        h.reset(seed=s)
        if h.queue or seed is not None:
            return h
    raise AssertionError("no day in 100 seeds starts with a patient waiting")


def row_cells(frame: str, label: str, width: int) -> list[str]:
    """The cells between the brackets of the row starting with ``label`` (cells joined by one space)."""
    (line,) = [ln for ln in frame.splitlines() if ln.startswith(label)]
    inner = line[line.index("[") + 1 : line.index("]")]
    return [inner[i : i + width] for i in range(0, len(inner), width + 1)]


def queue_lines(frame: str) -> list[str]:
    return [ln for ln in frame.splitlines() if ln.startswith("  #")]


def expected_icu_token(h: Hospital, pid: int) -> str:
    if pid == EMPTY:
        return ". "
    marker = (
        "r"
        if h.is_ready(pid)
        else "v"
        if h.vent_of[pid] != EMPTY
        else "!"
        if h.needs_ventilator(pid)
        else " "
    )
    return f"{h.severity[pid]}{marker}"


def pixel(frame: np.ndarray, section: str, index: int) -> np.ndarray:
    """The colour at the centre of a cell."""
    box = cell_box(section, index)
    return frame[(box.y0 + box.y1) // 2, (box.x0 + box.x1) // 2]


@pytest.fixture
def mid_episode() -> Hospital:
    h = fresh()
    play_random(h, 35)
    return h


# --------------------------------------------------------------------- ansi
def test_ansi__header_shows_scenario_step_and_counts(mid_episode: Hospital) -> None:
    h = mid_episode
    header = render_ansi(h).splitlines()[1]
    assert header == (
        f"HOSPITAL ED  |  normal_day  |  Step  35 / 100  |  Discharges: {h.counters.discharges:3d}   "
        f"Deaths: {h.counters.deaths:3d}   Queue: {len(h.queue):2d}"
    )


@pytest.mark.parametrize("noop_ticks", [0, 1, 3, 8, 20])
def test_ansi__one_line_per_visible_queue_slot(noop_ticks: int) -> None:
    h = fresh()
    for _ in range(noop_ticks):  # nobody is admitted: the queue grows past the 10 visible slots
        h.tick()
    frame = render_ansi(h)
    lines = queue_lines(frame)
    assert len(lines) == min(QUEUE_SLOTS, len(h.queue))
    for slot, (line, pid) in enumerate(zip(lines, h.queue)):
        assert line.split() == [
            f"#{slot}",
            f"sev={h.severity[pid]}",
            f"cond={CONDITIONS[h.day.condition[pid] - 1]}",
            f"wait={h.wait[pid]}",
        ] + (["needs", "vent"] if h.needs_ventilator(pid) else [])
    if len(h.queue) > QUEUE_SLOTS:
        assert f"Waiting queue ({len(h.queue)}, first {QUEUE_SLOTS} shown):" in frame
    else:
        assert f"Waiting queue ({len(h.queue)})" in frame


def test_ansi__long_queue_is_reached_by_the_parametrized_cases() -> None:
    h = fresh()
    for _ in range(20):
        h.tick()
    assert len(h.queue) > QUEUE_SLOTS  # otherwise the test above never checks the cut-off


def test_ansi__general_row_is_the_sorted_board_then_free_beds(mid_episode: Hospital) -> None:
    h = mid_episode
    cells = row_cells(render_ansi(h), "Gen Beds", 1)
    board = h.board()
    assert cells == [str(h.severity[p]) for p in board] + ["."] * h.general.count(EMPTY)
    assert cells.count(".") == h.general.count(EMPTY)
    assert f"occ={100 * len(board) / len(h.general):.1f}%" in render_ansi(h)


def test_ansi__general_row_is_current_right_after_a_transfer() -> None:
    h = fresh()
    while len(h.queue) < 2:
        h.tick()
    h.act_flat(ADMIT_GENERAL_0)
    h.act_flat(ADMIT_GENERAL_0)
    h.tick()
    h.act_flat(TRANSFER_0)  # the bed manager acts; the ventilator officer's frame must show it
    cells = row_cells(render_ansi(h), "Gen Beds", 1)
    assert cells.count(".") == h.general.count(EMPTY)


def test_ansi__icu_and_vent_markers_match_the_state_every_tick() -> None:
    h = fresh("surge", seed=3)
    seen: set[str] = set()
    while not h.done:
        frame = render_ansi(h)
        icu = row_cells(frame, "ICU Beds", 2)
        assert icu == [expected_icu_token(h, p) for p in h.icu]
        assert row_cells(frame, "Vents", 1) == ["." if p == EMPTY else "#" for p in h.vents]
        seen.update(token[1] for token in icu)
        play_busy(h, 1)
    assert {"v", "r", "!", " "} <= seen  # every marker was exercised


def test_ansi__footer_reports_critical_survival_invalid_rate_and_reward() -> None:
    h = fresh()
    h.act_flat(VENTILATE_0)  # nobody in the ICU: invalid, 1 of 1 actions
    h.tick()
    play_random(h, 10)
    footer = render_ansi(h).splitlines()[-2]
    c = h.counters
    # The metrics' words and values (SPEC §7): critical survival = 1 - critical deaths / critical.
    survival = 100 * (1 - c.critical_deaths / c.critical_total) if c.critical_total else 100.0
    died = f"({c.critical_deaths} of {c.critical_total} died)"
    assert footer == (
        f"Critical survival: {survival:.1f}% {died}   "
        f"Invalid action rate: {100 * c.invalid_actions / c.actions:.2f}%   "
        f"Ep reward: {c.cumulative_reward:+9.2f}"
    )
    assert c.invalid_actions == 1


def test_ansi__end_of_episode_is_labelled() -> None:
    h = fresh()
    play_random(h, 200)
    assert h.done
    assert ("END OF SHIFT" if h.truncated else "TERMINATED") in render_ansi(h).splitlines()[-2]


# ---------------------------------------------------------------- rgb_array
@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_rgb__fixed_shape_and_dtype_for_every_scenario(scenario: str) -> None:
    h = fresh(scenario)
    for _ in range(4):
        frame = render_rgb_array(h)
        assert frame.shape == FRAME_SHAPE
        assert frame.dtype == np.uint8
        play_random(h, 10)


def test_rgb__smaller_hospital_keeps_the_frame_size_and_draws_only_its_beds() -> None:
    h = Hospital({"base": "normal_day", "general_beds": 8, "icu_beds": 2, "ventilators": 1})
    h.reset(seed=0)
    frame = render_rgb_array(h)
    assert frame.shape == FRAME_SHAPE
    assert (pixel(frame, "general", 7) == SEVERITY_COLOURS[0]).all()
    for section, index in (("general", 8), ("icu", 2), ("vent", 1)):
        assert not (pixel(frame, section, index) == SEVERITY_COLOURS[0]).all()


def test_rgb__same_state_same_image(mid_episode: Hospital) -> None:
    first = render_rgb_array(mid_episode)
    np.testing.assert_array_equal(first, render_rgb_array(mid_episode))
    np.testing.assert_array_equal(first, render_rgb_array(copy.deepcopy(mid_episode)))


def test_rgb__frames_are_fresh_arrays(mid_episode: Hospital) -> None:
    first = render_rgb_array(mid_episode)
    expected = first.copy()
    first[:] = 0  # a recorder scribbling on a frame must not corrupt the next one
    np.testing.assert_array_equal(render_rgb_array(mid_episode), expected)


def test_rgb__different_state_different_image(mid_episode: Hospital) -> None:
    before = render_rgb_array(mid_episode)
    mid_episode.tick()
    assert not np.array_equal(before, render_rgb_array(mid_episode))


def test_rgb__general_cell_takes_the_patients_colour_when_a_bed_is_filled() -> None:
    h = fresh()
    assert h.queue and not h.board()
    before = render_rgb_array(h)
    np.testing.assert_array_equal(pixel(before, "general", 0), SEVERITY_COLOURS[0])
    pid = h.queue[0]
    h.act_flat(ADMIT_GENERAL_0)
    after = render_rgb_array(h)
    np.testing.assert_array_equal(pixel(after, "general", 0), SEVERITY_COLOURS[h.severity[pid]])
    assert h.severity[pid] != 0


def test_rgb__icu_bed_and_ventilator_markers() -> None:
    h = fresh("surge", seed=1)
    while not h.queue:
        h.tick()
    pid = h.queue[0]
    h.act_flat(ADMIT_ICU_0)
    bed = h.icu.index(pid)
    frame = render_rgb_array(h)
    box = cell_box("icu", bed)
    bottom_centre = frame[box.y1 - 3, (box.x0 + box.x1) // 2]
    np.testing.assert_array_equal(bottom_centre, SEVERITY_COLOURS[h.severity[pid]])
    needs_vent_corner = frame[box.y0 + 4, box.x1 - 6]
    assert np.array_equal(needs_vent_corner, NEEDS_VENT_COLOUR) == h.needs_ventilator(pid)

    h.act_flat(VENTILATE_0)
    assert h.vent_of[pid] == 0
    frame = render_rgb_array(h)
    np.testing.assert_array_equal(frame[box.y1 - 6, box.x0 + 6], ON_VENT_COLOUR)  # on-vent marker
    assert not np.array_equal(frame[box.y0 + 4, box.x1 - 6], NEEDS_VENT_COLOUR)
    np.testing.assert_array_equal(pixel(frame, "vent", 0), ON_VENT_COLOUR)
    np.testing.assert_array_equal(pixel(frame, "vent", 1), SEVERITY_COLOURS[0])


def test_rgb__ready_marker_shows_exactly_on_ready_icu_patients() -> None:
    h = fresh("surge", seed=3)
    ready_seen = False
    while not h.done:
        frame = render_rgb_array(h)
        for bed, pid in enumerate(h.icu):
            box = cell_box("icu", bed)
            ready = pid != EMPTY and h.is_ready(pid)
            assert np.array_equal(frame[box.y0 + 4, box.x0 + 4], READY_COLOUR) == ready
            ready_seen |= ready
        play_busy(h, 1)
    assert ready_seen


def test_rgb__queue_cells_follow_the_waiting_queue() -> None:
    h = fresh()
    for _ in range(5):
        h.tick()
    frame = render_rgb_array(h)
    for slot in range(QUEUE_SLOTS):
        expected = SEVERITY_COLOURS[h.severity[h.queue[slot]]] if slot < len(h.queue) else SEVERITY_COLOURS[0]
        np.testing.assert_array_equal(pixel(frame, "queue", slot), expected)


# ------------------------------------------------------------------ dispatch
def test_render_modes__are_the_three_documented_ones() -> None:
    assert RENDER_MODES == ("ansi", "human", "rgb_array")


def test_render_frame__dispatches_ansi_and_rgb_array(mid_episode: Hospital) -> None:
    assert render_frame(mid_episode, "ansi") == render_ansi(mid_episode)
    np.testing.assert_array_equal(render_frame(mid_episode, "rgb_array"), render_rgb_array(mid_episode))
    assert render_frame(mid_episode, None) is None


def test_render_frame__human_prints_the_text_frame_and_returns_none(
    mid_episode: Hospital, capsys: pytest.CaptureFixture[str]
) -> None:
    assert render_frame(mid_episode, "human") is None
    assert capsys.readouterr().out == render_ansi(mid_episode) + "\n"


def test_render_frame__unknown_mode_names_the_valid_ones(mid_episode: Hospital) -> None:
    with pytest.raises(ValueError, match=r"'rgb'.*ansi, human, rgb_array"):
        render_frame(mid_episode, "rgb")


def test_render__before_reset_is_a_clear_error() -> None:
    for mode in ("ansi", "rgb_array"):
        with pytest.raises(RuntimeError, match="reset"):
            render_frame(Hospital("normal_day"), mode)


def test_cell_box__unknown_section_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown section 'beds'"):
        cell_box("beds", 0)
