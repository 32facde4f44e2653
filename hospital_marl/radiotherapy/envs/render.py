"""Rendering of a plan (SPEC-RT §7, §9 "a picture a physicist can read"): pure functions of a
:class:`Plan`, numpy for the pixels and Pillow for lines and text.

``rgb_array``: :data:`FRAME_SHAPE` uint8, laid out by :func:`frame_layout` (the layout is data,
so tests and callers can find each part):

- left, the axial slice ×:data:`SCALE`, seen from the feet: orientation marks A (anterior, up),
  P, R (the patient's right, on the viewer's left) and L around it; axes in cm (the task's
  ``voxel_mm``). The dose is a warm colour wash (dark red → orange → pale yellow over
  0–:data:`WASH_MAX` × Rx; low doses fade into the grey body); the isodose lines of
  :data:`ISODOSE_LEVELS` (95 % and 107 % of Rx) are the boundaries of the {dose ≥ level}
  voxels; structure contours (tumour white, the OARs in :data:`OAR_COLOURS` order) come from a
  set of cool hues chosen away from every colour the wash takes, so no organ vanishes in it;
  the beams are their two field edges (the active beam white, the others grey);
- beside it, the colour bar in Gy, the isodose levels marked on it;
- right, the cumulative DVH (volume % against dose in Gy, 0–:data:`DVH_PLOT_MAX` × Rx): the
  tumour and every OAR in its contour colour, Rx dashed, each constraint's dose as a tick in its
  OAR's colour on the top axis;
- below, the legend: each structure by its task name in its colour, and the isodose lines.

``ansi``: a metrics summary in Gy (score, ICRU 83 tumour metrics, every constraint against its limit).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from hospital_marl.radiotherapy.core.dose import beam_axes
from hospital_marl.radiotherapy.core.metrics import PASS_THRESHOLD
from hospital_marl.radiotherapy.core.phantoms import GRID, Phantom
from hospital_marl.radiotherapy.core.plan import ACTION_NAMES, Plan
from hospital_marl.radiotherapy.core.sealed import PlanView
from hospital_marl.radiotherapy.core.tasks import Task

SCALE = 4
"""Screen pixels per voxel side in the slice."""
PANEL = GRID * SCALE  # 256
FRAME_SHAPE = (344, 640, 3)
WASH_MAX = 1.2
"""The top of the colour wash and the colour bar, × Rx (higher doses take its top colour)."""
WASH_FADE = 0.3 * WASH_MAX
"""Below this dose (× Rx) the wash fades linearly into the body grey: a low bath stays anatomy."""
DVH_PLOT_MAX = 1.5
ISODOSE_LEVELS = (0.95, 1.07)
"""Isodose lines drawn, × Rx: the ICRU 50/62 coverage window's ends."""
LINE = 2
"""Width of contours and isodose lines, screen pixels (drawn inside the region they bound)."""

Colour = tuple[int, int, int]
BACKGROUND: Colour = (22, 24, 30)
BODY_GREY: Colour = (70, 70, 70)
WASH_STOPS = np.array(
    [[110, 0, 0], [215, 25, 0], [255, 120, 0], [255, 190, 0], [255, 245, 120]], np.float64
)  # hues 0–55°: red to yellow; contours use the other hues
TUMOUR_COLOUR = np.array([255, 255, 255], np.uint8)
OAR_COLOURS = np.array(
    [
        [0, 229, 255],  # cyan
        [0, 255, 140],  # spring green
        [255, 64, 255],  # magenta
        [80, 150, 255],  # sky blue
        [180, 120, 255],  # violet
        [255, 150, 220],  # pink
        [150, 255, 220],  # mint
    ],
    np.uint8,
)
ISODOSE_COLOURS = np.array([[0, 0, 0], [40, 80, 255]], np.uint8)
"""95 % black, 107 % blue: both dark against the orange and yellow they cross."""
ACTIVE_BEAM: Colour = (255, 255, 255)
OTHER_BEAM: Colour = (150, 150, 150)
TEXT: Colour = (225, 225, 225)
DIM: Colour = (140, 140, 145)


