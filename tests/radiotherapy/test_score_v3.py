"""SPEC-RT §9: the score's third version, from the plans the physicist's review measured.

Each bad plan is a dose built on a real patient of the task (its own masks), scored by the env's
own path (``Plan.score_dose``): a clean plan (the prescription on the tumour, a low bath
elsewhere) against the same plan with one fault. Each fault must score below the clean plan and
be reported with the right violation; the expected tiers and violations come from the spec, not
from the implementation's output.
"""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.radiotherapy.core.metrics import CRITICAL_CAP, PASS_THRESHOLD
from hospital_marl.radiotherapy.core.plan import Plan

BATH = 0.10  # × Rx: the clean plan's dose on the body outside the tumour


def _patient(task: str, seed: int = 0) -> Plan:
    plan = Plan(task)
    plan.reset(np.random.default_rng(seed))
    return plan


def _index(plan: Plan, mask: np.ndarray) -> np.ndarray:
    """Body-voxel numbers of a grid mask's voxels."""
    return plan.cache.voxels.position[np.flatnonzero(mask)]


def _clean_dose(plan: Plan) -> np.ndarray:
    dose = np.full(plan.cache.body_index.size, BATH)
    dose[plan.tumour_index] = 1.0
    return dose


def _assess(plan: Plan, dose: np.ndarray) -> tuple[dict, float]:
    metrics, score = plan.score_dose(dose, 5)
    return metrics.as_dict(plan.task), score


@pytest.mark.parametrize("task", ["prostate", "head_neck", "pediatric_brain"])
def test_the_clean_plan_is_clean_and_passes(task: str) -> None:
    plan = _patient(task)
    m, score = _assess(plan, _clean_dose(plan))
    assert m["tier"] == "clean" and m["violations"] == [] and score >= PASS_THRESHOLD


@pytest.mark.parametrize("task", ["prostate", "pediatric_brain", "head_neck"])
def test_a_cold_spot__3_percent_of_the_tumour_at_half_rx_cannot_pass(task: str) -> None:
    """The review: 3 % of the tumour at 50 % of Rx passed prostate 5/5 and brain 5/5."""
    plan = _patient(task)
    clean = _assess(plan, _clean_dose(plan))[1]
    dose = _clean_dose(plan)
    cold = plan.tumour_index[: int(np.ceil(0.03 * plan.tumour_index.size))]
    dose[cold] = 0.5
    m, score = _assess(plan, dose)
    assert m["d98"] == 0.5
    assert score < clean and score <= CRITICAL_CAP < PASS_THRESHOLD
    assert m["tier"] == "major"
    assert any(v.startswith("target under-dosed") for v in m["violations"]), m["violations"]


def test_a_cold_spot_between_the_major_level_and_95_percent_costs_in_proportion() -> None:
    plan = _patient("prostate")
    scores = []
    for level in (1.0, 0.95, 0.945, 0.94, 0.935):
        dose = _clean_dose(plan)
        dose[plan.tumour_index[: int(np.ceil(0.03 * plan.tumour_index.size))]] = level
        m, score = _assess(plan, dose)
        assert m["tier"] == "clean"
        scores.append(score)
    assert scores[0] > scores[1] > scores[2] > scores[3] > scores[4]


def test_the_cord_raised_from_7_7_to_49_gy_fails_and_below_its_limit_still_costs() -> None:
    """The review: the whole spinal cord from 7.7 to 49 Gy left the score unchanged."""
    plan = _patient("head_neck")
    rx = plan.task.rx_gy
    cord = _index(plan, plan.phantom.oars[plan.task.oar_names.index("spinal_cord")])
    scores = {}
    for gy in (7.7, 40.0, 49.0):
        dose = _clean_dose(plan)
        dose[cord] = gy / rx
        scores[gy] = _assess(plan, dose)
    (low, s_low), (mid, s_mid), (high, s_high) = scores[7.7], scores[40.0], scores[49.0]
    assert low["tier"] == mid["tier"] == "clean"
    assert s_low > s_mid  # ALARA: below its 45 Gy limit the cord's dose still counts
    assert high["tier"] == "major" and s_high < s_mid and s_high < PASS_THRESHOLD
    assert any(v.startswith("spinal_cord (priority 1)") for v in high["violations"]), high["violations"]


