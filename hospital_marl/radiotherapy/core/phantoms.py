"""Phantoms: the patient slice of one episode (SPEC-RT §1).

A :class:`Phantom` is a 64 × 64 slice of boolean masks: the body, the tumour
(planning target) and one mask per organ at risk (OAR) of the task, plus the
isocentre (the tumour's centroid). Generators draw one from an
``np.random.Generator``; :func:`draw_phantom` redraws until
:func:`phantom_problems` finds nothing wrong, so every episode's phantom is
valid: every OAR non-empty and inside the body, no forbidden overlap, a tumour
of at least :data:`MIN_TUMOUR_VOXELS` voxels.

Orientation (an axial slice seen from the feet, patient supine): row 0 is
anterior, the last row posterior; columns run from the patient's right to left.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

GRID = 64
"""Voxels per side; voxels are unit squares, centres at integer (row, column)."""
MIN_TUMOUR_VOXELS = 30
MAX_REDRAWS = 400
"""Draws of a patient's free shape randomness before it is an error (a split keeping one digest bucket
of eight accepts ~1 draw in 8; 400 gives it ~50 tries in its bucket)."""

_ROWS, _COLS = np.mgrid[0:GRID, 0:GRID].astype(np.float64)  # (64, 64) voxel-centre coordinates
_AXIS = np.arange(GRID, dtype=np.float64)  # a row's (or a column's) voxel-centre coordinate


@dataclass(frozen=True, eq=False)
class Phantom:
    """One slice: masks and the isocentre. Arrays are read-only."""

    body: np.ndarray  # (64, 64) bool, inside the patient
    tumour: np.ndarray  # (64, 64) bool, the planning target
    oars: np.ndarray  # (n_oars, 64, 64) bool, in the task's OAR order
    isocentre: tuple[float, float]  # (row, column): the tumour's centroid
    parameters: tuple[float, ...] = ()  # (body, tumour, offset, layout) drawn from its split's Anatomy

    def __post_init__(self) -> None:
        for name in ("body", "tumour", "oars"):
            getattr(self, name).setflags(write=False)


Interval = tuple[float, float]


@dataclass(frozen=True)
class Anatomy:
    """The anatomy distribution a split draws patients from (SPEC-RT §8: the test split lies
    outside the training ranges). Each field is a union of intervals, sampled uniformly over
    their total length; ``body`` is a set of sizes (depth maps are cached per body)."""

    body: tuple[float, ...]  # body size: a radius (voxels) or a scale of the task's nominal body
    tumour: tuple[Interval, ...]  # tumour size: a radius (voxels) or a scale
    offset: tuple[Interval, ...]  # tumour position: distance from its nominal place (voxels)
    layout: tuple[Interval, ...]  # OAR layout: the gap (voxels) between the tumour and its nearest OARs,
    #                               or the lateral distance of paired OARs

    def __post_init__(self) -> None:
        if not self.body or not all(isinstance(b, (int, float)) and b > 0 for b in self.body):
            raise ValueError(f"Anatomy.body must be positive sizes, got {self.body!r}")
        for name in ("tumour", "offset", "layout"):
            value = getattr(self, name)
            if not value or not all(len(iv) == 2 and 0 <= iv[0] <= iv[1] for iv in value):
                raise ValueError(f"Anatomy.{name} must be intervals (low, high), got {value!r}")

    @staticmethod
    def sample(rng: np.random.Generator, intervals: tuple[Interval, ...]) -> float:
        # plain floats (called for every draw of a patient's shape): the same sum, in the same
        # order, as NumPy's over these few lengths
        lengths = [hi - lo for lo, hi in intervals]
        u = rng.uniform(0, sum(lengths))
        for (lo, _hi), length in zip(intervals, lengths):
            if u <= length:
                return float(lo + u)
            u -= length
        return float(intervals[-1][1])

    def pinned(self, rng: np.random.Generator) -> Anatomy:
        """This distribution's draw of (body, tumour, offset, layout), as an Anatomy that always
        gives those values (a generator then redraws only its free shape randomness)."""
        body, tumour, offset, layout = self.draw(rng)
        return Anatomy((body,), ((tumour, tumour),), ((offset, offset),), ((layout, layout),))

    def draw(self, rng: np.random.Generator) -> tuple[float, float, float, float]:
        """(body, tumour, offset, layout) of one patient."""
        body = float(self.body[int(rng.integers(len(self.body)))])
        return (
            body,
            self.sample(rng, self.tumour),
            self.sample(rng, self.offset),
            self.sample(rng, self.layout),
        )


def _box(centre: tuple[float, float], reach: float) -> tuple[slice, slice] | None:
    """The grid rows and columns within ``reach`` of ``centre`` (a shape that fits in a circle of
    radius ``reach − 1`` about it has no voxel beyond, even after rounding); None if not finite."""
    if not (math.isfinite(centre[0]) and math.isfinite(centre[1]) and math.isfinite(reach)):
        return None
    return (
        slice(max(0, math.floor(centre[0] - reach)), max(0, min(GRID, math.ceil(centre[0] + reach) + 1))),
        slice(max(0, math.floor(centre[1] - reach)), max(0, min(GRID, math.ceil(centre[1] + reach) + 1))),
    )


def disc(centre: tuple[float, float], radius: float) -> np.ndarray:
    """Voxels whose centre lies within ``radius`` of ``centre`` (row, column)."""
    # evaluated only near the centre (phantoms are drawn at every reset), each voxel as on the
    # whole grid: squared offsets per row and per column, summed by broadcasting
    box = _box(centre, abs(radius) + 1)
    rows, cols = box or (slice(None), slice(None))
    mask = np.zeros((GRID, GRID), bool)
    mask[rows, cols] = ((_AXIS[rows] - centre[0]) ** 2)[:, None] + ((_AXIS[cols] - centre[1]) ** 2)[
        None, :
    ] <= radius**2
    return mask


def ellipse(
    centre: tuple[float, float], semi_rows: float, semi_cols: float, angle_deg: float = 0.0
) -> np.ndarray:
    """An ellipse with semi-axes along rows and columns, rotated by ``angle_deg``."""
    a = np.deg2rad(angle_deg)
    box = _box(centre, max(abs(semi_rows), abs(semi_cols)) + 1)  # as in disc
    rows, cols = box or (slice(None), slice(None))
    dr, dc = _AXIS[rows] - centre[0], _AXIS[cols] - centre[1]  # per row, per column
    u = (dr * np.cos(a))[:, None] + (dc * np.sin(a))[None, :]
    v = (-dr * np.sin(a))[:, None] + (dc * np.cos(a))[None, :]
    mask = np.zeros((GRID, GRID), bool)
    mask[rows, cols] = (u / semi_rows) ** 2 + (v / semi_cols) ** 2 <= 1.0
    return mask


def rectangle(rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
    """Rows ``rows[0]..rows[1]`` and columns ``cols[0]..cols[1]``, inclusive."""
    mask = np.zeros((GRID, GRID), bool)
    mask[rows[0] : rows[1] + 1, cols[0] : cols[1] + 1] = True
    return mask


def annulus_sector(
    centre: tuple[float, float], inner: float, outer: float, from_deg: float, to_deg: float
) -> np.ndarray:
    """A ring segment; angles measured from the anterior direction (up), clockwise on screen."""
    dr, dc = _ROWS - centre[0], _COLS - centre[1]
    radius = np.hypot(dr, dc)
    angle = np.rad2deg(np.arctan2(dc, -dr)) % 360
    in_angle = (
        (angle >= from_deg) & (angle <= to_deg)
        if from_deg <= to_deg
        else (angle >= from_deg) | (angle <= to_deg)
    )
    return (radius >= inner) & (radius <= outer) & in_angle


def centroid(mask: np.ndarray) -> tuple[float, float]:
    """Mean (row, column) of the mask's voxels (sums of whole numbers: exact in any order)."""
    index = np.flatnonzero(mask)
    rows, cols = np.divmod(index, mask.shape[1])
    return float(rows.sum() / index.size), float(cols.sum() / index.size)


