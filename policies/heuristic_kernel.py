"""The heuristic's rules and the planner's rollouts, compiled (numba), written once.

The rules read an observation *vector* (float32) through ``off``: where each observation
block starts in it, in :data:`hospital_marl.core.kernel.OBS_BLOCKS` order (-1 = the
vector does not hold that block). One compiled rule therefore serves the global state
the kernel writes (:data:`hospital_marl.envs.observations.OFFSETS`), a composed
observation dict concatenated into that layout, and each role's own AEC vector
(:data:`ROLE_OFFSETS`). :mod:`policies.heuristic` is the Python face of these rules;
the planner's rollouts (:func:`evaluate_candidates`) call them inside the kernel, so a
whole imagined future (every live candidate x ``horizon`` ticks) is one compiled call.

Each role's rule proposes one flat action with a priority (0 = nothing to do); the team
plays all three every tick. The flat track allows one action a tick, so :func:`flat_action`
serialises the same priorities, re-ranked where one action a tick changes what pays: life
first (ventilate, ICU for the critical, a transfer to ICU), then flow (the most severe
non-critical patient to a general bed), then freeing beds under pressure, and a critical
patient parked in a general bed only when no non-critical patient could use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from hospital_marl.core import jitcache, kernel
from hospital_marl.core.actions import BOARD_DISCHARGE_SLOTS, BOARD_TRANSFER_SLOTS, FLAT_OF, NOOP, ROLES, Kind
from hospital_marl.core.kernel import (
    CRITICAL_SEVERITY,
    O_BED_OCCUPANCY,
    O_CAPACITY,
    O_ICU_NEEDS_VENT,
    O_ICU_OCCUPANCY,
    O_ICU_ON_VENT,
    O_ICU_READY,
    O_WAITING_QUEUE,
    OBS_BLOCKS,
    act_flat,
    carry_out,
    expected_deaths,
    needs_ventilator,
    survival_rate,
    tick,
    write_mask,
    write_observation,
)
from hospital_marl.core.types import (
    C_DEATHS,
    EMPTY,
    F_LAST_REWARD,
    GENERAL,
    ICU,
    PAT_CONDITION,
    PAT_LOCATION,
    PAT_SEVERITY,
    PAT_VENT_OF,
    PAT_WAS_CRITICAL,
    QUEUE_SLOTS,
    R_CRITICAL_DISCHARGE,
    R_DEATH,
    R_DISCHARGE,
    R_SURVIVAL_BONUS,
    S_N_PATIENTS,
    S_TERMINATED,
    S_TRUNCATED,
    WAITING,
)
from hospital_marl.envs.observations import BLOCK_BY_KEY, OFFSETS, ROLE_BLOCKS

VENTILATE = 100.0
STEP_DOWN_UNDER_PRESSURE = 98.0
ADMIT_CRITICAL_ICU = 90.0
TRANSFER_CRITICAL = 85.0
ADMIT_CRITICAL_GENERAL = 70.0
ADMIT = 60.0
STEP_DOWN = 50.0
EARLY_DISCHARGE_UNDER_PRESSURE = 40.0
"""The team rules' priorities (each role acts every tick; the priorities only order a role's own
proposals)."""

FLAT_STEP_DOWN_UNDER_PRESSURE = 55.0
FLAT_ADMIT_CRITICAL_GENERAL = 30.0
FLAT_STEP_DOWN = 20.0
"""The flat composition's own ranks where one action a tick changes what pays (the rest are the
team's): an admission to adequate care beats freeing an ICU bed for later; a critical patient
goes to a general bed (inadequate care that blocks a bed) only when no non-critical patient
could take it; a step-down nobody waits for is housekeeping."""

SERIOUS_SEVERITY = CRITICAL_SEVERITY - 1
"""A waiting patient this severe or worse justifies early-discharging the mildest general-bed
patient when the ward is full (the heuristic's and the planner's pressure rule, not a SPEC rule)."""

BOARD_SLOTS = BLOCK_BY_KEY["bed_occupancy"].shape[0]  # 20
ICU_SLOTS = BLOCK_BY_KEY["icu_occupancy"].shape[0]  # 5
VENT_SLOTS = BLOCK_BY_KEY["ventilator_status"].shape[0]  # 3
BOARD_ACTIONS = BOARD_TRANSFER_SLOTS  # transfers address the board's top five, early discharges its bottom
assert BOARD_DISCHARGE_SLOTS == BOARD_ACTIONS  # five


def _flat_table() -> np.ndarray:
    """``FLAT[kind, index]``: the flat action of a (kind, index) (SPEC §3 table), -1 = none."""
    table = np.full((len(Kind), QUEUE_SLOTS), -1, np.int64)
    for (kind, index), flat in FLAT_OF.items():
        table[int(kind), index] = flat
    return table


FLAT = _flat_table()
K_ADMIT_GENERAL, K_ADMIT_ICU, K_VENTILATE = int(Kind.ADMIT_GENERAL), int(Kind.ADMIT_ICU), int(Kind.VENTILATE)
K_TRANSFER_ICU, K_EARLY_DISCHARGE, K_DISCHARGE_ICU = (
    int(Kind.TRANSFER_ICU),
    int(Kind.EARLY_DISCHARGE),
    int(Kind.DISCHARGE_ICU),
)


def _role_offsets(role: str) -> np.ndarray:
    """Where each block starts in ``role``'s AEC vector (its ROLE_BLOCKS order), -1 if absent."""
    starts, start = {}, 0
    for key in ROLE_BLOCKS[role]:
        starts[key] = start
        start += int(np.prod(BLOCK_BY_KEY[key].shape))
    return np.array([starts.get(key, -1) for key in OBS_BLOCKS], np.int64)


