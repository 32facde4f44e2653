"""The batch loops, compiled: the vector envs' step over a range of rows (environments), with
ended rows restarted on the next day drawn ahead for them.

Parameters arrive as a table (:func:`~hospital_marl.core.types.stack_params`: every
:class:`~hospital_marl.core.types.Params` field with a leading row axis) and ``which``, the
table row of each env: a named scenario is a one-row table read by every env (``which`` all
0), a scenario distribution one row per env. Either way one call steps the whole range, and
the per-env :class:`Params` the rules receive is a view of that row (the same type as the
scalar env's, so the rules compile once for both).
"""

from __future__ import annotations

from hospital_marl.core.actions import N_FLAT_ACTIONS
from hospital_marl.core.kernel.common import (
    _jit,
)
from hospital_marl.core.kernel.dynamics import start_row, tick
from hospital_marl.core.kernel.observe import observe_row
from hospital_marl.core.kernel.rules import act_flat, act_role
from hospital_marl.core.types import (
    F_LAST_REWARD,
    F_LAST_ROLE_REWARD,
    N_ROLES,
    S_TERMINATED,
    S_TRUNCATED,
    Params,
)

# ---------------------------------------------------------------- batches (rows = environments)
ROW_LIVE, ROW_RESTARTED, ROW_ENDED = 0, 1, 2
"""What a batch step reports per row (``resets``): still in its episode; ended and started
its next day in the same call; ended, next day left to the caller (no key drawn ahead, or
the day does not fit the row's capacity)."""


@_jit
def _params_of(table, k):
    """Row ``k`` of the parameter table ``table`` as a :class:`Params` of views (nothing copied)."""
    return Params(
        table.ints[k],
        table.reals[k],
        table.deteriorate_base[k],
        table.condition_factor[k],
        table.improve[k],
        table.treatment[k],
        table.action_kind[k],
        table.action_index[k],
        table.action_role[k],
        table.role_flat[k],
        table.role_actions[k],
        table.rates[k],
        table.mix_cdf[k],
        table.service[k],
    )


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
def _same_row_until(which, lo, hi) -> int:
    """The end of the run of envs from ``lo`` that read the same table row (a named scenario:
    all of them; a distribution: one env each)."""
    stop = lo + 1
    while stop < hi and which[stop] == which[lo]:
        stop += 1
    return stop


@_jit
def step_flat_batch(st, table, which, lo, hi, actions, offsets, obs, masks, rewards, outcomes, ends) -> None:
    """Rows ``lo:hi`` (env ``e`` with the parameters of ``table`` row ``which[e]``), each live
    one: its flat action (out of range = invalid), the tick, the next observation and mask; a
    row whose episode ends is restarted at once (:func:`_end_row`, ``ends`` = (resets, final_obs,
    final_scalars, final_floats, keys, key_cursor); its code in ``resets``). Rows already done
    are left alone. Rows are independent, so disjoint ranges may run at once on several threads
    (no GIL)."""
    # Each run of envs sharing a row is one call of the loop body with the row's parameters as
    # an argument. Measured (B = 1024, normal_day): as fast as the loop before the table; the
    # same body inlined here, with the views made per run (or per env), ran 15-20 % slower.
    # The price is compile time: the body is optimised in _flat_rows and again linked in here.
    while lo < hi:
        stop = _same_row_until(which, lo, hi)
        _flat_rows(st, _params_of(table, which[lo]), lo, stop, actions, offsets, obs, masks, rewards,
                   outcomes, ends)  # fmt: skip
        lo = stop


@_jit
def _flat_rows(st, p, lo, hi, actions, offsets, obs, masks, rewards, outcomes, ends) -> None:
    """:func:`step_flat_batch` over rows ``lo:hi`` that share the parameters ``p``."""
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
    st, table, which, lo, hi, actions, seen, offsets, obs, masks, rewards, role_rewards, outcomes, ends
) -> None:
    """Rows ``lo:hi`` (parameters as :func:`step_flat_batch`), each live one: one action per role
    in role order (parallel resolution: an action valid on the mask ``seen`` but made impossible
    by an earlier role is a conflict), then the tick, the next observation and mask; ended rows
    restart as in :func:`step_flat_batch`. Threads: as :func:`step_flat_batch`."""
    while lo < hi:
        stop = _same_row_until(which, lo, hi)
        _joint_rows(st, _params_of(table, which[lo]), lo, stop, actions, seen, offsets, obs, masks, rewards,
                    role_rewards, outcomes, ends)  # fmt: skip
        lo = stop


