"""Text observations for language models: what a role sees, and its numbered legal actions.

A prompt is built from the same two sources as every other view: the
observation blocks (:data:`hospital_marl.envs.observations.BLOCKS`, given as a
mapping ``key -> values``, e.g. the composed env's observation, a role's
blocks, or the server's JSON observation) and the action table
(:data:`hospital_marl.core.actions.ACTION_TABLE`, whose labels are the
meanings shown). Only the blocks present are rendered, so a role's prompt
shows exactly what its AEC observation holds.

Deterministic (a pure function of the blocks and the mask) and compact: over a
``surge`` shift (the busiest scenario) a flat prompt, system prompt included,
is about 600 tokens on average and under 950 at the peak (estimate: characters / 4,
see :func:`estimate_tokens`); ``benchmarks/llm_tokens.py`` prints the figures per scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from hospital_marl.core.actions import ACTION_TABLE, NOOP, ROLE_FLAT, Kind
from hospital_marl.core.scenarios import CONDITIONS
from hospital_marl.envs.observations import BLOCK_BY_KEY

Blocks = Mapping[str, Any]

LEGAL_HEADER = "Legal actions (reply with one number):"
"""The line before the numbered legal actions; each then reads ``  <number>: <meaning>``."""


def _ints(values: Any) -> list[int]:
    return [int(v) for v in np.asarray(values, dtype=np.float64).ravel()]


def _count(n: int, noun: str) -> str:
    """``1 tick``, ``3 ticks``: prompts read as plain English."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _condition(condition_id: int) -> str:
    return CONDITIONS[condition_id - 1] if 1 <= condition_id <= len(CONDITIONS) else "?"


def _board(blocks: Blocks) -> list[tuple[int, int | None]]:
    """(severity, ticks left or None) of each occupied general-board position, board order."""
    severity = _ints(blocks["bed_occupancy"])
    left = _ints(blocks["board_remaining"]) if "board_remaining" in blocks else None
    return [(s, None if left is None else left[k]) for k, s in enumerate(severity) if s > 0]


def _queue(blocks: Blocks) -> list[tuple[int, int, int]]:
    """(severity, condition id, waited ticks) of each visible waiting patient, slot order."""
    rows = np.asarray(blocks["waiting_queue"], dtype=np.float64).reshape(-1, 3)
    return [(int(s), int(c), int(w)) for s, c, w in rows if s > 0]


def _icu_patient(blocks: Blocks, j: int) -> str:
    severity = _ints(blocks["icu_occupancy"])[j]
    if severity == 0:
        return "empty"
    parts = [f"sev {severity}"]
    if "icu_remaining" in blocks:
        parts.append(_count(_ints(blocks["icu_remaining"])[j], "tick") + " left")
    for key, word in (("icu_needs_vent", "needs vent"), ("icu_on_vent", "on vent"), ("icu_ready", "ready")):
        if key in blocks and _ints(blocks[key])[j]:
            parts.append(word)
    return ", ".join(parts)


# ------------------------------------------------------------------ sections
def _header(blocks: Blocks, episode_length: int | None) -> list[str]:
    tick = _ints(blocks["time_step"])[0]
    line = f"Tick {tick}" + (f" of {episode_length}" if episode_length else "") + " (1 tick = 14.4 min)."
    if "capacity" in blocks:
        general, icu, vents, waiting = _ints(blocks["capacity"])
        free = f"{_count(general, 'general bed')}, {_count(icu, 'ICU bed')}, {_count(vents, 'ventilator')}"
        line += f" Free: {free}. Waiting: {waiting}."
    return [line]


def _queue_section(blocks: Blocks, episode_length: int | None) -> list[str]:
    rows = _queue(blocks)
    if not rows:
        return ["Waiting queue: empty."]
    lines = ["Waiting queue (slot: severity 1-5, condition, ticks waited):"]
    lines += [f"  [{i}] sev {s}, {_condition(c)}, waited {w}" for i, (s, c, w) in enumerate(rows)]
    return lines


def _board_section(blocks: Blocks, episode_length: int | None) -> list[str]:
    board = _board(blocks)
    if not board:
        return ["General ward: empty."]
    cells = [f"sev {s}" + ("" if left is None else f"/{left}t") for s, left in board]
    return [
        "General ward, most severe first (severity/ticks left): " + ", ".join(cells) + ".",
    ]


def _icu_section(blocks: Blocks, episode_length: int | None) -> list[str]:
    n = len(_ints(blocks["icu_occupancy"]))
    return ["ICU beds: " + "; ".join(f"[{j}] {_icu_patient(blocks, j)}" for j in range(n)) + "."]