ROLE_OFFSETS: dict[str, np.ndarray] = {role: _role_offsets(role) for role in ROLES}
"""Block offsets of each role's AEC observation vector (for :func:`role_rule`)."""
ROLE_NUMBER = {role: r for r, role in enumerate(ROLES)}
N_ROLES = len(ROLES)
TRIAGE, BED_MANAGER, VENTILATOR_OFFICER = (
    ROLE_NUMBER[r] for r in ("triage", "bed_manager", "ventilator_officer")
)

_jit = njit(cache=True, nogil=True)


# ------------------------------------------------------------------ the rules
@_jit
def triage(obs, off, mask) -> tuple[int, float]:
    """Most severe first (then longest waiting, then slot); critical patients to ICU (a
    general bed if no ICU bed is free)."""
    o_q = off[O_WAITING_QUEUE]
    best, best_sev, best_wait = NOOP, -1, -1
    best_priority = 0.0
    for slot in range(QUEUE_SLOTS):  # the first qualifying slot in (-severity, -wait, slot) order
        if not obs[o_q + 3 * slot] > 0:
            continue
        sev, wait = int(obs[o_q + 3 * slot]), int(obs[o_q + 3 * slot + 2])
        if best != NOOP and (sev < best_sev or (sev == best_sev and wait <= best_wait)):
            continue
        general = FLAT[K_ADMIT_GENERAL, slot]
        if sev >= CRITICAL_SEVERITY:
            icu = FLAT[K_ADMIT_ICU, slot]
            if mask[icu]:
                action, priority = icu, ADMIT_CRITICAL_ICU + sev
            elif mask[general]:
                action, priority = general, ADMIT_CRITICAL_GENERAL + sev
            else:
                continue
        elif mask[general]:
            action, priority = general, ADMIT + sev
        else:
            continue
        best, best_sev, best_wait, best_priority = action, sev, wait, priority
    return best, best_priority


@_jit
def _pressure(obs, off) -> tuple[bool, bool]:
    """(a critical patient waits or lies in a general bed while the ICU is full; the general
    ward is full, a serious patient waits and the mildest board patient is severity 1): when
    freeing an ICU bed, or early-discharging, is worth an action."""
    o_b, o_q, o_c = off[O_BED_OCCUPANCY], off[O_WAITING_QUEUE], off[O_CAPACITY]
    critical_waiting, serious_waiting = False, False
    for slot in range(QUEUE_SLOTS):
        critical_waiting |= obs[o_q + 3 * slot] >= CRITICAL_SEVERITY
        serious_waiting |= obs[o_q + 3 * slot] >= SERIOUS_SEVERITY
    critical_on_board, n_board = False, 0
    for k in range(BOARD_SLOTS):
        critical_on_board |= obs[o_b + k] >= CRITICAL_SEVERITY
        n_board += obs[o_b + k] > 0
    icu_needed = obs[o_c + 1] == 0 and (critical_waiting or critical_on_board)
    ward_needed = obs[o_c] == 0 and n_board > 0 and serious_waiting and obs[o_b + n_board - 1] == 1
    return icu_needed, ward_needed