def crop(tumour: np.ndarray, organs: list[np.ndarray]) -> np.ndarray:
    """The target cropped one voxel clear of the organs (as planners crop a PTV from a critical
    organ): no organ overlaps it, so a split's anatomy never needs a redraw for that."""
    near = np.zeros_like(tumour)
    for organ in organs:
        near |= organ
    grown = near.copy()
    grown[1:] |= near[:-1]
    grown[:-1] |= near[1:]
    grown[:, 1:] |= near[:, :-1]
    grown[:, :-1] |= near[:, 1:]
    return tumour & ~grown


def make_phantom(body: np.ndarray, tumour: np.ndarray, oars: list[np.ndarray]) -> Phantom:
    """A phantom whose isocentre is the tumour's centroid (an empty tumour gets the grid centre)."""
    iso = centroid(tumour) if tumour.any() else ((GRID - 1) / 2, (GRID - 1) / 2)
    stack = np.array(oars, dtype=bool).reshape(len(oars), GRID, GRID)
    return Phantom(body.astype(bool), tumour.astype(bool), stack, iso)


_ABOVE_ONE = {np.dtype(np.uint64): np.uint64(0xFEFE_FEFE_FEFE_FEFE), np.dtype(np.uint8): np.uint8(0xFE)}
"""Every byte's bits above its lowest: set where a bytewise sum of masks counts 2 or more."""