def _ventilator_section(blocks: Blocks, episode_length: int | None) -> list[str]:
    status = _ints(blocks["ventilator_status"])
    return [
        "Ventilators: " + ", ".join(f"[{v}] {'in use' if u else 'free'}" for v, u in enumerate(status)) + "."
    ]


def _stats_section(blocks: Blocks, episode_length: int | None) -> list[str]:
    treated, deaths, _waiting = _ints(blocks["stats"])
    return [f"So far: {treated} discharged, {deaths} died."]


_Section = Callable[[Blocks, int | None], list[str]]
SECTIONS: tuple[tuple[tuple[str, ...], _Section], ...] = (
    (("time_step", "capacity"), _header),
    (("waiting_queue",), _queue_section),
    (("bed_occupancy", "board_remaining"), _board_section),
    (("icu_occupancy", "icu_remaining", "icu_needs_vent", "icu_on_vent", "icu_ready"), _icu_section),
    (("ventilator_status",), _ventilator_section),
    (("stats",), _stats_section),
)
"""(the blocks a section shows, its renderer): a section renders when its first block is present.
Every observation block belongs to exactly one section (a test checks it)."""
assert sorted(k for keys, _ in SECTIONS for k in keys) == sorted(BLOCK_BY_KEY)


def render_observation(blocks: Blocks, episode_length: int | None = None) -> str:
    """The blocks present in ``blocks`` as a few readable lines (deterministic)."""
    lines: list[str] = []
    for keys, section in SECTIONS:
        if keys[0] in blocks:
            lines += section(blocks, episode_length)
    return "\n".join(lines)


# ------------------------------------------------------------------ actions
def _target(blocks: Blocks, flat: int) -> str:
    """Who a board or ICU action concerns, read from the blocks (empty when they don't show it)."""
    spec = ACTION_TABLE[flat]
    # Admissions name their queue slot, listed just above: no repetition (tokens).
    if spec.kind in (Kind.TRANSFER_ICU, Kind.EARLY_DISCHARGE) and "bed_occupancy" in blocks:
        board = _board(blocks)
        k = spec.index if spec.kind == Kind.TRANSFER_ICU else len(board) - 1 - spec.index
        if 0 <= k < len(board):
            s, left = board[k]
            return f"sev {s}" + ("" if left is None else f", {_count(left, 'tick')} left")
    elif spec.kind == Kind.DISCHARGE_ICU and "icu_occupancy" in blocks:
        return _icu_patient(blocks, spec.index)
    return ""


def legal_actions(
    mask: Sequence[bool] | np.ndarray, role: str | None = None, blocks: Blocks | None = None
) -> list[tuple[int, str]]:
    """``(number, meaning)`` of each legal action, in number order.

    Flat (``role=None``): numbers are the 39 flat actions and ``mask`` their
    validity. For a role: numbers are the role's own actions (0 = its no-op)
    and ``mask`` its role mask. Meanings are the action table's labels, with
    the patient concerned when ``blocks`` show it.
    """
    flat_of = range(len(ACTION_TABLE)) if role is None else ROLE_FLAT[role]
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (len(flat_of),):
        raise ValueError(
            f"mask must have {len(flat_of)} entries for {role or 'the flat track'}, got {mask.shape}"
        )
    out = []
    for number, flat in enumerate(flat_of):
        if mask[number]:
            meaning = "wait (no-op)" if flat == NOOP else ACTION_TABLE[flat].label
            target = _target(blocks, flat) if blocks is not None and flat != NOOP else ""
            out.append((number, f"{meaning} ({target})" if target else meaning))
    return out


def render_prompt(
    blocks: Blocks,
    mask: Sequence[bool] | np.ndarray,
    role: str | None = None,
    episode_length: int | None = None,
) -> str:
    """The user message of one decision: the observation, then the numbered legal actions."""
    lines = [render_observation(blocks, episode_length), LEGAL_HEADER]
    lines += [f"  {number}: {meaning}" for number, meaning in legal_actions(mask, role, blocks)]
    return "\n".join(lines)


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: ceil(characters / 4), the usual rule of thumb for
    English text under BPE tokenizers. No tokenizer is used: each model has its own, and
    tiktoken's encodings are downloaded at first use."""
    return -(-len(text) // 4)


__all__ = ["LEGAL_HEADER", "estimate_tokens", "legal_actions", "render_observation", "render_prompt"]