@_jit
def _step_down(obs, off, mask) -> int:
    """The first ready ICU patient's step-down, if valid (NOOP otherwise)."""
    for j in range(ICU_SLOTS):
        action = FLAT[K_DISCHARGE_ICU, j]
        if obs[off[O_ICU_READY] + j] != 0 and mask[action]:
            return action
    return NOOP


@_jit
def _transfer(obs, off, mask) -> tuple[int, float]:
    """The most severe critical board patient's transfer to ICU, if valid, and its severity."""
    o_b = off[O_BED_OCCUPANCY]
    for k in range(BOARD_ACTIONS):
        if obs[o_b + k] >= CRITICAL_SEVERITY:
            action = FLAT[K_TRANSFER_ICU, k]
            return (action, obs[o_b + k]) if mask[action] else (NOOP, 0.0)
    return NOOP, 0.0


@_jit
def bed_manager(obs, off, mask) -> tuple[int, float]:
    """Step down ready ICU patients, move deteriorating general patients to ICU,
    early-discharge the mildest general patient only when critical patients wait for beds."""
    icu_needed, ward_needed = _pressure(obs, off)
    best, best_priority = NOOP, 0.0
    action = _step_down(obs, off, mask)
    if action != NOOP:
        best, best_priority = action, STEP_DOWN_UNDER_PRESSURE if icu_needed else STEP_DOWN
    action, sev = _transfer(obs, off, mask)
    if action != NOOP and TRANSFER_CRITICAL + sev > best_priority:  # ties keep the earlier proposal
        best, best_priority = action, TRANSFER_CRITICAL + sev
    if ward_needed:
        action = FLAT[K_EARLY_DISCHARGE, 0]
        if mask[action] and best_priority < EARLY_DISCHARGE_UNDER_PRESSURE:
            best, best_priority = action, EARLY_DISCHARGE_UNDER_PRESSURE
    return best, best_priority


@_jit
def ventilator_officer(obs, off, mask) -> tuple[int, float]:
    """A free ventilator only when an ICU patient needs one (it goes to them): never waste one.
    Priority: above everything, by the most severe patient in need."""
    worst, anyone = 0.0, False
    for j in range(ICU_SLOTS):
        needing = obs[off[O_ICU_NEEDS_VENT] + j] * (1 - obs[off[O_ICU_ON_VENT] + j])
        if needing != 0:
            anyone = True
        worst = max(worst, obs[off[O_ICU_OCCUPANCY] + j] * needing)
    if not anyone:
        return NOOP, 0.0
    for v in range(VENT_SLOTS):
        action = FLAT[K_VENTILATE, v]
        if mask[action]:
            return action, VENTILATE + worst
    return NOOP, 0.0


@_jit
def role_rule(role, obs, off, mask) -> tuple[int, float]:
    """One role's proposal (roles numbered in ROLES order)."""
    if role == TRIAGE:
        return triage(obs, off, mask)
    if role == BED_MANAGER:
        return bed_manager(obs, off, mask)
    return ventilator_officer(obs, off, mask)


@_jit
def _most_severe_waiting(obs, off, mask, kind, critical) -> tuple[int, float]:
    """The most severe waiting patient (then longest waiting, then slot) who is critical (or
    not, by ``critical``) and whose admission of ``kind`` is valid: its action and severity."""
    o_q = off[O_WAITING_QUEUE]
    best, best_sev, best_wait = NOOP, 0.0, -1.0
    for slot in range(QUEUE_SLOTS):
        sev, wait = obs[o_q + 3 * slot], obs[o_q + 3 * slot + 2]
        if sev <= 0 or (sev >= CRITICAL_SEVERITY) != critical or not mask[FLAT[kind, slot]]:
            continue
        if sev > best_sev or (sev == best_sev and wait > best_wait):
            best, best_sev, best_wait = FLAT[kind, slot], sev, wait
    return best, best_sev


