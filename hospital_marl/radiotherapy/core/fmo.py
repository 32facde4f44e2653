"""The reference optimum (SPEC-RT §8): fluence-map optimisation (FMO) over beamlets of the
same dose model, per patient.

Every other grid angle (18, 20° apart) gets beamlets 1 voxel wide across the tumour's projection plus the
largest aperture margin and two more voxels each side; beamlet ``j`` is the field formula of
:mod:`~hospital_marl.radiotherapy.core.dose` open from ``j − ½`` to ``j + ½`` (so every aperture
the agent can build is a sum of these beamlets, with the same k, depth and penumbra). The
fluences ``x`` (each in [0, 1], a beam's weight range) minimise a convex, smooth objective
on the dose ``D = A x``::

    target     mean (D − 1.035)²  +  30 · mean max(0, 1.0 − D)²  +  10 · mean max(0, D − 1.065)²
    near-max   10 · mean over the organ of max(0, D − 0.95 · limit)²      (serial organs)
    mean       10 · max(0, mean D − 0.9 · limit)²  +  0.1 · mean D         (parallel organs)
    V_x         1 · mean over the organ of max(0, D − x)²                  (the convex surrogate)
    conformity  3 · mean over the body outside the tumour of max(0, D − 0.98)²

solved by SciPy's L-BFGS-B (bounds 0 ≤ x ≤ 1, analytic gradient; stopped when the projected
gradient's largest component is ≤ :data:`GTOL` or the objective's relative change ≤ :data:`FTOL`,
at most :data:`MAX_ITERATIONS` iterations), then normalised (scaled by the factor in
:data:`NORMALISATION` that scores best, as a clinic normalises a plan). If a constraint still
fails, the weights of the failing organs' terms are multiplied by :data:`REWEIGHT` and the problem
solved again from the last fluence, at most :data:`ROUNDS` times (the usual planner's loop). It is then
scored by the env's own metrics and score (:meth:`Plan.score_dose`), like any agent's plan: it
is the reference every agent is measured against. The target sits at 1.035 Rx, the middle of
the ICRU 50/62 window once D98 ≥ 1.0 (which the Paddick CI at the Rx isodose rewards).
The surrogate is not the score, so an agent may beat it on a patient; it is a strong bound,
not a proof. FMO is an intensity-modulated plan over 18 angles: more freedom than ≤ 7
open apertures, which is the point of a headroom reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hospital_marl.radiotherapy.core.dose import (
    ANGLE_STEP,
    MAX_MARGIN,
    MU,
    N_ANGLES,
    PENUMBRA,
    _lateral,
    body_depths,
)
from hospital_marl.radiotherapy.core.kernels import aperture_beam
from hospital_marl.radiotherapy.core.plan import Plan

BEAMLET_REACH = MAX_MARGIN + 2
"""Beamlets reach this many voxels beyond the tumour's projection on each side."""
NORMALISATION = tuple(np.round(np.linspace(0.96, 1.10, 29), 3).tolist())
"""Scale factors tried on the optimal fluence (the plan normalisation)."""
FMO_ANGLE_STEP = 2
"""Grid steps between FMO angles (2: every 20°)."""
TARGET, UNDER, OVER, SPILL = 1.035, 1.0, 1.065, 0.98
"""The target's aim and its hinges (× Rx), and the body's spill level outside the target: THE
values the objective uses (the docstring's formula)."""
GTOL, FTOL, MAX_ITERATIONS = 1e-5, 2.2e-9, 300
"""L-BFGS-B's stopping tolerances (SciPy's ``gtol`` and ``ftol``) and iteration cap."""
ROUNDS, REWEIGHT = 4, 10.0
"""Re-solves with the failing organs' weights multiplied, when a constraint fails."""
WEIGHTS = {
    "target": 1.0,
    "under": 30.0,
    "over": 10.0,
    "oar": 10.0,
    "volume": 1.0,
    "alara": 0.1,
    "conformity": 3.0,
}


@dataclass(frozen=True)
class FMOResult:
    """The optimal fluence's score and metrics (as the env computes them) and the solver's report."""

    score: float
    metrics: dict[str, object]
    objective: float
    iterations: int
    converged: bool
    n_beamlets: int
    open_angles: int
    rounds: int = 1
    constraints_met: bool = False


