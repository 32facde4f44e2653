"""SPEC-RT §2, §8: the aperture dose model, checked against its formula on known geometry."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.radiotherapy.core.dose import (
    ANGLE_STEP,
    MU,
    PENUMBRA,
    BeamCache,
    beam_dose,
    depth_from_surface,
    plan_dose,
)
from hospital_marl.radiotherapy.core.phantoms import GRID, disc, make_phantom, rectangle
from tests.radiotherapy.conftest import CENTRE, centred_phantom

K = 1.0


def test_dose__zero_outside_the_body(phantom) -> None:
    for angle in (0, 40, 130, 270):
        dose = beam_dose(phantom, angle, K)
        assert (dose[~phantom.body] == 0).all()
        assert (dose[phantom.body] >= 0).all() and (dose[phantom.tumour] > 0).all()


def test_dose__mirror_symmetric_about_the_beam_axis(phantom) -> None:
    # body, tumour (hence isocentre) symmetric about the vertical midline; a 0° beam runs along it
    dose = beam_dose(phantom, 0, K)
    np.testing.assert_allclose(dose, dose[:, ::-1], atol=1e-12)


def test_dose__opposed_beams_are_mirror_images(phantom) -> None:
    np.testing.assert_allclose(beam_dose(phantom, 0, K), beam_dose(phantom, 180, K)[::-1, :], atol=1e-12)
    np.testing.assert_allclose(beam_dose(phantom, 90, K), beam_dose(phantom, 270, K)[:, ::-1], atol=1e-12)


def test_dose__a_quarter_turn_rotates_the_dose(phantom) -> None:
    # a 90° beam enters from the columns' high side: the 0° dose turned clockwise on screen
    np.testing.assert_allclose(np.rot90(beam_dose(phantom, 0, K), -1), beam_dose(phantom, 90, K), atol=1e-12)


def test_dose__attenuates_exponentially_with_depth_along_the_axis(phantom) -> None:
    dose = beam_dose(phantom, 0, K)  # enters at the top, travels down the rows
    col = 31  # half a voxel from the axis: profile factor exp(-0.25/(2σ²)) on every row alike
    rows = np.flatnonzero(phantom.body[:, col])
    ratios = dose[rows[1:], col] / dose[rows[:-1], col]
    np.testing.assert_allclose(ratios, np.exp(-MU), rtol=1e-9)


def test_dose__depth_is_measured_from_the_skin_not_the_grid_edge() -> None:
    # the same isocentre in a small and a large body: the extra tissue in front attenuates
    small = make_phantom(disc(CENTRE, 15), disc(CENTRE, 5), [disc((CENTRE[0] + 11, CENTRE[1]), 2)])
    large = make_phantom(disc(CENTRE, 28), disc(CENTRE, 5), [disc((CENTRE[0] + 11, CENTRE[1]), 2)])
    r, c = 31, 31
    ratio = beam_dose(large, 0, K)[r, c] / beam_dose(small, 0, K)[r, c]
    extra = depth_from_surface(large.body, 0)[r, c] - depth_from_surface(small.body, 0)[r, c]
    assert extra == pytest.approx(13.0, abs=0.5)  # radii 28 vs 15
    assert ratio == pytest.approx(np.exp(-MU * extra), rel=1e-9)


def test_depth__first_voxel_inside_is_half_a_voxel_deep(phantom) -> None:
    depth = depth_from_surface(phantom.body, 0)
    col = 31
    first = np.flatnonzero(phantom.body[:, col])[0]
    assert depth[first, col] == pytest.approx(0.5, abs=1e-9)
    assert depth[first + 10, col] == pytest.approx(10.5, abs=1e-9)


def test_depth__attenuation_does_not_depend_on_the_angle_in_a_round_body(phantom) -> None:
    # the original normalised depth over the grid, so μ changed with the angle; a disc body
    # has the same tissue in front of its centre from every side (up to its voxel outline)
    at_iso = [beam_dose(phantom, a, K)[31, 31] + beam_dose(phantom, a, K)[32, 32] for a in range(0, 360, 10)]
    assert max(at_iso) / min(at_iso) < 1.03


@pytest.mark.parametrize("margin", [0, 2, 5])
def test_dose__lateral_profile_is_the_aperture_with_an_erf_penumbra(margin: int) -> None:
    """A 0° beam: open across the tumour's projection rounded to the beamlet grid, plus the
    margin, with a Gaussian penumbra; SciPy's erf is the independent reference."""
    from scipy.special import erf

    # a square body: every column of a row lies at the same depth below the (flat) skin
    square = make_phantom(
        rectangle((4, 59), (4, 59)), disc(CENTRE, 6), [disc((CENTRE[0] + 12, CENTRE[1]), 3)]
    )
    dose = beam_dose(square, 0, K, margin)
    lat = np.arange(GRID) - CENTRE[1]
    tumour_lat = lat[square.tumour.any(axis=0)]
    lo, hi = np.round(tumour_lat.min()) - margin - 0.5, np.round(tumour_lat.max()) + margin + 0.5
    row = 31
    for col in range(6, 58):  # away from the side skin, where partial volumes thin the tissue
        offset = col - CENTRE[1]
        scale = np.sqrt(2) * PENUMBRA
        profile = 0.5 * (erf((offset - lo) / scale) - erf((offset - hi) / scale))
        expected = K * profile * np.exp(-MU * (row - 4 + 0.5))
        assert dose[row, col] == pytest.approx(expected, rel=1e-9, abs=1e-300)
    inside, outside = dose[row, int(CENTRE[1])], dose[row, int(CENTRE[1] + hi + 4)]
    assert outside < 0.01 * inside  # four voxels past the edge: almost nothing


