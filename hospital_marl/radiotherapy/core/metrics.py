"""Dose-volume histograms, plan metrics and the plan score (SPEC-RT §4–§5, §8).

Definitions (all doses × Rx, volumes as fractions of the structure):

- ``D_x``: the highest dose that at least x % of the volume receives. With the
  n voxel doses sorted high to low, ``D_x = d[ceil(x·n/100)]`` (1-based).
  D95, D98, D50 and D2 (the ICRU 83 near-maximum) of the tumour; D2% of a serial OAR.
- ``V_x``: the fraction of a structure receiving at least x (V95, V107 of the tumour at
  95 % / 107 % of Rx; an OAR's V_x at a constraint's dose).
- Paddick conformity index ``CI = TV_PIV² / (TV · PIV)``: TV the tumour volume,
  PIV the volume (body) inside the prescription isodose (≥ 1.0 Rx), TV_PIV the
  tumour volume inside it; 1 is perfect, 0 when nothing reaches Rx.
- Homogeneity index (ICRU 83) ``HI = (D2 − D98) / D50``; 0 when D50 = 0.
- OAR: each clinical constraint of the task (``Task.constraint_table``: near-max D2%,
  mean, or V_x, in Gy at the task's Rx) has a value and passes when value ≤ limit;
  an OAR passes when all of its constraints do.

Score in [0, 1] (ICRU 83 target goals D98 ≥ 95 %, D2 ≤ 107 % of Rx)::

    coverage = ½ · min(D98 / 0.95, 1) + ½ · V95          tumour term, 0 for an empty plan
    hot      = clip((D2 − 1.07) / (1.15 − 1.07), 0, 1)   hot spot: 1 at D2 = 115 % of Rx
    oar      = Σ w_p f_j / Σ w_p over the non-critical OARs, w = 2 / 1 by priority 2 / 3,
               f_j = the worst of its constraints' f: 1 at no dose, ½ at the limit (ALARA:
               sparing below a limit still counts), 0 at 1.5 × the limit, linear between
               (1 when a task has only critical OARs)
    beams    = 1 for 4–7 beams, ½ for 3, 0 for fewer
    score    = clip(coverage · (0.30 + 0.35 · oar + 0.25 · CI + 0.10 · beams) − 0.50 · hot, 0, 1)

then capped at :data:`CRITICAL_CAP` (< the pass threshold) when any priority-1 constraint
fails or the tumour's D2 exceeds :data:`D2_FAIL` (115 % of Rx): such a plan cannot pass.
Critical OARs are hard constraints (the cap) and are left out of the OAR term: counting
them there would hand out credit for organs far from every beam. The OAR, conformity
and beam terms are multiplied by coverage: an empty plan or an unfocused one earns
nothing for sparing organs it never irradiated; coverage alone (0.40) fails.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from hospital_marl.radiotherapy.core.kernels import tumour_statistics
from hospital_marl.radiotherapy.core.tasks import OAR, ConstraintTable, Task

DVH_BINS = 50
TUMOUR_DVH_MAX = 2.0
"""The tumour DVH spans 0–2 × Rx; an OAR's spans 0–2 × its reference dose (first constraint)."""
PASS_THRESHOLD = 0.60
CRITICAL_CAP = 0.50
"""A plan breaking any priority-1 constraint, or with D2 > D2_FAIL, scores at most this (< PASS_THRESHOLD)."""
PRIORITY_WEIGHTS = {2: 2.0, 3: 1.0}
"""Weights of the non-critical priorities in the OAR term (critical ones are gated by the cap)."""
SCORE_WEIGHTS = {"base": 0.30, "oar": 0.35, "ci": 0.25, "beams": 0.10, "hot": 0.50}
OAR_ZERO_AT = 1.5
"""A constraint earns nothing at this multiple of its limit (a parotid at 1.5× its
mean-dose limit is a clinical failure, not a near miss)."""
D98_GOAL = 0.95
"""ICRU 83: at least 98 % of the target receives 95 % of Rx."""
D2_GOAL = 1.07
"""ICRU 83: the near-maximum at most 107 % of Rx; the hot-spot penalty starts here."""
D2_FAIL = 1.15
"""A plan whose tumour D2 exceeds this cannot pass (hot = 1 and the cap)."""
SCORE_FORMULA = (
    "score = clip(coverage*(0.30 + 0.35*oar + 0.25*CI + 0.10*beams) - 0.50*hot, 0, 1), "
    "coverage = (min(D98/0.95,1) + V95)/2, hot = clip((D2-1.07)/0.08, 0, 1); "
    f"at most {CRITICAL_CAP} if a priority-1 constraint fails or D2 > {D2_FAIL}; pass >= {PASS_THRESHOLD}"
)