@_jit
def flat_action(obs, off, mask) -> int:
    """The flat track's one action a tick: the team's priorities, serialised (the highest wins;
    ties: the order below). Ventilate a patient who needs it; admit the most severe critical
    patient to ICU; transfer the most severe critical general-bed patient to ICU; admit the most
    severe non-critical patient to a general bed; step down a ready ICU patient when a critical
    patient needs the bed; early-discharge the mildest under pressure; a critical patient to a
    general bed only when no non-critical patient waits for one; any other step-down."""
    best, best_priority = ventilator_officer(obs, off, mask)
    icu_needed, ward_needed = _pressure(obs, off)
    action, sev = _most_severe_waiting(obs, off, mask, K_ADMIT_ICU, True)
    if action != NOOP and ADMIT_CRITICAL_ICU + sev > best_priority:
        best, best_priority = action, ADMIT_CRITICAL_ICU + sev
    action, sev = _transfer(obs, off, mask)
    if action != NOOP and TRANSFER_CRITICAL + sev > best_priority:
        best, best_priority = action, TRANSFER_CRITICAL + sev
    mild, sev = _most_severe_waiting(obs, off, mask, K_ADMIT_GENERAL, False)
    if mild != NOOP and ADMIT + sev > best_priority:
        best, best_priority = mild, ADMIT + sev
    step_down = _step_down(obs, off, mask)
    if step_down != NOOP and icu_needed and best_priority < FLAT_STEP_DOWN_UNDER_PRESSURE:
        best, best_priority = step_down, FLAT_STEP_DOWN_UNDER_PRESSURE
    action = FLAT[K_EARLY_DISCHARGE, 0]
    if ward_needed and mask[action] and best_priority < EARLY_DISCHARGE_UNDER_PRESSURE:
        best, best_priority = action, EARLY_DISCHARGE_UNDER_PRESSURE
    action, sev = _most_severe_waiting(obs, off, mask, K_ADMIT_GENERAL, True)
    if action != NOOP and mild == NOOP and FLAT_ADMIT_CRITICAL_GENERAL + sev > best_priority:
        best, best_priority = action, FLAT_ADMIT_CRITICAL_GENERAL + sev
    if step_down != NOOP and best_priority < FLAT_STEP_DOWN:
        best = step_down
    return best


# ------------------------------------------------------------------ the planner's rollouts
@_jit
def place(st, e, pid) -> int:
    """Where a patient is, for the horizon value: 0 waiting, 1 general bed, 2 ICU not needing a
    ventilator, 3 ICU on a ventilator it needs, 4 ICU needing one without; -1 not in the ED."""
    where = st.pat[e, pid, PAT_LOCATION]
    if where == WAITING:
        return 0
    if where == GENERAL:
        return 1
    if where != ICU:
        return -1
    if not needs_ventilator(st.pat[e, pid, PAT_SEVERITY], st.pat[e, pid, PAT_CONDITION]):
        return 2
    return 3 if st.pat[e, pid, PAT_VENT_OF] != EMPTY else 4


@_jit
def write_places(st, e, out) -> None:
    """Every patient's :func:`place` into ``out``."""
    for pid in range(st.scalars[e, S_N_PATIENTS]):
        out[pid] = place(st, e, pid)


@_jit
def horizon_value(st, p, e, death_by_place) -> float:
    """Per patient still in the ED (patient order): ``(1 - q) x discharge reward + q x death
    reward``, ``q = death_by_place[place, severity]``."""
    value = 0.0
    death = p.reals[R_DEATH]
    for pid in range(st.scalars[e, S_N_PATIENTS]):
        where = place(st, e, pid)
        if where < 0:
            continue
        q = death_by_place[where, st.pat[e, pid, PAT_SEVERITY]]
        discharge = (
            p.reals[R_CRITICAL_DISCHARGE] if st.pat[e, pid, PAT_WAS_CRITICAL] else p.reals[R_DISCHARGE]
        )
        value += (1.0 - q) * discharge + q * death
    return value


@_jit
def valued_tick(st, p, e, total) -> tuple[float, bool]:
    """The tick, after the actions: ``total`` plus its reward with deaths at their expected
    value (the sampled death penalties added back, ``death x expected deaths`` charged) and,
    when the shift ends, without the survival bonus (driven by sampled deaths); and whether
    it ended."""
    risk = expected_deaths(st, p, e)
    deaths = st.scalars[e, C_DEATHS]
    tick(st, p, e)
    total += st.floats[e, F_LAST_REWARD] + p.reals[R_DEATH] * (risk - (st.scalars[e, C_DEATHS] - deaths))
    if st.scalars[e, S_TERMINATED] or st.scalars[e, S_TRUNCATED]:
        total -= p.reals[R_SURVIVAL_BONUS] * survival_rate(st, e)
        return total, True
    return total, False


