"""The simulator's state and parameters as arrays: the one place that says what
every column means (Jumanji's ``types.py`` habit).

The state is a structure of arrays with one row per environment, so the same
compiled rules (:mod:`hospital_marl.core.kernel`) run one environment (the
scalar :class:`~hospital_marl.core.hospital.Hospital`, B = 1) or thousands (the
vector envs). Few arrays, packed by type, keep a kernel call's dispatch cheap; the six
that change (:data:`MUTABLE_FIELDS`) are views of one contiguous buffer, so a snapshot
or a restore is one memory copy. ``B`` = environments, ``P`` = patient capacity (at
least the day's patients: every patient occupies one id for the whole episode),
``T`` = episode length, ``K`` = bounce-back schedule slots (grown on demand).

Random numbers are not stored: every draw is a function of the row's key (``S_KEY``)
and what the draw is for (:mod:`hospital_marl.core.rng`). Only what a day *is* --
each patient's arrival tick, condition, severity on arrival and treatment quantiles --
is written into the row when the day starts (drawn in the kernel from that key).

Shapes and meaning:

``pat``  int32 ``(B, P, N_PAT)`` -- per patient, a record of columns named by the ``PAT_*`` constants
    (one patient's fields share a cache line: the rules visit patients in bed/queue order):
    ``PAT_CONDITION`` condition id 1..5 (the day's), ``PAT_ARRIVAL`` arrival tick (the day's),
    ``PAT_SEVERITY`` 1..5 now, ``PAT_LOCATION`` one of NOT_ARRIVED..DEAD,
    ``PAT_WAIT`` ticks spent waiting, ``PAT_NEGLECT`` ticks without adequate care,
    ``PAT_REMAINING`` treatment ticks left, ``PAT_ADMITTED_AT`` tick of the last placement,
    ``PAT_READY_FOR`` ticks ready for step-down in ICU, ``PAT_VENT_OF`` ventilator index or EMPTY,
    ``PAT_AWAY_SINCE`` tick of the last early discharge, ``PAT_WAS_CRITICAL`` 0/1 (ever severity >= 4),
    ``PAT_ARRIVAL_SEVERITY`` severity on arrival (the day's).
``quantile``  float64 ``(B, 2, P)`` -- treatment-time quantiles drawn with the day: [general, ICU].
``latent``  float64 ``(B, T, P)`` or ``(B, 0, P)`` -- only for a day from a user's day generator,
    which brings its own per-tick, per-patient dynamics uniforms (tick-major); empty otherwise
    (the kernel then draws them from the key).
``beds``  int32 ``(B, N_BEDS, MAX_BEDS)`` -- ``BEDS_GENERAL`` / ``BEDS_ICU`` / ``BEDS_VENT``: the
    patient id in each bed / on each ventilator (EMPTY = -1; only the scenario's first
    ``general_beds`` / ``icu_beds`` / ``ventilators`` columns are used); ``BEDS_VENT_IDLE``:
    consecutive ticks each ventilator's patient has not needed it (weaning).
``queue``  int32 ``(B, P)`` -- waiting patients' ids, first come first served; ``S_QUEUE_LEN`` long.
    A patient is in the queue at most once, so ``P`` slots can never overflow.
``scalars``  int64 ``(B, N_SCALARS)`` -- ``S_*``: patients of the day, next arrival id, queue
    length, tick, terminated, truncated, early discharges so far (the bounce-back draw index),
    then the integer counters in :data:`COUNTER_FIELDS` order (from ``S_COUNTERS``), then
    ``S_KEY``: the row's random key (64 bits as int64).
``floats``  float64 ``(B, N_FLOATS)`` -- ``F_*``: occupancy sum, cumulative reward, this tick's
    team reward and its per-role action-caused parts, the last tick's team and role rewards.
``bounce``  int32 ``(B, 2, K)`` -- the k-th early discharge's return tick (``BOUNCE_TICK``,
    -1 = none pending) and patient (``BOUNCE_PID``): returns happen in scheduling order.
``scratch``  int32 ``(B, MAX_BEDS)`` -- working space of the rules (the sorted general board),
    so that no rule allocates: the kernel runs without reference counting, which would
    otherwise cost more than the rules themselves.

Parameters (:class:`Params`) are arrays too, built per scenario / ClinicalParams /
RewardTable by :func:`make_params`: never module globals, so user tables work. The vector
envs' batch loops read them from a table (:func:`stack_params`: one row per scenario in use,
e.g. one per env under a scenario distribution).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from hospital_marl.core.actions import (  # noqa: F401 (the table's limits, for the kernel)
    ACTION_TABLE,
    BOARD_DISCHARGE_SLOTS,
    BOARD_TRANSFER_SLOTS,
    N_ROLES,
    QUEUE_SLOTS,
    ROLE_FLAT,
    ROLES,
)
from hospital_marl.core.clinical import ClinicalParams
from hospital_marl.core.constants import MAX_GENERAL_BEDS
from hospital_marl.core.metrics import EpisodeCounters
from hospital_marl.core.rewards import RewardTable
from hospital_marl.core.scenarios import Scenario

# Where a patient is. Every arrived patient is in exactly one place (conservation).
NOT_ARRIVED, WAITING, GENERAL, ICU, DISCHARGED, AWAY, DEAD = range(7)
EMPTY = -1

MAX_BEDS = MAX_GENERAL_BEDS  # the widest resource row: general beds
BOUNCE_BLOCK = 64  # bounce-back schedule slots added at a time

(
    PAT_CONDITION,
    PAT_ARRIVAL,
    PAT_SEVERITY,
    PAT_LOCATION,
    PAT_WAIT,
    PAT_NEGLECT,
    PAT_REMAINING,
    PAT_ADMITTED_AT,
    PAT_READY_FOR,
    PAT_VENT_OF,
    PAT_AWAY_SINCE,
    PAT_WAS_CRITICAL,
    PAT_ARRIVAL_SEVERITY,
) = range(13)
N_PAT = 13

BEDS_GENERAL, BEDS_ICU, BEDS_VENT, BEDS_VENT_IDLE = range(4)
N_BEDS = 4
BOUNCE_TICK, BOUNCE_PID = range(2)

COUNTER_FIELDS: tuple[str, ...] = tuple(
    name for name, value in EpisodeCounters().as_dict().items() if isinstance(value, int)
)
"""The integer fields of :class:`EpisodeCounters` (its order), one ``scalars`` column each."""

S_N_PATIENTS, S_NEXT_ARRIVAL, S_QUEUE_LEN, S_TICK, S_TERMINATED, S_TRUNCATED, S_BOUNCE_CURSOR = range(7)
S_COUNTERS = 7
(
    C_ARRIVALS,
    C_DEATHS,
    C_CRITICAL_TOTAL,
    C_CRITICAL_DEATHS,
    C_DISCHARGES,
    C_CRITICAL_SAVED,
    C_EARLY_DISCHARGES,
    C_BOUNCE_BACKS,
    C_DETERIORATIONS,
    C_INVALID_ACTIONS,
    C_CONFLICTS,
    C_ACTIONS,
    C_ADMISSIONS,
    C_WAIT_TICKS,
    C_TICKS,
) = range(S_COUNTERS, S_COUNTERS + len(COUNTER_FIELDS))
S_KEY = S_COUNTERS + len(COUNTER_FIELDS)
N_SCALARS = S_KEY + 1
assert all(globals()[f"C_{name.upper()}"] == S_COUNTERS + i for i, name in enumerate(COUNTER_FIELDS)), (
    "the C_* columns must follow EpisodeCounters' integer fields"
)

F_OCCUPANCY_SUM, F_CUMULATIVE_REWARD, F_TICK_REWARD = range(3)
F_ROLE_REWARD = 3  # N_ROLES columns, ROLES order
F_LAST_REWARD = F_ROLE_REWARD + N_ROLES
F_LAST_ROLE_REWARD = F_LAST_REWARD + 1  # N_ROLES columns
N_FLOATS = F_LAST_ROLE_REWARD + N_ROLES


class State(NamedTuple):
    """The whole mutable simulation state of B environments (see the module docstring)."""

    pat: np.ndarray
    quantile: np.ndarray
    latent: np.ndarray
    beds: np.ndarray
    queue: np.ndarray
    scalars: np.ndarray
    floats: np.ndarray
    bounce: np.ndarray
    scratch: np.ndarray


MUTABLE_FIELDS = ("pat", "quantile", "beds", "queue", "scalars", "floats", "bounce")
"""Everything an action or a tick changes. They live in one contiguous buffer (see
:func:`packed_buffer`), so a snapshot or a restore is one memory copy, not six."""


@lru_cache(maxsize=64)
def _mutable_layout(n: int, p: int, k: int) -> tuple[tuple[str, np.dtype, tuple[int, ...], int], ...]:
    """(field, dtype, shape, byte offset) of each mutable array in the packed buffer; every
    offset is a multiple of 8, so each view is aligned (numba types it as before)."""
    shapes: dict[str, tuple[np.dtype, tuple[int, ...]]] = {
        "pat": (np.dtype(np.int32), (n, p, N_PAT)),
        "quantile": (np.dtype(np.float64), (n, 2, p)),
        "beds": (np.dtype(np.int32), (n, N_BEDS, MAX_BEDS)),
        "queue": (np.dtype(np.int32), (n, p)),
        "scalars": (np.dtype(np.int64), (n, N_SCALARS)),
        "floats": (np.dtype(np.float64), (n, N_FLOATS)),
        "bounce": (np.dtype(np.int32), (n, 2, k)),
    }
    layout: list[tuple[str, np.dtype, tuple[int, ...], int]] = []
    offset = 0
    for name in MUTABLE_FIELDS:
        dtype, shape = shapes[name]
        layout.append((name, dtype, shape, offset))
        offset += -(-dtype.itemsize * math.prod(shape) // 8) * 8
    return tuple(layout)


def _views(buffer: np.ndarray, n: int, p: int, k: int) -> dict[str, np.ndarray]:
    new = np.ndarray  # positional arguments: half the cost of keywords (imagine() makes seven per call)
    return {name: new(shape, dtype, buffer, at) for name, dtype, shape, at in _mutable_layout(n, p, k)}


def _buffer_size(n: int, p: int, k: int) -> int:
    _, dtype, shape, offset = _mutable_layout(n, p, k)[-1]
    return offset + dtype.itemsize * math.prod(shape)


def empty_state(n_envs: int, patients: int, latent_ticks: int = 0, bounce_slots: int = BOUNCE_BLOCK) -> State:
    """An all-empty state (every bed free, no patient arrived): reset rows before use.
    ``latent_ticks``: room for a user day's own dynamics uniforms (0: drawn from the key)."""
    p = max(1, patients)
    buffer = np.zeros(_buffer_size(n_envs, p, bounce_slots), np.uint8)
    mutable = _views(buffer, n_envs, p, bounce_slots)
    mutable["beds"].fill(EMPTY)
    mutable["bounce"].fill(-1)
    return State(
        latent=np.zeros((n_envs, latent_ticks, p), np.float64),
        scratch=np.zeros((n_envs, MAX_BEDS), np.int32),
        **mutable,
    )


