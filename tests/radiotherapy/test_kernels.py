"""The compiled per-step passes (radiotherapy/core/kernels.py) give NumPy's results bit for bit:
the metrics are defined by NumPy's sums, and the golden trajectories depend on every last bit."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.radiotherapy.core.kernels import pairwise_sum, structure_statistics


@pytest.mark.parametrize("n", [*range(0, 300), 511, 512, 513, 1000, 2047, 2048, 2049, 4096, 10_007])
def test_pairwise_sum__is_ndarray_sum_bit_for_bit(n: int) -> None:
    values = np.random.default_rng(n).uniform(0.0, 1.7, n)
    assert pairwise_sum(values, 0, n) == values.sum()
    if n > 3:
        assert pairwise_sum(values, 2, n - 1) == values[2 : n - 1].sum()


def test_structure_statistics__gather_and_oar_means_and_maxima_as_numpy() -> None:
    rng = np.random.default_rng(7)
    dose = rng.uniform(0.0, 1.3, 2500)
    sizes = [3, 1, 130, 7, 900]  # OARs of every length regime, one of a single voxel
    n_tumour = 60
    voxels = rng.integers(0, dose.size, n_tumour + sum(sizes))
    starts = np.concatenate(([0], np.cumsum(sizes[:-1])))
    gathered, mean, highest = np.empty(voxels.size), np.empty(len(sizes)), np.empty(len(sizes))
    structure_statistics(dose, voxels, n_tumour, starts, gathered, mean, highest)
    assert np.array_equal(gathered, dose[voxels])
    oar_dose = dose[voxels][n_tumour:]
    assert np.array_equal(mean, np.add.reduceat(oar_dose, starts) / np.array(sizes, float))
    assert np.array_equal(highest, np.maximum.reduceat(oar_dose, starts))


def test_aperture_beam__is_the_field_formula_bit_for_bit_inside_and_far_outside_the_field() -> None:
    """The compiled field skips erf and exp where both are saturated; every value, on both sides
    of that cut and across the penumbra, is still exactly the formula's (math.erf, math.exp)."""
    import math

    from hospital_marl.radiotherapy.core.kernels import aperture_beam

    lo, hi, sigma, k = -3.5, 4.5, 1.5, 0.36
    scale = 1.0 / (math.sqrt(2.0) * sigma)
    cut = 6.0 / scale  # lateral distance beyond an edge where the kernel stops evaluating
    lateral = np.concatenate(
        (np.linspace(-40, 40, 4001), [hi + cut, hi + cut - 1e-9, lo - cut, lo - cut + 1e-9, hi + 5.9 / scale])
    )
    mu_d = np.linspace(0.0, 0.8, lateral.size)
    out = np.empty(lateral.size)
    aperture_beam(lateral, mu_d, lo, hi, sigma, k, out)
    want = [
        k * (0.5 * (math.erf((x - lo) * scale) - math.erf((x - hi) * scale))) * math.exp(-d)
        for x, d in zip(lateral.tolist(), mu_d.tolist())
    ]
    assert out.tolist() == want
    assert (out[np.abs(lateral) > 25] == 0.0).all() and not np.signbit(out).any()