@_jit
def _joint_rows(
    st, p, lo, hi, actions, seen, offsets, obs, masks, rewards, role_rewards, outcomes, ends
) -> None:
    """:func:`step_joint_batch` over rows ``lo:hi`` that share the parameters ``p``."""
    resets, final_obs, final_scalars, final_floats, keys, key_cursor = ends
    for e in range(lo, hi):
        resets[e] = ROW_LIVE
        if st.scalars[e, S_TERMINATED] or st.scalars[e, S_TRUNCATED]:
            continue
        for r in range(N_ROLES):
            a = actions[e, r]
            ok = 0 <= a < p.role_actions[r]
            was_valid = ok and (a == 0 or seen[e, p.role_flat[r, max(a, 0)]])
            outcomes[e, r] = act_role(st, p, e, r, a if ok else -1, was_valid)
        tick(st, p, e)
        observe_row(st, p, e, offsets, obs[e], masks[e])
        rewards[e] = st.floats[e, F_LAST_REWARD]
        for r in range(N_ROLES):
            role_rewards[e, r] = st.floats[e, F_LAST_ROLE_REWARD + r]
        if st.scalars[e, S_TERMINATED] or st.scalars[e, S_TRUNCATED]:
            resets[e] = _end_row(
                st, p, e, offsets, obs[e], masks[e], final_obs, final_scalars, final_floats, keys, key_cursor
            )


@_jit
def turn_batch(st, table, which, lo, hi, role, actions, offsets, obs, masks, outcomes, ends) -> None:
    """One AEC turn (:mod:`hospital_marl.envs.protocol`) of rows ``lo:hi``: each live row's
    action for ``role``, carried out at once (an impossible one is invalid, -1, as in the AEC
    env: the role saw the current mask), then the row observed again, so the next role reads the
    mid-tick state. No tick (:func:`tick_batch` runs it after the last role). ``ends`` is unused
    (nothing ends before the tick). Threads: as :func:`step_flat_batch`."""
    while lo < hi:
        stop = _same_row_until(which, lo, hi)
        _turn_rows(st, _params_of(table, which[lo]), lo, stop, role, actions, offsets, obs, masks, outcomes)
        lo = stop


@_jit
def _turn_rows(st, p, lo, hi, role, actions, offsets, obs, masks, outcomes) -> None:
    """:func:`turn_batch` over rows ``lo:hi`` that share the parameters ``p``."""
    for e in range(lo, hi):
        if st.scalars[e, S_TERMINATED] or st.scalars[e, S_TRUNCATED]:
            continue
        a = actions[e]
        ok = 0 <= a < p.role_actions[role]
        outcomes[e, role] = act_role(st, p, e, role, a if ok else -1, False)
        observe_row(st, p, e, offsets, obs[e], masks[e])


@_jit
def tick_batch(st, table, which, lo, hi, offsets, obs, masks, rewards, role_rewards, ends) -> None:
    """The tick of rows ``lo:hi`` after their AEC turns (:func:`turn_batch`): the tick, the next
    observation and mask, the tick's rewards; ended rows restart as in :func:`step_flat_batch`."""
    while lo < hi:
        stop = _same_row_until(which, lo, hi)
        _tick_rows(st, _params_of(table, which[lo]), lo, stop, offsets, obs, masks, rewards, role_rewards,
                   ends)  # fmt: skip
        lo = stop


@_jit
def _tick_rows(st, p, lo, hi, offsets, obs, masks, rewards, role_rewards, ends) -> None:
    """:func:`tick_batch` over rows ``lo:hi`` that share the parameters ``p``."""
    resets, final_obs, final_scalars, final_floats, keys, key_cursor = ends
    for e in range(lo, hi):
        resets[e] = ROW_LIVE
        if st.scalars[e, S_TERMINATED] or st.scalars[e, S_TRUNCATED]:
            continue
        tick(st, p, e)
        observe_row(st, p, e, offsets, obs[e], masks[e])
        rewards[e] = st.floats[e, F_LAST_REWARD]
        for r in range(3):
            role_rewards[e, r] = st.floats[e, F_LAST_ROLE_REWARD + r]
        if st.scalars[e, S_TERMINATED] or st.scalars[e, S_TRUNCATED]:
            resets[e] = _end_row(
                st, p, e, offsets, obs[e], masks[e], final_obs, final_scalars, final_floats, keys, key_cursor
            )