def _rank(percent: float, n: int) -> int:
    """1-based rank, high to low, of ``D_x`` among n voxel doses: ``ceil(x·n/100)`` within [1, n]."""
    return min(n, max(1, math.ceil(percent * n / 100 - 1e-9)))


@lru_cache(maxsize=256)
def rank_positions(n: int) -> np.ndarray:
    """Where D95, D98, D50 and D2 sit among n doses sorted low to high (per tumour size, once)."""
    return np.array([n - _rank(p, n) for p in (95, 98, 50, 2)])


LEVELS = np.array([1.0, 0.95, 1.07])
"""The tumour dose levels counted per plan: Rx (conformity), V95, V107."""
N_TUMOUR_STATISTICS = 4 + 1 + LEVELS.size + 1  # D95 D98 D50 D2, sum, below each level, body >= Rx


def dose_at_volume(doses: np.ndarray, percent: float) -> float:
    """``D_x``: the highest dose received by at least ``percent`` % of the voxels."""
    n = doses.size
    if n == 0:
        return 0.0
    rank = _rank(percent, n)
    return float(np.partition(doses, n - rank)[n - rank])


def volume_at_dose(doses: np.ndarray, level: float) -> float:
    """``V_x``: the fraction of voxels receiving at least ``level`` (× Rx)."""
    return float(np.count_nonzero(doses >= level)) / doses.size if doses.size else 0.0


def cumulative_dvh(doses: np.ndarray, dose_max: float, bins: int = DVH_BINS) -> np.ndarray:
    """Fraction of the volume receiving at least ``(i + 1) · dose_max / bins``, i = 0..bins−1."""
    levels = dose_max * np.arange(1, bins + 1) / bins
    if doses.size == 0:
        return np.zeros(bins)
    return (doses[None, :] >= levels[:, None]).mean(axis=1)


def paddick_ci(tumour_dose: np.ndarray, body_dose: np.ndarray, isodose: float = 1.0) -> float:
    """Paddick conformity index ``TV_PIV² / (TV · PIV)``; 0 when nothing reaches the isodose."""
    tv = tumour_dose.size
    piv = int(np.count_nonzero(body_dose >= isodose))
    tv_piv = int(np.count_nonzero(tumour_dose >= isodose))
    return tv_piv**2 / (tv * piv) if tv and piv else 0.0


def homogeneity_index(tumour_dose: np.ndarray) -> float:
    """ICRU 83 ``(D2 − D98) / D50``; 0 when D50 = 0 (no dose)."""
    d50 = dose_at_volume(tumour_dose, 50)
    return (dose_at_volume(tumour_dose, 2) - dose_at_volume(tumour_dose, 98)) / d50 if d50 > 0 else 0.0


def oar_fraction(value: float, limit: float) -> float:
    """A constraint's share (as low as reasonably achievable): 1 at no dose, ½ at the limit,
    0 at :data:`OAR_ZERO_AT` × limit, linear in between."""
    if value <= limit:
        return 1.0 - 0.5 * value / limit
    return max(0.0, 0.5 - 0.5 * (value - limit) / ((OAR_ZERO_AT - 1.0) * limit))


def beam_term(n_beams: int) -> float:
    return 1.0 if n_beams >= 4 else 0.5 if n_beams == 3 else 0.0