@_jit
def evaluate_candidates(
    st, p, e, buffer, actions, horizon, offsets, obs, mask, death_by_place, values
) -> None:
    """One imagined future (row ``e`` of ``st``, whose mutable fields live in ``buffer``): each of
    ``actions``, then the heuristic, for ``horizon`` ticks from the same start (restored in
    between), valued into ``values``: the ticks' :func:`valued_tick` rewards, plus the
    horizon value unless the shift ended. The caller has drawn the bounce-back pairs
    ``horizon`` actions may need.

    ``e`` is an argument, never a constant: a kernel function called with a literal row index
    would compile (and cache) a second specialisation of itself and of every rule it calls
    (measured once: a first use several times slower)."""
    start = buffer.copy()
    for i in range(actions.shape[0]):
        if i:
            buffer[:] = start
        total = 0.0
        action = actions[i]
        ended = False
        for _ in range(horizon):
            act_flat(st, p, e, action)
            total, ended = valued_tick(st, p, e, total)
            if ended:
                break
            write_observation(st, p, e, offsets, obs)
            write_mask(st, p, e, mask)
            valid = 0
            for a in range(mask.shape[0]):
                valid += mask[a]
            action = NOOP if valid == 1 else flat_action(obs, offsets, mask)
        values[i] = total if ended else total + horizon_value(st, p, e, death_by_place)


@_jit
def play_roles(st, p, e, first, offsets, obs, mask) -> None:
    """Roles ``first`` .. the last, in AEC order, each playing its rule on the state the one
    before it left (observation and mask rewritten after every action), as the team track does."""
    for role in range(first, N_ROLES):
        write_observation(st, p, e, offsets, obs)
        write_mask(st, p, e, mask)
        action, _ = role_rule(role, obs, offsets, mask)
        carry_out(st, p, e, role, action, np.bool_(False))


@_jit
def evaluate_role_candidates(
    st, p, e, buffer, role, actions, horizon, offsets, obs, mask, death_by_place, values
) -> None:
    """:func:`evaluate_candidates` for the team track: each of ``actions`` (flat actions of
    ``role``), then the roles after it this tick playing their rules, the tick, then
    ``horizon - 1`` ticks of every role's rule in AEC order; valued the same way
    (:func:`valued_tick`, :func:`horizon_value`). The caller has drawn the bounce-back pairs
    ``3 x horizon`` actions may need."""
    start = buffer.copy()
    for i in range(actions.shape[0]):
        if i:
            buffer[:] = start
        carry_out(st, p, e, role, actions[i], np.bool_(False))
        play_roles(st, p, e, role + 1, offsets, obs, mask)
        total, ended = valued_tick(st, p, e, 0.0)
        for _ in range(horizon - 1):
            if ended:
                break
            play_roles(st, p, e, 0, offsets, obs, mask)
            total, ended = valued_tick(st, p, e, total)
        values[i] = total if ended else total + horizon_value(st, p, e, death_by_place)


# ------------------------------------------------------------------ the on-disk cache
DEPENDENCIES: tuple[str, ...] = (
    *kernel.SOURCES,
    "hospital_marl.envs.observations",
    "hospital_marl.core.constants",
)
"""Modules whose code or constants the functions above compile in. numba's on-disk cache
checks only the file that defines a function, so an edit to the kernel alone would leave
these functions running the old rules from the cache; :func:`check_cache` prevents that."""
_DISPATCHERS: tuple[Any, ...] = (
    *(triage, bed_manager, ventilator_officer, role_rule, flat_action, place, write_places),
    *(_pressure, _step_down, _transfer, _most_severe_waiting),
    *(horizon_value, evaluate_candidates, valued_tick, play_roles, evaluate_role_candidates),
)


def dependencies_digest() -> str:
    """A digest of this module's and its :data:`DEPENDENCIES`' source files."""
    return jitcache.sources_digest((__name__, *DEPENDENCIES))


def check_cache(digest: str | None = None) -> bool:
    """Empty this module's numba cache when it was compiled from other sources (kernel edits,
    a merge, a checkout); record the current ones. Returns whether it was emptied."""
    return jitcache.check_cache(_DISPATCHERS, "heuristic_kernel.sources", (), digest or dependencies_digest())


check_cache()


__all__ = [
    "OFFSETS",
    "ROLE_OFFSETS",
    "check_cache",
    "evaluate_candidates",
    "evaluate_role_candidates",
    "flat_action",
    "horizon_value",
    "role_rule",
    "write_places",
]