SHARED_FIELDS = frozenset({"latent", "scratch"})
"""Arrays a copy may share: a user day's dynamics uniforms (read-only during an episode)
and the rules' scratch space."""
assert SHARED_FIELDS | set(MUTABLE_FIELDS) == set(State._fields)


def packed_buffer(state: State) -> np.ndarray | None:
    """The one buffer holding every mutable field of ``state`` (None if they are separate
    arrays, e.g. a state a user assembled by hand)."""
    buffer = state.pat.base
    if buffer is None or buffer.ndim != 1 or buffer.dtype != np.uint8:
        return None
    for name in MUTABLE_FIELDS:
        if getattr(state, name).base is not buffer:
            return None
    return buffer


def with_buffer(state: State, buffer: np.ndarray, **shared: np.ndarray) -> State:
    """``state``'s shared arrays (or those given) with its mutable fields read from ``buffer``
    (a copy of its :func:`packed_buffer`): the state that buffer holds."""
    n, p, _ = state.pat.shape
    fields = _views(buffer, n, p, state.bounce.shape[2])
    fields.update(shared)
    # State(...) rather than _replace: a third of the cost
    return State(*[fields.get(name, old) for name, old in zip(State._fields, state)])


def copy_state(state: State, **shared: np.ndarray) -> State:
    """An independent copy of everything that changes (the rest is shared: :data:`SHARED_FIELDS`,
    unless replaced by ``shared``, e.g. a copy's own scratch space)."""
    buffer = packed_buffer(state)
    if buffer is not None:
        return with_buffer(state, buffer.copy(), **shared)
    return _repacked(state, state.pat.shape[1], state.bounce.shape[2])._replace(**shared)


