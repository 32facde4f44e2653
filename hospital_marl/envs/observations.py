"""Observation builders: one table of named blocks, from which the composed
Dict observation, each role's flat vector and the global state are all made.

Values are raw (severities, ticks, counts) as float32, like the original's,
so they read directly; normalise in the learner (e.g. ``VecNormalize``).
"""

from __future__ import annotations

import copy
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from hospital_marl.core import kernel
from hospital_marl.core.actions import MAX_ICU_BEDS, MAX_VENTILATORS, ROLES
from hospital_marl.core.constants import BOARD_OBS_ROWS, MAX_GENERAL_BEDS
from hospital_marl.core.hospital import QUEUE_SLOTS, Hospital, SimulatorHandle
from hospital_marl.core.scenarios import Scenario

STATS_HIGH = 10_000.0


@dataclass(frozen=True)
class Block:
    """One named observation block."""

    key: str
    shape: tuple[int, ...]
    high: str | float  # a number, or "T" (episode length), "R" (longest treatment), "Q" (queue columns)
    # (a new symbolic bound must join composed_space's key, which holds the values of "T" and "R")
    doc: str


BLOCKS: tuple[Block, ...] = (
    # The original's six keys, shapes kept exactly.
    Block(
        "bed_occupancy",
        (BOARD_OBS_ROWS,),
        5,
        "general board: severity per bed, most severe first (0 = empty); a board of more than 20: "
        "its 15 most and 5 least severe",
    ),
    Block("icu_occupancy", (MAX_ICU_BEDS,), 5, "severity per ICU bed, fixed index (0 = empty)"),
    Block("ventilator_status", (MAX_VENTILATORS,), 1, "1 = in use, 0 = free"),
    Block("waiting_queue", (QUEUE_SLOTS, 3), "Q", "first 10 waiting: [severity, condition_id, waiting_time]"),
    Block("time_step", (1,), "T", "ticks elapsed"),
    Block("stats", (3,), STATS_HIGH, "[total_treated, total_deaths, total_waiting]"),
    # Extra keys a decision needs.
    Block("board_remaining", (BOARD_OBS_ROWS,), "R", "treatment ticks left per board position"),
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
        return _treatment_high(hospital)
    return float(block.high)


def _treatment_high(hospital: Hospital) -> float:
    cp = hospital.clinical
    return float(max(hi for _, hi in cp.treatment_general + cp.treatment_icu))


def block_high(block: Block, hospital: Hospital) -> np.ndarray:
    """A block's upper bounds, in its shape (every lower bound is 0)."""
    if block.high == "Q":  # per column: severity <= 5, condition id <= 5, waiting time <= T
        column_high = np.array([5.0, 5.0, max(5.0, float(hospital.scenario.episode_length))], np.float32)
        return np.broadcast_to(column_high, block.shape).copy()
    return np.full(block.shape, _high(block, hospital), np.float32)


def block_space(block: Block, hospital: Hospital) -> spaces.Box:
    return spaces.Box(0.0, block_high(block, hospital), block.shape, np.float32)


COMPOSED_FORMATS = ("dict", "dict_1d", "dict_action_mask", "dict_1d_action_mask")
"""The composed/team envs' ``observation_format``: ``"dict"`` (SPEC §5's shapes: ``waiting_queue``
(10, 3)) or ``"dict_1d"`` (the same keys and values, every block 1-D: ``waiting_queue`` (30,) row
by row, ``[severity, condition_id, waiting_time]`` per slot), the shapes SB3's checker expects;
``..._action_mask``: either, with the action mask inside as ``"action_mask"`` (bool, 39 flat or
41 team), where libraries that read masks from observations look (TorchRL's ``ActionMask``)."""
VECTOR_FORMATS = ("dict", "dict_1d")
"""The formats of the natively batched envs (their masks: ``action_masks()`` and ``infos``)."""
MASK_KEY = "action_mask"


def check_composed_format(observation_format: str, formats: tuple[str, ...] = COMPOSED_FORMATS) -> bool:
    """Whether ``observation_format`` asks for 1-D blocks (a clear error if it is none of ``formats``)."""
    if observation_format not in formats:
        raise ValueError(f"observation_format must be one of {formats}, got {observation_format!r}")
    return observation_format.startswith("dict_1d")


def format_has_mask(observation_format: str) -> bool:
    """Whether ``observation_format`` puts the action mask in the observation (``"action_mask"``)."""
    return observation_format.endswith("_action_mask")


_SPACES: OrderedDict[tuple[Any, ...], spaces.Space] = OrderedDict()
SPACE_CACHE_ENTRIES = 64
"""How many spaces are kept for copying; the least recently used goes first (a sweep over many
custom days' lengths must not grow it without bound)."""
_SPACES_LOCK = threading.Lock()  # a server builds envs in several threads at once


def _copy_of(key: tuple[Any, ...], build: Callable[[], spaces.Space]) -> Any:
    """A deep copy of the space cached under ``key`` (built by ``build`` the first time)."""
    with _SPACES_LOCK:
        space = _SPACES.get(key)
        if space is not None:
            _SPACES.move_to_end(key)
    if space is None:
        space = build()
        with _SPACES_LOCK:
            _SPACES[key] = space
            while len(_SPACES) > SPACE_CACHE_ENTRIES:
                _SPACES.popitem(last=False)
    return copy.deepcopy(space)


def composed_space(hospital: Hospital, one_d: bool = False) -> spaces.Dict:
    """The composed env's Dict observation space (``one_d``: every block flattened).

    A fresh copy for every env (a space carries its own seeded generator) of one built per set of
    bounds: building the boxes (gymnasium formats their bounds as text) took ~0.6 ms, most of an
    env's construction, paid by every served session; a copy takes a quarter of that."""

    def build() -> spaces.Dict:
        boxes = {b.key: block_space(b, hospital) for b in BLOCKS}
        if one_d:  # block_space's boxes are float32
            boxes = {k: spaces.Box(b.low.ravel(), b.high.ravel(), dtype=np.float32) for k, b in boxes.items()}
        members: dict[str, spaces.Space[Any]] = dict(boxes)  # a mapping: gymnasium sorts its keys
        return spaces.Dict(members)

    return _copy_of(
        ("composed", float(hospital.scenario.episode_length), _treatment_high(hospital), one_d), build
    )


def _flat_space(keys: tuple[str, ...], hospital: Hospital) -> spaces.Box:
    """The blocks ``keys`` flattened into one vector's Box: a copy, as :func:`composed_space`'s (a
    Box formats its bounds as text when built: ~1 ms for a state vector's)."""

    def build() -> spaces.Box:
        high = np.concatenate([block_high(BLOCK_BY_KEY[k], hospital).ravel() for k in keys])
        return spaces.Box(np.zeros_like(high), high, dtype=np.float32)

    return _copy_of(("flat", keys, float(hospital.scenario.episode_length), _treatment_high(hospital)), build)


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


OFFSETS = np.array([BLOCK_OFFSETS[key][0] for key in kernel.OBS_BLOCKS], np.int64)
"""Where the kernel writes each block (its OBS_BLOCKS order) in the global state vector."""
assert sorted(kernel.OBS_BLOCKS) == sorted(BLOCK_BY_KEY), "the kernel must write every block"
_COMPOSED_VIEWS: tuple[tuple[str, slice, tuple[int, ...] | None], ...] = tuple(
    (key, slice(a, b), shape if len(shape) > 1 else None) for key, (a, b, shape) in BLOCK_OFFSETS.items()
)
"""(key, where in the state vector, shape to reshape to or None): the composed dict's views."""


_FLAT_VIEWS = tuple((key, where) for key, where, _ in _COMPOSED_VIEWS)
_SHAPED_VIEWS = tuple((key, shape) for key, _, shape in _COMPOSED_VIEWS if shape is not None)


def composed_views(vector: np.ndarray, one_d: bool = False) -> dict[str, np.ndarray]:
    """The composed Dict observation as views of one state vector (or a batch of them);
    ``one_d``: every block as it sits in the vector (``"dict_1d"``)."""
    if one_d:
        return {key: vector[..., where] for key, where in _FLAT_VIEWS}
    if vector.ndim == 1:  # one env (every step of the composed env): the short path
        views = {key: vector[where] for key, where in _FLAT_VIEWS}
        for key, shape in _SHAPED_VIEWS:
            views[key] = views[key].reshape(shape)
        return views
    lead = vector.shape[:-1]
    return {
        key: vector[..., where] if shape is None else vector[..., where].reshape(*lead, *shape)
        for key, where, shape in _COMPOSED_VIEWS
    }


class ComposedBuffers:
    """Where the composed env's kernel step writes its observation, and the Dict of views of
    it that the step returns, without rebuilding twelve views every step (they cost more than
    the step's simulation).

    Observations behave as fresh: a buffer is written again only when nothing outside this
    object refers to it or to any of its views (CPython reference counts, checked on every
    reuse), e.g. the usual loop that drops the observation from two steps ago. An observation
    someone keeps (in a list, a frame stack, a replay buffer, a tensor made from it) is never
    overwritten: its buffer is retired and a new one made. Each call returns a new dict.
    """

    __slots__ = ("_next", "_one_d", "_slots")

    def __init__(self, slots: int = 2, one_d: bool = False) -> None:
        self._one_d = one_d
        self._slots = [self._new() for _ in range(slots)]  # two: the loop holds the last one
        self._next = 0

    @staticmethod
    def _references(slot: list[Any]) -> int:
        return sys.getrefcount(slot[0]) + sum(map(sys.getrefcount, slot[2]))

    def _new(self) -> list[Any]:
        vector = np.empty(STATE_SIZE, np.float32)
        views = composed_views(vector, self._one_d)
        slot: list[Any] = [vector, views, tuple(views.values())]
        del vector, views  # the baseline counts only the slot's own references
        slot.append(self._references(slot))
        return slot

    def __deepcopy__(self, memo: dict[int, Any]) -> ComposedBuffers:
        # copies of views would not be views of the copy
        return ComposedBuffers(len(self._slots), self._one_d)

    def __reduce__(self) -> tuple[type, tuple[int, bool]]:
        return ComposedBuffers, (len(self._slots), self._one_d)

    def take(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """A state vector to write the next observation into, and the Dict of views of it."""
        i = self._next
        self._next = (i + 1) % len(self._slots)
        slot = self._slots[i]
        if self._references(slot) != slot[3]:  # still referenced from outside: leave it to them
            self._slots[i] = slot = self._new()
        return slot[0], slot[1].copy()


class ObservationBuilder:
    """Observations of one simulator, written by the kernel into a fresh float32 vector per
    state (the global state layout); the composed dict and each role's vector are views /
    gathers of it. Built once per state (cached on ``hospital.version``)."""

    def __init__(self, hospital: Hospital | SimulatorHandle) -> None:
        self.hospital = hospital
        self._version: int | None = None
        self._vector: np.ndarray | None = None

    def adopt(self, vector: np.ndarray, version: int | None = None) -> None:
        """The vector of the current state (``version``: the hospital's, if the caller has
        it at hand), written by a fused kernel step."""
        self._vector, self._version = vector, self.hospital.version if version is None else version

    def vector(self) -> np.ndarray:
        """The global state (every block, flattened, in block order). Do not mutate."""
        if self._vector is None or self._version != self.hospital.version:
            vector = np.empty(STATE_SIZE, np.float32)
            self.hospital.observe(OFFSETS, vector)  # the mask too, cached on the hospital
            self.adopt(vector)
        return self._vector  # type: ignore[return-value]

    def composed(self, one_d: bool = False) -> dict[str, np.ndarray]:
        """The composed Dict observation: views of a fresh vector per state."""
        return composed_views(self.vector(), one_d)

    def role(self, role: str) -> np.ndarray:
        """A role's flat observation (its blocks, in ROLE_BLOCKS order)."""
        return self.vector()[ROLE_INDEX[role]]

    def roles(self, roles: list[str]) -> dict[str, np.ndarray]:
        """Several roles' observations of one state (the parallel env)."""
        vector = self.vector()
        return {role: vector[ROLE_INDEX[role]] for role in roles}

    def state(self) -> np.ndarray:
        return self.vector().copy()


# ------------------------------------------------------------------ layouts
OBSERVATION_LAYOUTS = ("fixed", "masked")
"""``observation_layout`` of every view: ``"fixed"`` (today's blocks: every size shown in the
maximum layout, empty and absent slots both 0) or ``"masked"`` (the same blocks plus
:data:`PRESENCE_BLOCKS`: which bed, ICU bed and ventilator slots exist in this episode's
hospital). ``None`` (the default) picks ``"masked"`` for a :class:`ScenarioDistribution`,
whose hospitals differ in size from episode to episode, and ``"fixed"`` for a named scenario
(its observation, golden trajectories and shipped checkpoints unchanged)."""

PRESENCE_BLOCKS: tuple[Block, ...] = (
    Block("general_present", (BOARD_OBS_ROWS,), 1, "1 = the department has this general bed"),
    Block("icu_present", (MAX_ICU_BEDS,), 1, "1 = the department has this ICU bed"),
    Block("ventilator_present", (MAX_VENTILATORS,), 1, "1 = this ventilator is in service now"),
    Block(
        "general_beds",
        (1,),
        MAX_GENERAL_BEDS,
        "the department's general beds (a board longer than 20 shows its most and least severe)",
    ),
)
PRESENCE_SIZE = sum(int(np.prod(b.shape)) for b in PRESENCE_BLOCKS)
VENT_PRESENCE = slice(BOARD_OBS_ROWS + MAX_ICU_BEDS, BOARD_OBS_ROWS + MAX_ICU_BEDS + MAX_VENTILATORS)
"""Where ``ventilator_present`` sits in the presence vector."""
_PRESENCE_HIGH = np.concatenate([np.full(b.shape, float(b.high), np.float32) for b in PRESENCE_BLOCKS])


def check_layout(observation_layout: str | None, hospital: Hospital) -> str:
    """The layout a view uses (``None``: by what the env was built with, see :data:`OBSERVATION_LAYOUTS`)."""
    if observation_layout is None:
        return "masked" if hospital.distribution is not None else "fixed"
    if observation_layout not in OBSERVATION_LAYOUTS:
        raise ValueError(
            f"observation_layout must be one of {OBSERVATION_LAYOUTS} or None, got {observation_layout!r}"
        )
    return observation_layout


def presence_vector(general_beds: int, icu_beds: int, ventilators: int) -> np.ndarray:
    """The presence blocks of one hospital, concatenated (float32, :data:`PRESENCE_SIZE`)."""
    out = np.zeros(PRESENCE_SIZE, np.float32)
    out[: min(general_beds, BOARD_OBS_ROWS)] = 1.0
    out[-1] = general_beds
    out[BOARD_OBS_ROWS : BOARD_OBS_ROWS + icu_beds] = 1.0
    out[VENT_PRESENCE] = np.arange(MAX_VENTILATORS) < ventilators
    return out


def outage_row(scenario: Scenario) -> tuple[int, int, int, int]:
    """``(ventilators, out, start, end)``: the arguments of the kernel's
    :func:`~hospital_marl.core.kernel.rules.in_service` for this scenario (no outage: an empty
    window, as in its parameter table)."""
    o = scenario.outage
    return (scenario.ventilators, o.ventilators, o.start, o.end) if o else (scenario.ventilators, 0, 1, 0)


def ventilators_at(scenario: Scenario, tick: int) -> int:
    """The scenario's ventilators in service at a decision at ``tick`` (an outage takes some out
    for a while)."""
    return int(kernel.in_service(*outage_row(scenario), tick))


def presence_of(hospital: Hospital) -> np.ndarray:
    """:func:`presence_vector` of the hospital's current scenario, at its current tick."""
    s = hospital.scenario
    return presence_vector(s.general_beds, s.icu_beds, ventilators_at(s, hospital.tick_count))


def presence_views(vector: np.ndarray) -> dict[str, np.ndarray]:
    """The presence blocks as Dict entries (views of one vector, or of a batch ``(B, PRESENCE_SIZE)``)."""
    out, start = {}, 0
    for b in PRESENCE_BLOCKS:
        size = int(np.prod(b.shape))
        out[b.key] = vector[..., start : start + size]
        start += size
    return out


def presence_space() -> dict[str, spaces.Box]:
    """The presence blocks' boxes (float32: 0/1 slots, then the general-bed count)."""
    return {b.key: spaces.Box(0.0, float(b.high), b.shape, np.float32) for b in PRESENCE_BLOCKS}


def with_presence(box: spaces.Box) -> spaces.Box:
    """A flat vector's box with the presence blocks appended (role vectors, the global state)."""
    low = np.concatenate([box.low, np.zeros(PRESENCE_SIZE, np.float32)])
    high = np.concatenate([box.high, _PRESENCE_HIGH])
    return spaces.Box(low, high, dtype=np.float32)