def _words(masks: np.ndarray, voxels: int) -> np.ndarray:
    """Bool masks of ``voxels`` each, flat, as 64-bit words (8 voxels each) when a mask divides
    evenly into them, else as bytes."""
    flat = np.ascontiguousarray(masks, dtype=bool).reshape(-1)
    return flat.view(np.uint64) if voxels % 8 == 0 else flat.view(np.uint8)


def phantom_problems(
    phantom: Phantom, oar_names: tuple[str, ...], envelopes: frozenset[str] = frozenset()
) -> list[str]:
    """Everything wrong with a phantom (empty = valid).

    ``envelopes`` are OARs that may contain other OARs (the whole brain holds the
    brainstem); no OAR may overlap the tumour, and no two other OARs may overlap.
    """
    problems = []
    body, tumour = phantom.body, phantom.tumour
    n_tumour = int(np.count_nonzero(tumour))
    if n_tumour < MIN_TUMOUR_VOXELS:
        problems.append(f"tumour has {n_tumour} voxels (< {MIN_TUMOUR_VOXELS})")
    if np.count_nonzero(tumour > body):
        problems.append("tumour extends outside the body")
    if len(oar_names) != len(phantom.oars):
        problems.append(f"{len(phantom.oars)} OAR masks for {len(oar_names)} OARs")
        return problems
    # whole-mask tests eight voxels at a time: bool bytes are 0 or 1, so 64-bit words of them
    # can be and-ed (a 1 byte in both), or-ed, and summed bytewise (no carry below 256 masks)
    n = len(oar_names)
    words = _words(phantom.oars, body.size).reshape(n, -1)
    body_words, tumour_words = _words(body, body.size), _words(tumour, body.size)
    present = np.asarray(words.any(axis=1))  # (n,) bool (numpy's stubs allow a scalar here)
    outside = (words & ~body_words).any(axis=1)
    on_tumour = (words & tumour_words).any(axis=1)
    for j, name in enumerate(oar_names):
        if not present[j]:
            problems.append(f"OAR {name} is empty")
        if outside[j]:
            problems.append(f"OAR {name} extends outside the body")
        if on_tumour[j]:
            problems.append(f"OAR {name} overlaps the tumour")
    plain = [j for j, name in enumerate(oar_names) if name not in envelopes]
    shared = len(plain) > 255 or (words[plain].sum(axis=0, dtype=words.dtype) & _ABOVE_ONE[words.dtype]).any()
    if shared:  # a voxel lies in two OARs that must not overlap: name the pairs
        for i, (a, mask_a) in enumerate(zip(oar_names, phantom.oars)):
            for b, mask_b in zip(oar_names[i + 1 :], phantom.oars[i + 1 :]):
                if a not in envelopes and b not in envelopes and (mask_a & mask_b).any():
                    problems.append(f"OARs {a} and {b} overlap")
    r, c = (round(x) for x in phantom.isocentre)
    if not body[r, c]:
        problems.append("isocentre outside the body")
    elif n_tumour and not tumour[r, c]:  # a target cropped into a crescent: its centroid falls outside
        problems.append("isocentre outside the tumour")
    return problems


PhantomGenerator = Callable[[np.random.Generator, Anatomy], Phantom]
"""Draws one (possibly invalid) phantom from an anatomy distribution; :func:`draw_phantom`
validates and redraws."""

_CENTRE = ((GRID - 1) / 2, (GRID - 1) / 2)


def _around(rng: np.random.Generator, distance: float) -> tuple[float, float]:
    """An offset of ``distance`` voxels in a uniformly drawn direction (rows, columns)."""
    a = rng.uniform(0, 2 * np.pi)
    return distance * np.cos(a), distance * np.sin(a)


