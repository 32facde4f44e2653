"""The dose model (SPEC-RT §2, §8): shaped fields through the isocentre.

A beam at gantry angle θ (degrees; 0 enters from the anterior side, i.e. the
top row, and 90 from the columns' high side) travels along ``u = (cos θ, −sin θ)``
in (row, column). Its field is a beam's-eye-view aperture: open from ``lo`` to ``hi``
across the beam (lateral coordinate ``ℓ`` from the central axis), fitted to the
tumour's projection plus a margin of ``m`` voxels, with a Gaussian penumbra. The dose
it deposits at voxel ``p`` is::

    k · ½[erf((ℓ − lo)/√2σ) − erf((ℓ − hi)/√2σ)] · exp(−μ · d)      inside the body, 0 outside

with ``σ`` = :data:`PENUMBRA`, ``d`` the depth of ``p`` *from the body surface* along the
beam (tissue crossed on the way in, so ``μ`` means the same per voxel at every angle) and
``k`` the calibration constant of the task (``Task.dose_scale``). The edges lie on the
beamlet grid (beamlet ``j`` is open from ``j − ½`` to ``j + ½``): ``lo = round(min ℓ_tumour)
− m − ½``, ``hi = round(max ℓ_tumour) + m + ½``; so an aperture is exactly a sum of
beamlets of the same formula, the variables of the fluence-map optimisation
(:mod:`hospital_marl.radiotherapy.core.fmo`). A plan's dose is the weighted sum of its beams.

A beam's dose depends only on (phantom, angle, margin), so :class:`BeamCache` computes
it once per episode on the grid of :data:`ANGLE_STEP` degrees; a step then costs one
weighted sum over the body voxels.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hospital_marl.radiotherapy.core.kernels import aperture_beam
from hospital_marl.radiotherapy.core.phantoms import GRID, Phantom

PENUMBRA = 1.5
"""The field edge's Gaussian σ, voxels (80–20 % width ≈ 1.7 σ)."""
MAX_MARGIN = 5
"""Aperture margins are 0–5 voxels around the tumour's projection."""
N_MARGINS = MAX_MARGIN + 1
MU = 0.012
"""Linear attenuation per voxel of tissue."""
ANGLE_STEP = 10
"""Gantry angles live on a 10° grid (the turn action's step)."""
N_ANGLES = 360 // ANGLE_STEP
CALIBRATION_WEIGHT = 0.6
"""The middle weight of the calibration (a new beam's weight)."""


_VOXEL_ROWS, _VOXEL_COLS = (a.ravel() for a in np.mgrid[0:GRID, 0:GRID].astype(float))  # (4096,) each


