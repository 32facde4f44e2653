"""SPEC-RT §2: six to seven evenly spaced beams at a middle weight give the tumour D95 ≈ 1.0 Rx."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.radiotherapy.core.calibration import calibrate, evenly_spaced_angles
from hospital_marl.radiotherapy.core.dose import ANGLE_STEP, CALIBRATION_WEIGHT
from hospital_marl.radiotherapy.core.plan import Plan
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, TASKS


def test_evenly_spaced_angles__on_the_grid_and_spread() -> None:
    assert evenly_spaced_angles(4) == [0, 90, 180, 270]
    angles = evenly_spaced_angles(7)
    assert all(a % ANGLE_STEP == 0 for a in angles)
    assert np.diff(angles).min() >= 50 and np.diff(angles).max() <= 60


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_calibration__six_to_seven_even_beams_at_middle_weight_give_d95_of_rx(task: str) -> None:
    # fresh patients (not the calibration's own), through the env's core
    plan = Plan(task)
    d95 = []
    for seed in range(12):
        plan.reset(np.random.default_rng([777, seed]))
        for n in (6, 7):
            angles = np.array(evenly_spaced_angles(n)) // ANGLE_STEP
            metrics, _ = plan.evaluate(angles, np.full(n, round(CALIBRATION_WEIGHT * 10)))
            d95.append(metrics.d95)
    assert np.mean(d95) == pytest.approx(1.0, abs=0.05)
    # a patient's D95 spreads with the tumour's size (σ = 4 beams cover a large one less well)
    assert min(d95) >= 0.7 and max(d95) <= 1.35


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_calibration__stored_constant_is_what_calibrate_gives(task: str) -> None:
    assert TASKS[task].dose_scale == pytest.approx(calibrate(TASKS[task]), rel=2e-3)


def test_calibration__full_weight_six_beams_overdose_the_target() -> None:
    # the original's fixed script; dose is linear in weight: ≈ (1.0 / 0.6) Rx, a little less for 6 beams
    plan = Plan("prostate")
    d95 = []
    for seed in range(10):
        plan.reset(np.random.default_rng([778, seed]))
        d95.append(plan.evaluate(np.array(evenly_spaced_angles(6)) // ANGLE_STEP, np.full(6, 10))[0].d95)
    assert 1.4 < np.mean(d95) < 1.75