def test_the_rectum_from_v50_0_to_49_percent_costs_but_still_passes() -> None:
    """The review: rectum V50 0 % -> 49 % left the score unchanged to four decimals."""
    plan = _patient("prostate")
    rectum = _index(plan, plan.phantom.oars[plan.task.oar_names.index("rectum")])
    dose = _clean_dose(plan)
    clean = _assess(plan, dose)[1]
    dose[rectum[: int(0.49 * rectum.size)]] = 55.0 / plan.task.rx_gy  # ≥ 50 Gy, < 70 Gy
    m, score = _assess(plan, dose)
    rectum_values = [c[0] for c in m["oars"]["rectum"]["constraints"]]
    assert rectum_values[0] == pytest.approx(int(0.49 * rectum.size) / rectum.size)
    assert m["tier"] == "clean" and score >= PASS_THRESHOLD
    assert clean - score > 0.01


@pytest.mark.parametrize("task", ["prostate", "head_neck", "pediatric_brain"])
def test_130_percent_over_2_percent_of_the_body_outside_the_tumour_cannot_pass(task: str) -> None:
    """The review: 130 % of Rx over 2 % of the body, outside the tumour, passed 15/15."""
    plan = _patient(task)
    clean = _assess(plan, _clean_dose(plan))[1]
    normal = plan.phantom.body & ~plan.phantom.tumour & ~plan.phantom.oars.any(axis=0)
    hot = _index(plan, normal)[: int(np.ceil(0.02 * plan.cache.body_index.size))]
    dose = _clean_dose(plan)
    dose[hot] = 1.3
    m, score = _assess(plan, dose)
    assert m["body_near_max"] == 1.3
    assert score < clean and score < PASS_THRESHOLD and m["tier"] == "major"
    where = [v for v in m["violations"] if v.startswith("hot spot outside the target")]
    assert where and "normal tissue" in where[0], m["violations"]
    row, col = m["hot_spot"]["row"], m["hot_spot"]["col"]
    assert normal[row, col] and m["hot_spot"]["in"] == "normal tissue"


def test_a_failed_priority_2_constraint_ranks_below_any_clean_plan_however_conformal() -> None:
    """The review: agents failing a parotid in most head & neck plans 'beat' FMO on conformity."""
    plan = _patient("head_neck")
    parotid = _index(plan, plan.phantom.oars[plan.task.oar_names.index("parotid_r")])
    conformal = _clean_dose(plan)  # CI = 1
    conformal[parotid] = 25.0 / plan.task.rx_gy  # over its 20 Gy mean
    m_fail, s_fail = _assess(plan, conformal)
    assert m_fail["ci"] == 1.0 and m_fail["tier"] == "minor" and s_fail < PASS_THRESHOLD
    assert any(v.startswith("parotid_r (priority 2)") for v in m_fail["violations"]), m_fail["violations"]
    # a clean plan with poor conformity: the prescription also spilt over a ring of normal tissue
    sloppy = _clean_dose(plan)
    normal = plan.phantom.body & ~plan.phantom.tumour & ~plan.phantom.oars.any(axis=0)
    spill = _index(plan, normal)[: plan.tumour_index.size]
    sloppy[spill] = 1.0
    m_clean, s_clean = _assess(plan, sloppy)
    assert m_clean["tier"] == "clean" and m_clean["ci"] < 0.6
    assert s_clean > s_fail


def test_a_tumour_hot_spot_at_or_above_115_percent_is_a_major_deviation() -> None:
    plan = _patient("pediatric_brain")
    dose = _clean_dose(plan)
    dose[plan.tumour_index[: int(np.ceil(0.05 * plan.tumour_index.size))]] = 1.16
    m, score = _assess(plan, dose)
    assert m["d2"] == 1.16 and m["tier"] == "major" and score <= CRITICAL_CAP
    assert any(v.startswith("target hot spot") for v in m["violations"])


@pytest.mark.parametrize("task", ["prostate", "head_neck", "pediatric_brain"])
def test_the_body_near_max_is_its_numpy_definition_bit_for_bit(task: str) -> None:
    """The compiled step's near-max outside the target (a k-heap) equals ``dose_at_volume``'s D1%
    of those voxels, and the reported hot spot is the hottest of them."""
    from hospital_marl.radiotherapy.core.metrics import body_near_max

    plan = _patient(task, seed=3)
    rng = np.random.default_rng(7)
    outside = _index(plan, plan.phantom.body & ~plan.phantom.tumour)
    for _ in range(20):
        n = int(rng.integers(1, 8))
        angles, weights = rng.integers(0, 36, n), rng.integers(1, 11, n)
        margins = rng.integers(0, 6, n)
        metrics, _ = plan.evaluate(angles, weights, margins)
        dose = plan.cache.dose(angles, weights / 10.0, margins)
        assert metrics.body_near_max == body_near_max(dose[outside])
        row, col = metrics.hot_spot
        assert dose[plan.cache.voxels.position[row * 64 + col]] == dose[outside].max()
