"""Rendering of a plan (SPEC-RT §7): pure functions of a :class:`Plan`, numpy only.

``rgb_array``: :data:`FRAME_SHAPE` (256, 512, 3) uint8. Left, the slice ×4: the
dose as a colour wash (blue → red over 0–:data:`WASH_MAX` × Rx) over the grey
body, structure contours (tumour white, OARs in :data:`OAR_COLOURS` order) and
the beams (the active beam yellow, the others grey): each beam's aperture as its two field
edges from the source to beyond the isocentre. Right, the cumulative DVH over
0–:data:`DVH_PLOT_MAX` × Rx: the tumour and every OAR in its contour colour, Rx as a grey
vertical line, a tick every 10 Gy under the dose axis, each constraint's dose as a short tick
in its OAR's colour on the top axis.

``ansi``: a metrics summary in Gy (score, ICRU 83 tumour metrics, every constraint against its limit).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from hospital_marl.radiotherapy.core.dose import beam_axes
from hospital_marl.radiotherapy.core.metrics import PASS_THRESHOLD
from hospital_marl.radiotherapy.core.phantoms import GRID
from hospital_marl.radiotherapy.core.plan import ACTION_NAMES, Plan

SCALE = 4
PANEL = GRID * SCALE  # 256
FRAME_SHAPE = (PANEL, 2 * PANEL, 3)
WASH_MAX = 1.2
DVH_PLOT_MAX = 1.5
TUMOUR_COLOUR = np.array([255, 255, 255], np.uint8)  # white: visible on the red of a high dose
OAR_COLOURS = np.array(
    [
        [60, 220, 255],
        [80, 255, 80],
        [255, 140, 255],
        [255, 170, 40],
        [170, 120, 255],
        [0, 200, 170],
        [220, 220, 120],
    ],
    np.uint8,
)
BODY_GREY = np.array([70, 70, 70], np.float64)


def _colormap(x: np.ndarray) -> np.ndarray:
    """x in [0, 1] -> (..., 3) float RGB, blue → cyan → green → yellow → red."""
    stops = np.array([[0, 0, 200], [0, 200, 255], [0, 220, 0], [255, 230, 0], [255, 0, 0]], float)
    pos = np.clip(x, 0, 1) * (len(stops) - 1)
    i = np.minimum(pos.astype(int), len(stops) - 2)
    f = (pos - i)[..., None]
    return stops[i] * (1 - f) + stops[i + 1] * f


def _edges(mask: np.ndarray) -> np.ndarray:
    inner = mask.copy()
    inner[1:, :] &= mask[:-1, :]
    inner[:-1, :] &= mask[1:, :]
    inner[:, 1:] &= mask[:, :-1]
    inner[:, :-1] &= mask[:, 1:]
    return mask & ~inner


def _draw_line(img: np.ndarray, p0: tuple[float, float], p1: tuple[float, float], colour: np.ndarray) -> None:
    n = int(max(abs(p1[0] - p0[0]), abs(p1[1] - p0[1]))) * 2 + 2
    rows = np.rint(np.linspace(p0[0], p1[0], n)).astype(int)
    cols = np.rint(np.linspace(p0[1], p1[1], n)).astype(int)
    ok = (rows >= 0) & (rows < img.shape[0]) & (cols >= 0) & (cols < img.shape[1])
    img[rows[ok], cols[ok]] = colour


@lru_cache(maxsize=1)
def _dvh_axes() -> np.ndarray:
    panel = np.full((PANEL, PANEL, 3), 20, np.uint8)
    grey = np.array([110, 110, 110], np.uint8)
    _draw_line(panel, (PANEL - 16, 16), (PANEL - 16, PANEL - 8), grey)  # dose axis
    _draw_line(panel, (8, 16), (PANEL - 16, 16), grey)  # volume axis
    x_rx = 16 + (PANEL - 24) / DVH_PLOT_MAX
    _draw_line(panel, (8, x_rx), (PANEL - 16, x_rx), np.array([80, 80, 80], np.uint8))
    panel.setflags(write=False)
    return panel


def _dvh_panel(plan: Plan, dose: np.ndarray) -> np.ndarray:
    panel = _dvh_axes().copy()
    width, height = PANEL - 24, PANEL - 24
    levels = np.linspace(0, DVH_PLOT_MAX, width)
    if plan.phantom is None:
        raise RuntimeError("render after reset()")
    masks = [(plan.phantom.tumour, TUMOUR_COLOUR)] + [
        (m, OAR_COLOURS[i % len(OAR_COLOURS)]) for i, m in enumerate(plan.phantom.oars)
    ]
    for mask, colour in masks:
        d = np.sort(dose[mask])
        fraction = 1.0 - np.searchsorted(d, levels, side="left") / d.size  # at least each level
        ys = PANEL - 16 - fraction * height
        xs = 16 + np.arange(width)
        for x0, y0, x1, y1 in zip(xs[:-1], ys[:-1], xs[1:], ys[1:]):
            _draw_line(panel, (y0, x0), (y1, x1), colour)
    rx = plan.task.rx_gy
    for gy in np.arange(10.0, DVH_PLOT_MAX * rx, 10.0):  # the dose axis in Gy: a tick every 10 Gy
        x = 16 + gy / rx / DVH_PLOT_MAX * width
        _draw_line(
            panel, (PANEL - 16, x), (PANEL - 11 - 4 * (gy % 50 == 0), x), np.array([150, 150, 150], np.uint8)
        )
    table = plan.task.constraint_table
    for j, level in zip(table.oar.tolist(), table.level.tolist()):  # each constraint's dose
        x = 16 + min(level, DVH_PLOT_MAX) / DVH_PLOT_MAX * width
        _draw_line(panel, (2, x), (12, x), OAR_COLOURS[j % len(OAR_COLOURS)])
    return panel


def render_rgb_array(plan: Plan) -> np.ndarray:
    """The frame: dose wash, contours and beams | DVH. (256, 512, 3) uint8."""
    ph = plan.phantom
    if ph is None:
        raise RuntimeError("render before reset")
    dose = plan.dose_grid()
    wash = _colormap(dose / WASH_MAX)
    alpha = np.clip(dose / (0.3 * WASH_MAX), 0, 1)[..., None]  # low dose fades into the body grey
    image = np.where(ph.body[..., None], BODY_GREY * (1 - alpha) + wash * alpha, 0).astype(np.uint8)
    for mask, colour in [(ph.tumour, TUMOUR_COLOUR)] + [
        (m, OAR_COLOURS[i % len(OAR_COLOURS)]) for i, m in enumerate(ph.oars)
    ]:
        image[_edges(mask)] = colour
    big = np.repeat(np.repeat(image, SCALE, axis=0), SCALE, axis=1)
    iso = (np.array(ph.isocentre) + 0.5) * SCALE
    for slot, ((angle, _), edges) in enumerate(zip(plan.beams(), plan.apertures())):
        u, n = beam_axes(angle)
        colour = np.array([255, 255, 0] if slot == plan.active else [170, 170, 170], np.uint8)
        for edge in edges:  # the field edges, from the source to past the isocentre
            side = n * edge * SCALE
            _draw_line(big, tuple(iso + side - u * PANEL * 0.7), tuple(iso + side + u * PANEL * 0.15), colour)
    frame = np.zeros(FRAME_SHAPE, np.uint8)
    frame[:, :PANEL] = big
    frame[:, PANEL:] = _dvh_panel(plan, dose)
    return frame


def render_ansi(plan: Plan, last_action: int | None = None) -> str:
    """A text summary of the plan: beams, tumour metrics, OARs against their limits, score."""
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
