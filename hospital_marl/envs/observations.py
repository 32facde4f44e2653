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


def _board_group(h: Hospital) -> tuple[list[int], ...]:
    """bed_occupancy, board_remaining."""
    sev, rem = h.severity, h.remaining
    board = h.board()
    pad = [0] * (MAX_GENERAL_BEDS - len(board))
    return [sev[p] for p in board] + pad, [rem[p] for p in board] + pad


def _icu_group(h: Hospital) -> tuple[list[int], ...]:
    """icu_occupancy, icu_remaining, icu_needs_vent, icu_on_vent, icu_ready."""
    sev, rem, cond, vent_of = h.severity, h.remaining, h.day.condition, h.vent_of
    pad = [0] * (MAX_ICU_BEDS - len(h.icu))
    icu_sev, icu_rem, needs, on, ready = pad.copy(), pad.copy(), pad.copy(), pad.copy(), pad.copy()
    for p in reversed(h.icu):  # filled back to front, then reversed once: no per-bed branching cost
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
            needs.append(1 if s == 5 or (s == 4 and cond[p] == 2) else 0)
            on.append(1 if vent_of[p] != EMPTY else 0)
            ready.append(1 if r <= 0 and s <= 3 else 0)
    for lst in (icu_sev, icu_rem, needs, on, ready):
        lst.reverse()
    return icu_sev, icu_rem, needs, on, ready


def _queue_group(h: Hospital) -> tuple[list[int], ...]:
    """waiting_queue (rows flattened)."""
    sev, cond, wait = h.severity, h.day.condition, h.wait
    rows: list[int] = []
    for p in h.queue[:QUEUE_SLOTS]:
        rows += (sev[p], cond[p], wait[p])
    rows += [0] * (3 * QUEUE_SLOTS - len(rows))
    return (rows,)


def _scalar_group(h: Hospital) -> tuple[list[int], ...]:
    """ventilator_status, time_step, stats, capacity."""
    c = h.counters
    n_queue = len(h.queue)
    return (
        [0 if v == EMPTY else 1 for v in h.vents] + [0] * (MAX_VENTILATORS - len(h.vents)),
        [h.tick_count],
        [c.discharges, c.deaths, n_queue],
        [h.general.count(EMPTY), h.icu.count(EMPTY), h.vents.count(EMPTY), n_queue],
    )


# Each group builds its blocks together (they share lookups) and returns them in this order.
_GROUPS = (_board_group, _icu_group, _queue_group, _scalar_group)
_GROUP_KEYS: tuple[tuple[str, ...], ...] = (
    ("bed_occupancy", "board_remaining"),
    ("icu_occupancy", "icu_remaining", "icu_needs_vent", "icu_on_vent", "icu_ready"),
    ("waiting_queue",),
    ("ventilator_status", "time_step", "stats", "capacity"),
)
_WHERE: dict[str, tuple[int, int]] = {
    key: (g, i) for g, keys in enumerate(_GROUP_KEYS) for i, key in enumerate(keys)
}
"""Block key -> (group, position in the group's result)."""
assert sorted(_WHERE) == sorted(BLOCK_BY_KEY), "every block must have exactly one builder group"

_Plan = tuple[tuple[int, ...], tuple[tuple[int, int], ...]]


def _plan(keys: tuple[str, ...]) -> _Plan:
    """How to build these blocks in this order: the groups to run, then (group, position) per block."""
    return tuple(sorted({_WHERE[key][0] for key in keys})), tuple(_WHERE[key] for key in keys)


_STATE_PLAN = _plan(COMPOSED_KEYS)
_ROLE_PLANS = {role: _plan(keys) for role, keys in ROLE_BLOCKS.items()}
_COMPOSED_VIEWS: tuple[tuple[str, slice, tuple[int, ...] | None], ...] = tuple(
    (key, slice(a, b), shape if len(shape) > 1 else None) for key, (a, b, shape) in BLOCK_OFFSETS.items()
)
"""(key, where in the state vector, shape to reshape to or None): the composed dict's views."""


def _float32(values: list[int]) -> np.ndarray:
    """A fresh float32 array of the block values (non-negative ints).

    Through ``bytes`` when every value fits a byte (the usual case): about 3x
    faster than ``np.array(values, np.float32)``, and exact, as every uint8 is
    a float32. Larger values (long episodes) take the general path.
    """
    try:
        return np.frombuffer(bytes(values), np.uint8).astype(np.float32)
    except (ValueError, TypeError):
        return np.array(values, np.float32)


class ObservationBuilder:
    """Builds observations from the simulator state, each block group once per state.

    Blocks come in four groups (board, ICU, queue, scalars) that share their
    work; a role's observation runs only its groups (a triage observation
    never sorts the general board), and views of one state share them (the
    AEC roles between two changes, the parallel env's three roles). Observation
    building is on every env's hot path: few allocations, one array
    conversion per view.
    """

    def __init__(self, hospital: Hospital) -> None:
        self.hospital = hospital
        self._version: int | None = None  # the hospital version the caches below show
        self._groups: list[tuple[list[int], ...] | None] = [None] * len(_GROUPS)
        self._vector: np.ndarray | None = None

    def _values(self, plan: _Plan) -> list[int]:
        h = self.hospital
        if self._version != h.version:
            self._version = h.version
            self._groups = [None] * len(_GROUPS)
            self._vector = None
        groups = self._groups
        for g in plan[0]:
            if groups[g] is None:
                groups[g] = _GROUPS[g](h)
        flat: list[int] = []
        for g, i in plan[1]:
            flat += groups[g][i]  # type: ignore[index]
        return flat

    def vector(self) -> np.ndarray:
        """The global state (every block, flattened, in block order). Do not mutate."""
        if self._vector is None or self._version != self.hospital.version:
            self._vector = _float32(self._values(_STATE_PLAN))
        return self._vector

    def composed(self) -> dict[str, np.ndarray]:
        """The composed Dict observation: views of a fresh vector per state."""
        vector = self.vector()
        return {
            key: vector[where] if shape is None else vector[where].reshape(shape)
            for key, where, shape in _COMPOSED_VIEWS
        }

    def role(self, role: str) -> np.ndarray:
        """A role's flat observation (its blocks, in ROLE_BLOCKS order)."""
        if self._vector is not None and self._version == self.hospital.version:
            return self._vector[ROLE_INDEX[role]]  # the state is built already: one gather
        return _float32(self._values(_ROLE_PLANS[role]))

    def roles(self, roles: list[str]) -> dict[str, np.ndarray]:
        """Several roles' observations of one state (the parallel env): the global vector once,
        then one gather per role, cheaper than building each role's blocks into its own array."""
        vector = self.vector()
        return {role: vector[ROLE_INDEX[role]] for role in roles}

    def state(self) -> np.ndarray:
        return self.vector().copy()
