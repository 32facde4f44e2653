"""SPEC §2–§3's rules, compiled: who needs what, action validity and the mask, the events
an action or a tick causes (rewards, discharges, deaths, placements) and carrying out an
action. One environment's row ``e`` of a :class:`~hospital_marl.core.types.State`.
"""

from __future__ import annotations

import numpy as np

from hospital_marl.core.actions import N_FLAT_ACTIONS
from hospital_marl.core.kernel.common import (
    CRITICAL_SEVERITY,
    K_ADMIT_GENERAL,
    K_ADMIT_ICU,
    K_DISCHARGE_ICU,
    K_EARLY_DISCHARGE,
    K_NOOP,
    K_TRANSFER_ICU,
    K_VENTILATE,
    MAX_SEVERITY,
    NO_ROLE,
    OUT_CONFLICT,
    OUT_DONE,
    OUT_INVALID,
    OUT_NOOP,
    RESPIRATORY,
    _jit,
)
from hospital_marl.core.rng import (
    D_BOUNCE,
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
    C_CONFLICTS,
    C_CRITICAL_DEATHS,
    C_CRITICAL_SAVED,
    C_CRITICAL_TOTAL,
    C_DEATHS,
    C_DISCHARGES,
    C_EARLY_DISCHARGES,
    C_INVALID_ACTIONS,
    DEAD,
    DISCHARGED,
    EMPTY,
    F_ROLE_REWARD,
    F_TICK_REWARD,
    GENERAL,
    I_BOUNCE_DELAY_HIGH,
    I_BOUNCE_DELAY_LOW,
    I_GENERAL_BEDS,
    I_ICU_BEDS,
    I_MAX_TICKS,
    I_OUTAGE_END,
    I_OUTAGE_START,
    I_OUTAGE_VENTS,
    I_VENTILATORS,
    ICU,
    P_BED_FACTOR,
    P_BOUNCE_PER_SEVERITY,
    P_DEATH_IN_BED,
    P_DEATH_RESIDUAL,
    P_DEATH_WAITING,
    P_DETERIORATE_CAP,
    P_NEGLECT_SCALE,
    PAT_ADMITTED_AT,
    PAT_AWAY_SINCE,
    PAT_CONDITION,
    PAT_LOCATION,
    PAT_READY_FOR,
    PAT_REMAINING,
    PAT_SEVERITY,
    PAT_VENT_OF,
    PAT_WAS_CRITICAL,
    QUEUE_SLOTS,
    R_CRITICAL_DISCHARGE,
    R_DEATH,
    R_DISCHARGE,
    R_EARLY_PER_SEVERITY,
    R_INVALID,
    S_BOUNCE_CURSOR,
    S_KEY,
    S_QUEUE_LEN,
    S_TICK,
)


@_jit
def needs_ventilator(severity: int, condition: int) -> bool:
    """SPEC §2: (respiratory and critical) or the highest severity."""
    return severity == MAX_SEVERITY or (severity >= CRITICAL_SEVERITY and condition == RESPIRATORY)


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
def in_service(ventilators, out, start, end, tick) -> int:
    """THE outage rule: the ventilators that can take a patient at a decision at ``tick``, of
    ``ventilators``, while ``out`` of them are out of service from ``start`` to ``end``
    inclusive (:class:`~hospital_marl.core.scenarios.Outage`; the highest-numbered go)."""
    if start <= tick <= end:
        return ventilators - out
    return ventilators


@_jit
def ventilators_in_service(st, p, e) -> int:
    """:func:`in_service` of row ``e`` at its current tick."""
    ints, tick = p.ints, st.scalars[e, S_TICK]
    vents, out = ints[I_VENTILATORS], ints[I_OUTAGE_VENTS]
    return in_service(vents, out, ints[I_OUTAGE_START], ints[I_OUTAGE_END], tick)


@_jit
def in_service_rows(table, ticks, out) -> None:
    """:func:`in_service` of several rows: ``table`` ``(k, 4)`` [ventilators, out, start, end]
    and ``ticks`` ``(k,)`` -> ``out`` ``(k,)`` (the vector envs' presence blocks)."""
    for i in range(len(ticks)):
        out[i] = in_service(table[i, 0], table[i, 1], table[i, 2], table[i, 3], ticks[i])


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
    for v in range(ventilators_in_service(st, p, e)):
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
        in_service = ventilators_in_service(st, p, e)
        return index < in_service and st.beds[e, BEDS_VENT, index] == EMPTY and unvented > 0
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
