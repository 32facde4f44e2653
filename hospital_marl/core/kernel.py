"""Every rule of SPEC §2–§4, written once, as compiled functions over one
environment's rows of a :class:`~hospital_marl.core.types.State` (row ``e``).

The scalar :class:`~hospital_marl.core.hospital.Hospital` runs them on a
one-row state, the vector envs on B rows (a loop over environments, here in
the compiled code). Parameters arrive as :class:`~hospital_marl.core.types.Params`
arrays. Every random draw is made here too, from the row's key by the
counter-based generator of :mod:`hospital_marl.core.rng` (a day is a key:
its patients are drawn into the row when it starts, their dynamics and
bounce-backs when they happen), so no NumPy generator runs on the hot path.

Compiled with ``cache=True``: the machine code is cached on disk next to this
file, or under ``NUMBA_CACHE_DIR`` when the package directory is read-only
(the Docker image sets it). Every function is serial and releases the GIL
(``nogil``): the vector envs run the batch loops over disjoint row ranges on
plain Python threads when asked for more than one (``threads=``). No numba
threading layer is involved (nothing compiles with ``parallel=True``), so
nothing here competes with torch's own thread pool beyond the cores it uses.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hospital_marl.core.actions import N_FLAT_ACTIONS, Kind
from hospital_marl.core.rng import (
    D_BOUNCE,
    D_BURST_COUNT,
    D_CONDITION,
    D_COUNT,
    D_DYNAMICS,
    D_PENDING,
    D_Q_GENERAL,
    D_Q_ICU,
    D_SEVERITY,
    categorical,
    poisson,
    uniform,
)
from hospital_marl.core.types import (
    AWAY,
    BEDS_GENERAL,
    BEDS_ICU,
    BEDS_VENT,
    BEDS_VENT_IDLE,
    BOARD_DISCHARGE_SLOTS,
    BOARD_TRANSFER_SLOTS,
    BOUNCE_PID,
    BOUNCE_TICK,
    C_ACTIONS,
    C_ADMISSIONS,
    C_ARRIVALS,
    C_BOUNCE_BACKS,
    C_CONFLICTS,
    C_CRITICAL_DEATHS,
    C_CRITICAL_SAVED,
    C_CRITICAL_TOTAL,
    C_DEATHS,
    C_DETERIORATIONS,
    C_DISCHARGES,
    C_EARLY_DISCHARGES,
    C_INVALID_ACTIONS,
    C_TICKS,
    C_WAIT_TICKS,
    DEAD,
    DISCHARGED,
    EMPTY,
    F_CUMULATIVE_REWARD,
    F_LAST_REWARD,
    F_LAST_ROLE_REWARD,
    F_OCCUPANCY_SUM,
    F_ROLE_REWARD,
    F_TICK_REWARD,
    GENERAL,
    I_BOUNCE_DELAY_HIGH,
    I_BOUNCE_DELAY_LOW,
    I_BURST_CONDITION,
    I_BURST_END,
    I_BURST_START,
    I_EPISODE_LENGTH,
    I_GENERAL_BEDS,
    I_ICU_BEDS,
    I_MAX_DEATHS,
    I_MAX_TICKS,
    I_STEP_DOWN_BLOCK,
    I_VENTILATORS,
    I_WEAN_TICKS,
    ICU,
    MIX_BURST_SEVERITY,
    MIX_CONDITION,
    MIX_SEVERITY,
    N_PAT,
    P_BED_FACTOR,
    P_BOUNCE_PER_SEVERITY,
    P_BURST_RATE,
    P_DEATH_IN_BED,
    P_DEATH_RESIDUAL,
    P_DEATH_WAITING,
    P_DETERIORATE_CAP,
    P_NEGLECT_SCALE,
    PAT_ADMITTED_AT,
    PAT_ARRIVAL,
    PAT_ARRIVAL_SEVERITY,
    PAT_AWAY_SINCE,
    PAT_CONDITION,
    PAT_LOCATION,
    PAT_NEGLECT,
    PAT_READY_FOR,
    PAT_REMAINING,
    PAT_SEVERITY,
    PAT_VENT_OF,
    PAT_WAIT,
    PAT_WAS_CRITICAL,
    QUEUE_SLOTS,
    R_CRITICAL_DISCHARGE,
    R_CRITICAL_UNATTENDED,
    R_DEATH,
    R_DISCHARGE,
    R_EARLY_PER_SEVERITY,
    R_ICU_BUSY_BONUS,
    R_ICU_BUSY_THRESHOLD,
    R_INVALID,
    R_SURVIVAL_BONUS,
    R_WAITING,
    S_BOUNCE_CURSOR,
    S_KEY,
    S_N_PATIENTS,
    S_NEXT_ARRIVAL,
    S_QUEUE_LEN,
    S_TERMINATED,
    S_TICK,
    S_TRUNCATED,
    WAITING,
)

OUT_DONE, OUT_NOOP, OUT_INVALID, OUT_CONFLICT = range(4)
"""Outcome codes (:class:`~hospital_marl.core.hospital.Outcome` in this order)."""
NO_ROLE = -1


K_NOOP, K_ADMIT_GENERAL, K_ADMIT_ICU, K_VENTILATE = (
    int(Kind.NOOP),
    int(Kind.ADMIT_GENERAL),
    int(Kind.ADMIT_ICU),
    int(Kind.VENTILATE),
)
K_TRANSFER_ICU, K_EARLY_DISCHARGE, K_DISCHARGE_ICU = (
    int(Kind.TRANSFER_ICU),
    int(Kind.EARLY_DISCHARGE),
    int(Kind.DISCHARGE_ICU),
)

# Observation blocks the kernel writes, in the order of its ``offsets`` argument
# (the layout itself is hospital_marl.envs.observations.BLOCKS).
OBS_BLOCKS: tuple[str, ...] = (
    "bed_occupancy",
    "icu_occupancy",
    "ventilator_status",
    "waiting_queue",
    "time_step",
    "stats",
    "board_remaining",
    "icu_remaining",
    "icu_needs_vent",
    "icu_on_vent",
    "icu_ready",
    "capacity",
)
(
    O_BED_OCCUPANCY,
    O_ICU_OCCUPANCY,
    O_VENTILATOR_STATUS,
    O_WAITING_QUEUE,
    O_TIME_STEP,
    O_STATS,
    O_BOARD_REMAINING,
    O_ICU_REMAINING,
    O_ICU_NEEDS_VENT,
    O_ICU_ON_VENT,
    O_ICU_READY,
    O_CAPACITY,
) = range(12)
MAX_GENERAL_OBS, MAX_ICU_OBS, MAX_VENT_OBS = 20, 5, 3

_jit = njit(cache=True, nogil=True, _nrt=False)
# Constants handed to a compiled callee are wrapped (``np.int64(ICU)``, ``np.bool_(True)``):
# numba types a bare literal as ``Literal[int](3)`` and compiles the callee once per value,
# which the cold compile (every fresh clone, CI) pays for; wrapped, one specialisation serves all.
"""No reference counting: a call passing the state's arrays would otherwise incref and decref
each of them, which costs more than most rules do. Safe because no rule allocates
(``State.scratch`` is their working space) and every array outlives the call."""


# ------------------------------------------------------------------ the rules
CRITICAL_SEVERITY = 4
"""SPEC §2: a patient is critical from the first tick their severity reaches this. Below it a
general bed is adequate care, early discharge is allowed, and a treated ICU patient can step
down; every rule reads the threshold from here (numba freezes it at compile time, and this
file's cache is invalidated with the file)."""


@_jit
def needs_ventilator(severity: int, condition: int) -> bool:
    """SPEC §2: (respiratory and critical) or severity == 5."""
    return severity == 5 or (severity >= CRITICAL_SEVERITY and condition == 2)


@_jit
def ready_for_step_down(remaining: int, severity: int) -> bool:
    """SPEC §2: an ICU patient whose treatment is done and who is no longer critical."""
    return remaining <= 0 and severity < CRITICAL_SEVERITY


@_jit
def treatment_ticks(p, care: int, severity: int, quantile: float) -> int:
    """The treatment time at a per-patient quantile in [0, 1) (care 0 = general, 1 = ICU)."""
    low = p.treatment[care, severity, 0]
    high = p.treatment[care, severity, 1]
    return low + int(quantile * (high - low + 1))


@_jit
def deteriorate_probability(p, severity: int, neglect: int, condition: int, in_bed: bool) -> float:
    """SPEC §8: min(cap, b[s] (1 + n / scale) c[cond] m), m = bed factor in a bed, 1 waiting."""
    prob = (
        p.deteriorate_base[severity]
        * (1.0 + neglect / p.reals[P_NEGLECT_SCALE])
        * p.condition_factor[condition]
    )
    if in_bed:
        prob = prob * p.reals[P_BED_FACTOR]
    cap = p.reals[P_DETERIORATE_CAP]
    return prob if prob < cap else cap


@_jit
def death_probability(p, adequate: bool, in_bed: bool) -> float:
    """SPEC §8: a severity-5 patient's per-tick death probability."""
    if adequate:
        return p.reals[P_DEATH_RESIDUAL]
    return p.reals[P_DEATH_IN_BED] if in_bed else p.reals[P_DEATH_WAITING]


@_jit
def board(st, p, e, out) -> int:
    """The general board into ``out``: occupied beds' patients, most severe first, then longest
    stay (earliest admission), then id. Returns its length."""
    pat = st.pat
    n = 0
    for bed in range(p.ints[I_GENERAL_BEDS]):
        pid = st.beds[e, BEDS_GENERAL, bed]
        if pid == EMPTY:
            continue
        # insertion sort: at most 20 beds
        j = n
        while j > 0:
            q = out[j - 1]
            sq, sp = pat[e, q, PAT_SEVERITY], pat[e, pid, PAT_SEVERITY]
            if sq > sp or (
                sq == sp
                and (
                    pat[e, q, PAT_ADMITTED_AT] < pat[e, pid, PAT_ADMITTED_AT]
                    or (pat[e, q, PAT_ADMITTED_AT] == pat[e, pid, PAT_ADMITTED_AT] and q < pid)
                )
            ):
                break
            out[j] = q
            j -= 1
        out[j] = pid
        n += 1
    return n


@_jit
def ventilator_target(st, p, e) -> int:
    """The ICU patient a free ventilator goes to: most severe without one; ties: needs one
    first, then longest in ICU, then bed index. EMPTY if none."""
    pat = st.pat
    best = EMPTY
    for bed in range(p.ints[I_ICU_BEDS]):
        pid = st.beds[e, BEDS_ICU, bed]
        if pid == EMPTY or pat[e, pid, PAT_VENT_OF] != EMPTY:
            continue
        if best == EMPTY:
            best = pid
            continue
        s, sb = pat[e, pid, PAT_SEVERITY], pat[e, best, PAT_SEVERITY]
        if s != sb:
            if s > sb:
                best = pid
            continue
        n = needs_ventilator(s, pat[e, pid, PAT_CONDITION])
        nb = needs_ventilator(sb, pat[e, best, PAT_CONDITION])
        if n != nb:
            if n:
                best = pid
            continue
        if pat[e, pid, PAT_ADMITTED_AT] < pat[e, best, PAT_ADMITTED_AT]:
            best = pid  # equal admission: the earlier bed (already best) stays
    return best


@_jit
def action_facts(st, p, e, brd):
    """The few facts of the present state that SPEC §3 validity reads, computed once per
    state (the mask reads them 39 times): the general board (sorted into ``brd``) and

    ``(n_board, n_queue, free_general, free_icu, unvented, free_vents)`` -- board length,
    addressable queue slots, free general / ICU beds, ICU patients without a ventilator,
    free ventilators. The observation's capacity block reads the same counts."""
    n_board = board(st, p, e, brd)
    n_queue = min(st.scalars[e, S_QUEUE_LEN], QUEUE_SLOTS)
    beds = st.beds
    free_general = 0
    for bed in range(p.ints[I_GENERAL_BEDS]):
        free_general += beds[e, BEDS_GENERAL, bed] == EMPTY
    free_icu = 0
    unvented = 0
    for bed in range(p.ints[I_ICU_BEDS]):
        pid = beds[e, BEDS_ICU, bed]
        if pid == EMPTY:
            free_icu += 1
        elif st.pat[e, pid, PAT_VENT_OF] == EMPTY:
            unvented += 1
    free_vents = 0
    for v in range(p.ints[I_VENTILATORS]):
        free_vents += beds[e, BEDS_VENT, v] == EMPTY
    return n_board, n_queue, free_general, free_icu, unvented, free_vents


@_jit
def valid_given(st, p, e, kind: int, index: int, brd, facts) -> bool:
    """SPEC §3 validity of one action, given the state's :func:`action_facts` (and its board
    in ``brd``): the one rule behind the mask, :func:`is_valid` and ``act``."""
    n_board, n_queue, free_general, free_icu, unvented, _ = facts
    if kind == K_NOOP:
        return True
    if index < 0:
        return False
    if kind == K_ADMIT_GENERAL:
        return index < n_queue and free_general > 0
    if kind == K_ADMIT_ICU:
        return index < n_queue and free_icu > 0
    if kind == K_VENTILATE:
        return index < p.ints[I_VENTILATORS] and st.beds[e, BEDS_VENT, index] == EMPTY and unvented > 0
    if kind == K_TRANSFER_ICU:
        return index < n_board and index < BOARD_TRANSFER_SLOTS and free_icu > 0
    if kind == K_EARLY_DISCHARGE:
        if index >= n_board or index >= BOARD_DISCHARGE_SLOTS:
            return False
        return st.pat[e, brd[n_board - 1 - index], PAT_SEVERITY] < CRITICAL_SEVERITY  # never the critical
    if kind == K_DISCHARGE_ICU:
        if index >= p.ints[I_ICU_BEDS]:
            return False
        pid = st.beds[e, BEDS_ICU, index]
        # "ready or non-critical": ready implies non-critical, so this is "non-critical".
        return pid != EMPTY and st.pat[e, pid, PAT_SEVERITY] < CRITICAL_SEVERITY
    return False


@_jit
def is_valid(st, p, e, kind: int, index: int) -> bool:
    """SPEC §3 validity: whether one action would be carried out now."""
    brd = st.scratch[e]
    return valid_given(st, p, e, kind, index, brd, action_facts(st, p, e, brd))


@_jit
def _write_mask_given(p, st, e, brd, facts, out) -> None:
    for flat in range(N_FLAT_ACTIONS):
        out[flat] = valid_given(st, p, e, p.action_kind[flat], p.action_index[flat], brd, facts)


@_jit
def write_mask(st, p, e, out) -> None:
    """The 39 flat actions' validity into ``out`` (bool): :func:`valid_given` over the action
    table, on facts computed once."""
    brd = st.scratch[e]
    _write_mask_given(p, st, e, brd, action_facts(st, p, e, brd), out)


# ---------------------------------------------------------------- rewards and events
@_jit
def _reward(st, e, value: float, role: int) -> None:
    st.floats[e, F_TICK_REWARD] += value
    if role != NO_ROLE:
        st.floats[e, F_ROLE_REWARD + role] += value


@_jit
def _mark_critical(st, e, pid) -> None:
    if st.pat[e, pid, PAT_WAS_CRITICAL] == 0 and st.pat[e, pid, PAT_SEVERITY] >= CRITICAL_SEVERITY:
        st.pat[e, pid, PAT_WAS_CRITICAL] = 1
        st.scalars[e, C_CRITICAL_TOTAL] += 1


@_jit
def _release_ventilator(st, e, pid) -> None:
    v = st.pat[e, pid, PAT_VENT_OF]
    if v != EMPTY:
        st.beds[e, BEDS_VENT, v] = EMPTY
        st.beds[e, BEDS_VENT_IDLE, v] = 0
        st.pat[e, pid, PAT_VENT_OF] = EMPTY


@_jit
def _discharge(st, p, e, pid, role) -> None:
    """A successful discharge (treatment done)."""
    st.pat[e, pid, PAT_LOCATION] = DISCHARGED
    st.scalars[e, C_DISCHARGES] += 1
    if st.pat[e, pid, PAT_WAS_CRITICAL]:
        st.scalars[e, C_CRITICAL_SAVED] += 1
        _reward(st, e, p.reals[R_CRITICAL_DISCHARGE], role)
    else:
        _reward(st, e, p.reals[R_DISCHARGE], role)


@_jit
def _early_discharge(st, p, e, pid, role) -> None:
    """Home before treatment is done: a cost, and maybe a bounce-back later this shift."""
    sev = st.pat[e, pid, PAT_SEVERITY]
    st.pat[e, pid, PAT_LOCATION] = AWAY
    st.pat[e, pid, PAT_AWAY_SINCE] = st.scalars[e, S_TICK]
    st.scalars[e, C_EARLY_DISCHARGES] += 1
    _reward(st, e, p.reals[R_EARLY_PER_SEVERITY] * sev, role)
    k = st.scalars[e, S_BOUNCE_CURSOR]  # the caller guarantees a schedule slot (see types.with_bounce_room)
    st.scalars[e, S_BOUNCE_CURSOR] = k + 1
    key = st.scalars[e, S_KEY]  # the k-th early discharge's draws: the same on every branch
    if uniform(key, np.int64(D_BOUNCE), k, np.int64(0)) < p.reals[P_BOUNCE_PER_SEVERITY] * sev:
        low, high = p.ints[I_BOUNCE_DELAY_LOW], p.ints[I_BOUNCE_DELAY_HIGH]
        back = (
            st.scalars[e, S_TICK]
            + low
            + int(uniform(key, np.int64(D_BOUNCE), k, np.int64(1)) * (high - low + 1))
        )
        if back < p.ints[I_MAX_TICKS]:
            st.bounce[e, BOUNCE_TICK, k] = back
            st.bounce[e, BOUNCE_PID, k] = pid


@_jit
def _die(st, p, e, pid) -> None:
    st.pat[e, pid, PAT_LOCATION] = DEAD
    _release_ventilator(st, e, pid)
    st.scalars[e, C_DEATHS] += 1
    if st.pat[e, pid, PAT_WAS_CRITICAL]:
        st.scalars[e, C_CRITICAL_DEATHS] += 1
    _reward(st, e, p.reals[R_DEATH], np.int64(NO_ROLE))


@_jit
def _place(st, p, e, pid, where) -> None:
    """Put a patient in the first free bed of a kind and draw the treatment time."""
    row = BEDS_GENERAL if where == GENERAL else BEDS_ICU
    n_beds = p.ints[I_GENERAL_BEDS] if where == GENERAL else p.ints[I_ICU_BEDS]
    for bed in range(n_beds):
        if st.beds[e, row, bed] == EMPTY:
            st.beds[e, row, bed] = pid
            break
    pat = st.pat
    pat[e, pid, PAT_LOCATION] = where
    pat[e, pid, PAT_ADMITTED_AT] = st.scalars[e, S_TICK]
    pat[e, pid, PAT_READY_FOR] = 0
    care = 0 if where == GENERAL else 1
    pat[e, pid, PAT_REMAINING] = treatment_ticks(
        p, care, pat[e, pid, PAT_SEVERITY], st.quantile[e, care, pid]
    )


@_jit
def _admit_from_queue(st, p, e, slot, where) -> None:
    n = st.scalars[e, S_QUEUE_LEN]
    pid = st.queue[e, slot]
    for i in range(slot, n - 1):
        st.queue[e, i] = st.queue[e, i + 1]
    st.scalars[e, S_QUEUE_LEN] = n - 1
    st.scalars[e, C_ADMISSIONS] += 1
    _place(st, p, e, pid, where)


@_jit
def _free_general_bed_of(st, p, e, pid) -> None:
    for bed in range(p.ints[I_GENERAL_BEDS]):
        if st.beds[e, BEDS_GENERAL, bed] == pid:
            st.beds[e, BEDS_GENERAL, bed] = EMPTY
            return


# ---------------------------------------------------------------- actions
@_jit
def carry_out(st, p, e, role: int, flat: int, valid_when_chosen: bool) -> int:
    """One action (``flat``: its row of the action table; -1 = not an action at all), counted.

    Invalid: -1 reward to ``role``, counted; valid on the mask its role saw but made
    impossible by an earlier role (``valid_when_chosen``): a free, counted conflict.
    """
    st.scalars[e, C_ACTIONS] += 1
    if flat < 0:
        st.scalars[e, C_INVALID_ACTIONS] += 1
        _reward(st, e, p.reals[R_INVALID], role)
        return OUT_INVALID
    kind, index = p.action_kind[flat], p.action_index[flat]
    if kind == K_NOOP:
        return OUT_NOOP
    brd = st.scratch[e]
    facts = action_facts(st, p, e, brd)
    n_board = facts[0]
    if not valid_given(st, p, e, kind, index, brd, facts):
        if valid_when_chosen:
            st.scalars[e, C_CONFLICTS] += 1
            return OUT_CONFLICT
        st.scalars[e, C_INVALID_ACTIONS] += 1
        _reward(st, e, p.reals[R_INVALID], role)
        return OUT_INVALID
    if kind == K_ADMIT_GENERAL:
        _admit_from_queue(st, p, e, index, np.int64(GENERAL))
    elif kind == K_ADMIT_ICU:
        _admit_from_queue(st, p, e, index, np.int64(ICU))
    elif kind == K_VENTILATE:
        pid = ventilator_target(st, p, e)
        st.beds[e, BEDS_VENT, index] = pid
        st.beds[e, BEDS_VENT_IDLE, index] = 0
        st.pat[e, pid, PAT_VENT_OF] = index
    elif kind == K_TRANSFER_ICU:
        pid = brd[index]
        _free_general_bed_of(st, p, e, pid)
        _place(st, p, e, pid, np.int64(ICU))
    elif kind == K_EARLY_DISCHARGE:
        pid = brd[n_board - 1 - index]
        _free_general_bed_of(st, p, e, pid)
        _early_discharge(st, p, e, pid, role)
    elif kind == K_DISCHARGE_ICU:
        pid = st.beds[e, BEDS_ICU, index]
        st.beds[e, BEDS_ICU, index] = EMPTY
        _release_ventilator(st, e, pid)
        if ready_for_step_down(st.pat[e, pid, PAT_REMAINING], st.pat[e, pid, PAT_SEVERITY]):
            _discharge(st, p, e, pid, role)
        else:
            _early_discharge(st, p, e, pid, role)
    return OUT_DONE


@_jit
def act_flat(st, p, e, flat: int) -> int:
    """A flat action (-1 = unparseable): the acting role is the action's."""
    role = p.action_role[flat] if flat >= 0 else NO_ROLE
    return carry_out(st, p, e, role, flat, np.bool_(False))


@_jit
def act_role(st, p, e, role: int, role_action: int, valid_when_chosen: bool) -> int:
    """A role action (-1 = unparseable)."""
    flat = p.role_flat[role, role_action] if role_action >= 0 else -1
    return carry_out(st, p, e, role, flat, valid_when_chosen)


# ---------------------------------------------------------------- dynamics
@_jit
def dynamics_uniform(st, e, t, pid) -> float:
    """Patient ``pid``'s uniform at tick ``t`` (one per patient and tick, whatever its care):
    a user day's own draw if it brought them, else the key's."""
    if st.latent.shape[1] > 0:
        return st.latent[e, t, pid]
    return uniform(st.scalars[e, S_KEY], np.int64(D_DYNAMICS), np.int64(pid), t)


@_jit
def _treat(st, p, e, pid, u: float, care: int) -> None:
    """Adequate care: treatment progresses; severity may improve; residual mortality at 5."""
    pat = st.pat
    if pat[e, pid, PAT_REMAINING] > 0:
        pat[e, pid, PAT_REMAINING] -= 1
    sev = pat[e, pid, PAT_SEVERITY]
    if sev == 5:
        death = death_probability(p, np.bool_(True), np.bool_(True))
        if u < death:
            _die(st, p, e, pid)
        elif u < death + p.improve[care, 5]:
            pat[e, pid, PAT_SEVERITY] = 4
    elif u < p.improve[care, sev]:
        pat[e, pid, PAT_SEVERITY] = sev - 1


@_jit
def _neglect(st, p, e, pid, u: float, in_bed: bool) -> None:
    """No adequate care: severity may rise (faster the longer the neglect); death at 5."""
    pat = st.pat
    n = pat[e, pid, PAT_NEGLECT]
    pat[e, pid, PAT_NEGLECT] = n + 1
    sev = pat[e, pid, PAT_SEVERITY]
    if sev == 5:
        if u < death_probability(p, np.bool_(False), in_bed):
            _die(st, p, e, pid)
        return
    if u < deteriorate_probability(p, sev, n, pat[e, pid, PAT_CONDITION], in_bed):
        pat[e, pid, PAT_SEVERITY] = sev + 1
        st.scalars[e, C_DETERIORATIONS] += 1
        _mark_critical(st, e, pid)


@_jit
def arrive(st, p, e, t) -> None:
    """Tick ``t`` begins: bounce-backs due return (one level worse), then the day's arrivals."""
    pat = st.pat
    for k in range(st.scalars[e, S_BOUNCE_CURSOR]):
        if st.bounce[e, BOUNCE_TICK, k] == t:
            st.bounce[e, BOUNCE_TICK, k] = -1
            pid = st.bounce[e, BOUNCE_PID, k]
            pat[e, pid, PAT_SEVERITY] = min(5, pat[e, pid, PAT_SEVERITY] + 1)
            pat[e, pid, PAT_LOCATION] = WAITING
            st.queue[e, st.scalars[e, S_QUEUE_LEN]] = pid
            st.scalars[e, S_QUEUE_LEN] += 1
            st.scalars[e, C_BOUNCE_BACKS] += 1
            _mark_critical(st, e, pid)
    n = st.scalars[e, S_N_PATIENTS]
    pid = st.scalars[e, S_NEXT_ARRIVAL]
    while pid < n and pat[e, pid, PAT_ARRIVAL] <= t:
        pat[e, pid, PAT_LOCATION] = WAITING
        st.queue[e, st.scalars[e, S_QUEUE_LEN]] = pid
        st.scalars[e, S_QUEUE_LEN] += 1
        st.scalars[e, C_ARRIVALS] += 1
        _mark_critical(st, e, pid)
        pid += 1
    st.scalars[e, S_NEXT_ARRIVAL] = pid


@_jit
def survival_rate(st, e) -> float:
    arrivals = st.scalars[e, C_ARRIVALS]
    return 1.0 - st.scalars[e, C_DEATHS] / arrivals if arrivals else 1.0


@_jit
def tick(st, p, e) -> None:
    """Advance one tick after the roles' actions (SPEC §2 order): ICU care, general care,
    weaning, the waiting room, rewards and occupancy, then the next tick's arrivals.
    The tick's team and role rewards are left in ``floats[e, F_LAST_*]``."""
    pat, beds, sc = st.pat, st.beds, st.scalars
    t = sc[e, S_TICK]
    n_icu, n_general = p.ints[I_ICU_BEDS], p.ints[I_GENERAL_BEDS]

    # ICU: adequate unless the patient needs a ventilator and has none.
    for bed in range(n_icu):
        pid = beds[e, BEDS_ICU, bed]
        if pid == EMPTY:
            continue
        s = pat[e, pid, PAT_SEVERITY]
        if ready_for_step_down(pat[e, pid, PAT_REMAINING], s):  # holds the bed, stable
            pat[e, pid, PAT_READY_FOR] += 1
            if pat[e, pid, PAT_READY_FOR] >= p.ints[I_STEP_DOWN_BLOCK]:
                beds[e, BEDS_ICU, bed] = EMPTY
                _release_ventilator(st, e, pid)
                _discharge(st, p, e, pid, np.int64(NO_ROLE))
            continue
        u = dynamics_uniform(st, e, t, pid)
        if pat[e, pid, PAT_VENT_OF] != EMPTY or not needs_ventilator(s, pat[e, pid, PAT_CONDITION]):
            _treat(st, p, e, pid, u, np.int64(1))
        else:
            _neglect(st, p, e, pid, u, np.bool_(True))
        if pat[e, pid, PAT_LOCATION] == DEAD:
            beds[e, BEDS_ICU, bed] = EMPTY

    # General beds: adequate for the non-critical; critical patients make no progress.
    n_crit_general = 0
    for bed in range(n_general):
        pid = beds[e, BEDS_GENERAL, bed]
        if pid == EMPTY:
            continue
        u = dynamics_uniform(st, e, t, pid)
        if pat[e, pid, PAT_SEVERITY] < CRITICAL_SEVERITY:
            _treat(st, p, e, pid, u, np.int64(0))
            if pat[e, pid, PAT_REMAINING] <= 0:
                beds[e, BEDS_GENERAL, bed] = EMPTY
                _discharge(st, p, e, pid, np.int64(NO_ROLE))
        else:
            _neglect(st, p, e, pid, u, np.bool_(True))
            if pat[e, pid, PAT_LOCATION] == DEAD:
                beds[e, BEDS_GENERAL, bed] = EMPTY
            else:
                n_crit_general += 1

    # Ventilator weaning: released after wean_ticks consecutive ticks not needed.
    for v in range(p.ints[I_VENTILATORS]):
        pid = beds[e, BEDS_VENT, v]
        if pid == EMPTY:
            continue
        if needs_ventilator(pat[e, pid, PAT_SEVERITY], pat[e, pid, PAT_CONDITION]):
            beds[e, BEDS_VENT_IDLE, v] = 0
        else:
            beds[e, BEDS_VENT_IDLE, v] += 1
            if beds[e, BEDS_VENT_IDLE, v] >= p.ints[I_WEAN_TICKS]:
                _release_ventilator(st, e, pid)

    # Waiting room: never adequate care. Neglect, deaths, then waiting time.
    n_crit_waiting = 0
    n_queue = sc[e, S_QUEUE_LEN]
    kept = 0
    for i in range(n_queue):
        pid = st.queue[e, i]
        _neglect(st, p, e, pid, dynamics_uniform(st, e, t, pid), np.bool_(False))
        if pat[e, pid, PAT_LOCATION] == DEAD:
            continue
        pat[e, pid, PAT_WAIT] += 1
        if pat[e, pid, PAT_SEVERITY] >= CRITICAL_SEVERITY:
            n_crit_waiting += 1
        st.queue[e, kept] = pid
        kept += 1
    sc[e, S_QUEUE_LEN] = kept
    sc[e, C_WAIT_TICKS] += kept
    _reward(
        st,
        e,
        p.reals[R_CRITICAL_UNATTENDED] * (n_crit_waiting + n_crit_general)
        + p.reals[R_WAITING] * (kept - n_crit_waiting),
        np.int64(NO_ROLE),
    )
    icu_used = 0
    for bed in range(n_icu):
        icu_used += beds[e, BEDS_ICU, bed] != EMPTY
    if icu_used / n_icu > p.reals[R_ICU_BUSY_THRESHOLD]:
        _reward(st, e, p.reals[R_ICU_BUSY_BONUS], np.int64(NO_ROLE))
    general_used = 0
    for bed in range(n_general):
        general_used += beds[e, BEDS_GENERAL, bed] != EMPTY
    st.floats[e, F_OCCUPANCY_SUM] += (general_used + icu_used) / (n_general + n_icu)
    sc[e, C_TICKS] += 1

    # Next tick: bounce-backs return, then the day's arrivals.
    sc[e, S_TICK] = t + 1
    if sc[e, C_DEATHS] >= p.ints[I_MAX_DEATHS]:
        sc[e, S_TERMINATED] = 1
    elif t + 1 >= p.ints[I_MAX_TICKS]:
        sc[e, S_TRUNCATED] = 1
    else:
        arrive(st, p, e, t + 1)
    if sc[e, S_TERMINATED] or sc[e, S_TRUNCATED]:
        _reward(st, e, p.reals[R_SURVIVAL_BONUS] * survival_rate(st, e), np.int64(NO_ROLE))

    fl = st.floats
    team = fl[e, F_TICK_REWARD]
    shared = team - (fl[e, F_ROLE_REWARD] + fl[e, F_ROLE_REWARD + 1] + fl[e, F_ROLE_REWARD + 2])
    fl[e, F_LAST_REWARD] = team
    for r in range(3):
        fl[e, F_LAST_ROLE_REWARD + r] = fl[e, F_ROLE_REWARD + r] + shared
        fl[e, F_ROLE_REWARD + r] = 0.0
    fl[e, F_CUMULATIVE_REWARD] += team
    fl[e, F_TICK_REWARD] = 0.0


@_jit
def _new_patient(st, e, pid, t, severity, condition, q_general, q_icu) -> None:
    """Patient ``pid`` of the day (if the row has room): all fields reset, its identity written."""
    if pid >= st.pat.shape[1]:
        return
    for f in range(N_PAT):
        st.pat[e, pid, f] = 0
    st.pat[e, pid, PAT_CONDITION] = condition
    st.pat[e, pid, PAT_ARRIVAL] = t
    st.pat[e, pid, PAT_SEVERITY] = severity
    st.pat[e, pid, PAT_ARRIVAL_SEVERITY] = severity
    st.pat[e, pid, PAT_VENT_OF] = EMPTY
    st.quantile[e, 0, pid] = q_general
    st.quantile[e, 1, pid] = q_icu


@_jit
def draw_arrivals(st, p, e, first_tick, first_pid) -> int:
    """The day's patients arriving at ticks ``first_tick`` .. T-1, from the row's key, as ids
    ``first_pid`` onwards (SPEC §2: Poisson per tick with λ(t), the scenario's severity and
    condition mixes, the burst's extra patients after the background ones of a tick; each
    with its two treatment quantiles). Returns the day's patient count; patients past the
    row's capacity are not written (the caller grows the state and draws again)."""
    key = st.scalars[e, S_KEY]
    pid = first_pid
    burst_start, burst_end = p.ints[I_BURST_START], p.ints[I_BURST_END]
    for t in range(max(0, first_tick), p.ints[I_EPISODE_LENGTH]):
        n = poisson(p.rates[t], key, np.int64(D_COUNT), t)
        extra = 0
        if burst_start <= t <= burst_end:
            extra = poisson(p.reals[P_BURST_RATE], key, np.int64(D_BURST_COUNT), t)
        for j in range(n + extra):
            if j < n:
                severity = categorical(p.mix_cdf[MIX_SEVERITY], uniform(key, np.int64(D_SEVERITY), t, j))
                condition = categorical(p.mix_cdf[MIX_CONDITION], uniform(key, np.int64(D_CONDITION), t, j))
            else:
                severity = categorical(
                    p.mix_cdf[MIX_BURST_SEVERITY], uniform(key, np.int64(D_SEVERITY), t, j)
                )
                condition = p.ints[I_BURST_CONDITION]
            q_general, q_icu = (
                uniform(key, np.int64(D_Q_GENERAL), t, j),
                uniform(key, np.int64(D_Q_ICU), t, j),
            )
            _new_patient(st, e, pid, t, severity, condition, q_general, q_icu)
            pid += 1
    return pid


@_jit
def start_row(st, p, e, key) -> int:
    """Row ``e`` starts the day of ``key``: its patients drawn, then :func:`reset_row`. Returns
    the day's patient count; if that exceeds the row's capacity nothing is started (grow, retry)."""
    st.scalars[e, S_KEY] = key
    n = draw_arrivals(st, p, e, np.int64(0), np.int64(0))
    if n <= st.pat.shape[1]:
        reset_row(st, p, e, n)
    return n


@_jit
def start_rows(st, p, rows, keys) -> int:
    """:func:`start_row` for each of ``rows``; returns 0, or the largest day that did not fit
    (grow the state to it and call again: starting a row twice gives the same day)."""
    need = 0
    for i in range(rows.shape[0]):
        n = start_row(st, p, rows[i], keys[i])
        if n > st.pat.shape[1] and n > need:
            need = n
    return need


@_jit
def imagine_row(st, p, e, key) -> int:
    """Row ``e`` (a copy of the present) gets a new future from ``key`` (SPEC §10): later
    arrivals, every patient's dynamics from this tick on, new early discharges' draws and
    the pending bounce-backs are all redrawn. Returns the imagined day's patient count;
    if it exceeds the capacity the row is unusable (grow, copy the present again, retry)."""
    st.scalars[e, S_KEY] = key
    n = draw_arrivals(st, p, e, st.scalars[e, S_TICK] + 1, st.scalars[e, S_NEXT_ARRIVAL])
    if n <= st.pat.shape[1]:
        st.scalars[e, S_N_PATIENTS] = n
        redraw_pending_bounces(st, p, e)
    return n


@_jit
def reset_row(st, p, e, n_patients) -> None:
    """Row ``e`` becomes an empty ED on the day already written into its day columns
    (condition, arrival, severity on arrival, quantiles), then tick 0's arrivals.
    The row's key (``S_KEY``) is kept."""
    pat = st.pat
    for pid in range(pat.shape[1]):
        for f in (PAT_LOCATION, PAT_WAIT, PAT_NEGLECT, PAT_REMAINING, PAT_ADMITTED_AT, PAT_READY_FOR):
            pat[e, pid, f] = 0
        pat[e, pid, PAT_VENT_OF] = EMPTY
        pat[e, pid, PAT_AWAY_SINCE] = 0
        pat[e, pid, PAT_WAS_CRITICAL] = 0
    st.beds[e, :, :] = EMPTY
    st.beds[e, BEDS_VENT_IDLE, :] = 0
    key = st.scalars[e, S_KEY]
    st.scalars[e, :] = 0
    st.scalars[e, S_KEY] = key
    st.scalars[e, S_N_PATIENTS] = n_patients
    st.floats[e, :] = 0.0
    st.bounce[e, :, :] = -1
    arrive(st, p, e, np.int64(0))


# ---------------------------------------------------------------- observations
@_jit
def write_observation(st, p, e, offsets, out) -> None:
    """Every observation block of row ``e`` into ``out`` (float32, the global-state layout:
    block ``b`` starts at ``offsets[b]``, blocks in :data:`OBS_BLOCKS` order). Raw values."""
    brd = st.scratch[e]
    _write_observation_given(st, p, e, offsets, out, brd, action_facts(st, p, e, brd))


@_jit
def _write_observation_given(st, p, e, offsets, out, brd, facts) -> None:
    pat, beds, sc = st.pat, st.beds, st.scalars
    n_board, _, free_general, free_icu, _, free_vents = facts
    o_sev, o_rem = offsets[O_BED_OCCUPANCY], offsets[O_BOARD_REMAINING]
    for k in range(MAX_GENERAL_OBS):
        if k < n_board:
            out[o_sev + k] = pat[e, brd[k], PAT_SEVERITY]
            out[o_rem + k] = pat[e, brd[k], PAT_REMAINING]
        else:
            out[o_sev + k] = 0.0
            out[o_rem + k] = 0.0
    n_icu = p.ints[I_ICU_BEDS]
    for j in range(MAX_ICU_OBS):
        pid = beds[e, BEDS_ICU, j] if j < n_icu else EMPTY
        if pid == EMPTY:
            for b in (O_ICU_OCCUPANCY, O_ICU_REMAINING, O_ICU_NEEDS_VENT, O_ICU_ON_VENT, O_ICU_READY):
                out[offsets[b] + j] = 0.0
            continue
        s, r = pat[e, pid, PAT_SEVERITY], pat[e, pid, PAT_REMAINING]
        out[offsets[O_ICU_OCCUPANCY] + j] = s
        out[offsets[O_ICU_REMAINING] + j] = r
        out[offsets[O_ICU_NEEDS_VENT] + j] = needs_ventilator(s, pat[e, pid, PAT_CONDITION])
        out[offsets[O_ICU_ON_VENT] + j] = pat[e, pid, PAT_VENT_OF] != EMPTY
        out[offsets[O_ICU_READY] + j] = ready_for_step_down(r, s)
    for v in range(MAX_VENT_OBS):
        out[offsets[O_VENTILATOR_STATUS] + v] = v < p.ints[I_VENTILATORS] and beds[e, BEDS_VENT, v] != EMPTY
    n_queue = sc[e, S_QUEUE_LEN]
    o_q = offsets[O_WAITING_QUEUE]
    for slot in range(QUEUE_SLOTS):
        if slot < n_queue:
            pid = st.queue[e, slot]
            out[o_q + 3 * slot] = pat[e, pid, PAT_SEVERITY]
            out[o_q + 3 * slot + 1] = pat[e, pid, PAT_CONDITION]
            out[o_q + 3 * slot + 2] = pat[e, pid, PAT_WAIT]
        else:
            out[o_q + 3 * slot] = 0.0
            out[o_q + 3 * slot + 1] = 0.0
            out[o_q + 3 * slot + 2] = 0.0
    out[offsets[O_TIME_STEP]] = sc[e, S_TICK]
    out[offsets[O_STATS]] = sc[e, C_DISCHARGES]
    out[offsets[O_STATS] + 1] = sc[e, C_DEATHS]
    out[offsets[O_STATS] + 2] = n_queue
    o_c = offsets[O_CAPACITY]
    out[o_c] = free_general
    out[o_c + 1] = free_icu
    out[o_c + 2] = free_vents
    out[o_c + 3] = n_queue


# ---------------------------------------------------------------- fused entry points
@_jit
def step_flat_row(st, p, e, flat, offsets, obs, mask) -> int:
    """The composed env's step of one row: the action, the tick, then the next observation
    and mask. Returns the action's outcome."""
    outcome = act_flat(st, p, e, flat)
    tick(st, p, e)
    observe_row(st, p, e, offsets, obs, mask)
    return outcome


STEP_NOT_RUNNING, STEP_NEEDS_ROOM = -2, -3
"""Codes of :func:`step_flat_report` when it did nothing (the caller fixes the cause)."""


@_jit
def step_flat_report(st, p, e, flat, offsets, obs, mask):
    """:func:`step_flat_row` for a Python caller, with what it reads next in one return:
    ``(outcome, team reward, tick, terminated, truncated)``. Does nothing and returns
    outcome :data:`STEP_NOT_RUNNING` if the episode has ended, :data:`STEP_NEEDS_ROOM` if
    no bounce-back schedule slot is free for an early discharge (the caller makes room, calls again)."""
    sc = st.scalars
    if sc[e, S_TERMINATED] or sc[e, S_TRUNCATED]:
        return STEP_NOT_RUNNING, 0.0, sc[e, S_TICK], True, True
    if sc[e, S_BOUNCE_CURSOR] >= st.bounce.shape[2]:
        return STEP_NEEDS_ROOM, 0.0, sc[e, S_TICK], False, False
    outcome = act_flat(st, p, e, flat)  # step_flat_row's body (calling it would compile it twice)
    tick(st, p, e)
    observe_row(st, p, e, offsets, obs, mask)
    reward = st.floats[e, F_LAST_REWARD]
    return outcome, reward, sc[e, S_TICK], sc[e, S_TERMINATED] != 0, sc[e, S_TRUNCATED] != 0


@_jit
def observe_row(st, p, e, offsets, obs, mask) -> None:
    """The observation and the mask of row ``e``, both read from one :func:`action_facts`."""
    brd = st.scratch[e]
    facts = action_facts(st, p, e, brd)
    _write_observation_given(st, p, e, offsets, obs, brd, facts)
    _write_mask_given(p, st, e, brd, facts, mask)


@_jit
def redraw_pending_bounces(st, p, e) -> None:
    """Imagine (SPEC §10): every patient sent home early who has not come back keeps an
    unrevealed bounce-back draw; redraw it from the row's (new) key, conditioned on what is
    known (not back by now). The schedule is rebuilt from slot 0; later early discharges follow."""
    pat = st.pat
    key = st.scalars[e, S_KEY]
    now = st.scalars[e, S_TICK]
    low, high = p.ints[I_BOUNCE_DELAY_LOW], p.ints[I_BOUNCE_DELAY_HIGH]
    span = high - low + 1
    k = 0
    for slot in range(st.bounce.shape[2]):
        st.bounce[e, BOUNCE_TICK, slot] = -1
    for pid in range(st.scalars[e, S_N_PATIENTS]):
        if pat[e, pid, PAT_LOCATION] != AWAY:
            continue
        since = pat[e, pid, PAT_AWAY_SINCE]
        first = max(0, now + 1 - since - low)  # the first delay not yet revealed
        left = span - first
        if left <= 0:
            continue
        prob = min(1.0, p.reals[P_BOUNCE_PER_SEVERITY] * pat[e, pid, PAT_SEVERITY])
        # P(bounce with an unrevealed delay | not back by now)
        q = prob * left / span / (1.0 - prob * first / span)
        if uniform(key, np.int64(D_PENDING), pid, np.int64(0)) < q:
            back = since + low + first + int(uniform(key, np.int64(D_PENDING), pid, np.int64(1)) * left)
            if back < p.ints[I_MAX_TICKS]:
                st.bounce[e, BOUNCE_TICK, k] = back
                st.bounce[e, BOUNCE_PID, k] = pid
                k += 1
    st.scalars[e, S_BOUNCE_CURSOR] = k


@_jit
def expected_deaths(st, p, e) -> float:
    """Expected deaths in the coming tick (only severity 5 can die), by each patient's care:
    the death rule's probabilities, summed (the planner counts deaths at their expectation)."""
    pat, beds = st.pat, st.beds
    risk = 0.0
    for i in range(st.scalars[e, S_QUEUE_LEN]):
        if pat[e, st.queue[e, i], PAT_SEVERITY] == 5:
            risk += death_probability(p, np.bool_(False), np.bool_(False))
    for bed in range(p.ints[I_GENERAL_BEDS]):
        pid = beds[e, BEDS_GENERAL, bed]
        if pid != EMPTY and pat[e, pid, PAT_SEVERITY] == 5:
            risk += death_probability(p, np.bool_(False), np.bool_(True))
    for bed in range(p.ints[I_ICU_BEDS]):
        pid = beds[e, BEDS_ICU, bed]
        if pid != EMPTY and pat[e, pid, PAT_SEVERITY] == 5:
            adequate = pat[e, pid, PAT_VENT_OF] != EMPTY or not needs_ventilator(
                pat[e, pid, PAT_SEVERITY],
                pat[e, pid, PAT_CONDITION],  # severity 5, typed as stored
            )
            risk += death_probability(p, adequate, np.bool_(True))
    return risk


# ---------------------------------------------------------------- batches (rows = environments)
ROW_LIVE, ROW_RESTARTED, ROW_ENDED = 0, 1, 2
"""What a batch step reports per row (``resets``): still in its episode; ended and started
its next day in the same call; ended, next day left to the caller (no key drawn ahead, or
the day does not fit the row's capacity)."""


@_jit
def _end_row(st, p, e, offsets, obs, mask, final_obs, final_scalars, final_floats, keys, key_cursor) -> int:
    """Row ``e``'s episode has just ended (its last observation is in ``obs``): keep what the
    vector env reports of it (last observation, counters), then start its next day from the
    next key drawn ahead for it (``keys[e, key_cursor[e]]``) and observe that day's start.
    Returns :data:`ROW_RESTARTED`, or :data:`ROW_ENDED` if the caller must start it."""
    for i in range(obs.shape[0]):  # element loops: slice copies would need numba's runtime
        final_obs[e, i] = obs[i]
    for i in range(st.scalars.shape[1]):
        final_scalars[e, i] = st.scalars[e, i]
    for i in range(st.floats.shape[1]):
        final_floats[e, i] = st.floats[e, i]
    c = key_cursor[e]
    if c >= keys.shape[1]:
        return ROW_ENDED
    if start_row(st, p, e, keys[e, c]) > st.pat.shape[1]:
        return ROW_ENDED  # the same key again once the state has grown
    key_cursor[e] = c + 1
    observe_row(st, p, e, offsets, obs, mask)
    return ROW_RESTARTED


@_jit
def step_flat_batch(st, p, lo, hi, actions, offsets, obs, masks, rewards, outcomes, ends) -> None:
    """Rows ``lo:hi``, each live one: its flat action (out of range = invalid), the tick, the
    next observation and mask; a row whose episode ends is restarted at once (:func:`_end_row`,
    ``ends`` = (resets, final_obs, final_scalars, final_floats, keys, key_cursor); its code
    in ``resets``). Rows already done are left alone. Rows are independent, so disjoint
    ranges may run at once on several threads (no GIL)."""
    resets, final_obs, final_scalars, final_floats, keys, key_cursor = ends
    for e in range(lo, hi):
        resets[e] = ROW_LIVE
        if st.scalars[e, S_TERMINATED] or st.scalars[e, S_TRUNCATED]:
            continue
        a = actions[e]
        outcomes[e] = act_flat(st, p, e, a if 0 <= a < N_FLAT_ACTIONS else -1)
        tick(st, p, e)
        observe_row(st, p, e, offsets, obs[e], masks[e])
        rewards[e] = st.floats[e, F_LAST_REWARD]
        if st.scalars[e, S_TERMINATED] or st.scalars[e, S_TRUNCATED]:
            resets[e] = _end_row(
                st, p, e, offsets, obs[e], masks[e], final_obs, final_scalars, final_floats, keys, key_cursor
            )


@_jit
def step_joint_batch(
    st, p, lo, hi, actions, seen, offsets, obs, masks, rewards, role_rewards, outcomes, ends
) -> None:
    """Rows ``lo:hi``, each live one: one action per role in role order (parallel resolution:
    an action valid on the mask ``seen`` but made impossible by an earlier role is a
    conflict), then the tick, the next observation and mask; ended rows restart as in
    :func:`step_flat_batch`. Threads: as :func:`step_flat_batch`."""
    resets, final_obs, final_scalars, final_floats, keys, key_cursor = ends
    for e in range(lo, hi):
        resets[e] = ROW_LIVE
        if st.scalars[e, S_TERMINATED] or st.scalars[e, S_TRUNCATED]:
            continue
        for r in range(3):
            a = actions[e, r]
            ok = 0 <= a < p.role_actions[r]
            was_valid = ok and (a == 0 or seen[e, p.role_flat[r, max(a, 0)]])
            outcomes[e, r] = act_role(st, p, e, r, a if ok else -1, was_valid)
        tick(st, p, e)
        observe_row(st, p, e, offsets, obs[e], masks[e])
        rewards[e] = st.floats[e, F_LAST_REWARD]
        for r in range(3):
            role_rewards[e, r] = st.floats[e, F_LAST_ROLE_REWARD + r]
        if st.scalars[e, S_TERMINATED] or st.scalars[e, S_TRUNCATED]:
            resets[e] = _end_row(
                st, p, e, offsets, obs[e], masks[e], final_obs, final_scalars, final_floats, keys, key_cursor
            )
