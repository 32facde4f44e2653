"""A board for people: the compact ``rgb_array`` frame with its rows named, a legend and counters.

``rgb_array`` (:mod:`hospital_marl.envs.render`) stays unlabelled on purpose: it is cheap enough to
record every step of training rollouts, and video encoders and learners want pixels, not words.
A person reading a notebook or the documentation needs to be told what each row is, what the
colours mean, how far the shift has gone and what was just done: :func:`render_labelled` draws
exactly that around the same frame (the frame's pixels are pasted unchanged, scaled up).

It needs Pillow (which the core install already brings through openenv-core's gradio; the
``docs`` and ``notebooks`` extras name it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hospital_marl.core.actions import ACTION_TABLE, ROLE_FLAT, ROLES
from hospital_marl.core.hospital import Hospital
from hospital_marl.envs.render import (
    NEEDS_VENT_COLOUR,
    ON_VENT_COLOUR,
    READY_COLOUR,
    SEVERITY_COLOURS,
    WAIT_BAR_FULL,
    render_rgb_array,
)

TICK_MINUTES = 14.4
"""Minutes of the shift per tick (100 ticks = 24 hours)."""

SEVERITY_NAMES: tuple[str, ...] = ("empty", "1 minor", "2", "3", "4 severe", "5 critical")
"""Legend text for :data:`~hospital_marl.envs.render.SEVERITY_COLOURS`, row by row."""

# Where the compact frame's rows are (frame pixels, before scaling): label, y of the row's centre.
_ROWS: tuple[tuple[str, int], ...] = (
    ("General beds", 25),
    ("ICU beds | vents", 74),
    ("Waiting queue", 124),
    ("Time", 161),
    ("Deaths", 181),
    ("Queue length", 201),
)
_LABEL_W, _HEADER_H, _FOOTER_H, _LEGEND_W = 150, 46, 44, 190
_TEXT = (235, 235, 240)
_DIM = (160, 160, 172)
_BACKGROUND = (18, 18, 24)


def describe_action(action: int | Mapping[str, int] | None) -> str:
    """The last action in words, from the one action table.

    Args:
        action: a flat action (0–38), a mapping role -> role action (the team and parallel
            views), or None (nothing yet).
    """
    if action is None:
        return "none yet"
    if isinstance(action, Mapping):
        parts = []
        for role in ROLES:
            if role in action:
                spec = ACTION_TABLE[ROLE_FLAT[role][int(action[role])]]
                parts.append(f"{role}: {spec.label if spec.flat else 'no-op'}")
        return "; ".join(parts) or "none yet"
    if not 0 <= int(action) < len(ACTION_TABLE):
        raise ValueError(f"a flat action is in 0..{len(ACTION_TABLE) - 1}, got {action!r}")
    spec = ACTION_TABLE[int(action)]
    return spec.label if spec.role is None else f"{spec.role}: {spec.label}"


def render_labelled(
    hospital: Hospital, last_action: int | Mapping[str, int] | None = None, scale: int = 2
) -> np.ndarray:
    """The ``rgb_array`` frame with row names, a severity and marker legend, counters and the last action.

    Args:
        hospital: a simulator after ``reset()`` (an env's ``unwrapped.hospital``).
        last_action: what was just played, shown in words (see :func:`describe_action`).
        scale: how many screen pixels per frame pixel (the frame is 240 × 480).

    Returns:
        An ``(H, W, 3)`` uint8 image; the frame's pixels sit in it unchanged, scaled by ``scale``.
    """
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError as exc:  # pragma: no cover - Pillow comes with the core install
        raise ImportError(
            'render_labelled needs Pillow: pip install -e ".[notebooks]" (from a clone)'
        ) from exc
    if not isinstance(scale, int) or scale < 1:
        raise ValueError(f"scale must be a positive int, got {scale!r}")
    frame = render_rgb_array(hospital)
    big = np.repeat(np.repeat(frame, scale, axis=0), scale, axis=1)
    fh, fw = big.shape[:2]
    width = (_LABEL_W + _LEGEND_W) * scale + fw
    height = (_HEADER_H + _FOOTER_H) * scale + fh
    image = Image.new("RGB", (width, height), _BACKGROUND)
    image.paste(Image.fromarray(big), (_LABEL_W * scale, _HEADER_H * scale))
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=11 * scale)
    small = ImageFont.load_default(size=9 * scale)

    h, c = hospital, hospital.counters
    minutes = h.tick_count * TICK_MINUTES
    clock = f"{int(minutes // 60):02d}:{int(minutes % 60):02d}"
    status = ""
    if h.terminated:
        status = f"  -  ENDED EARLY: {c.deaths} deaths reached the limit of {h.scenario.max_deaths}"
    elif h.truncated:
        status = "  -  END OF SHIFT"
    metrics = h.metrics()
    draw.text(
        (8 * scale, 6 * scale),
        f"Emergency department  -  {h.scenario.name}  -  tick {h.tick_count} / {h.max_ticks} "
        f"({clock} of 24:00 into the shift){status}",
        fill=_TEXT,
        font=font,
    )
    draw.text(
        (8 * scale, 24 * scale),
        f"arrived {c.arrivals}   discharged {c.discharges}   deaths {c.deaths} "
        f"(limit {h.scenario.max_deaths})   waiting {len(h.queue)}   critical survival "
        f"{100 * metrics['critical_patient_survival']:.0f}%   invalid actions {c.invalid_actions}",
        fill=_DIM,
        font=small,
    )
    bars = {
        "Time": f"tick {h.tick_count} / {h.max_ticks}",
        "Deaths": f"{c.deaths} / {h.scenario.max_deaths}",
        "Queue length": f"{len(h.queue)} waiting",
    }
    for label, y in _ROWS:
        top = (_HEADER_H + y) * scale
        if label in bars:  # the bars are 10 pixels apart: one line each
            draw.text((8 * scale, top - 7 * scale), label, fill=_TEXT, font=font)
            draw.text((98 * scale, top - 6 * scale), bars[label], fill=_DIM, font=small)
            continue
        draw.text((8 * scale, top - 12 * scale), label, fill=_TEXT, font=font)
        if label == "General beds":
            draw.text((8 * scale, top + 1 * scale), "most severe first", fill=_DIM, font=small)
        elif label == "Waiting queue":
            draw.text((8 * scale, top + 1 * scale), "first 10, in order", fill=_DIM, font=small)

    x0, y = (_LABEL_W * scale + fw + 10 * scale), (_HEADER_H + 4) * scale
    draw.text((x0, y), "Severity", fill=_TEXT, font=font)
    y += 16 * scale
    swatch = 10 * scale
    for colour, name in zip(SEVERITY_COLOURS, SEVERITY_NAMES):
        draw.rectangle((x0, y, x0 + swatch, y + swatch), fill=tuple(int(v) for v in colour))
        draw.text((x0 + swatch + 6 * scale, y - 1 * scale), name, fill=_TEXT, font=small)
        y += 14 * scale
    y += 6 * scale
    draw.text((x0, y), "ICU markers", fill=_TEXT, font=font)
    y += 16 * scale
    for colour, name in (
        (READY_COLOUR, "ready for step-down"),
        (NEEDS_VENT_COLOUR, "needs a ventilator"),
        (ON_VENT_COLOUR, "on a ventilator"),
    ):
        draw.rectangle((x0, y, x0 + swatch, y + swatch), fill=tuple(int(v) for v in colour))
        draw.text((x0 + swatch + 6 * scale, y - 1 * scale), name, fill=_TEXT, font=small)
        y += 14 * scale
    y += 6 * scale
    draw.text(
        (x0, y),
        f"White bar under a waiting\npatient: time waited\n(full at {WAIT_BAR_FULL} ticks = "
        f"{WAIT_BAR_FULL * TICK_MINUTES / 60:.1f} h)",
        fill=_DIM,
        font=small,
    )

    draw.text(
        (8 * scale, (_HEADER_H * scale + fh) + 8 * scale),
        f"Last action: {describe_action(last_action)}",
        fill=_TEXT,
        font=font,
    )
    return np.asarray(image)


def env_hospital(env: Any) -> Hospital:
    """The simulator behind any scalar view (AEC, parallel, composed, team), unwrapped."""
    return env.unwrapped.hospital


__all__ = ["SEVERITY_NAMES", "TICK_MINUTES", "describe_action", "env_hospital", "render_labelled"]