def prostate_phantom(rng: np.random.Generator, anatomy: Anatomy) -> Phantom:
    """Body circle (radius ``anatomy.body``); tumour circle (radius ``anatomy.tumour``) moved by
    ``anatomy.offset`` from the centre; rectum posterior and bladder anterior, each
    ``anatomy.layout`` voxels from the tumour's edge.

    OAR order: rectum, bladder.
    """
    r_body, r_t, offset, gap = anatomy.draw(rng)
    body = _disc_cached(_CENTRE, r_body)
    dr, dc = _around(rng, offset)
    centre = (_CENTRE[0] + dr, _CENTRE[1] + dc)
    tumour = disc(centre, r_t)
    pelvis = r_body / 28  # the organs scale with the pelvis (so the smallest bodies can be drawn)
    rectum_semi = (rng.uniform(3.5, 5) * pelvis, rng.uniform(5, 7) * pelvis)  # (rows, columns): posterior
    rectum = ellipse((centre[0] + r_t + gap + rectum_semi[0], centre[1]), *rectum_semi)
    r_b = rng.uniform(5, 9) * pelvis
    bladder = disc((centre[0] - r_t - gap - r_b, centre[1] + rng.uniform(-2, 2)), r_b)
    rectum, bladder = rectum & ~tumour, bladder & ~tumour
    return make_phantom(body, crop(tumour, [rectum, bladder]), [rectum, bladder])


@lru_cache(maxsize=16)
def _head_neck_anatomy(scale: float, parotid: float) -> tuple[np.ndarray, list[np.ndarray]]:
    """The head-and-neck body and OARs at a body ``scale``, parotids ``parotid`` × ``scale`` voxels
    off the midline (drawn once per size). Every position scales with the body, so that every body
    scale of every split can be drawn (the second version's fixed-size organs collided below 0.95)."""
    c_r, c_c = _CENTRE
    body = ellipse(_CENTRE, 29 * scale, 28 * scale)
    cord = rectangle((int(c_r + 15 * scale), int(c_r + 21 * scale)), (int(c_c - 2), int(c_c + 2)))
    brainstem = disc((c_r + 10.5 * scale, c_c), 3)
    parotid_r = ellipse((c_r + 2, c_c - parotid * scale), 5, 3.5)
    parotid_l = ellipse((c_r + 2, c_c + parotid * scale), 5, 3.5)
    mandible = annulus_sector((c_r + 2, c_c), 18 * scale, 21 * scale, 290, 70)
    larynx = disc((c_r - 12 * scale, c_c), 2.5)
    oesophagus = disc((c_r + 4 * scale, c_c), 2.2)
    return body, [cord, brainstem, parotid_r, parotid_l, mandible, larynx, oesophagus]


def head_neck_phantom(rng: np.random.Generator, anatomy: Anatomy) -> Phantom:
    """Body ellipse 29 × 28 voxels × ``anatomy.body``; a rotated elliptical tumour (semi-axes
    5–9 × 4–7 × ``anatomy.tumour``) ``anatomy.offset`` voxels off the midline on a random side;
    parotids ``anatomy.layout`` voxels off the midline.

    OAR order: spinal cord, brainstem, parotid R, parotid L, mandible, larynx, oesophagus.
    """
    scale, size, offset, parotid = anatomy.draw(rng)
    c_r, c_c = _CENTRE
    body, oars = _head_neck_anatomy(scale, round(parotid * 2) / 2)
    side = 1 if rng.random() < 0.5 else -1
    centre = (c_r - 2 + rng.uniform(-3, 3), c_c + side * offset)
    tumour = ellipse(centre, size * rng.uniform(5, 9), size * rng.uniform(4, 7), rng.uniform(0, 180))
    return make_phantom(body, crop(tumour, oars), oars)


@lru_cache(maxsize=16)
def _brain_anatomy(r_body: float) -> tuple[np.ndarray, list[np.ndarray], tuple[float, float]]:
    """The paediatric body (radius ``r_body``) and brainstem, chiasm, cochleae, whole brain
    scaled with it; and the brainstem's centre."""
    c_r, c_c = _CENTRE
    s = r_body / 29
    stem_centre = (c_r + 6 * s, c_c)
    return (
        disc(_CENTRE, r_body),
        [
            disc(stem_centre, _STEM_RADIUS),
            ellipse((c_r - 6 * s, c_c), 1.6, 4.5),
            disc((stem_centre[0], c_c - 14 * s), 2),
            disc((stem_centre[0], c_c + 14 * s), 2),
            disc(_CENTRE, r_body - 3),
        ],
        stem_centre,
    )