@dataclass(frozen=True)
class PlanMetrics:
    """The metrics of one plan (doses × Rx)."""

    d95: float
    d98: float
    d50: float
    d2: float
    mean: float
    v95: float
    v107: float
    ci: float
    hi: float
    oar_mean: tuple[float, ...]
    oar_max: tuple[float, ...]
    constraint_values: tuple[float, ...]  # one per row of the task's constraint table
    constraint_pass: tuple[bool, ...]
    oar_pass: tuple[bool, ...]  # every constraint of the OAR passes
    n_beams: int

    def as_dict(self, task: Task) -> dict[str, object]:
        """JSON-able: tumour metrics (× Rx), then the OARs by name: mean, max, each constraint
        (``[value, limit, pass]``: a dose × Rx, or a V_x fraction), priority, pass."""
        oars = task.oars
        out: dict[str, object] = {
            "rx_gy": task.rx_gy,
            "d95": self.d95,
            "d98": self.d98,
            "d50": self.d50,
            "d2": self.d2,
            "mean": self.mean,
            "v95": self.v95,
            "v107": self.v107,
            "ci": self.ci,
            "hi": self.hi,
            "n_beams": self.n_beams,
        }
        table = task.constraint_table
        limits = table.limit.tolist()
        per_oar: list[list[list[object]]] = [[] for _ in oars]
        for c, j in enumerate(table.oar.tolist()):
            per_oar[j].append([self.constraint_values[c], limits[c], self.constraint_pass[c]])
        out["oars"] = {
            o.name: {"mean": m, "max": x, "constraints": cs, "priority": o.priority, "pass": p}
            for o, m, x, cs, p in zip(oars, self.oar_mean, self.oar_max, per_oar, self.oar_pass)
        }
        out["critical_pass"] = all(self.oar_pass[j] for j in _oar_table(oars).critical)
        out["hot_spot_fail"] = self.d2 > D2_FAIL
        return out


def oar_statistics(oar_doses: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(mean, max) dose of each OAR from its voxel doses, each (n_oars,)."""
    return np.array([d.sum() / d.size for d in oar_doses]), np.array([d.max() for d in oar_doses])


def constraint_values_numpy(oar_doses: list[np.ndarray], table: ConstraintTable) -> np.ndarray:
    """THE definition of each constraint's value (the kernel's must equal it bit for bit)."""
    values = []
    for j, kind, level in zip(table.oar.tolist(), table.metric.tolist(), table.level.tolist()):
        d = oar_doses[j]
        values.append(
            dose_at_volume(d, 2) if kind == 0 else d.sum() / d.size if kind == 1 else volume_at_dose(d, level)
        )
    return np.array(values, np.float64)


def plan_metrics(
    tumour_dose: np.ndarray,
    body_dose: np.ndarray,
    oar_doses: list[np.ndarray],
    task: Task,
    n_beams: int,
) -> PlanMetrics:
    """Every metric of a plan from the tumour's, the body's and each OAR's voxel doses (NumPy)."""
    ordered = np.sort(np.asarray(tumour_dose, np.float64), axis=None)  # low to high
    body = np.ascontiguousarray(body_dose, np.float64).ravel()
    stats = np.empty(N_TUMOUR_STATISTICS)
    tumour_statistics(ordered, body, rank_positions(ordered.size), LEVELS, stats)
    oar_mean, oar_max = oar_statistics(oar_doses)
    values = constraint_values_numpy(oar_doses, task.constraint_table)
    return metrics_from_statistics(stats, ordered.size, oar_mean, oar_max, values, task, n_beams)


def metrics_from_statistics(
    stats: np.ndarray,
    n: int,
    oar_mean: np.ndarray,
    oar_max: np.ndarray,
    values: np.ndarray,
    task: Task,
    n_beams: int,
) -> PlanMetrics:
    """The metrics from :func:`~hospital_marl.radiotherapy.core.kernels.tumour_statistics` of ``n``
    tumour voxels (at :func:`rank_positions`, :data:`LEVELS`), the OAR statistics and the
    constraint values (rows of ``task.constraint_table``)."""
    d95, d98, d50, d2, total, *counts = stats.tolist()
    below_rx, below_95, below_107, above_rx = (int(c) for c in counts)
    table = task.constraint_table
    passes = values <= table.limit
    oar_pass = np.ones(len(task.oars), bool)
    np.logical_and.at(oar_pass, table.oar, passes)
    tv_piv = n - below_rx
    return PlanMetrics(
        d95=d95,
        d98=d98,
        d50=d50,
        d2=d2,
        mean=total / n,
        v95=(n - below_95) / n,
        v107=(n - below_107) / n,
        ci=tv_piv**2 / (n * above_rx) if above_rx else 0.0,
        hi=(d2 - d98) / d50 if d50 > 0 else 0.0,
        oar_mean=tuple(oar_mean.tolist()),
        oar_max=tuple(oar_max.tolist()),
        constraint_values=tuple(values.tolist()),
        constraint_pass=tuple(passes.tolist()),
        oar_pass=tuple(oar_pass.tolist()),
        n_beams=n_beams,
    )


