"""Rendering: pure functions of a :class:`Hospital`.

Every env view renders through :func:`render_frame`, so the text frame, the
printed frame and the video frame always show the same state the same way.
Only numpy is used (no pygame / matplotlib): ``rgb_array`` must stay cheap
enough to record every step of training rollouts.

``ansi`` frame (what the original printed)::

    ========================================================================================
    HOSPITAL ED  |  normal_day  |  Step  35 / 100  |  Discharges:  17   Deaths:   6   Queue: 12
    ========================================================================================
    Gen Beds  [5 4 3 3 2 . . . . . . . . . . . . . . .]  occ=25.0%
    ICU Beds  [4v .  5! 3r . ]                             occ=60.0%
    Vents     [# # .]                                      in use=66.7%
    ----------------------------------------------------------------------------------------
    Waiting queue (12, first 10 shown):
      #0  sev=2  cond=trauma      wait=29
      ...
    ----------------------------------------------------------------------------------------
    Critical survival: 83.3% (2 of 12 died)   Invalid action rate: 0.00%   Ep reward:    +40.40
    ========================================================================================

The general row is the *general board* (occupied beds sorted most severe
first, then free beds ``.``), the view the actions address. ICU beds keep
their fixed indices; each shows the severity and a marker: ``v`` on a
ventilator, ``r`` ready for step-down, ``!`` needs a ventilator and has none
(a ready patient still weaning off a ventilator shows ``r``: the bed manager's
cue). The words are the metrics': ``Discharges`` counts successful
discharges; ``Critical survival`` is ``critical_patient_survival`` so far (1 − critical
deaths / critical patients); ``Invalid action rate`` is ``invalid_action_rate``.

``rgb_array`` frame: :data:`FRAME_SHAPE` (240, 480, 3) uint8, the same size
for every scenario (missing beds are simply not drawn). Rows, top to bottom:
20 general-board cells (a longer board as the observation shows it: its 15 most and 5 least
severe), 5 ICU cells (left) and 3 ventilator cells (right),
10 waiting-queue cells (a white bar along the bottom grows with waiting time,
full at :data:`WAIT_BAR_FULL` ticks), then three bars: time (tick / max
ticks), deaths (deaths / scenario.max_deaths) and queue length (full at
:data:`QUEUE_BAR_FULL`); a red (terminated) or blue (end of shift) strip at
the bottom once the episode is over. Cells are coloured by severity
(:data:`SEVERITY_COLOURS`: empty dark grey, 1 green ... 5 red). ICU markers:
white square top-left = ready, magenta square top-right = needs a ventilator
and has none, blue square bottom-left = on a ventilator. A ventilator in use
is blue with a strip in its patient's severity colour.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from hospital_marl.core.hospital import EMPTY, QUEUE_SLOTS, Hospital
from hospital_marl.core.scenarios import CONDITIONS

RENDER_MODES: tuple[str, ...] = ("ansi", "human", "rgb_array")
"""The render modes every env view accepts (its ``metadata["render_modes"]``)."""

# ----------------------------------------------------------------------- ansi
TEXT_WIDTH = 88
_ROW_LABEL_WIDTH = 53  # "ICU Beds  [...]" padded so the occupancy figures line up


def _check_reset(h: Hospital) -> None:
    if not hasattr(h, "counters"):
        raise RuntimeError("call Hospital.reset() before rendering it")


def _percent(used: int, total: int) -> str:
    return f"{100.0 * used / total:.1f}%" if total else "n/a"


def _icu_token(h: Hospital, pid: int) -> str:
    """Two characters per ICU bed: severity and the marker the bed manager / officer acts on."""
    if pid == EMPTY:
        return ". "
    if h.is_ready(pid):
        marker = "r"
    elif h.vent_of[pid] != EMPTY:
        marker = "v"
    elif h.needs_ventilator(pid):
        marker = "!"
    else:
        marker = " "
    return f"{h.severity[pid]}{marker}"


def render_ansi(h: Hospital) -> str:
    """The text frame: what a person watching a rollout needs to judge the decisions.

    Args:
        h: a simulator after ``reset()``.

    Returns:
        A multi-line string (no trailing newline).
    """
    _check_reset(h)
    c = h.counters
    sev = h.severity
    rule, thin = "=" * TEXT_WIDTH, "-" * TEXT_WIDTH

    board = h.board()
    n_general = len(h.general)
    general_cells = [str(sev[p]) for p in board] + ["."] * (n_general - len(board))
    icu_used = sum(1 for p in h.icu if p != EMPTY)
    vents_used = sum(1 for p in h.vents if p != EMPTY)
    general_row = f"Gen Beds  [{' '.join(general_cells)}]"
    icu_row = f"ICU Beds  [{' '.join(_icu_token(h, p) for p in h.icu)}]"
    vent_row = f"Vents     [{' '.join('.' if p == EMPTY else '#' for p in h.vents)}]"

    lines = [
        rule,
        f"HOSPITAL ED  |  {h.scenario.name}  |  Step {h.tick_count:3d} / {h.max_ticks:3d}  |  "
        f"Discharges: {c.discharges:3d}   Deaths: {c.deaths:3d}   Queue: {len(h.queue):2d}",
        rule,
        f"{general_row:<{_ROW_LABEL_WIDTH}}occ={_percent(len(board), n_general)}",
        f"{icu_row:<{_ROW_LABEL_WIDTH}}occ={_percent(icu_used, len(h.icu))}",
        f"{vent_row:<{_ROW_LABEL_WIDTH}}in use={_percent(vents_used, len(h.vents))}",
        thin,
    ]

    n_queue = len(h.queue)
    if n_queue == 0:
        lines.append("Waiting queue (0): empty")
    elif n_queue > QUEUE_SLOTS:
        lines.append(f"Waiting queue ({n_queue}, first {QUEUE_SLOTS} shown):")
    else:
        lines.append(f"Waiting queue ({n_queue}):")
    condition = h.day.condition
    for slot, pid in enumerate(h.queue[:QUEUE_SLOTS]):
        flag = "  needs vent" if h.needs_ventilator(pid) else ""
        lines.append(
            f"  #{slot:<2d} sev={sev[pid]}  cond={CONDITIONS[condition[pid] - 1]:<12s}"
            f"wait={h.wait[pid]:<3d}{flag}"
        )

    metrics = h.metrics()
    footer = (
        f"Critical survival: {100.0 * metrics['critical_patient_survival']:.1f}% "
        f"({c.critical_deaths} of {c.critical_total} died)   "
        f"Invalid action rate: {100.0 * metrics['invalid_action_rate']:.2f}%   "
        f"Ep reward: {c.cumulative_reward:+9.2f}"
    )
    if h.terminated:
        footer += f"   TERMINATED: {c.deaths} deaths (limit {h.scenario.max_deaths})"
    elif h.truncated:
        footer += "   END OF SHIFT"
    lines += [thin, footer, rule]
    return "\n".join(lines)


# ------------------------------------------------------------------ rgb_array
FRAME_SHAPE: tuple[int, int, int] = (240, 480, 3)
"""(height, width, RGB) of every ``rgb_array`` frame, whatever the scenario."""

SEVERITY_COLOURS = np.array(
    [
        (70, 70, 78),  # 0: empty bed
        (46, 204, 64),  # 1: green
        (170, 220, 50),  # 2: yellow-green
        (255, 210, 0),  # 3: yellow
        (255, 133, 27),  # 4: orange
        (230, 30, 30),  # 5: red
    ],
    dtype=np.uint8,
)  # (6, 3) uint8, row = severity
SEVERITY_COLOURS.flags.writeable = False

READY_COLOUR = np.array((245, 245, 245), dtype=np.uint8)
NEEDS_VENT_COLOUR = np.array((255, 0, 255), dtype=np.uint8)
ON_VENT_COLOUR = np.array((0, 150, 255), dtype=np.uint8)
WAIT_BAR_COLOUR = np.array((245, 245, 245), dtype=np.uint8)
TIME_BAR_COLOUR = np.array((90, 170, 255), dtype=np.uint8)
DEATH_BAR_COLOUR = np.array((230, 30, 30), dtype=np.uint8)
QUEUE_BAR_COLOUR = np.array((255, 133, 27), dtype=np.uint8)
TERMINATED_COLOUR = np.array((200, 20, 20), dtype=np.uint8)
TRUNCATED_COLOUR = np.array((60, 110, 220), dtype=np.uint8)
_BACKGROUND = (18, 18, 24)
_PANEL = (34, 34, 44)
_BAR_TROUGH = (55, 55, 65)

WAIT_BAR_FULL = 20
"""Waiting ticks at which a queue cell's wait bar is full width."""
QUEUE_BAR_FULL = 3 * QUEUE_SLOTS
"""Queue length at which the queue-length bar is full."""


