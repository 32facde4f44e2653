"""Observation builders: one table of named blocks, from which the composed
Dict observation, each role's flat vector and the global state are all made.

Values are raw (severities, ticks, counts) as float32, like the original's,
so they read directly; normalise in the learner (e.g. ``VecNormalize``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from hospital_marl.core.actions import ROLES
from hospital_marl.core.hospital import EMPTY, QUEUE_SLOTS, Hospital

MAX_GENERAL_BEDS = 20
MAX_ICU_BEDS = 5
MAX_VENTILATORS = 3
STATS_HIGH = 10_000.0


@dataclass(frozen=True)
class Block:
    """One named observation block."""

    key: str
    shape: tuple[int, ...]
    high: str | float  # a number, or "T" (episode length), "R" (longest treatment), "Q" (queue columns)
    doc: str


BLOCKS: tuple[Block, ...] = (
    # The original's six keys, shapes kept exactly.
    Block(
        "bed_occupancy",
        (MAX_GENERAL_BEDS,),
        5,
        "general board: severity per bed, most severe first (0 = empty)",
    ),
    Block("icu_occupancy", (MAX_ICU_BEDS,), 5, "severity per ICU bed, fixed index (0 = empty)"),
    Block("ventilator_status", (MAX_VENTILATORS,), 1, "1 = in use, 0 = free"),
    Block("waiting_queue", (QUEUE_SLOTS, 3), "Q", "first 10 waiting: [severity, condition_id, waiting_time]"),
    Block("time_step", (1,), "T", "ticks elapsed"),
    Block("stats", (3,), STATS_HIGH, "[total_treated, total_deaths, total_waiting]"),
    # Extra keys a decision needs.
    Block("board_remaining", (MAX_GENERAL_BEDS,), "R", "treatment ticks left per board position"),
    Block("icu_remaining", (MAX_ICU_BEDS,), "R", "treatment ticks left per ICU bed"),
    Block("icu_needs_vent", (MAX_ICU_BEDS,), 1, "ICU patient needs a ventilator"),
    Block("icu_on_vent", (MAX_ICU_BEDS,), 1, "ICU patient is on a ventilator"),
    Block("icu_ready", (MAX_ICU_BEDS,), 1, "ICU patient ready for step-down"),
    Block("capacity", (4,), STATS_HIGH, "[free general beds, free ICU beds, free ventilators, queue length]"),
)
BLOCK_BY_KEY = {b.key: b for b in BLOCKS}
COMPOSED_KEYS: tuple[str, ...] = tuple(b.key for b in BLOCKS)

ROLE_BLOCKS: dict[str, tuple[str, ...]] = {
    "triage": ("waiting_queue", "capacity", "time_step"),
    "bed_manager": (
        "bed_occupancy",
        "board_remaining",
        "icu_occupancy",
        "icu_remaining",
        "icu_needs_vent",
        "icu_on_vent",
        "icu_ready",
        "waiting_queue",
        "capacity",
        "time_step",
    ),
    "ventilator_officer": (
        "icu_occupancy",
        "icu_needs_vent",
        "icu_on_vent",
        "icu_ready",
        "ventilator_status",
        "capacity",
        "time_step",
    ),
}
"""What each role sees (its own job's blocks), flattened in this order."""
assert set(ROLE_BLOCKS) == set(ROLES)


def _high(block: Block, hospital: Hospital) -> float:
    if block.high == "T":
        return float(hospital.scenario.episode_length)
    if block.high == "R":
        cp = hospital.clinical
        return float(max(hi for _, hi in cp.treatment_general + cp.treatment_icu))
    return float(block.high)


def block_space(block: Block, hospital: Hospital) -> spaces.Box:
    if block.high == "Q":  # per column: severity <= 5, condition id <= 5, waiting time <= T
        column_high = np.array([5.0, 5.0, max(5.0, float(hospital.scenario.episode_length))], np.float32)
        return spaces.Box(0.0, np.broadcast_to(column_high, block.shape).copy(), block.shape, np.float32)
    return spaces.Box(0.0, _high(block, hospital), block.shape, np.float32)


def composed_space(hospital: Hospital) -> spaces.Dict:
    """The composed env's Dict observation space."""
    return spaces.Dict({b.key: block_space(b, hospital) for b in BLOCKS})


def _flat_space(keys: tuple[str, ...], hospital: Hospital) -> spaces.Box:
    lows, highs = [], []
    for key in keys:
        box = block_space(BLOCK_BY_KEY[key], hospital)
        lows.append(box.low.ravel())
        highs.append(box.high.ravel())
    return spaces.Box(np.concatenate(lows), np.concatenate(highs), dtype=np.float32)


def role_space(role: str, hospital: Hospital) -> spaces.Box:
    """A role's flat observation vector."""
    return _flat_space(ROLE_BLOCKS[role], hospital)


def state_space(hospital: Hospital) -> spaces.Box:
    """The global state: every block, flattened (for centralised critics)."""
    return _flat_space(COMPOSED_KEYS, hospital)


def role_slices() -> dict[str, list[tuple[str, slice]]]:
    """Where each block sits in each role's vector (for readers of role observations)."""
    out: dict[str, list[tuple[str, slice]]] = {}
    for role, keys in ROLE_BLOCKS.items():
        start, rows = 0, []
        for key in keys:
            size = int(np.prod(BLOCK_BY_KEY[key].shape))
            rows.append((key, slice(start, start + size)))
            start += size
        out[role] = rows
    return out


def _layout() -> tuple[dict[str, tuple[int, int, tuple[int, ...]]], int]:
    offsets, start = {}, 0
    for b in BLOCKS:
        size = int(np.prod(b.shape))
        offsets[b.key] = (start, start + size, b.shape)
        start += size
    return offsets, start


BLOCK_OFFSETS, STATE_SIZE = _layout()
"""Where each block sits in the global state vector (block order)."""
ROLE_INDEX: dict[str, np.ndarray] = {
    role: np.concatenate([np.arange(*BLOCK_OFFSETS[k][:2]) for k in keys])
    for role, keys in ROLE_BLOCKS.items()
}
"""Indices of a role's observation in the global state vector."""


class ObservationBuilder:
    """Builds the global state vector once per simulator state; every view slices it.

    One ``np.array`` call per state (not one per block): observation building
    is on every env's hot path.
    """

    def __init__(self, hospital: Hospital) -> None:
        self.hospital = hospital
        self._version: int | None = None
        self._vector = np.zeros(STATE_SIZE, np.float32)
        self._blocks: dict[str, np.ndarray] = {}

    def vector(self) -> np.ndarray:
        """The global state (every block, flattened, in block order). Do not mutate."""
        h = self.hospital
        if h.version == self._version:
            return self._vector
        sev, rem = h.severity, h.remaining
        cond, wait, vent_of = h.day.condition, h.wait, h.vent_of
        board = h.board()
        pad_g = [0] * (MAX_GENERAL_BEDS - len(board))
        icu_sev, icu_rem, needs, on, ready = [], [], [], [], []
        for p in h.icu:
            if p == EMPTY:
                icu_sev.append(0)
                icu_rem.append(0)
                needs.append(0)
                on.append(0)
                ready.append(0)
            else:
                s, r = sev[p], rem[p]
                icu_sev.append(s)
                icu_rem.append(r)
                needs.append(s == 5 or (s == 4 and cond[p] == 2))
                on.append(vent_of[p] != EMPTY)
                ready.append(r <= 0 and s <= 3)
        pad_i = [0] * (MAX_ICU_BEDS - len(h.icu))
        queue: list[int] = []
        for p in h.queue[:QUEUE_SLOTS]:
            queue += (sev[p], cond[p], wait[p])
        c = h.counters
        n_queue = len(h.queue)
        n_free_vents = h.vents.count(EMPTY)
        values = (
            [sev[p] for p in board]
            + pad_g
            + icu_sev
            + pad_i
            + [v != EMPTY for v in h.vents]
            + [0] * (MAX_VENTILATORS - len(h.vents))
            + queue
            + [0] * (3 * QUEUE_SLOTS - len(queue))
            + [h.tick_count, c.discharges, c.deaths, n_queue]
            + [rem[p] for p in board]
            + pad_g
            + icu_rem
            + pad_i
            + needs
            + pad_i
            + on
            + pad_i
            + ready
            + pad_i
            + [h.general.count(EMPTY), h.icu.count(EMPTY), n_free_vents, n_queue]
        )
        vector = np.array(values, np.float32)
        self._vector = vector
        self._blocks = {
            key: vector[a:b] if len(shape) == 1 else vector[a:b].reshape(shape)
            for key, (a, b, shape) in BLOCK_OFFSETS.items()
        }
        self._version = h.version
        return vector

    def composed(self) -> dict[str, np.ndarray]:
        """The composed Dict observation (views of a fresh vector per state)."""
        self.vector()
        return dict(self._blocks)

    def role(self, role: str) -> np.ndarray:
        return self.vector()[ROLE_INDEX[role]]

    def state(self) -> np.ndarray:
        return self.vector().copy()