class _OarTable(NamedTuple):
    graded: tuple[tuple[int, float, tuple[int, ...]], ...]  # (OAR index, weight, its constraint rows)
    total: float  # their weights' sum
    critical: tuple[int, ...]  # indices of the priority-1 OARs
    limits: tuple[float, ...]  # every constraint's limit


_OAR_TABLES: dict[int, tuple[tuple[OAR, ...], _OarTable]] = {}


def _oar_table(oars: tuple[OAR, ...], table: ConstraintTable | None = None) -> _OarTable:
    """What the score reads from a task's OARs, worked out once per OAR tuple (kept alive here,
    so its id is not reused while cached)."""
    hit = _OAR_TABLES.get(id(oars))
    if (hit is None or hit[0] is not oars) and table is not None:
        rows = table.oar.tolist()
        graded = tuple(
            (j, PRIORITY_WEIGHTS[o.priority], tuple(c for c, k in enumerate(rows) if k == j))
            for j, o in enumerate(oars)
            if not o.critical
        )
        critical = tuple(j for j, o in enumerate(oars) if o.critical)
        if len(_OAR_TABLES) >= 64:
            _OAR_TABLES.clear()
        summary = _OarTable(graded, sum(w for _, w, _ in graded), critical, tuple(table.limit.tolist()))
        hit = _OAR_TABLES[id(oars)] = (oars, summary)
    if hit is None or hit[0] is not oars:
        return _OarTable((), 0.0, tuple(j for j, o in enumerate(oars) if o.critical), ())
    return hit[1]


def score_terms(m: PlanMetrics, task: Task) -> dict[str, float]:
    """The score's terms (coverage, oar, ci, beams, hot), each in [0, 1]."""
    table, values = _oar_table(task.oars, task.constraint_table), m.constraint_values
    total, limits = table.total, table.limits
    oar = (
        sum(w * min(oar_fraction(values[c], limits[c]) for c in rows) for _, w, rows in table.graded) / total
        if total
        else 1.0
    )
    return {
        "coverage": 0.5 * min(m.d98 / D98_GOAL, 1.0) + 0.5 * m.v95,
        "oar": oar,
        "ci": m.ci,
        "beams": beam_term(m.n_beams),
        "hot": min(1.0, max(0.0, (m.d2 - D2_GOAL) / (D2_FAIL - D2_GOAL))),
    }


def plan_score(m: PlanMetrics, task: Task) -> float:
    """The plan's score in [0, 1] (module docstring); below the pass mark if a critical OAR fails
    or the tumour's near-maximum exceeds :data:`D2_FAIL`."""
    capped = m.d2 > D2_FAIL or not all(m.oar_pass[j] for j in _oar_table(task.oars).critical)
    return score_from_terms(score_terms(m, task), capped)


def score_from_terms(t: Mapping[str, float], capped: bool) -> float:
    """THE combination of the score's terms (:func:`score_terms`), capped at :data:`CRITICAL_CAP`
    when ``capped`` (a critical constraint fails or D2 > :data:`D2_FAIL`). Shared by
    :func:`plan_score` and by scripts that rebuild the score from an observation."""
    w = SCORE_WEIGHTS
    score = t["coverage"] * (w["base"] + w["oar"] * t["oar"] + w["ci"] * t["ci"] + w["beams"] * t["beams"])
    score = min(1.0, max(0.0, score - w["hot"] * t["hot"]))
    return min(score, CRITICAL_CAP) if capped else score