def beamlet_matrix(plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """(A, angle of each column): A is (n_body, n_beamlets), the dose of each beamlet at unit
    fluence on the body voxels, in the plan's body-voxel order."""
    cache, phantom = plan.beam_cache, plan.patient
    columns, angles = [], []
    for a in range(0, N_ANGLES, FMO_ANGLE_STEP):
        low, high = cache.projection(a)
        depth = MU * body_depths(phantom.body, cache._body_key, a, cache.body_index)
        lateral = _lateral(phantom.isocentre, a * ANGLE_STEP, cache.voxel_rows, cache.voxel_cols)
        for j in np.arange(low - BEAMLET_REACH, high + BEAMLET_REACH + 1):
            column = np.empty(lateral.size)
            aperture_beam(lateral, depth, j - 0.5, j + 0.5, PENUMBRA, cache.k, column)
            columns.append(column)
            angles.append(a)
    return np.stack(columns, axis=1), np.array(angles)


def optimise_fluence(plan: Plan, max_iterations: int = MAX_ITERATIONS) -> FMOResult:
    """FMO on the plan's patient (the plan itself is left untouched)."""
    from scipy.optimize import minimize

    A, angles = beamlet_matrix(plan)
    position = plan.beam_cache.voxels.position
    tumour = position[np.flatnonzero(plan.patient.tumour)]
    outside = np.setdiff1d(np.arange(A.shape[0]), tumour)
    table = plan.task.constraint_table
    organs = [position[np.flatnonzero(mask)] for mask in plan.patient.oars]
    w = WEIGHTS
    boost = np.ones(len(organs))  # per organ: its terms' weight multiplier (raised where it fails)

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        dose = A @ x
        grad_dose = np.zeros_like(dose)  # d objective / d dose
        d = dose[tumour]
        n = d.size
        under, over = np.maximum(0.0, UNDER - d), np.maximum(0.0, d - OVER)
        value = (
            w["target"] * ((d - TARGET) ** 2).sum()
            + w["under"] * (under**2).sum()
            + w["over"] * (over**2).sum()
        ) / n
        grad_dose[tumour] += (
            2 * w["target"] * (d - TARGET) - 2 * w["under"] * under + 2 * w["over"] * over
        ) / n
        for j, kind, level, limit in zip(table.oar, table.metric, table.level, table.limit):
            idx = organs[j]
            d = dose[idx]
            b = boost[j]
            if kind == 1:  # mean
                excess = max(0.0, d.mean() - 0.9 * limit)
                value += b * w["oar"] * excess**2 + w["alara"] * d.mean()
                grad_dose[idx] += (2 * b * w["oar"] * excess + w["alara"]) / idx.size
            else:  # near-max (a hinge below the limit) or V_x (a hinge at x)
                threshold, weight = (0.95 * limit, w["oar"]) if kind == 0 else (level, w["volume"])
                hinge = np.maximum(0.0, d - threshold)
                value += b * weight * (hinge**2).sum() / idx.size
                grad_dose[idx] += 2 * b * weight * hinge / idx.size
        spill = np.maximum(0.0, dose[outside] - SPILL)
        value += w["conformity"] * (spill**2).sum() / outside.size
        grad_dose[outside] += 2 * w["conformity"] * spill / outside.size
        return float(value), A.T @ grad_dose

    x = np.full(A.shape[1], 0.1)
    iterations, rounds = 0, 0
    while True:
        rounds += 1
        result = minimize(
            objective,
            x,
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, 1.0)] * A.shape[1],
            options={"maxiter": max_iterations, "gtol": GTOL, "ftol": FTOL},
        )
        x, iterations = result.x, iterations + int(result.nit)
        open_angles = int(np.unique(angles[x > 1e-3]).size)
        # plan normalisation, as a clinic does: the optimal fluence scaled to the best score
        dose = A @ x
        scale = max(NORMALISATION, key=lambda f: plan.score_dose(f * dose, open_angles)[1])
        metrics, score = plan.score_dose(scale * dose, open_angles)
        failing = [j for j, ok in enumerate(metrics.oar_pass) if not ok]
        if not failing or rounds >= ROUNDS:
            break
        boost[failing] *= REWEIGHT
    return FMOResult(
        score=score,
        metrics=metrics.as_dict(plan.task),
        objective=float(result.fun),
        iterations=iterations,
        converged=bool(result.success),
        n_beamlets=int(A.shape[1]),
        open_angles=open_angles,
        rounds=rounds,
        constraints_met=all(metrics.constraint_pass),
    )