def _repacked(state: State, patients: int, pairs: int) -> State:
    """``state`` with its mutable fields copied into a fresh packed buffer sized for ``patients``
    and ``pairs`` (at least the current sizes); the shared arrays are kept."""
    n = state.pat.shape[0]
    buffer = np.zeros(_buffer_size(n, patients, pairs), np.uint8)
    mutable = _views(buffer, n, patients, pairs)
    mutable["beds"][:] = state.beds
    mutable["scalars"][:] = state.scalars
    mutable["floats"][:] = state.floats
    old_p, old_k = state.pat.shape[1], state.bounce.shape[2]
    mutable["pat"][:, :old_p] = state.pat
    mutable["quantile"][:, :, :old_p] = state.quantile
    mutable["queue"][:, :old_p] = state.queue
    mutable["bounce"].fill(-1)
    mutable["bounce"][:, :, :old_k] = state.bounce
    return state._replace(**mutable)


def grow_patients(state: State, patients: int) -> State:
    """The same state with room for ``patients`` per row (never silently too small)."""
    old = state.pat.shape[1]
    if patients <= old:
        return state
    n, t = state.pat.shape[0], state.latent.shape[1]
    latent = np.zeros((n, t, patients), np.float64)
    latent[:, :, :old] = state.latent
    grown = _repacked(state, patients, state.bounce.shape[2])
    return grown._replace(latent=latent)


