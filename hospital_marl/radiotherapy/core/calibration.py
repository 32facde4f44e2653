"""Calibration of the dose constant k (SPEC-RT §2).

k (dose per unit weight on the central axis, × Rx) is set so that six to seven
evenly spaced beams at the middle weight give the tumour D95 ≈ 1.0 Rx: the mean
D95 of the 6-beam and the 7-beam plans over :data:`CALIBRATION_PHANTOMS`
phantoms is exactly 1 after calibration.

k is per task, like a clinical plan normalisation: the same k does not give every
tumour size and depth the same D95 (attenuation, the penumbra's share of a small
target), so the tasks' stored k differ.
The built-in tasks store their k (``Task.dose_scale``, recomputed by
``python -m hospital_marl.radiotherapy.core.calibration``); a user task with
``dose_scale=None`` is calibrated on first use (a fraction of a second, cached).
"""

from __future__ import annotations

import numpy as np

from hospital_marl.radiotherapy.core.dose import ANGLE_STEP, CALIBRATION_WEIGHT, beam_dose
from hospital_marl.radiotherapy.core.metrics import dose_at_volume
from hospital_marl.radiotherapy.core.phantoms import draw_phantom
from hospital_marl.radiotherapy.core.tasks import TASKS, Task

CALIBRATION_PHANTOMS = 16
CALIBRATION_SEED = 20_240_917
CALIBRATION_BEAMS = (6, 7)

_cache: dict[int, tuple[Task, float]] = {}


def evenly_spaced_angles(n_beams: int) -> list[int]:
    """``n_beams`` gantry angles 360°/n apart from 0°, rounded to the angle grid (degrees)."""
    return [round(360 * i / n_beams / ANGLE_STEP) * ANGLE_STEP % 360 for i in range(n_beams)]


def calibration_d95(task: Task, dose_scale: float, n_phantoms: int = CALIBRATION_PHANTOMS) -> float:
    """Mean tumour D95 of the 6- and 7-beam evenly spaced plans at the middle weight."""
    values = []
    for i in range(n_phantoms):
        rng = np.random.default_rng(np.random.SeedSequence([CALIBRATION_SEED, i]))
        phantom = draw_phantom(task.generator, rng, task.oar_names, task.envelopes, task.anatomy_for("train"))
        beams = {a: beam_dose(phantom, a, dose_scale) for a in range(0, 360, ANGLE_STEP)}
        for n in CALIBRATION_BEAMS:
            dose = np.zeros_like(beams[0])  # summed in the beams' order, as sum() did
            for a in evenly_spaced_angles(n):
                dose = dose + CALIBRATION_WEIGHT * beams[a]
            values.append(dose_at_volume(dose[phantom.tumour], 95))
    return float(np.mean(values))


def calibrate(task: Task) -> float:
    """The k giving a mean calibration D95 of exactly 1.0 Rx (dose is linear in k)."""
    return 1.0 / calibration_d95(task, 1.0)


def task_dose_scale(task: Task) -> float:
    """The task's k: its stored ``dose_scale``, or calibrated once per task object."""
    if task.dose_scale is not None:
        return task.dose_scale
    hit = _cache.get(id(task))
    if hit is None or hit[0] is not task:
        hit = (task, calibrate(task))
        _cache[id(task)] = hit
    return hit[1]


if __name__ == "__main__":  # pragma: no cover - the command that produced the stored constants
    for name, task in TASKS.items():
        print(f"{name}: dose_scale={calibrate(task):.4f}")
