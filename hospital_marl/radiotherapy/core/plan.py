"""The planning core (SPEC-RT §3): a plan being built on one phantom, step by step.

:class:`Plan` owns the state (beams, active beam, step count), the rules
(:data:`ACTIONS`, exact masks), and the per-step evaluation (dose, metrics,
score). It imports no gymnasium; the env in ``radiotherapy.envs`` is a thin view.

Beam weights are held as integer tenths (1–10) so that ±0.1 steps never drift.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hospital_marl.action_index import INVALID, action_index_or_invalid
from hospital_marl.radiotherapy.core.dose import ANGLE_STEP, MAX_MARGIN, N_ANGLES, BeamCache, next_cache
from hospital_marl.radiotherapy.core.kernels import (
    constraint_values,
    cumulative_dvhs,
    outside_statistics,
    structure_statistics,
    tumour_statistics,
)
from hospital_marl.radiotherapy.core.metrics import (
    BODY_NEAR_MAX_PERCENT,
    DVH_BINS,
    LEVELS,
    N_TUMOUR_STATISTICS,
    TUMOUR_DVH_MAX,
    PlanMetrics,
    _rank,
    metrics_from_statistics,
    plan_score,
    rank_positions,
)
from hospital_marl.radiotherapy.core.phantoms import GRID, Phantom, draw_phantom
from hospital_marl.radiotherapy.core.tasks import N_BUCKETS, SPLIT_BUCKETS, Task, get_task

MAX_BEAMS = 7
NEW_BEAM_WEIGHT = 6  # tenths: a new beam's weight 0.6
NEW_MARGIN = 2  # voxels: a new beam's aperture margin around the tumour's projection
MIN_WEIGHT, MAX_WEIGHT = 1, 10  # tenths


@dataclass(frozen=True)
class Action:
    id: int
    name: str
    doc: str
    valid_when: str


ACTIONS: tuple[Action, ...] = (
    Action(
        0,
        "add_beam",
        "add a beam at the next default angle, weight 0.6, aperture margin 2 voxels; it becomes active",
        "fewer than 7 beams",
    ),
    Action(1, "turn_cw", "turn the active beam by +10°", "a beam exists"),
    Action(2, "turn_ccw", "turn the active beam by −10°", "a beam exists"),
    Action(3, "weight_up", "active beam weight +0.1", "a beam exists and its weight < 1.0"),
    Action(4, "weight_down", "active beam weight −0.1", "a beam exists and its weight > 0.1"),
    Action(5, "remove_beam", "remove the active beam (the previous one becomes active)", "a beam exists"),
    Action(6, "next_beam", "make the next beam active (cyclic)", "two or more beams"),
    Action(7, "lock", "lock the plan: the episode terminates", "a beam exists"),
    Action(
        8,
        "widen",
        "widen the active beam's aperture: margin +1 voxel around the tumour's projection",
        "a beam exists and its margin < 5",
    ),
    Action(
        9,
        "narrow",
        "narrow the active beam's aperture: margin −1 voxel (0 = the projection itself)",
        "a beam exists and its margin > 0",
    ),
)
"""THE action table (SPEC-RT §3, apertures §8)."""
N_ACTIONS = len(ACTIONS)
ADD, TURN_CW, TURN_CCW, WEIGHT_UP, WEIGHT_DOWN, REMOVE, NEXT, LOCK, WIDEN, NARROW = range(N_ACTIONS)
ACTION_NAMES = tuple(a.name for a in ACTIONS)


def valid_actions(n_beams: int, active_weight: int, active_margin: int = NEW_MARGIN) -> tuple[bool, ...]:
    """THE mask rule (:data:`ACTIONS` ``valid_when``): which actions change a plan with ``n_beams``
    beams whose active beam has weight ``active_weight`` (tenths) and aperture margin
    ``active_margin`` (voxels; both anything when there is no beam)."""
    n, w, m = n_beams, active_weight, active_margin
    return (
        n < MAX_BEAMS,
        n > 0,
        n > 0,
        n > 0 and w < MAX_WEIGHT,
        n > 0 and w > MIN_WEIGHT,
        n > 0,
        n >= 2,
        n > 0,
        n > 0 and m < MAX_MARGIN,
        n > 0 and m > 0,
    )


_MASKS = tuple(
    tuple(
        tuple(np.array(valid_actions(n, w, m), dtype=bool) for m in range(MAX_MARGIN + 1))
        for w in range(MAX_WEIGHT + 1)
    )
    for n in range(MAX_BEAMS + 1)
)
"""Every plan state's mask, [n_beams][active weight][active margin], built once from
:func:`valid_actions`."""
for _row in _MASKS:
    for _col in _row:
        for _mask in _col:
            _mask.setflags(write=False)


def default_angle_index(existing: np.ndarray) -> int:
    """The next default angle (grid index): the one farthest from every existing beam.

    Maximin on the circle, ties to the smallest angle: 0°, 180°, 90°, 270°, 40°, ...
    so any number of beams added in a row is close to evenly spaced.
    """
    if existing.size == 0:
        return 0
    grid = np.arange(N_ANGLES)
    gap = np.abs(grid[:, None] - existing[None, :]) % N_ANGLES
    gap = np.minimum(gap, N_ANGLES - gap).min(axis=1)
    return int(np.argmax(gap))


class Plan:
    """A plan on one phantom: reset with a task and an RNG, then step actions.

    State (all fixed-size, so snapshots are cheap)::

        angles   (7,) int64   grid angle index (× 10°) of beam slot i < n_beams
        weights  (7,) int64   weight in tenths (1–10) of beam slot i < n_beams
        margins  (7,) int64   aperture margin in voxels (0–5) of beam slot i < n_beams
        n_beams  int          beams present, packed in slots 0..n_beams−1
        active   int          the active beam's slot (−1 when there is none)
    """

    def __init__(self, task: str | Task | None = None, split: str = "train") -> None:
        # imported here so that ``python -m ...core.calibration`` runs without a runpy warning
        from hospital_marl.radiotherapy.core.calibration import task_dose_scale

        self.task = get_task(task)
        self.split = split
        self._anatomy = self.task.anatomy_for(split)  # checks the split's name
        # each split draws only the patients of its own digest buckets: none is in two splits
        self._bucket = None if self._anatomy is None else (SPLIT_BUCKETS[split], N_BUCKETS)
        self.dose_scale = task_dose_scale(self.task)
        self.phantom: Phantom | None = None
        self.angles = np.zeros(MAX_BEAMS, np.int64)
        self.weights = np.zeros(MAX_BEAMS, np.int64)
        self.margins = np.zeros(MAX_BEAMS, np.int64)
        self.n_beams = 0
        self.active = -1
        self.steps = 0
        self.invalid_actions = 0
        self.locked = False
        self.score = 0.0
        self.metrics: PlanMetrics | None = None
        self.cache: BeamCache | None = None
        self._empty_plan: tuple[PlanMetrics, float] | None = None
        # a structure's DVH bin width: tumour over 0–2 Rx, each OAR over 0–2 × its reference dose
        self._constraints = self.task.constraint_table
        self._dvh_inv = DVH_BINS / np.concatenate(([TUMOUR_DVH_MAX], 2.0 * self._constraints.reference))

    # ------------------------------------------------------------ episode
    def reset(self, rng: np.random.Generator, phantom: Phantom | None = None) -> None:
        """A new patient (drawn from ``rng`` unless given) and an empty plan."""
        task = self.task
        self.phantom = phantom or draw_phantom(
            task.generator, rng, task.oar_names, task.envelopes, self._anatomy, self._bucket
        )
        self.cache = next_cache(self.phantom, self.dose_scale, self.cache)
        position = self.cache.voxels.position
        size = position.size
        tumour = np.flatnonzero(self.phantom.tumour)
        stacked = np.flatnonzero(self.phantom.oars)  # voxel v of OAR j at j·size + v, OAR by OAR
        # every structure's body-voxel indices: the tumour's, then each OAR's in turn
        self._dvh_voxels = position[np.concatenate((tumour, stacked % size))]
        self.tumour_index = self._dvh_voxels[: tumour.size]  # (n_tumour,)
        self._oar_voxels = self._dvh_voxels[tumour.size :]
        # the body outside the target (its near-max, D1%): body-voxel indices and a buffer
        self._outside = position[np.flatnonzero(self.phantom.body & ~self.phantom.tumour)]
        self._outside_dose = np.empty(self._outside.size)
        self._outside_rank = max(0, self._outside.size - _rank(BODY_NEAR_MAX_PERCENT, self._outside.size))
        # grid voxel -> the first OAR holding it, −1 for none (where a hot spot lies)
        self._structure_at = np.full(self.phantom.body.size, -1, np.int64)
        for j in range(len(self.phantom.oars) - 1, -1, -1):
            self._structure_at[self.phantom.oars[j].ravel()] = j
        bounds = np.searchsorted(stacked, np.arange(len(self.phantom.oars) + 1) * size)
        self._oar_starts = bounds[:-1]  # (n_oars,) where each OAR's voxels start in _oar_voxels
        sizes = np.diff(bounds, prepend=-tumour.size)  # (1 + n_oars,) voxels per structure
        if not sizes.all():
            empty = [name for name, size in zip(("tumour", *task.oar_names), sizes) if not size]
            raise ValueError(f"the phantom's masks {empty} are empty (inside the body): nothing to dose")
        self._dvh_sizes = sizes.astype(float)
        self._oar_sizes = self._dvh_sizes[1:]
        self._oar_mean, self._oar_max = np.empty(self._oar_starts.size), np.empty(self._oar_starts.size)
        # where each OAR's D2% sits among its doses sorted low to high
        self._near_max = np.array([int(n) - _rank(2, int(n)) for n in sizes[1:]], np.int64)
        self._values = np.empty(self._constraints.oar.size)
        self._ranks, self._tumour_statistics = rank_positions(tumour.size), np.empty(N_TUMOUR_STATISTICS)
        # DVH bins of every structure voxel, counted in one pass: each structure's row and bin width
        self._dvh_inv_bin = np.repeat(self._dvh_inv, sizes)
        self._dvh_offset = np.repeat(np.arange(sizes.size) * (DVH_BINS + 1), sizes)
        self._n_structures = sizes.size
        self._structure_dose = np.empty(self._dvh_voxels.size)  # the plan's dose on them
        self._dvh_counts = np.empty((sizes.size, DVH_BINS + 1), np.int64)
        self.n_beams, self.active, self.steps, self.invalid_actions = 0, -1, 0, 0
        self.angles[:] = 0
        self.weights[:] = 0
        self.margins[:] = 0
        self.locked = False
        self._evaluate()

    # --------------------------------------------------------------- rules
    @property
    def done(self) -> bool:
        return self.locked or self.truncated

    @property
    def truncated(self) -> bool:
        return not self.locked and self.steps >= self.task.max_steps

    def action_mask(self) -> np.ndarray:
        """(10,) bool: exactly the actions that change the plan (or lock it)."""
        return self._mask().copy()

    def _mask(self) -> np.ndarray:
        """The mask of this state from :data:`_MASKS` (read-only: shared by every plan)."""
        n = self.n_beams
        if not n:
            return _MASKS[0][0][0]
        return _MASKS[n][int(self.weights[self.active])][int(self.margins[self.active])]

    def step(self, action: int) -> tuple[float, bool]:
        """Apply one action; returns (reward = change in score, valid). Invalid actions change
        nothing and are counted: masked-out ones, and anything that is not an index in
        ``[0, N_ACTIONS)`` (out of range, a float, a bool, ``None``: as the ED's core)."""
        if self.phantom is None:
            raise RuntimeError("Plan.step before reset")
        if self.done:
            raise RuntimeError("the plan is locked or out of steps: reset first")
        if type(action) is not int or not 0 <= action < N_ACTIONS:
            action = action_index_or_invalid(action, N_ACTIONS)
        self.steps += 1
        valid = action != INVALID and bool(self._mask()[action])
        if not valid:
            self.invalid_actions += 1
            return 0.0, False
        a, n = int(action), self.n_beams
        if a == ADD:
            self.angles[n] = default_angle_index(self.angles[:n])
            self.weights[n] = NEW_BEAM_WEIGHT
            self.margins[n] = NEW_MARGIN
            self.n_beams, self.active = n + 1, n
        elif a in (TURN_CW, TURN_CCW):
            self.angles[self.active] = (self.angles[self.active] + (1 if a == TURN_CW else -1)) % N_ANGLES
        elif a in (WEIGHT_UP, WEIGHT_DOWN):
            self.weights[self.active] += 1 if a == WEIGHT_UP else -1
        elif a in (WIDEN, NARROW):
            self.margins[self.active] += 1 if a == WIDEN else -1
        elif a == REMOVE:
            i = self.active
            self.angles[i : n - 1] = self.angles[i + 1 : n].copy()
            self.weights[i : n - 1] = self.weights[i + 1 : n].copy()
            self.margins[i : n - 1] = self.margins[i + 1 : n].copy()
            self.angles[n - 1] = self.weights[n - 1] = self.margins[n - 1] = 0
            self.n_beams = n - 1
            self.active = (i - 1) % (n - 1) if n > 1 else -1
        elif a == NEXT:  # the same beams, so the same dose, metrics and score: nothing to evaluate
            self.active = (self.active + 1) % n
            return 0.0, True
        elif a == LOCK:
            self.locked = True
            return 0.0, True
        before = self.score
        self._evaluate()
        return self.score - before, True

    # ---------------------------------------------------------- evaluation
    @property
    def beam_cache(self) -> BeamCache:
        """The patient's beam cache (drawn by :meth:`reset`): a clear error before then."""
        if self.cache is None:
            raise RuntimeError("the plan has no patient yet: reset() it first")
        return self.cache

    @property
    def patient(self) -> Phantom:
        """The patient (drawn by :meth:`reset`): a clear error before then."""
        if self.phantom is None:
            raise RuntimeError("the plan has no patient yet: reset() it first")
        return self.phantom

    def body_dose(self) -> np.ndarray:
        """The plan's dose on the body voxels (n_body,) float64, × Rx."""
        n = self.n_beams
        if n == 0:
            return np.zeros(self.beam_cache.body_index.size)
        return self.beam_cache.dose(self.angles[:n], self.weights[:n] / 10.0, self.margins[:n])

    def dose_grid(self) -> np.ndarray:
        """The plan's dose on the slice (64, 64), zero outside the body."""
        return self.beam_cache.to_grid(self.body_dose())

    def evaluate(
        self, angles: np.ndarray, weights: np.ndarray, margins: np.ndarray | None = None
    ) -> tuple[PlanMetrics, float]:
        """Metrics and score of any beam set on this phantom (grid angle indices, weights in tenths,
        aperture margins in voxels: :data:`NEW_MARGIN` each when not given).

        The plan's own state is untouched: planners search with this.
        """
        angles = np.asarray(angles, np.int64)
        margins = (
            np.full(angles.size, NEW_MARGIN, np.int64) if margins is None else np.asarray(margins, np.int64)
        )
        dose = (
            self.beam_cache.dose(angles, np.asarray(weights) / 10.0, margins)
            if len(angles)
            else np.zeros(self.beam_cache.body_index.size)
        )
        return self._assess(dose, np.empty(self._dvh_voxels.size), len(angles))

    def score_dose(self, body_dose: np.ndarray, n_beams: int) -> tuple[PlanMetrics, float]:
        """Metrics and score of any dose on the body voxels (a fluence map's, for the FMO
        reference), exactly as for the plan's own; the plan is untouched."""
        return self._assess(
            np.ascontiguousarray(body_dose, np.float64), np.empty(self._dvh_voxels.size), n_beams
        )

    def _assess(self, dose: np.ndarray, structures: np.ndarray, n_beams: int) -> tuple[PlanMetrics, float]:
        """Metrics and score of ``dose``; ``structures`` receives it on the tumour's voxels, then
        every OAR's (``_dvh_voxels``)."""
        n_tumour = self.tumour_index.size
        structure_statistics(
            dose, self._dvh_voxels, n_tumour, self._oar_starts, structures, self._oar_mean, self._oar_max
        )
        ordered = np.sort(structures[:n_tumour])  # low to high
        tumour_statistics(ordered, dose, self._ranks, LEVELS, self._tumour_statistics)
        table = self._constraints
        constraint_values(
            structures,
            n_tumour,
            self._oar_starts,
            self._oar_mean,
            table.oar,
            table.metric,
            table.level,
            self._near_max,
            self._values,
        )
        near_max, at = outside_statistics(dose, self._outside, self._outside_rank, self._outside_dose)
        hot_spot, hot_spot_in = (-1, -1), ""
        if at >= 0 and dose[self._outside[at]] > 0:  # no dose, no hot spot (the empty plan is shared)
            hottest = self._outside[at]
            row, col = int(self.beam_cache.voxel_rows[hottest]), int(self.beam_cache.voxel_cols[hottest])
            hot_spot = (row, col)
            inside = int(self._structure_at[row * GRID + col])
            hot_spot_in = "normal tissue" if inside < 0 else self.task.oar_names[inside]
        metrics = metrics_from_statistics(
            self._tumour_statistics,
            n_tumour,
            self._oar_mean,
            self._oar_max,
            self._values,
            self.task,
            n_beams,
            body_near_max=near_max,
            hot_spot=hot_spot,
            hot_spot_in=hot_spot_in,
        )
        return metrics, plan_score(metrics, self.task)

    def _evaluate(self) -> None:
        self._dose = self.body_dose()
        if self.n_beams == 0:  # no dose anywhere: the same metrics on every phantom, assessed once
            self._structure_dose.fill(0.0)
            if self._empty_plan is None:
                self._empty_plan = self._assess(self._dose, self._structure_dose, 0)
            self.metrics, self.score = self._empty_plan
            return
        self.metrics, self.score = self._assess(self._dose, self._structure_dose, self.n_beams)

    def dvhs(self, out: np.ndarray | None = None) -> np.ndarray:
        """(1 + n_oars, 50) cumulative DVHs: tumour over 0–2 Rx, each OAR over 0–2 × its limit.

        Column i is the fraction of the structure receiving at least (i + 1)/50 of the span.
        Written into ``out`` (any float dtype, e.g. an observation's float32 rows) if given.
        """
        if out is None or out.dtype not in (np.float32, np.float64) or not out.flags.c_contiguous:
            dvhs = np.empty((self._n_structures, DVH_BINS))
            if out is not None:
                out[...] = self.dvhs(dvhs)
                return out
            out = dvhs
        cumulative_dvhs(
            self._structure_dose, self._dvh_inv_bin, self._dvh_offset, self._dvh_sizes, self._dvh_counts, out
        )
        return out

    def oar_centroids(self) -> np.ndarray:
        """(n_oars, 2) float64: each OAR's centroid (row, column), as ``phantom.centroid`` of its mask.

        Summed over the voxel coordinates in one pass for all OARs: sums of whole numbers are
        exact in float64, so this is bit for bit the mean of each mask's ``np.nonzero``.
        """
        voxels = self._oar_voxels
        rows = np.add.reduceat(self.beam_cache.voxel_rows[voxels], self._oar_starts)
        cols = np.add.reduceat(self.beam_cache.voxel_cols[voxels], self._oar_starts)
        return np.stack((rows, cols), axis=1) / self._oar_sizes[:, None]

    def beams(self) -> list[tuple[int, float]]:
        """The beams as (angle in degrees, weight), in slot order (margins: :attr:`margins`)."""
        return [(int(self.angles[i]) * ANGLE_STEP, int(self.weights[i]) / 10) for i in range(self.n_beams)]

    def apertures(self) -> list[tuple[float, float]]:
        """Each beam's aperture edges (lo, hi) across the beam, voxels from its central axis."""
        out = []
        for i in range(self.n_beams):
            low, high = self.beam_cache.projection(int(self.angles[i]))
            m = int(self.margins[i])
            out.append((low - m - 0.5, high + m + 0.5))
        return out

    # ------------------------------------------------------ snapshot/restore
    def snapshot(self) -> tuple:
        """The mutable state (beams, counters); restore() brings it back on the same phantom."""
        return (
            self.angles.copy(),
            self.weights.copy(),
            self.margins.copy(),
            self.n_beams,
            self.active,
            self.steps,
            self.invalid_actions,
            self.locked,
        )

    def restore(self, state: tuple) -> None:
        angles, weights, margins, self.n_beams, self.active, self.steps, self.invalid_actions, self.locked = (
            state
        )
        self.angles[:] = angles
        self.weights[:] = weights
        self.margins[:] = margins
        self._evaluate()