def grow_bounce(state: State, slots: int) -> State:
    """The same state with room for ``slots`` scheduled bounce-backs per row (new slots empty)."""
    if slots <= state.bounce.shape[2]:
        return state
    return _repacked(state, state.pat.shape[1], slots)


def with_bounce_room(state: State, actions: int) -> State:
    """``state``, or a grown copy, in which every row has a free bounce-back schedule slot for each
    of ``actions`` more actions (one early discharge each): compiled code can then act that often
    without returning to Python. Grows by at least :data:`BOUNCE_BLOCK` slots at a time."""
    slots = state.bounce.shape[2]
    need = int(state.scalars[:, S_BOUNCE_CURSOR].max()) + actions
    return grow_bounce(state, max(need, slots + BOUNCE_BLOCK)) if need > slots else state


# ------------------------------------------------------------------ parameters
(
    I_GENERAL_BEDS,
    I_ICU_BEDS,
    I_VENTILATORS,
    I_MAX_DEATHS,
    I_MAX_TICKS,
    I_WEAN_TICKS,
    I_STEP_DOWN_BLOCK,
    I_BOUNCE_DELAY_LOW,
    I_BOUNCE_DELAY_HIGH,
    I_EPISODE_LENGTH,
    I_BURST_START,
    I_BURST_END,
    I_BURST_CONDITION,
    I_OUTAGE_START,
    I_OUTAGE_END,
    I_OUTAGE_VENTS,
) = range(16)
N_INT_PARAMS = 16

