"""The per-step arithmetic of a plan, compiled (numba): the statistics every metric and DVH
is read from, in one pass each instead of a dozen NumPy calls (SPEC-RT §7: a step is one
weighted sum of cached beams and these passes).

The sums are NumPy's, bit for bit: ``ndarray.sum`` and ``np.add.reduceat`` add
contiguous float64 pairwise in blocks of eight (:func:`pairwise_sum`), so the metrics equal
the NumPy definitions in :mod:`~hospital_marl.radiotherapy.core.metrics` exactly, and the
recorded trajectories (tests/radiotherapy/golden.json) did not move when the step was
compiled. Compiled with ``cache=True`` (on disk next to this file, or under
``NUMBA_CACHE_DIR``), on first use: importing the package compiles nothing.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_jit = njit(cache=True, nogil=True)

_BLOCK = 128  # NumPy's PW_BLOCKSIZE: longer runs are split in two


@_jit
def _block_sum(values: np.ndarray, start: int, stop: int) -> float:
    """NumPy's sum of at most 128 contiguous float64: eight running sums, then the rest in order."""
    n = stop - start
    if n < 8:
        total = -0.0
        for i in range(start, stop):
            total += values[i]
        return total
    r0, r1, r2, r3 = values[start], values[start + 1], values[start + 2], values[start + 3]
    r4, r5, r6, r7 = values[start + 4], values[start + 5], values[start + 6], values[start + 7]
    i = start + 8
    whole = stop - n % 8
    while i < whole:
        r0 += values[i]
        r1 += values[i + 1]
        r2 += values[i + 2]
        r3 += values[i + 3]
        r4 += values[i + 4]
        r5 += values[i + 5]
        r6 += values[i + 6]
        r7 += values[i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < stop:
        total += values[i]
        i += 1
    return total


@_jit
def _split(start: int, stop: int) -> int:
    """Where NumPy splits a run longer than a block: half, rounded down to a multiple of eight."""
    half = (stop - start) // 2
    return start + half - half % 8


@_jit
def pairwise_sum(values: np.ndarray, start: int, stop: int) -> float:
    """``values[start:stop].sum()`` exactly as NumPy adds contiguous float64: runs longer than
    :data:`_BLOCK` are split in two and the halves' sums added, down to :func:`_block_sum`.

    The recursion is walked with an explicit stack (numba's on-disk cache cannot hold a
    recursive function: numba issue #6061).
    """
    if stop - start <= _BLOCK:
        return _block_sum(values, start, stop)
    lo, hi = np.empty(64, np.int64), np.empty(64, np.int64)
    left_sum, right_pending = np.empty(64), np.zeros(64, np.bool_)
    top, lo[0], hi[0] = 0, start, stop
    while True:
        if hi[top] - lo[top] > _BLOCK:  # descend into the left half
            mid = _split(lo[top], hi[top])
            right_pending[top] = False
            lo[top + 1], hi[top + 1] = lo[top], mid
            top += 1
            continue
        value = _block_sum(values, lo[top], hi[top])
        top -= 1
        while top >= 0 and right_pending[top]:  # both halves done: add them, return upwards
            value = left_sum[top] + value
            top -= 1
        if top < 0:
            return value
        left_sum[top], right_pending[top] = value, True  # left half done: do the right half
        lo[top + 1], hi[top + 1] = _split(lo[top], hi[top]), hi[top]
        top += 1


@_jit
def tumour_statistics(
    ordered: np.ndarray, body_dose: np.ndarray, ranks: np.ndarray, levels: np.ndarray, out: np.ndarray
) -> None:
    """``out`` = [the tumour's doses ``ordered`` (sorted low to high) at positions ``ranks``, their
    sum (``ndarray.sum``'s), how many lie below each of ``levels``, how many body voxels receive
    ≥ 1 Rx]. The caller sorts (NumPy's sort: compiling numba's would cost seconds on first use)."""
    k = 0
    for r in ranks:
        out[k] = ordered[r]
        k += 1
    out[k] = pairwise_sum(ordered, 0, ordered.size)
    k += 1
    for level in levels:
        below = 0
        while below < ordered.size and ordered[below] < level:
            below += 1
        out[k] = below
        k += 1
    above = 0
    for d in body_dose:
        if d >= 1.0:
            above += 1
    out[k] = above


@_jit
def structure_statistics(
    dose: np.ndarray,
    voxels: np.ndarray,
    n_tumour: int,
    oar_starts: np.ndarray,
    structure_dose: np.ndarray,
    oar_mean: np.ndarray,
    oar_max: np.ndarray,
) -> None:
    """``structure_dose = dose[voxels]`` (the tumour's voxels, then each OAR's from ``oar_starts``
    on); each OAR's mean (``np.add.reduceat``'s sum: its first dose plus the pairwise sum of the
    rest, over its voxel count) and max."""
    for i in range(voxels.size):
        structure_dose[i] = dose[voxels[i]]
    n_oars = oar_starts.size
    for j in range(n_oars):
        start = n_tumour + oar_starts[j]
        stop = n_tumour + oar_starts[j + 1] if j + 1 < n_oars else voxels.size
        highest = structure_dose[start]
        for i in range(start + 1, stop):
            if structure_dose[i] > highest:
                highest = structure_dose[i]
        oar_max[j] = highest
        oar_mean[j] = (structure_dose[start] + pairwise_sum(structure_dose, start + 1, stop)) / (stop - start)


@_jit
def cumulative_dvhs(
    structure_dose: np.ndarray,
    inverse_bin: np.ndarray,
    first_bin: np.ndarray,
    sizes: np.ndarray,
    counts: np.ndarray,
    out: np.ndarray,
) -> None:
    """Every structure's cumulative DVH (``out``: (n_structures, bins)) in one pass.

    Voxel i falls in bin ``min(dose · inverse_bin[i], bins)`` (floored) of its structure's row
    of ``counts`` (n_structures × (bins + 1), the row's flat start ``first_bin[i]``);
    ``out[s, j]`` is the fraction of structure s's voxels in bins above j.
    """
    bins = out.shape[1]
    flat = counts.ravel()
    flat[:] = 0
    for i in range(structure_dose.size):
        scaled = structure_dose[i] * inverse_bin[i]
        flat[first_bin[i] + int(min(scaled, bins))] += 1
    for s in range(out.shape[0]):
        at_least = 0
        for j in range(bins, 0, -1):
            at_least += counts[s, j]
            out[s, j - 1] = at_least / sizes[s]


@_jit
def constraint_values(
    structure_dose: np.ndarray,
    n_tumour: int,
    oar_starts: np.ndarray,
    oar_mean: np.ndarray,
    oar: np.ndarray,
    metric: np.ndarray,
    level: np.ndarray,
    near_max_position: np.ndarray,
    out: np.ndarray,
) -> None:
    """Each constraint's value (``out``) from the structures' doses (:func:`structure_statistics`):
    metric 0 the OAR's D2% (its doses at ``near_max_position[j]`` once sorted low to high: an order
    statistic, the same value however it is found), 1 its mean, 2 the fraction of its voxels at
    or above ``level`` (V_x)."""
    n_oars = oar_starts.size
    for c in range(oar.size):
        j = oar[c]
        start = n_tumour + oar_starts[j]
        stop = n_tumour + oar_starts[j + 1] if j + 1 < n_oars else structure_dose.size
        kind = metric[c]
        if kind == 1:
            out[c] = oar_mean[j]
        elif kind == 2:
            count = 0
            for i in range(start, stop):
                if structure_dose[i] >= level[c]:
                    count += 1
            out[c] = count / (stop - start)
        else:
            out[c] = np.partition(structure_dose[start:stop], near_max_position[j])[near_max_position[j]]


_ERF_ONE = 6.0
"""erf(x) is exactly 1.0 in float64 from x ≈ 5.9216 on (−1.0 below −5.9216): a voxel this many
penumbra widths (× √2) beyond both field edges gets exactly 0.0, so the beam skips its erf and exp
(``test_kernels.py`` checks the formula bit for bit on both sides of the cut)."""


@_jit
def aperture_beam(
    lateral: np.ndarray, depth: np.ndarray, lo: float, hi: float, penumbra: float, k: float, out: np.ndarray
) -> None:
    """THE field formula, into ``out``: ``k · ½[erf((ℓ − lo)/√2σ) − erf((ℓ − hi)/√2σ)] · exp(−μ d)``
    is evaluated by the caller's constants: here ``depth`` is already ``μ d`` (an open field from
    ``lo`` to ``hi`` across the beam, a Gaussian penumbra σ = ``penumbra``)."""
    scale = 1.0 / (math.sqrt(2.0) * penumbra)
    for i in range(lateral.size):
        a, b = (lateral[i] - lo) * scale, (lateral[i] - hi) * scale  # a >= b
        if b >= _ERF_ONE or a <= -_ERF_ONE:  # erf(a) = erf(b) = ±1 exactly: the formula gives +0.0
            out[i] = 0.0
            continue
        profile = 0.5 * (math.erf(a) - math.erf(b))
        out[i] = k * profile * math.exp(-depth[i])


@_jit
def outside_statistics(
    dose: np.ndarray, outside: np.ndarray, rank: int, heap: np.ndarray
) -> tuple[float, int]:
    """(the doses of the body voxels ``outside`` the target at position ``rank`` once sorted low to
    high — an order statistic, their near-max —, the position in ``outside`` of the first hottest);
    (0.0, -1) when there are none. The near-max is the k-th largest (k = n − rank, small): kept
    in ``heap`` (a min-heap of the k largest so far, at least k long), one comparison per voxel."""
    n = outside.size
    if n == 0:
        return 0.0, -1
    k = n - rank
    best, at = -1.0, -1
    size = 0
    for i in range(n):
        d = dose[outside[i]]
        if d > best:
            best, at = d, i
        if size < k:  # fill: sift up
            j = size
            heap[j] = d
            size += 1
            while j > 0 and heap[(j - 1) // 2] > heap[j]:
                p = (j - 1) // 2
                heap[p], heap[j] = heap[j], heap[p]
                j = p
        elif d > heap[0]:  # replace the smallest of the k largest: sift down
            heap[0] = d
            j = 0
            while True:
                c = 2 * j + 1
                if c >= k:
                    break
                if c + 1 < k and heap[c + 1] < heap[c]:
                    c += 1
                if heap[j] <= heap[c]:
                    break
                heap[j], heap[c] = heap[c], heap[j]
                j = c
    return heap[0], at
