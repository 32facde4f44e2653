"""Fused entry points, compiled: a whole composed-env step of one row (action, tick,
observation, mask) in one call from Python.
"""

from __future__ import annotations

from hospital_marl.core.kernel.common import (
    _jit,
)
from hospital_marl.core.kernel.dynamics import tick
from hospital_marl.core.kernel.observe import observe_row
from hospital_marl.core.kernel.rules import act_flat
from hospital_marl.core.types import (
    F_LAST_REWARD,
    S_BOUNCE_CURSOR,
    S_TERMINATED,
    S_TICK,
    S_TRUNCATED,
)


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