(
    P_NEGLECT_SCALE,
    P_DETERIORATE_CAP,
    P_BED_FACTOR,
    P_DEATH_WAITING,
    P_DEATH_IN_BED,
    P_DEATH_RESIDUAL,
    P_BOUNCE_PER_SEVERITY,
    R_DISCHARGE,
    R_CRITICAL_DISCHARGE,
    R_DEATH,
    R_CRITICAL_UNATTENDED,
    R_WAITING,
    R_INVALID,
    R_EARLY_PER_SEVERITY,
    R_ICU_BUSY_BONUS,
    R_ICU_BUSY_THRESHOLD,
    R_SURVIVAL_BONUS,
    P_BURST_RATE,
) = range(18)
N_FLOAT_PARAMS = 18
MIX_SEVERITY, MIX_CONDITION, MIX_BURST_SEVERITY = range(3)


class Params(NamedTuple):
    """Scenario, clinical and reward parameters as arrays (one set per batch).

    ``ints`` ``(N_INT_PARAMS,)`` and ``reals`` ``(N_FLOAT_PARAMS,)`` by the ``I_*`` / ``P_*`` / ``R_*``
    constants; per severity (index = severity, 0 unused): ``deteriorate_base`` ``(6,)``,
    ``condition_factor`` ``(6,)`` (by condition id), ``improve`` ``(2, 6)`` [general, ICU],
    ``treatment`` ``(2, 6, 2)`` [general, ICU] x severity x (low, high) ticks. The action table
    (SPEC §3, from :data:`~hospital_marl.core.actions.ACTION_TABLE`): per flat action its
    ``action_kind``, ``action_index`` and ``action_role`` ``(39,)`` (role -1 = the no-op);
    ``role_flat`` ``(3, 21)`` role action -> flat action; ``role_actions`` ``(3,)`` sizes.
    The arrival model (SPEC §2, §6): ``rates`` ``(T,)`` λ(t) without the burst; ``mix_cdf``
    ``(3, 5)`` cumulative [severity, condition, burst severity] mixes; the burst's ticks,
    condition (``I_BURST_*``, no burst: start > end) and rate (``P_BURST_RATE``). ``service``
    ``(T,)``: the probability that adequate care advances a patient's treatment at tick t
    (staffing; 1 = every tick, the default).
    """

    ints: np.ndarray
    reals: np.ndarray
    deteriorate_base: np.ndarray
    condition_factor: np.ndarray
    improve: np.ndarray
    treatment: np.ndarray
    action_kind: np.ndarray
    action_index: np.ndarray
    action_role: np.ndarray
    role_flat: np.ndarray
    role_actions: np.ndarray
    rates: np.ndarray
    mix_cdf: np.ndarray
    service: np.ndarray