class Box(NamedTuple):
    """A pixel rectangle ``frame[y0:y1, x0:x1]``."""

    y0: int
    y1: int
    x0: int
    x1: int


# Geometry (fixed; the observation layout caps beds at 20 / 5 / 3).
_MAX_GENERAL, _MAX_ICU, _MAX_VENTS = 20, 5, 3
_GENERAL_Y, _GENERAL_X0, _GENERAL_PITCH, _GENERAL_W = (10, 40), 10, 23, 21
_ICU_Y, _ICU_X0, _WIDE_PITCH, _WIDE_W = (54, 94), 10, 46, 42
_VENT_X0 = 470 - (_MAX_VENTS * _WIDE_PITCH - (_WIDE_PITCH - _WIDE_W))  # right-aligned
_QUEUE_Y, _QUEUE_X0 = (108, 140), 10
_WAIT_BAR_H = 5
_MARK = 10  # marker square side
_BAR_X = (10, 470)
_TIME_BAR_Y, _DEATH_BAR_Y, _QUEUE_BAR_Y = (156, 166), (176, 186), (196, 206)
_STATUS_Y = (220, 232)
_VENT_STRIP_H = 8


def _row_boxes(y: tuple[int, int], x0: int, pitch: int, width: int, n: int) -> tuple[Box, ...]:
    return tuple(Box(y[0], y[1], x0 + i * pitch, x0 + i * pitch + width) for i in range(n))