_STEM_RADIUS = 4.0


@lru_cache(maxsize=16)
def _disc_cached(centre: tuple[float, float], radius: float) -> np.ndarray:
    mask = disc(centre, radius)
    mask.setflags(write=False)
    return mask


def pediatric_brain_phantom(rng: np.random.Generator, anatomy: Anatomy) -> Phantom:
    """Body circle (radius ``anatomy.body``); a small tumour (radius ``anatomy.tumour``) beside the
    brainstem, ``anatomy.layout`` voxels from its edge (``offset``: unused, the layout sets it).

    OAR order: brainstem, optic chiasm, cochlea R, cochlea L, brain (minus the tumour).
    """
    r_body, r_t, _offset, gap = anatomy.draw(rng)
    body, (brainstem, chiasm, cochlea_r, cochlea_l, whole_brain), stem_centre = _brain_anatomy(r_body)
    direction = np.deg2rad(rng.uniform(-70, 70) + rng.choice([90, 270]))  # beside: to the right or left
    distance = _STEM_RADIUS + r_t + gap
    centre = (stem_centre[0] - distance * np.cos(direction), stem_centre[1] + distance * np.sin(direction))
    tumour = crop(disc(centre, r_t), [brainstem, chiasm, cochlea_r, cochlea_l])
    brain = whole_brain & ~tumour
    return make_phantom(body, tumour, [brainstem, chiasm, cochlea_r, cochlea_l, brain])


def phantom_digest(phantom: Phantom) -> bytes:
    """A patient's identity: a BLAKE2 digest of every mask's voxels (body, tumour, each OAR)."""
    masks = np.concatenate((phantom.body[None], phantom.tumour[None], phantom.oars))
    return hashlib.blake2b(np.packbits(masks).tobytes(), digest_size=16).digest()


def split_bucket(phantom: Phantom, n_buckets: int) -> int:
    """This patient's bucket of ``n_buckets``: its digest modulo ``n_buckets``. Each split keeps
    only its own buckets (disjoint sets), so no patient (voxel for voxel) is in two splits."""
    return int.from_bytes(phantom_digest(phantom)[:8], "little") % n_buckets


def draw_phantom(
    generator: PhantomGenerator,
    rng: np.random.Generator,
    oar_names: tuple[str, ...],
    envelopes: frozenset[str] = frozenset(),
    anatomy: Anatomy | None = None,
    bucket: tuple[tuple[int, ...], int] | None = None,
) -> Phantom:
    """A valid phantom of the split's anatomy.

    The patient's parameters (body, tumour size, position, OAR layout) are drawn once from
    ``anatomy``; only the generator's free shape randomness (directions, rotations, small organ
    sizes) is redrawn, at most :data:`MAX_REDRAWS` times, until the phantom is valid and, when
    ``bucket = (owned, n)`` is given, lies in one of the buckets ``owned`` of ``n`` (:func:`split_bucket`). A
    patient whose parameters give no such phantom is an error naming them, never a silent draw of
    other parameters (which would shift the split's distribution). A generator of one argument
    (a user's ``rng -> Phantom``) is called without ``anatomy`` and redrawn whole."""
    problems: list[str] = []
    pinned = None if anatomy is None else anatomy.pinned(rng)
    for _ in range(MAX_REDRAWS):
        phantom = generator(rng) if pinned is None else generator(rng, pinned)  # type: ignore[call-arg]
        # the bucket first (a digest is cheaper than the checks; the same phantom is kept either way)
        if bucket is not None and split_bucket(phantom, bucket[1]) not in bucket[0]:
            problems = [f"in another split's bucket (not {bucket[0]} of {bucket[1]})"]
            continue
        problems = phantom_problems(phantom, oar_names, envelopes)
        if not problems:
            if pinned is None:
                return phantom
            parameters = (pinned.body[0], pinned.tumour[0][0], pinned.offset[0][0], pinned.layout[0][0])
            return Phantom(phantom.body, phantom.tumour, phantom.oars, phantom.isocentre, parameters)
    where = ""
    if pinned is not None:
        values = (pinned.body[0], pinned.tumour[0][0], pinned.offset[0][0], pinned.layout[0][0])
        where = f" for (body, tumour, offset, layout) = {tuple(round(v, 4) for v in values)}"
    raise ValueError(f"no valid phantom in {MAX_REDRAWS} draws{where}; last problems: {problems}")