def make_params(scenario: Scenario, clinical: ClinicalParams, rewards: RewardTable, max_ticks: int) -> Params:
    """The kernel's view of one scenario, ClinicalParams and RewardTable."""
    cp, rw = clinical, rewards
    ints = np.zeros(N_INT_PARAMS, np.int64)
    ints[I_GENERAL_BEDS] = scenario.general_beds
    ints[I_ICU_BEDS] = scenario.icu_beds
    ints[I_VENTILATORS] = scenario.ventilators
    ints[I_MAX_DEATHS] = scenario.max_deaths
    ints[I_MAX_TICKS] = max_ticks
    ints[I_WEAN_TICKS] = cp.wean_ticks
    ints[I_STEP_DOWN_BLOCK] = cp.step_down_block_ticks
    ints[I_BOUNCE_DELAY_LOW], ints[I_BOUNCE_DELAY_HIGH] = cp.bounce_back_delay
    ints[I_EPISODE_LENGTH] = scenario.episode_length
    ints[I_BURST_START], ints[I_BURST_END] = 1, 0  # no burst
    outage = scenario.outage
    if outage is not None:
        ints[I_OUTAGE_START], ints[I_OUTAGE_END] = outage.start, outage.end
        ints[I_OUTAGE_VENTS] = outage.ventilators
    else:
        ints[I_OUTAGE_START], ints[I_OUTAGE_END] = 1, 0  # no outage
    reals = np.zeros(N_FLOAT_PARAMS, np.float64)
    for index, value in (
        (P_NEGLECT_SCALE, cp.neglect_scale),
        (P_DETERIORATE_CAP, cp.deteriorate_cap),
        (P_BED_FACTOR, cp.bed_factor),
        (P_DEATH_WAITING, cp.death_waiting),
        (P_DEATH_IN_BED, cp.death_in_bed),
        (P_DEATH_RESIDUAL, cp.death_residual),
        (P_BOUNCE_PER_SEVERITY, cp.bounce_back_per_severity),
        (R_DISCHARGE, rw.discharge),
        (R_CRITICAL_DISCHARGE, rw.critical_discharge),
        (R_DEATH, rw.death),
        (R_CRITICAL_UNATTENDED, rw.critical_unattended_per_tick),
        (R_WAITING, rw.waiting_per_tick),
        (R_INVALID, rw.invalid_action),
        (R_EARLY_PER_SEVERITY, rw.early_discharge_per_severity),
        (R_ICU_BUSY_BONUS, rw.icu_busy_bonus),
        (R_ICU_BUSY_THRESHOLD, rw.icu_busy_threshold),
        (R_SURVIVAL_BONUS, rw.survival_bonus),
    ):
        reals[index] = value
    burst = scenario.burst
    mixes = [scenario.severity_mix, scenario.condition_mix, scenario.severity_mix]
    if burst is not None:
        ints[I_BURST_START], ints[I_BURST_END] = burst.start, min(burst.end, scenario.episode_length - 1)
        ints[I_BURST_CONDITION] = burst.condition
        reals[P_BURST_RATE] = burst.rate
        mixes[MIX_BURST_SEVERITY] = burst.severity_mix
    mix_cdf = np.cumsum(np.array(mixes, np.float64), axis=1)
    mix_cdf /= mix_cdf[:, -1:]
    base = np.zeros(6, np.float64)
    base[: len(cp.deteriorate_base)] = cp.deteriorate_base
    return Params(
        ints=ints,
        reals=reals,
        deteriorate_base=base,
        condition_factor=np.array(cp.condition_factor, np.float64),
        improve=np.array([cp.improve_general, cp.improve_icu], np.float64),
        treatment=np.array([cp.treatment_general, cp.treatment_icu], np.int64),
        **_ACTION_ARRAYS,
        rates=np.asarray(scenario.arrival_rates(), np.float64),
        mix_cdf=mix_cdf,
        service=np.asarray(scenario.service_speeds(), np.float64),
    )


# ------------------------------------------------------------------ parameter tables (one row per scenario)
def stack_params(params: list[Params], length: int) -> Params:
    """A parameter table: ``params`` stacked, every field with a leading row axis, so a batch
    loop steps envs of different scenarios in one call (env ``e`` reads row ``which[e]``;
    :func:`params_row`). ``rates`` and ``service`` are padded with zeros to ``length`` ticks
    (at least every row's episode length; the kernel reads them only below it). The action
    table's fields stay read-only: a row of the table then has exactly the type of a
    :func:`make_params` result, so the compiled rules serve both without a second signature."""
    fields = []
    for name, *column in zip(Params._fields, *params):
        if name in _TICK_FIELDS:
            table = np.zeros((len(column), length), np.float64)
            for k, values in enumerate(column):
                table[k, : len(values)] = values
        else:
            table = np.stack(column)
        table.flags.writeable = name not in _ACTION_ARRAYS
        fields.append(table)
    return Params(*fields)