def test_dose__plan_is_the_weighted_sum_of_its_beams(phantom) -> None:
    angles, weights = [0, 120, 240], [0.3, 0.6, 1.0]
    expected = sum(w * beam_dose(phantom, a, K) for a, w in zip(angles, weights))
    np.testing.assert_allclose(plan_dose(phantom, angles, weights, K), expected)


def test_beam_cache__matches_the_direct_dose_on_body_voxels() -> None:
    phantom = centred_phantom(tumour_radius=4)
    cache = BeamCache(phantom, 0.5)
    angles, weights, margins = np.array([0, 9, 22]), np.array([0.6, 0.2, 1.0]), np.array([0, 3, 5])
    expected = plan_dose(phantom, list(angles * ANGLE_STEP), list(weights), 0.5, list(margins))
    np.testing.assert_allclose(cache.to_grid(cache.dose(angles, weights, margins)), expected, atol=1e-12)


def test_aperture__is_the_sum_of_its_beamlets() -> None:
    """What makes FMO a superset of the agent's plans: an aperture's dose equals the sum of the
    1-voxel beamlets it spans (the erf terms telescope)."""
    from hospital_marl.radiotherapy.core.fmo import beamlet_matrix
    from hospital_marl.radiotherapy.core.plan import Plan

    plan = Plan("head_neck")
    plan.reset(np.random.default_rng(0))
    A, angle_of = beamlet_matrix(plan)
    columns = np.flatnonzero(angle_of == 0)  # beamlets from the projection's low end − 7 to its high end + 7
    for margin in (0, 2, 5):
        span = columns[7 - margin : len(columns) - 7 + margin]
        np.testing.assert_allclose(A[:, span].sum(axis=1), plan.cache.beam(margin), rtol=1e-9, atol=1e-12)


def test_beam_caches__reused_across_bodies_never_shared_and_recomputed_for_each_patient() -> None:
    """A plan moving between bodies takes a set-aside cache of the new body (no reallocation),
    yet two live plans never hold the same cache and every dose is the fresh cache's."""
    from hospital_marl.radiotherapy.core.plan import Plan

    plans = [Plan("pediatric_brain"), Plan("pediatric_brain")]
    rngs = [np.random.default_rng(s) for s in (3, 4)]
    bodies, angles, weights, margins = set(), np.array([0, 9, 21]), np.array([6, 10, 3]), np.array([0, 2, 5])
    for _ in range(12):
        for plan, rng in zip(plans, rngs):
            plan.reset(rng)
            bodies.add(plan.phantom.body.tobytes())
            fresh = BeamCache(plan.phantom, plan.dose_scale)
            np.testing.assert_array_equal(
                plan.cache.dose(angles, weights / 10, margins), fresh.dose(angles, weights / 10, margins)
            )
        assert plans[0].cache is not plans[1].cache
    assert len(bodies) > 1  # the plans did change bodies
