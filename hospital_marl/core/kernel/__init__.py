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

The kernel is split by job: :mod:`~hospital_marl.core.kernel.common` (settings and codes),
:mod:`~hospital_marl.core.kernel.rules` (validity, masks, events, actions),
:mod:`~hospital_marl.core.kernel.dynamics` (the tick, arrivals, days, imagined futures),
:mod:`~hospital_marl.core.kernel.observe` (observation writers),
:mod:`~hospital_marl.core.kernel.fused` (whole steps for a Python caller) and
:mod:`~hospital_marl.core.kernel.batch` (the vector envs' loops). This package re-exports
them, so callers write ``kernel.tick``. numba's cache checks only the file that defines a
function, while these functions compile their callees in from the other files: at import,
:func:`~hospital_marl.core.jitcache.check_cache` empties the kernel's cache whenever any of
its source files has changed since it was compiled.
"""

from __future__ import annotations

from hospital_marl.core import jitcache
from hospital_marl.core.kernel import batch, common, dynamics, fused, observe, rules
from hospital_marl.core.kernel.batch import (
    ROW_ENDED,
    ROW_LIVE,
    ROW_RESTARTED,
    step_flat_batch,
    step_joint_batch,
    tick_batch,
    turn_batch,
)
from hospital_marl.core.kernel.common import (
    CRITICAL_SEVERITY,
    K_ADMIT_GENERAL,
    K_ADMIT_ICU,
    K_DISCHARGE_ICU,
    K_EARLY_DISCHARGE,
    K_NOOP,
    K_TRANSFER_ICU,
    K_VENTILATE,
    MAX_GENERAL_OBS,
    MAX_ICU_OBS,
    MAX_VENT_OBS,
    NO_ROLE,
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
    OBS_BLOCKS,
    OUT_CONFLICT,
    OUT_DONE,
    OUT_INVALID,
    OUT_NOOP,
)
from hospital_marl.core.kernel.dynamics import (
    arrive,
    draw_arrivals,
    dynamics_uniform,
    expected_deaths,
    forget_patients,
    imagine_row,
    redraw_pending_bounces,
    redraw_unrevealed_quantiles,
    reset_row,
    seal_row,
    start_row,
    start_rows,
    survival_rate,
    tick,
)
from hospital_marl.core.kernel.fused import STEP_NEEDS_ROOM, STEP_NOT_RUNNING, step_flat_report, step_flat_row
from hospital_marl.core.kernel.observe import board_row, observe_row, write_observation
from hospital_marl.core.kernel.rules import (
    act_flat,
    act_role,
    action_facts,
    board,
    carry_out,
    death_probability,
    deteriorate_probability,
    in_service,
    in_service_rows,
    is_valid,
    needs_ventilator,
    ready_for_step_down,
    treatment_ticks,
    valid_given,
    ventilator_target,
    ventilators_in_service,
    write_mask,
)

SOURCES: tuple[str, ...] = (
    *(m.__name__ for m in (common, rules, dynamics, observe, fused, batch)),
    "hospital_marl.core.constants",
    "hospital_marl.core.rng",
    "hospital_marl.core.types",
    "hospital_marl.core.actions",
)
"""Modules whose code or constants the kernel's functions compile in (see the module docstring)."""

jitcache.check_cache(jitcache.dispatchers(rules, dynamics, observe, fused, batch), "kernel.sources", SOURCES)

__all__ = [
    "CRITICAL_SEVERITY",
    "K_ADMIT_GENERAL",
    "K_ADMIT_ICU",
    "K_DISCHARGE_ICU",
    "K_EARLY_DISCHARGE",
    "K_NOOP",
    "K_TRANSFER_ICU",
    "K_VENTILATE",
    "MAX_GENERAL_OBS",
    "MAX_ICU_OBS",
    "MAX_VENT_OBS",
    "NO_ROLE",
    "OBS_BLOCKS",
    "OUT_CONFLICT",
    "OUT_DONE",
    "OUT_INVALID",
    "OUT_NOOP",
    "O_BED_OCCUPANCY",
    "O_BOARD_REMAINING",
    "O_CAPACITY",
    "O_ICU_NEEDS_VENT",
    "O_ICU_OCCUPANCY",
    "O_ICU_ON_VENT",
    "O_ICU_READY",
    "O_ICU_REMAINING",
    "O_STATS",
    "O_TIME_STEP",
    "O_VENTILATOR_STATUS",
    "O_WAITING_QUEUE",
    "ROW_ENDED",
    "ROW_LIVE",
    "ROW_RESTARTED",
    "SOURCES",
    "STEP_NEEDS_ROOM",
    "STEP_NOT_RUNNING",
    "act_flat",
    "act_role",
    "action_facts",
    "arrive",
    "board",
    "board_row",
    "carry_out",
    "death_probability",
    "deteriorate_probability",
    "draw_arrivals",
    "dynamics_uniform",
    "expected_deaths",
    "forget_patients",
    "imagine_row",
    "in_service",
    "in_service_rows",
    "is_valid",
    "needs_ventilator",
    "observe_row",
    "ready_for_step_down",
    "redraw_pending_bounces",
    "redraw_unrevealed_quantiles",
    "reset_row",
    "seal_row",
    "start_row",
    "start_rows",
    "step_flat_batch",
    "step_flat_report",
    "step_flat_row",
    "step_joint_batch",
    "survival_rate",
    "tick",
    "tick_batch",
    "treatment_ticks",
    "turn_batch",
    "valid_given",
    "ventilator_target",
    "ventilators_in_service",
    "write_mask",
    "write_observation",
]
