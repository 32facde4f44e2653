"""What every part of the compiled kernel shares: the ``njit`` settings, the outcome and
action-kind codes and the observation blocks' order (the clinical thresholds are
:mod:`hospital_marl.core.constants`, re-exported here for the kernel's files).

Kept apart so each job of the kernel (rules, dynamics, observation writers, fused entry points,
batch loops) is a file of its own; :mod:`hospital_marl.core.kernel` re-exports them all.
"""

from __future__ import annotations

from numba import njit

from hospital_marl.core.actions import MAX_ICU_BEDS, MAX_VENTILATORS, Kind
from hospital_marl.core.constants import (  # noqa: F401 (for the kernel)
    BOARD_OBS_ROWS,
    CRITICAL_SEVERITY,
    MAX_SEVERITY,
    RESPIRATORY,
)
from hospital_marl.core.rng import JIT_OPTIONS

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
MAX_GENERAL_OBS, MAX_ICU_OBS, MAX_VENT_OBS = BOARD_OBS_ROWS, MAX_ICU_BEDS, MAX_VENTILATORS

_jit = njit(**JIT_OPTIONS)
# Constants handed to a compiled callee are wrapped (``np.int64(ICU)``, ``np.bool_(True)``):
# numba types a bare literal as ``Literal[int](3)`` and compiles the callee once per value,
# which the cold compile (every fresh clone, CI) pays for; wrapped, one specialisation serves all.
"""No reference counting: a call passing the state's arrays would otherwise incref and decref
each of them, which costs more than most rules do. Safe because no rule allocates
(``State.scratch`` is their working space) and every array outlives the call."""