def set_params_row(table: Params, k: int, params: Params) -> None:
    """Write ``params`` (one scenario's) into row ``k`` of ``table`` (:func:`stack_params`; its
    ``rates`` / ``service`` must be long enough). The action table is the package's constant:
    it is the same in every row and is not rewritten."""
    for name, rows, values in zip(Params._fields, table, params):
        if name in _ACTION_ARRAYS:
            if values is not _ACTION_ARRAYS[name]:
                raise ValueError(f"Params.{name} is not the package's action table")
        elif name in _TICK_FIELDS:
            if len(values) > rows.shape[1]:
                raise ValueError(f"a day of {len(values)} ticks does not fit a table of {rows.shape[1]}")
            rows[k, : len(values)] = values
            rows[k, len(values) :] = 0.0
        else:
            rows[k] = values


def params_row(table: Params, k: int) -> Params:
    """Row ``k`` of a parameter table: a :class:`Params` of views (no copy), as the batch loops
    read it (``rates`` / ``service`` padded: see :func:`stack_params`)."""
    return Params._make(rows[k] for rows in table)


_TICK_FIELDS = frozenset({"rates", "service"})
"""The :class:`Params` fields with one value per tick (episode lengths differ between scenarios)."""


def _action_arrays() -> dict[str, np.ndarray]:
    """The action table as the kernel reads it (built once; read-only)."""
    role_actions = np.array([len(ROLE_FLAT[role]) for role in ROLES], np.int64)
    role_flat = np.zeros((len(ROLES), int(role_actions.max())), np.int64)
    for r, role in enumerate(ROLES):
        role_flat[r, : len(ROLE_FLAT[role])] = ROLE_FLAT[role]
    arrays = {
        "action_kind": np.array([int(spec.kind) for spec in ACTION_TABLE], np.int64),
        "action_index": np.array([spec.index for spec in ACTION_TABLE], np.int64),
        "action_role": np.array(
            [-1 if spec.role is None else ROLES.index(spec.role) for spec in ACTION_TABLE]
        ),
        "role_flat": role_flat,
        "role_actions": role_actions,
    }
    arrays["action_role"] = arrays["action_role"].astype(np.int64)
    for array in arrays.values():
        array.flags.writeable = False
    return arrays


_ACTION_ARRAYS = _action_arrays()


def counters_of(scalars: np.ndarray, floats: np.ndarray) -> EpisodeCounters:
    """One row's counters as the :class:`EpisodeCounters` record every view reports."""
    values = scalars[S_COUNTERS : S_COUNTERS + len(COUNTER_FIELDS)].tolist()
    return EpisodeCounters(
        **dict(zip(COUNTER_FIELDS, values)),
        occupancy_sum=float(floats[F_OCCUPANCY_SUM]),
        cumulative_reward=float(floats[F_CUMULATIVE_REWARD]),
    )


def write_day(state: State, e: int, day: Any) -> None:
    """Write a user day (a :class:`~hospital_marl.core.generator.DayArrays` from a user's day
    generator) into row ``e``: every patient's identity, severity on arrival, quantiles and
    its own dynamics uniforms (the state needs ``latent`` room: ``empty_state(latent_ticks=T)``)."""
    n = len(day.arrival)
    if n > state.pat.shape[1]:
        raise ValueError(
            f"a day of {n} patients does not fit a state of {state.pat.shape[1]}: grow_patients first"
        )
    state.pat[e, :n, PAT_CONDITION] = day.condition
    state.pat[e, :n, PAT_ARRIVAL] = day.arrival
    state.pat[e, :n, PAT_SEVERITY] = day.severity
    state.pat[e, :n, PAT_ARRIVAL_SEVERITY] = day.severity
    state.quantile[e, :, :n] = day.quantile
    state.latent[e, :, :n] = day.latent.T


def patient_capacity(scenario: Scenario) -> int:
    """Patient slots per env: the expected arrivals plus eight standard deviations (Poisson),
    plus room for small days. A day that still does not fit grows the state (never overflows:
    the kernel reports how many patients a day has before writing past the capacity)."""
    mean = scenario.expected_arrivals
    return int(mean + 8 * math.sqrt(mean) + 16)