_BOXES: dict[str, tuple[Box, ...]] = {
    "general": _row_boxes(_GENERAL_Y, _GENERAL_X0, _GENERAL_PITCH, _GENERAL_W, _MAX_GENERAL),
    "icu": _row_boxes(_ICU_Y, _ICU_X0, _WIDE_PITCH, _WIDE_W, _MAX_ICU),
    "vent": _row_boxes(_ICU_Y, _VENT_X0, _WIDE_PITCH, _WIDE_W, _MAX_VENTS),
    "queue": _row_boxes(_QUEUE_Y, _QUEUE_X0, _WIDE_PITCH, _WIDE_W, QUEUE_SLOTS),
}


def cell_box(section: str, index: int) -> Box:
    """Where a cell is drawn, for tests and for overlays drawn on recorded frames.

    Args:
        section: ``"general"`` (board position), ``"icu"`` (bed), ``"vent"`` or ``"queue"`` (slot).
        index: the cell's index within its section.
    """
    try:
        return _BOXES[section][index]
    except KeyError:
        raise ValueError(f"unknown section {section!r}; sections: {', '.join(_BOXES)}") from None


def _panel(frame: np.ndarray, boxes: tuple[Box, ...], pad: int = 4) -> None:
    frame[boxes[0].y0 - pad : boxes[-1].y1 + pad, boxes[0].x0 - pad : boxes[-1].x1 + pad] = _PANEL


