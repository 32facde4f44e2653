"""SPEC §2's dynamics, compiled: one tick (care, deterioration, deaths, weaning, the waiting
room, rewards), arrivals, a day drawn from its key into a row, and imagined futures (a copy of
the present with every unrevealed draw redrawn from another key).
"""

from __future__ import annotations

import numpy as np

from hospital_marl.core.kernel.common import (
    CRITICAL_SEVERITY,
    MAX_SEVERITY,
    NO_ROLE,
    _jit,
)
from hospital_marl.core.kernel.rules import (
    _die,
    _discharge,
    _mark_critical,
    _release_ventilator,
    _reward,
    death_probability,
    deteriorate_probability,
    needs_ventilator,
    ready_for_step_down,
)
from hospital_marl.core.rng import (
    D_BURST_COUNT,
    D_CONDITION,
    D_COUNT,
    D_DYNAMICS,
    D_PENDING,
    D_Q_GENERAL,
    D_Q_ICU,
    D_QUANTILE,
    D_SERVICE,
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
    BOUNCE_PID,
    BOUNCE_TICK,
    C_ARRIVALS,
    C_BOUNCE_BACKS,
    C_DEATHS,
    C_DETERIORATIONS,
    C_TICKS,
    C_WAIT_TICKS,
    DEAD,
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
    N_ROLES,
    P_BOUNCE_PER_SEVERITY,
    P_BURST_RATE,
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
    R_CRITICAL_UNATTENDED,
    R_ICU_BUSY_BONUS,
    R_ICU_BUSY_THRESHOLD,
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


# ---------------------------------------------------------------- dynamics
@_jit
def dynamics_uniform(st, e, t, pid) -> float:
    """Patient ``pid``'s uniform at tick ``t`` (one per patient and tick, whatever its care):
    a user day's own draw if it brought them, else the key's."""
    if st.latent.shape[1] > 0:
        return st.latent[e, t, pid]
    return uniform(st.scalars[e, S_KEY], np.int64(D_DYNAMICS), np.int64(pid), t)


@_jit
def _treat(st, p, e, pid, u: float, care: int, t: int) -> None:
    """Adequate care: treatment progresses (at the tick's service speed: staffing); severity
    may improve; residual mortality at 5."""
    pat = st.pat
    if pat[e, pid, PAT_REMAINING] > 0:
        speed = p.service[t]
        if speed >= 1.0 or uniform(st.scalars[e, S_KEY], np.int64(D_SERVICE), np.int64(pid), t) < speed:
            pat[e, pid, PAT_REMAINING] -= 1
    sev = pat[e, pid, PAT_SEVERITY]
    if sev == MAX_SEVERITY:
        death = death_probability(p, np.bool_(True), np.bool_(True))
        if u < death:
            _die(st, p, e, pid)
        elif u < death + p.improve[care, MAX_SEVERITY]:
            pat[e, pid, PAT_SEVERITY] = MAX_SEVERITY - 1
    elif u < p.improve[care, sev]:
        pat[e, pid, PAT_SEVERITY] = sev - 1


@_jit
def _neglect(st, p, e, pid, u: float, in_bed: bool) -> None:
    """No adequate care: severity may rise (faster the longer the neglect); death at 5."""
    pat = st.pat
    n = pat[e, pid, PAT_NEGLECT]
    pat[e, pid, PAT_NEGLECT] = n + 1
    sev = pat[e, pid, PAT_SEVERITY]
    if sev == MAX_SEVERITY:
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
            pat[e, pid, PAT_SEVERITY] = min(MAX_SEVERITY, pat[e, pid, PAT_SEVERITY] + 1)
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
    t = st.scalars[e, S_TICK]
    _icu_care(st, p, e, t)
    n_crit_general = _general_care(st, p, e, t)
    _wean(st, p, e)
    n_waiting, n_crit_waiting = _waiting_room(st, p, e, t)
    _tick_rewards(st, p, e, n_waiting, n_crit_waiting, n_crit_general)
    _next_tick(st, p, e, t)
    _settle_rewards(st, e)


@_jit
def _icu_care(st, p, e, t) -> None:
    """ICU: adequate care unless the patient needs a ventilator and has none; a patient ready
    for step-down holds the bed (stable) until the step-down block has passed."""
    pat, beds = st.pat, st.beds
    for bed in range(p.ints[I_ICU_BEDS]):
        pid = beds[e, BEDS_ICU, bed]
        if pid == EMPTY:
            continue
        s = pat[e, pid, PAT_SEVERITY]
        if ready_for_step_down(pat[e, pid, PAT_REMAINING], s):
            pat[e, pid, PAT_READY_FOR] += 1
            if pat[e, pid, PAT_READY_FOR] >= p.ints[I_STEP_DOWN_BLOCK]:
                beds[e, BEDS_ICU, bed] = EMPTY
                _release_ventilator(st, e, pid)
                _discharge(st, p, e, pid, np.int64(NO_ROLE))
            continue
        u = dynamics_uniform(st, e, t, pid)
        if pat[e, pid, PAT_VENT_OF] != EMPTY or not needs_ventilator(s, pat[e, pid, PAT_CONDITION]):
            _treat(st, p, e, pid, u, np.int64(1), t)
        else:
            _neglect(st, p, e, pid, u, np.bool_(True))
        if pat[e, pid, PAT_LOCATION] == DEAD:
            beds[e, BEDS_ICU, bed] = EMPTY


@_jit
def _general_care(st, p, e, t) -> int:
    """General beds: adequate for the non-critical; critical patients make no progress.
    Returns how many critical patients are left in general beds."""
    pat, beds = st.pat, st.beds
    n_crit_general = 0
    for bed in range(p.ints[I_GENERAL_BEDS]):
        pid = beds[e, BEDS_GENERAL, bed]
        if pid == EMPTY:
            continue
        u = dynamics_uniform(st, e, t, pid)
        if pat[e, pid, PAT_SEVERITY] < CRITICAL_SEVERITY:
            _treat(st, p, e, pid, u, np.int64(0), t)
            if pat[e, pid, PAT_REMAINING] <= 0:
                beds[e, BEDS_GENERAL, bed] = EMPTY
                _discharge(st, p, e, pid, np.int64(NO_ROLE))
        else:
            _neglect(st, p, e, pid, u, np.bool_(True))
            if pat[e, pid, PAT_LOCATION] == DEAD:
                beds[e, BEDS_GENERAL, bed] = EMPTY
            else:
                n_crit_general += 1
    return n_crit_general


@_jit
def _wean(st, p, e) -> None:
    """Ventilator weaning: released after wean_ticks consecutive ticks not needed."""
    pat, beds = st.pat, st.beds
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


@_jit
def _waiting_room(st, p, e, t) -> tuple[int, int]:
    """Waiting room: never adequate care. Neglect, deaths (the dead leave the queue), then
    waiting time. Returns (patients still waiting, how many of them are critical)."""
    pat, sc = st.pat, st.scalars
    n_crit_waiting = 0
    kept = 0
    for i in range(sc[e, S_QUEUE_LEN]):
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
    return kept, n_crit_waiting


@_jit
def _tick_rewards(st, p, e, n_waiting, n_crit_waiting, n_crit_general) -> None:
    """The tick's team rewards (critical patients without adequate care, the others waiting,
    a busy ICU) and the occupancy the metrics average."""
    beds = st.beds
    n_icu, n_general = p.ints[I_ICU_BEDS], p.ints[I_GENERAL_BEDS]
    _reward(
        st,
        e,
        p.reals[R_CRITICAL_UNATTENDED] * (n_crit_waiting + n_crit_general)
        + p.reals[R_WAITING] * (n_waiting - n_crit_waiting),
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
    st.scalars[e, C_TICKS] += 1


@_jit
def _next_tick(st, p, e, t) -> None:
    """The episode ends (the death cap, or the last tick) with the survival bonus, or the next
    tick begins: bounce-backs return, then the day's arrivals."""
    sc = st.scalars
    sc[e, S_TICK] = t + 1
    if sc[e, C_DEATHS] >= p.ints[I_MAX_DEATHS]:
        sc[e, S_TERMINATED] = 1
    elif t + 1 >= p.ints[I_MAX_TICKS]:
        sc[e, S_TRUNCATED] = 1
    else:
        arrive(st, p, e, t + 1)
    if sc[e, S_TERMINATED] or sc[e, S_TRUNCATED]:
        _reward(st, e, p.reals[R_SURVIVAL_BONUS] * survival_rate(st, e), np.int64(NO_ROLE))


@_jit
def _settle_rewards(st, e) -> None:
    """The tick's team reward and each role's (its own plus the shared part the roles did not
    earn alone) into ``floats[e, F_LAST_*]``; the tick's accumulators emptied."""
    fl = st.floats
    team = fl[e, F_TICK_REWARD]
    role_sum = fl[e, F_ROLE_REWARD]
    for r in range(1, N_ROLES):  # left to right, as the rewards were always summed
        role_sum += fl[e, F_ROLE_REWARD + r]
    shared = team - role_sum
    fl[e, F_LAST_REWARD] = team
    for r in range(N_ROLES):
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
    """Row ``e`` (a copy of the present) gets a new future from ``key`` (SPEC §10, §12): later
    arrivals, every patient's dynamics from this tick on, new early discharges' draws, the
    pending bounce-backs and the treatment quantiles nobody has seen yet are all redrawn.
    Returns the imagined day's patient count; if it exceeds the capacity the row is unusable
    (grow, copy the present again, retry)."""
    st.scalars[e, S_KEY] = key
    n = draw_arrivals(st, p, e, st.scalars[e, S_TICK] + 1, st.scalars[e, S_NEXT_ARRIVAL])
    if n <= st.pat.shape[1]:
        forget_patients(st, e, n)  # what is left of the real day past the imagined one
        st.scalars[e, S_N_PATIENTS] = n
        redraw_pending_bounces(st, p, e)
        redraw_unrevealed_quantiles(st, e)
    return n


@_jit
def seal_row(st, p, e, key) -> None:
    """Row ``e`` (a copy of the present) keeps the present only (SPEC §12): the patients who
    have not arrived are erased, and every unrevealed draw of those who have (pending
    bounce-backs, unseen treatment quantiles, their dynamics) now comes from ``key``. What a
    policy's handle holds: nothing in it is the day's future or the episode's key."""
    st.scalars[e, S_KEY] = key
    arrived = st.scalars[e, S_NEXT_ARRIVAL]
    forget_patients(st, e, arrived)
    st.scalars[e, S_N_PATIENTS] = arrived
    redraw_pending_bounces(st, p, e)
    redraw_unrevealed_quantiles(st, e)


@_jit
def forget_patients(st, e, first) -> None:
    """Patient ids ``first`` onwards become blank rows (no identity, no quantiles)."""
    for pid in range(first, st.pat.shape[1]):
        for f in range(N_PAT):
            st.pat[e, pid, f] = 0
        st.pat[e, pid, PAT_VENT_OF] = EMPTY
        st.quantile[e, 0, pid] = 0.0
        st.quantile[e, 1, pid] = 0.0


@_jit
def redraw_unrevealed_quantiles(st, e) -> None:
    """Every arrived patient's treatment quantile for a care level it is not in now is redrawn
    from the row's key: a waiting patient's two, a general-bed patient's ICU one (an ICU
    transfer draws a new time), an ICU patient's general one. The quantile of the bed a patient
    is in stays: its draw is the remaining treatment time the present shows."""
    key = st.scalars[e, S_KEY]
    for pid in range(st.scalars[e, S_NEXT_ARRIVAL]):
        where = st.pat[e, pid, PAT_LOCATION]
        if where != GENERAL:
            st.quantile[e, 0, pid] = uniform(key, np.int64(D_QUANTILE), pid, np.int64(0))
        if where != ICU:
            st.quantile[e, 1, pid] = uniform(key, np.int64(D_QUANTILE), pid, np.int64(1))


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
        if pat[e, st.queue[e, i], PAT_SEVERITY] == MAX_SEVERITY:
            risk += death_probability(p, np.bool_(False), np.bool_(False))
    for bed in range(p.ints[I_GENERAL_BEDS]):
        pid = beds[e, BEDS_GENERAL, bed]
        if pid != EMPTY and pat[e, pid, PAT_SEVERITY] == MAX_SEVERITY:
            risk += death_probability(p, np.bool_(False), np.bool_(True))
    for bed in range(p.ints[I_ICU_BEDS]):
        pid = beds[e, BEDS_ICU, bed]
        if pid != EMPTY and pat[e, pid, PAT_SEVERITY] == MAX_SEVERITY:
            adequate = pat[e, pid, PAT_VENT_OF] != EMPTY or not needs_ventilator(
                pat[e, pid, PAT_SEVERITY],
                pat[e, pid, PAT_CONDITION],  # severity 5, typed as stored
            )
            risk += death_probability(p, adequate, np.bool_(True))
    return risk