@dataclass(frozen=True)
class Box:
    """A rectangle of the frame, pixels: rows ``top:bottom``, columns ``left:right``."""

    left: int
    top: int
    right: int
    bottom: int

    @property
    def region(self) -> tuple[slice, slice]:
        """Index a frame with this: ``frame[box.region]``."""
        return slice(self.top, self.bottom), slice(self.left, self.right)


@dataclass(frozen=True)
class LegendEntry:
    label: str
    colour: Colour
    kind: str  # "tumour", "oar" or "isodose"
    box: Box  # where the entry (swatch and label) is drawn


@dataclass(frozen=True)
class Layout:
    """Where each part of the frame is, for one task."""

    slice_panel: Box
    colour_bar: Box
    dvh: Box
    orientation: dict[str, Box]  # "A", "P", "R", "L" -> the letter's box
    legend: tuple[LegendEntry, ...]
    cm_per_pixel: float


_SLICE = Box(40, 20, 40 + PANEL, 20 + PANEL)
_BAR = Box(316, 20, 328, 20 + PANEL)
_DVH = Box(404, 20, 628, 20 + PANEL)
_LEGEND_TOP, _LEGEND_ROW, _LEGEND_SLOT, _LEGEND_PER_ROW = 312, 15, 128, 5


@lru_cache(maxsize=4)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def wash_colours(dose: np.ndarray | float) -> np.ndarray:
    """The slice's colour (float RGB, (..., 3)) of each dose × Rx inside the body: the wash over the
    body grey. The colour bar and the legend's isodose swatches (one level) show the same function."""
    x = np.clip(np.asarray(dose, np.float64) / WASH_MAX, 0, 1) * (len(WASH_STOPS) - 1)
    i = np.minimum(x.astype(int), len(WASH_STOPS) - 2)
    f = (x - i)[..., None]
    colour = WASH_STOPS[i] * (1 - f) + WASH_STOPS[i + 1] * f
    alpha = np.clip(np.asarray(dose, np.float64) / WASH_FADE, 0, 1)[..., None]
    return np.asarray(BODY_GREY, np.float64) * (1 - alpha) + colour * alpha


def structure_colours(task: Task) -> list[tuple[str, Colour]]:
    """(name, contour colour): the tumour, then each OAR in the task's order."""
    return [("tumour", _rgb(TUMOUR_COLOUR))] + [
        (name, _rgb(OAR_COLOURS[i % len(OAR_COLOURS)])) for i, name in enumerate(task.oar_names)
    ]


def _rgb(colour: np.ndarray) -> Colour:
    r, g, b = (int(v) for v in colour)
    return r, g, b


def _ticks(top: float, wanted: int) -> np.ndarray:
    """Round tick values in [0, top]: the smallest 1/2/5 × 10^k step giving at most ``wanted``."""
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 500):
        if top / step <= wanted:
            return np.arange(0.0, top + 1e-9, step)
    return np.array([0.0])


def _text_box(draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int, anchor: str) -> Box:
    left, top, right, bottom = draw.textbbox(xy, text, font=_font(size), anchor=anchor)
    return Box(int(left), int(top), int(np.ceil(right)), int(np.ceil(bottom)))