def beam_axes(angle_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """(direction of travel u, lateral unit vector n), each (2,) in (row, column)."""
    a = np.deg2rad(angle_deg)
    return np.array([np.cos(a), -np.sin(a)]), np.array([np.sin(a), np.cos(a)])


_HALF_SPAN = int(np.ceil((GRID - 1) / 2 * np.sqrt(2))) + 2  # beam's-eye grid half size: the whole slice
_S_STEP = 0.5  # beam's-eye sampling step along the beam (voxels); 1 voxel across
_S_GRID, _L_GRID = np.meshgrid(
    np.arange(-_HALF_SPAN, _HALF_SPAN + _S_STEP, _S_STEP),
    np.arange(-_HALF_SPAN, _HALF_SPAN + 1.0),
    indexing="ij",
)  # (S, L) beam's-eye coordinates, centred on the slice
_CENTRE = (GRID - 1) / 2


def _bilinear(image: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``image`` (2-D) sampled at fractional (rows, cols), zero outside it."""
    padded = np.zeros((image.shape[0] + 2, image.shape[1] + 2))
    padded[1:-1, 1:-1] = image
    r = np.clip(rows + 1, 0, image.shape[0] + 1 - 1e-9)
    c = np.clip(cols + 1, 0, image.shape[1] + 1 - 1e-9)
    r0, c0 = r.astype(np.int64), c.astype(np.int64)
    fr, fc = r - r0, c - c0
    r1, c1 = np.minimum(r0 + 1, image.shape[0] + 1), np.minimum(c0 + 1, image.shape[1] + 1)
    return (padded[r0, c0] * (1 - fc) + padded[r0, c1] * fc) * (1 - fr) + (
        padded[r1, c0] * (1 - fc) + padded[r1, c1] * fc
    ) * fr


def depth_from_surface(body: np.ndarray, angle_deg: float, voxels: np.ndarray | None = None) -> np.ndarray:
    """Tissue depth (voxels) from the body surface to each voxel along a beam at ``angle_deg``.

    The depth of a voxel is the tissue crossed by the ray through it, parallel to
    the beam, up to it: it depends on the body and the angle only (not on where the
    central axis is). It is computed on a beam's-eye grid centred on the slice (axis
    ``s`` along the beam in half-voxel steps, ``ℓ`` across in voxels): the body is
    sampled bilinearly (partial volumes at the skin), accumulated along ``s``, and
    read back at every voxel's ``(s, ℓ)`` bilinearly. The skin lies half a voxel
    outside the outermost body voxel centres, so a first voxel sits at depth ≈ 0.5.

    Returns (64, 64) float64, or (len(voxels),) for the given flat voxel indices.
    """
    u, n = beam_axes(angle_deg)
    tissue = _bilinear(
        body.astype(float),
        _CENTRE + _S_GRID * u[0] + _L_GRID * n[0],
        _CENTRE + _S_GRID * u[1] + _L_GRID * n[1],
    )
    depth_bev = np.cumsum(tissue, axis=0)
    depth_bev -= 0.5 * tissue  # trapezoid rule: the integral of the tissue up to each sample
    depth_bev *= _S_STEP
    vr = _VOXEL_ROWS if voxels is None else _VOXEL_ROWS[voxels]
    vc = _VOXEL_COLS if voxels is None else _VOXEL_COLS[voxels]
    dr, dc = vr - _CENTRE, vc - _CENTRE
    s_index = (dr * u[0] + dc * u[1] + _HALF_SPAN) / _S_STEP
    l_index = dr * n[0] + dc * n[1] + _HALF_SPAN
    depth = _bilinear(depth_bev, s_index, l_index)
    return depth.reshape(GRID, GRID) if voxels is None else depth


_DEPTHS: dict[tuple[bytes, int], np.ndarray] = {}
_DEPTHS_MAX = 64 * N_ANGLES  # the built-in tasks draw bodies from a few sizes each
_BODIES: dict[bytes, BodyVoxels] = {}
_BODIES_MAX = 64


class BodyVoxels(NamedTuple):
    """Where a body's voxels are (read-only arrays, shared by every episode on that body)."""

    # The field shadows tuple.index (a method), which mypy reports; the name is the array's meaning.
    index: np.ndarray  # type: ignore[assignment]  # (n_body,) flat grid indices, ``np.flatnonzero(body)``
    rows: np.ndarray  # (n_body,) float64 grid row of each
    cols: np.ndarray  # (n_body,) float64 grid column of each
    position: np.ndarray  # (64 · 64,) int64 body-voxel number of each grid voxel, −1 outside


def body_voxels(body: np.ndarray, body_key: bytes) -> BodyVoxels:
    """:class:`BodyVoxels` of a body, memoised per body like the depths."""
    hit = _BODIES.get(body_key)
    if hit is None:
        if len(_BODIES) >= _BODIES_MAX:
            _BODIES.clear()
        index = np.flatnonzero(body)
        position = np.full(body.size, -1, np.int64)
        position[index] = np.arange(index.size)
        rows, cols = _VOXEL_ROWS[index], _VOXEL_COLS[index]
        hit = BodyVoxels(index, rows, cols, position)
        for a in hit:
            a.setflags(write=False)
        _BODIES[body_key] = hit
    return hit


def body_depths(body: np.ndarray, body_key: bytes, angle_index: int, body_index: np.ndarray) -> np.ndarray:
    """:func:`depth_from_surface` on the body voxels, memoised per (body, grid angle) across episodes.

    ``body_key`` identifies the body mask (``body.tobytes()``); built-in tasks draw the
    tumour and OARs per episode but keep the body, so each depth map is computed once.
    """
    key = (body_key, angle_index)
    depth = _DEPTHS.get(key)
    if depth is None:
        if len(_DEPTHS) >= _DEPTHS_MAX:
            _DEPTHS.clear()
        depth = depth_from_surface(body, angle_index * ANGLE_STEP, body_index)
        depth.setflags(write=False)
        _DEPTHS[key] = depth
    return depth


def lateral_distance(
    isocentre: tuple[float, float], angle_deg: float, voxels: np.ndarray | None = None
) -> np.ndarray:
    """Signed distance (voxels) of each voxel from the beam's central axis: (64, 64), or (len(voxels),)."""
    vr = _VOXEL_ROWS if voxels is None else _VOXEL_ROWS[voxels]
    vc = _VOXEL_COLS if voxels is None else _VOXEL_COLS[voxels]
    lat = _lateral(isocentre, angle_deg, vr, vc)
    return lat.reshape(GRID, GRID) if voxels is None else lat


def _lateral(
    isocentre: tuple[float, float], angle_deg: float, rows: np.ndarray, cols: np.ndarray
) -> np.ndarray:
    _, n = beam_axes(angle_deg)
    return (rows - isocentre[0]) * n[0] + (cols - isocentre[1]) * n[1]


def field_edges(phantom: Phantom, angle_deg: float, margin: int) -> tuple[float, float]:
    """(lo, hi): the aperture's edges across a beam, the tumour's projection on the beamlet grid
    widened by ``margin`` voxels on each side."""
    lat = lateral_distance(phantom.isocentre, angle_deg, np.flatnonzero(phantom.tumour))
    return float(np.round(lat.min()) - margin - 0.5), float(np.round(lat.max()) + margin + 0.5)


def field_dose(lateral: np.ndarray, depth: np.ndarray, lo: float, hi: float, k: float) -> np.ndarray:
    """THE field formula (module docstring) on given lateral distances and depths."""
    out = np.empty(lateral.size)
    aperture_beam(
        np.ascontiguousarray(lateral, float).ravel(), MU * np.ravel(depth), lo, hi, PENUMBRA, k, out
    )
    return out.reshape(np.shape(lateral))


def beam_dose(phantom: Phantom, angle_deg: float, k: float, margin: int = 2) -> np.ndarray:
    """Dose of one beam (aperture with ``margin``) at unit weight on the whole slice (64, 64), × Rx."""
    lo, hi = field_edges(phantom, angle_deg, margin)
    dose = field_dose(
        lateral_distance(phantom.isocentre, angle_deg), depth_from_surface(phantom.body, angle_deg), lo, hi, k
    )
    return np.where(phantom.body, dose, 0.0)


def plan_dose(
    phantom: Phantom,
    angles_deg: list[float],
    weights: list[float],
    k: float,
    margins: list[int] | None = None,
) -> np.ndarray:
    """The dose of a plan on the whole slice (64, 64): Σ weight × beam dose."""
    dose = np.zeros((GRID, GRID))
    for i, (angle, weight) in enumerate(zip(angles_deg, weights)):
        dose += weight * beam_dose(phantom, angle, k, 2 if margins is None else margins[i])
    return dose


class BeamCache:
    """Per-episode cache of beam doses on the body voxels, one row per (grid angle, margin).

    ``rows[a · N_MARGINS + m]`` is the dose of the beam at ``a × ANGLE_STEP`` degrees with
    aperture margin ``m`` on the body voxels (``body_index = np.flatnonzero(phantom.body)``
    order, at grid rows ``voxel_rows`` and columns ``voxel_cols``; ``voxels``:
    :class:`BodyVoxels`), computed on first use. :meth:`renew` starts the next episode on the
    same body in the same memory.
    """

    def __init__(self, phantom: Phantom, k: float) -> None:
        self.k = k
        self._body_key = phantom.body.tobytes()
        self.voxels = body_voxels(phantom.body, self._body_key)
        self.body_index, self.voxel_rows, self.voxel_cols = self.voxels[:3]
        self.rows = np.zeros((N_ANGLES * N_MARGINS, self.body_index.size))  # float64
        self._done = np.zeros(N_ANGLES * N_MARGINS, bool)
        self._set_phantom(phantom)

    def _set_phantom(self, phantom: Phantom) -> None:
        self.phantom = phantom
        tumour = np.flatnonzero(phantom.tumour)
        self._tumour_rows, self._tumour_cols = _VOXEL_ROWS[tumour], _VOXEL_COLS[tumour]
        self._edges = np.full((N_ANGLES, 2), np.nan)  # rounded projection (min, max) per angle

    def renew(self, phantom: Phantom) -> bool:
        """Forget every beam and serve ``phantom`` if it has the same body (True), else change nothing."""
        if phantom.body.tobytes() != self._body_key:
            return False
        self._set_phantom(phantom)
        self._done[:] = False
        return True

    def projection(self, angle_index: int) -> tuple[float, float]:
        """The tumour's projection across the beam, rounded to the beamlet grid: (min, max)."""
        edges = self._edges[angle_index]
        if np.isnan(edges[0]):
            lat = _lateral(
                self.phantom.isocentre, angle_index * ANGLE_STEP, self._tumour_rows, self._tumour_cols
            )
            edges[:] = np.round(lat.min()), np.round(lat.max())
        return float(edges[0]), float(edges[1])

    def beam(self, row_index: int) -> np.ndarray:
        """The (n_body,) dose of beam row ``angle · N_MARGINS + margin`` (unit weight)."""
        row = self.rows[row_index]
        if not self._done[row_index]:
            angle_index, margin = divmod(row_index, N_MARGINS)
            depth = body_depths(self.phantom.body, self._body_key, angle_index, self.body_index)
            lateral = _lateral(
                self.phantom.isocentre, angle_index * ANGLE_STEP, self.voxel_rows, self.voxel_cols
            )
            low, high = self.projection(angle_index)
            aperture_beam(lateral, MU * depth, low - margin - 0.5, high + margin + 0.5, PENUMBRA, self.k, row)
            self._done[row_index] = True
        return row

    def dose(self, angle_indices: np.ndarray, weights: np.ndarray, margins: np.ndarray) -> np.ndarray:
        """Σ weight × beam over the given beams, on the body voxels (n_body,).

        Summed beam by beam in a fixed order with plain IEEE products and sums, not through
        BLAS: OpenBLAS picks its kernel per CPU, and its AVX-512 and AVX2 kernels differ in the
        last bits, so the same plan had different doses (and golden trajectories) on
        different machines."""
        rows = angle_indices * N_MARGINS + margins
        if not self._done[rows].all():
            for r in rows:
                self.beam(int(r))
        total = np.zeros(self.rows.shape[1])
        for weight, row in zip(weights.tolist(), rows.tolist()):
            total += weight * self.rows[row]
        return total

    def to_grid(self, body_dose: np.ndarray) -> np.ndarray:
        """Body-voxel dose -> (64, 64), zero outside the body."""
        grid = np.zeros(GRID * GRID)
        grid[self.body_index] = body_dose
        return grid.reshape(GRID, GRID)


_SPARE_CACHES: dict[tuple[bytes, float], list[BeamCache]] = {}
_SPARE_MAX = 8
"""Beam caches set aside when a plan moved to another body, kept for the next plan on that body:
allocating a cache's (216, n_body) rows costs more than a whole step, and the built-in tasks draw
their bodies from a few sizes. A cache is in at most one place: a plan, or this pool."""


def next_cache(phantom: Phantom, k: float, previous: BeamCache | None) -> BeamCache:
    """A cache serving ``phantom`` (every beam to be computed afresh): ``previous`` if it has the
    same body, else a spare one of that body (``previous`` becomes a spare), else a new one."""
    if previous is not None:
        if previous.k == k and previous.renew(phantom):
            return previous
        if sum(map(len, _SPARE_CACHES.values())) >= _SPARE_MAX:
            _SPARE_CACHES.clear()
        _SPARE_CACHES.setdefault((previous._body_key, previous.k), []).append(previous)
    spares = _SPARE_CACHES.get((phantom.body.tobytes(), k))
    if spares:
        cache = spares.pop()
        cache.renew(phantom)
        return cache
    return BeamCache(phantom, k)