@lru_cache(maxsize=16)
def _background(n_general: int, n_icu: int, n_vents: int) -> np.ndarray:
    """The static part of a frame (panels, empty cells, bar troughs), drawn once per bed layout."""
    frame = np.empty(FRAME_SHAPE, dtype=np.uint8)
    frame[:] = _BACKGROUND
    for section, n in (("general", n_general), ("icu", n_icu), ("vent", n_vents), ("queue", QUEUE_SLOTS)):
        boxes = _BOXES[section][:n]
        _panel(frame, boxes)
        for b in boxes:
            frame[b.y0 : b.y1, b.x0 : b.x1] = SEVERITY_COLOURS[0]
    for y0, y1 in (_TIME_BAR_Y, _DEATH_BAR_Y, _QUEUE_BAR_Y):
        frame[y0:y1, _BAR_X[0] : _BAR_X[1]] = _BAR_TROUGH
    frame.flags.writeable = False
    return frame


# Per-frame drawing pastes precomputed solid tiles: a same-shape copy runs row
# by row as memcpy, about 5x faster than broadcasting a 3-byte colour over a box.
def _solid(height: int, width: int, colour: np.ndarray) -> np.ndarray:
    tile = np.empty((height, width, 3), dtype=np.uint8)
    tile[:] = colour
    tile.flags.writeable = False
    return tile


def _severity_tiles(height: int, width: int) -> np.ndarray:  # (6, height, width, 3) uint8
    tiles = np.ascontiguousarray(np.broadcast_to(SEVERITY_COLOURS[:, None, None, :], (6, height, width, 3)))
    tiles.flags.writeable = False
    return tiles


_BAR_W = _BAR_X[1] - _BAR_X[0]
_GENERAL_TILES = _severity_tiles(_GENERAL_Y[1] - _GENERAL_Y[0], _GENERAL_W)
_ICU_TILES = _severity_tiles(_ICU_Y[1] - _ICU_Y[0], _WIDE_W)
_QUEUE_TILES = _severity_tiles(_QUEUE_Y[1] - _QUEUE_Y[0], _WIDE_W)
_VENT_STRIP_TILES = _severity_tiles(_VENT_STRIP_H, _WIDE_W)
_VENT_BODY = _solid(_ICU_Y[1] - _ICU_Y[0] - _VENT_STRIP_H, _WIDE_W, ON_VENT_COLOUR)
_READY_MARK = _solid(_MARK, _MARK, READY_COLOUR)
_ON_VENT_MARK = _solid(_MARK, _MARK, ON_VENT_COLOUR)
_NEEDS_VENT_MARK = _solid(_MARK, _MARK, NEEDS_VENT_COLOUR)
_WAIT_BAR = _solid(_WAIT_BAR_H, _WIDE_W, WAIT_BAR_COLOUR)
_TIME_BAR = _solid(_TIME_BAR_Y[1] - _TIME_BAR_Y[0], _BAR_W, TIME_BAR_COLOUR)
_DEATH_BAR = _solid(_DEATH_BAR_Y[1] - _DEATH_BAR_Y[0], _BAR_W, DEATH_BAR_COLOUR)
_QUEUE_BAR = _solid(_QUEUE_BAR_Y[1] - _QUEUE_BAR_Y[0], _BAR_W, QUEUE_BAR_COLOUR)
_TERMINATED_STRIP = _solid(_STATUS_Y[1] - _STATUS_Y[0], _BAR_W, TERMINATED_COLOUR)
_TRUNCATED_STRIP = _solid(_STATUS_Y[1] - _STATUS_Y[0], _BAR_W, TRUNCATED_COLOUR)


def _bar(frame: np.ndarray, y0: int, fraction: float, tile: np.ndarray) -> None:
    width = round(_BAR_W * min(max(fraction, 0.0), 1.0))
    if width:
        frame[y0 : y0 + tile.shape[0], _BAR_X[0] : _BAR_X[0] + width] = tile[:, :width]


