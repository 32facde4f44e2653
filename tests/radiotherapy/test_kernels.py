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
