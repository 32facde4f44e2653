"""The observation writers, compiled: every observation block of a row into one float32
vector (the global-state layout), and the observation with its mask from one set of facts.
"""

from __future__ import annotations

from hospital_marl.core.kernel.common import (
    MAX_GENERAL_OBS,
    MAX_ICU_OBS,
    MAX_VENT_OBS,
    O_BED_OCCUPANCY,
    O_BOARD_REMAINING,
    O_CAPACITY,
    O_ICU_NEEDS_VENT,
    O_ICU_OCCUPANCY,
    O_ICU_ON_VENT,
    O_ICU_READY,
    O_ICU_REMAINING,
    O_STATS,
    O_TIME_STEP,
    O_VENTILATOR_STATUS,
    O_WAITING_QUEUE,
    _jit,
)
from hospital_marl.core.kernel.rules import (
    _write_mask_given,
    action_facts,
    needs_ventilator,
    ready_for_step_down,
)
from hospital_marl.core.types import (
    BEDS_ICU,
    BEDS_VENT,
    BOARD_DISCHARGE_SLOTS,
    C_DEATHS,
    C_DISCHARGES,
    EMPTY,
    I_ICU_BEDS,
    I_VENTILATORS,
    PAT_CONDITION,
    PAT_REMAINING,
    PAT_SEVERITY,
    PAT_VENT_OF,
    PAT_WAIT,
    QUEUE_SLOTS,
    S_QUEUE_LEN,
    S_TICK,
)


# ---------------------------------------------------------------- observations
@_jit
def board_row(k, n_board) -> int:
    """The board position an observation's row ``k`` shows: row k itself while the board fits
    in ``MAX_GENERAL_OBS`` rows; above that the first ``MAX_GENERAL_OBS - 5`` rows are the most
    severe and the last 5 the least severe (every position an action addresses, SPEC §3)."""
    if n_board <= MAX_GENERAL_OBS or k < MAX_GENERAL_OBS - BOARD_DISCHARGE_SLOTS:
        return k
    return n_board - MAX_GENERAL_OBS + k


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
            pid = brd[board_row(k, n_board)]
            out[o_sev + k] = pat[e, pid, PAT_SEVERITY]
            out[o_rem + k] = pat[e, pid, PAT_REMAINING]
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


@_jit
def observe_row(st, p, e, offsets, obs, mask) -> None:
    """The observation and the mask of row ``e``, both read from one :func:`action_facts`."""
    brd = st.scratch[e]
    facts = action_facts(st, p, e, brd)
    _write_observation_given(st, p, e, offsets, obs, brd, facts)
    _write_mask_given(p, st, e, brd, facts, mask)