def render_rgb_array(h: Hospital) -> np.ndarray:
    """The video frame: the whole ED at a glance, cheap enough to record every step.

    Args:
        h: a simulator after ``reset()``.

    Returns:
        A new ``FRAME_SHAPE`` uint8 array (never a view of a cached one).
    """
    _check_reset(h)
    frame = _background(len(h.general), len(h.icu), len(h.vents)).copy()
    sev = h.severity

    for b, pid in zip(_BOXES["general"], h.board_shown()):  # a board over 20: as observed
        frame[b.y0 : b.y1, b.x0 : b.x1] = _GENERAL_TILES[sev[pid]]

    vent_of = h.vent_of
    for b, pid in zip(_BOXES["icu"], h.icu):
        if pid == EMPTY:
            continue
        frame[b.y0 : b.y1, b.x0 : b.x1] = _ICU_TILES[sev[pid]]
        if h.is_ready(pid):
            frame[b.y0 + 2 : b.y0 + 2 + _MARK, b.x0 + 2 : b.x0 + 2 + _MARK] = _READY_MARK
        if vent_of[pid] != EMPTY:
            frame[b.y1 - 2 - _MARK : b.y1 - 2, b.x0 + 2 : b.x0 + 2 + _MARK] = _ON_VENT_MARK
        elif h.needs_ventilator(pid):
            frame[b.y0 + 2 : b.y0 + 2 + _MARK, b.x1 - 2 - _MARK : b.x1 - 2] = _NEEDS_VENT_MARK

    for b, pid in zip(_BOXES["vent"], h.vents):
        if pid != EMPTY:
            frame[b.y0 : b.y1 - _VENT_STRIP_H, b.x0 : b.x1] = _VENT_BODY
            frame[b.y1 - _VENT_STRIP_H : b.y1, b.x0 : b.x1] = _VENT_STRIP_TILES[sev[pid]]

    wait = h.wait
    for b, pid in zip(_BOXES["queue"], h.queue):
        frame[b.y0 : b.y1, b.x0 : b.x1] = _QUEUE_TILES[sev[pid]]
        bar = _WIDE_W * min(wait[pid], WAIT_BAR_FULL) // WAIT_BAR_FULL
        if bar:
            frame[b.y1 - _WAIT_BAR_H : b.y1, b.x0 : b.x0 + bar] = _WAIT_BAR[:, :bar]

    _bar(frame, _TIME_BAR_Y[0], h.tick_count / h.max_ticks, _TIME_BAR)
    _bar(frame, _DEATH_BAR_Y[0], h.counters.deaths / h.scenario.max_deaths, _DEATH_BAR)
    _bar(frame, _QUEUE_BAR_Y[0], len(h.queue) / QUEUE_BAR_FULL, _QUEUE_BAR)
    if h.terminated or h.truncated:
        frame[_STATUS_Y[0] : _STATUS_Y[1], _BAR_X[0] : _BAR_X[1]] = (
            _TERMINATED_STRIP if h.terminated else _TRUNCATED_STRIP
        )
    return frame


# ------------------------------------------------------------------ dispatch
def render_frame(h: Hospital, mode: str | None) -> str | np.ndarray | None:
    """Render in one of :data:`RENDER_MODES`; the single entry point every env view calls.

    Args:
        h: a simulator after ``reset()``.
        mode: ``"ansi"`` returns the text frame, ``"rgb_array"`` the image,
            ``"human"`` prints the text frame and returns None; ``None`` renders nothing.

    Raises:
        ValueError: for any other mode.
    """
    if mode is None:
        return None
    if mode == "ansi":
        return render_ansi(h)
    if mode == "rgb_array":
        return render_rgb_array(h)
    if mode == "human":
        print(render_ansi(h), flush=True)
        return None
    raise ValueError(f"unknown render mode {mode!r}; valid modes: {', '.join(RENDER_MODES)} (or None)")


__all__ = [
    "FRAME_SHAPE",
    "QUEUE_BAR_FULL",
    "RENDER_MODES",
    "SEVERITY_COLOURS",
    "TEXT_WIDTH",
    "WAIT_BAR_FULL",
    "Box",
    "cell_box",
    "render_ansi",
    "render_frame",
    "render_rgb_array",
]