@lru_cache(maxsize=16)
def _static(task: Task) -> tuple[Layout, np.ndarray]:
    """The task's layout and everything drawn that does not change within an episode (text, axes,
    colour bar, legend, constraint ticks): the frame starts as a copy of this."""
    image = Image.new("RGB", (FRAME_SHAPE[1], FRAME_SHAPE[0]), BACKGROUND)
    draw = ImageDraw.Draw(image)
    s, rx = _SLICE, task.rx_gy

    # orientation marks around the slice: anterior up, the patient's right on the viewer's left
    mid_x, mid_y = (s.left + s.right) / 2, (s.top + s.bottom) / 2
    places = {"A": (mid_x, s.top - 3, "mb"), "P": (mid_x, s.bottom + 19, "mt"),
              "R": (4, mid_y, "lm"), "L": (s.right + 5, mid_y, "lm")}  # fmt: skip
    orientation = {}
    for letter, (x, y, anchor) in places.items():
        draw.text((x, y), letter, fill=TEXT, font=_font(14), anchor=anchor)
        orientation[letter] = _text_box(draw, (x, y), letter, 14, anchor)

    # axes in cm from the slice's top-left corner
    cm_per_pixel = task.voxel_mm / 10 / SCALE
    for cm in _ticks(PANEL * cm_per_pixel, 10):
        p = cm / cm_per_pixel
        draw.line([(s.left + p, s.bottom), (s.left + p, s.bottom + 3)], fill=DIM)
        draw.line([(s.left - 4, s.top + p), (s.left - 1, s.top + p)], fill=DIM)
        label = f"{cm:g}"
        draw.text((s.left + p, s.bottom + 5), label, fill=DIM, font=_font(10), anchor="mt")
        if cm > 0:
            draw.text((s.left - 6, s.top + p), label, fill=DIM, font=_font(10), anchor="rm")
    draw.text((s.left - 6, s.bottom + 5), "cm", fill=DIM, font=_font(10), anchor="rt")
    draw.rectangle([s.left - 1, s.top - 1, s.right, s.bottom], outline=(60, 60, 66))

    # the colour bar: the wash as the slice shows it, 0 at the bottom, in Gy
    b = _BAR
    rows = np.arange(b.bottom - b.top)
    dose = WASH_MAX * (1 - (rows + 0.5) / rows.size)
    bar = np.repeat(wash_colours(dose)[:, None, :], b.right - b.left, axis=1)
    image.paste(Image.fromarray(np.rint(bar).astype(np.uint8)), (b.left, b.top))
    for gy in _ticks(WASH_MAX * rx, 9):
        y = b.bottom - gy / (WASH_MAX * rx) * (b.bottom - b.top)
        draw.line([(b.right, y), (b.right + 3, y)], fill=DIM)
        draw.text((b.right + 5, y), f"{gy:g}", fill=DIM, font=_font(10), anchor="lm")
    for level, colour in zip(ISODOSE_LEVELS, ISODOSE_COLOURS):
        y = b.bottom - level / WASH_MAX * (b.bottom - b.top)
        draw.line([(b.left, y), (b.right - 1, y)], fill=_rgb(colour), width=2)
    draw.text(((b.left + b.right) / 2, s.top - 3), "Gy", fill=TEXT, font=_font(11), anchor="mb")

    # the DVH axes: volume % up, dose in Gy across, Rx dashed, constraint doses on the top axis
    d = _DVH
    draw.line([(d.left, d.top), (d.left, d.bottom), (d.right, d.bottom)], fill=DIM)
    for pct in (0, 25, 50, 75, 100):
        y = d.bottom - pct / 100 * (d.bottom - d.top)
        draw.line([(d.left - 3, y), (d.left, y)], fill=DIM)
        draw.text((d.left - 5, y), f"{pct}", fill=DIM, font=_font(10), anchor="rm")
    for gy in _ticks(DVH_PLOT_MAX * rx, 8):
        x = d.left + gy / (DVH_PLOT_MAX * rx) * (d.right - d.left)
        draw.line([(x, d.bottom), (x, d.bottom + 3)], fill=DIM)
        draw.text((x, d.bottom + 5), f"{gy:g}", fill=DIM, font=_font(10), anchor="mt")
    x_rx = d.left + (d.right - d.left) / DVH_PLOT_MAX
    for y in range(d.top, d.bottom, 6):
        draw.line([(x_rx, y), (x_rx, y + 2)], fill=(95, 95, 100))
    draw.text((x_rx, d.top - 3), f"Rx {rx:g} Gy", fill=DIM, font=_font(10), anchor="mb")
    draw.text((d.left - 5, d.top - 3), "volume %", fill=TEXT, font=_font(11), anchor="lb")
    draw.text((d.right, d.bottom + 19), "dose (Gy)", fill=TEXT, font=_font(11), anchor="rt")
    draw.text((d.right, d.top - 3), "DVH", fill=TEXT, font=_font(11), anchor="rb")
    table = task.constraint_table
    for j, level in zip(table.oar.tolist(), table.level.tolist()):
        x = d.left + min(level, DVH_PLOT_MAX) / DVH_PLOT_MAX * (d.right - d.left)
        draw.line([(x, d.top), (x, d.top + 8)], fill=_rgb(OAR_COLOURS[j % len(OAR_COLOURS)]), width=2)

    # the legend: structures by their task names, then the isodose lines
    entries: list[tuple[str, Colour, str, float]] = [
        (name, colour, "tumour" if i == 0 else "oar", 0.0)
        for i, (name, colour) in enumerate(structure_colours(task))
    ]
    entries += [
        (f"{100 * level:g} % Rx ({level * rx:.1f} Gy)", _rgb(colour), "isodose", level)
        for level, colour in zip(ISODOSE_LEVELS, ISODOSE_COLOURS)
    ]
    legend = []
    for k, (label, colour, kind, level) in enumerate(entries):
        x = 8 + (k % _LEGEND_PER_ROW) * _LEGEND_SLOT
        y = _LEGEND_TOP + (k // _LEGEND_PER_ROW) * _LEGEND_ROW
        if kind == "isodose":  # the line on the wash colour it crosses, as in the slice
            draw.rectangle([x, y, x + 13, y + 10], fill=_rgb(np.rint(wash_colours(level))))
            draw.line([(x, y + 5), (x + 13, y + 5)], fill=colour, width=2)
        else:
            draw.rectangle([x, y, x + 13, y + 10], outline=colour, width=2)
        draw.text((x + 18, y + 5), label, fill=TEXT, font=_font(12), anchor="lm")
        right = int(np.ceil(draw.textbbox((x + 18, y + 5), label, font=_font(12), anchor="lm")[2]))
        legend.append(LegendEntry(label, colour, kind, Box(x, y, right, y + 11)))

    frame = np.asarray(image, np.uint8).copy()
    frame.setflags(write=False)
    layout = Layout(_SLICE, _BAR, _DVH, orientation, tuple(legend), cm_per_pixel)
    return layout, frame


def frame_layout(task: Task) -> Layout:
    """Where the slice, colour bar, DVH, orientation marks and legend entries are in a frame of
    ``task``."""
    return _static(task)[0]


def _upscale(mask: np.ndarray) -> np.ndarray:
    return np.repeat(np.repeat(mask, SCALE, axis=0), SCALE, axis=1)


def boundary_band(mask: np.ndarray, width: int = LINE) -> np.ndarray:
    """The pixels (at :data:`SCALE`) of ``mask``'s voxels that lie within ``width`` pixels of a
    voxel outside it, across a side: where its contour line is drawn, just inside."""
    big = _upscale(mask)
    inner = big.copy()
    for k in range(1, width + 1):
        inner[k:, :] &= big[:-k, :]
        inner[:-k, :] &= big[k:, :]
        inner[:, k:] &= big[:, :-k]
        inner[:, :-k] &= big[:, k:]
    return big & ~inner


def _slice_panel(plan: Plan, ph: Phantom, dose: np.ndarray) -> np.ndarray:
    image = np.where(ph.body[..., None], wash_colours(dose), BACKGROUND)
    big = _upscale(np.rint(image).astype(np.uint8))
    picture = Image.fromarray(big)
    draw = ImageDraw.Draw(picture)
    iso = (np.array(ph.isocentre) + 0.5) * SCALE  # (row, column) of the isocentre, pixels
    for slot, ((angle, _), edges) in enumerate(zip(plan.beams(), plan.apertures())):
        u, n = beam_axes(angle)
        colour = ACTIVE_BEAM if slot == plan.active else OTHER_BEAM
        for edge in edges:  # the field edges, from the source to past the isocentre
            start = iso + n * edge * SCALE - u * PANEL * 0.7
            end = iso + n * edge * SCALE + u * PANEL * 0.15
            draw.line([(start[1], start[0]), (end[1], end[0])], fill=colour)
    big = np.array(picture)
    for level, colour in zip(ISODOSE_LEVELS, ISODOSE_COLOURS):
        big[boundary_band(ph.body & (dose >= level))] = colour
    for i, mask in enumerate(ph.oars):
        big[boundary_band(mask)] = OAR_COLOURS[i % len(OAR_COLOURS)]
    big[boundary_band(ph.tumour)] = TUMOUR_COLOUR
    return big


def _dvh_curves(image: Image.Image, plan: Plan, ph: Phantom, dose: np.ndarray) -> None:
    d = _DVH
    width, height = d.right - d.left, d.bottom - d.top
    levels = np.linspace(0, DVH_PLOT_MAX, width)
    xs = d.left + np.arange(width)
    draw = ImageDraw.Draw(image)
    masks = [ph.tumour, *ph.oars]
    colours = [colour for _, colour in structure_colours(plan.task)]
    for mask, colour in reversed(list(zip(masks, colours))):  # the tumour last, on top
        values = np.sort(dose[mask])
        fraction = 1.0 - np.searchsorted(values, levels, side="left") / values.size  # at least each level
        ys = d.bottom - fraction * height
        draw.line(list(zip(xs.tolist(), ys.tolist())), fill=colour, width=1)


def render_rgb_array(plan: Plan) -> np.ndarray:
    """The frame (:data:`FRAME_SHAPE` uint8): slice with dose, contours, isodose lines and beams,
    colour bar, DVH and legend, placed as :func:`frame_layout` says."""
    ph = plan.phantom
    if ph is None:
        raise RuntimeError("render before reset")
    layout, background = _static(plan.task)
    dose = plan.dose_grid()
    frame = background.copy()
    frame[layout.slice_panel.region] = _slice_panel(plan, ph, dose)
    image = Image.fromarray(frame)
    _dvh_curves(image, plan, ph, dose)
    return np.asarray(image, np.uint8).copy()


def render_ansi(plan: Plan | PlanView, last_action: int | None = None) -> str:
    """A text summary of the plan (or a policy's read-only view of it, as the LLM's prompt): beams,
    tumour metrics, OARs against their limits, score."""
    m = plan.metrics
    if m is None or plan.phantom is None:
        raise RuntimeError("render before reset")
    task = plan.task

    def gy(relative: float) -> str:
        return f"{relative * task.rx_gy:.1f} Gy"

    status = "LOCKED" if plan.locked else "TRUNCATED" if plan.truncated else "planning"
    lines = [
        f"RT PLAN | {plan.task.name} | step {plan.steps}/{plan.task.max_steps} | {status}"
        + (f" | last: {ACTION_NAMES[last_action]}" if last_action is not None else ""),
        "beams: "
        + (
            "  ".join(
                f"{'*' if i == plan.active else ''}{a:3d}°×{w:.1f}" for i, (a, w) in enumerate(plan.beams())
            )
            or "(none)"
        ),
        f"Rx {task.rx_gy:g} Gy in {task.fractions} fx | tumour  D98 {gy(m.d98)}  D50 {gy(m.d50)}  "
        f"D2 {gy(m.d2)} (goals D98 ≥ {gy(0.95)}, D2 ≤ {gy(1.07)})  V95 {100 * m.v95:5.1f}%  "
        f"V107 {100 * m.v107:5.1f}%  CI {m.ci:.3f}  HI {m.hi:.3f}",
    ]
    table = task.constraint_table
    for c, j in enumerate(table.oar.tolist()):
        oar, value = task.oars[j], m.constraint_values[c]
        constraint = oar.constraints[c - int(np.searchsorted(table.oar, j))]  # rows run OAR by OAR
        shown = f"{100 * value:.1f} %" if constraint.metric == "volume" else gy(value)
        lines.append(
            f"  {oar.name:14s} P{oar.priority}  {constraint.describe():16s} is {shown:9s} "
            f"{'ok' if m.constraint_pass[c] else 'FAIL'}"
        )
    verdict = "pass" if plan.score >= PASS_THRESHOLD else "fail"
    lines.append(
        f"score {plan.score:.3f} ({verdict} at {PASS_THRESHOLD})  invalid actions {plan.invalid_actions}"
    )
    return "\n".join(lines)
