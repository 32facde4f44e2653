"""Dose-volume histograms, plan metrics and the plan score (SPEC-RT §4–§5).

Definitions (all doses × Rx, volumes as fractions of the structure):

- ``D_x``: the highest dose that at least x % of the volume receives. With the
  n voxel doses sorted high to low, ``D_x = d[ceil(x·n/100)]`` (1-based).
  D95, D98, D50 and D2 (the near-maximum) of the tumour.
- ``V_x``: the fraction of the tumour receiving at least x % of Rx (V95, V107).
- Paddick conformity index ``CI = TV_PIV² / (TV · PIV)``: TV the tumour volume,
  PIV the volume (body) inside the prescription isodose (≥ 1.0 Rx), TV_PIV the
  tumour volume inside it; 1 is perfect, 0 when nothing reaches Rx.
- Homogeneity index (ICRU 83) ``HI = (D2 − D98) / D50``; 0 when D50 = 0.
- OAR: mean and max dose; the constraint passes when mean ≤ limit.

Score in [0, 1]::

    coverage = ½ · min(D95, 1) + ½ · V95                 tumour term, 0 for an empty plan
    oar      = Σ w_p f_j / Σ w_p over the non-critical OARs, w = 2 / 1 by priority 2 / 3,
               f_j = 1 if mean ≤ limit, falling linearly to 0 at 1.5 × limit
               (1 when a task has only critical OARs)
    beams    = 1 for 4–7 beams, ½ for 3, 0 for fewer
    overdose = clip((D95 − 1.05) / 0.25, 0, 1)          the whole target overdosed
    score    = clip(coverage · (0.35 + 0.55 · oar + 0.10 · beams) − 0.50 · overdose, 0, 1)

then capped at :data:`CRITICAL_CAP` (< the pass threshold) when any priority-1
constraint fails. Critical OARs are hard constraints (the cap) and are left out of
the OAR term: counting them there would hand out credit for organs far from every
beam (in head & neck both critical organs lie posterior, away from the target). The
OAR and beam terms are multiplied by coverage: an empty plan or an unfocused one earns
nothing for sparing organs it never irradiated; coverage alone (0.35 + 0.10) fails.

Why D95 and not D2 carries the overdose penalty: with σ = 4 pencil beams all
aimed at the isocentre, the near-maximum over D95 (well above 1, varying widely
between patients) is set by the tumour's size, not by the plan; the plan controls the
overall level, and a target dosed far above Rx is what "six beams at full weight" did
unpunished (the README scoreboard's ``six_full`` row shows its D95).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from hospital_marl.radiotherapy.core.kernels import tumour_statistics
from hospital_marl.radiotherapy.core.tasks import OAR

DVH_BINS = 50
TUMOUR_DVH_MAX = 2.0
"""The tumour DVH spans 0–2 × Rx; an OAR's spans 0–2 × its limit."""
PASS_THRESHOLD = 0.60
CRITICAL_CAP = 0.50
"""A plan breaking any priority-1 constraint scores at most this (< PASS_THRESHOLD)."""
PRIORITY_WEIGHTS = {2: 2.0, 3: 1.0}
"""Weights of the non-critical priorities in the OAR term (critical ones are gated by the cap)."""
SCORE_WEIGHTS = {"base": 0.35, "oar": 0.55, "beams": 0.10, "overdose": 0.50}
OAR_ZERO_AT = 1.5
"""An OAR earns nothing of its weight at this multiple of its limit (a parotid at 1.5× its
mean-dose limit is a clinical failure, not a near miss)."""
OVERDOSE_START = 1.05
OVERDOSE_SPAN = 0.25
SCORE_FORMULA = (
    "score = clip(coverage*(0.35 + 0.55*oar + 0.10*beams) - 0.50*overdose, 0, 1), "
    "coverage = (min(D95,1) + V95)/2, overdose = clip((D95-1.05)/0.25, 0, 1); "
    f"at most {CRITICAL_CAP} if a priority-1 constraint fails; pass >= {PASS_THRESHOLD}"
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


def oar_fraction(mean_dose: float, limit: float) -> float:
    """An OAR's share of its weight: 1 within the limit, 0 at :data:`OAR_ZERO_AT` × limit, linear between."""
    if mean_dose <= limit:
        return 1.0
    return max(0.0, 1.0 - (mean_dose - limit) / ((OAR_ZERO_AT - 1.0) * limit))


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
    oar_pass: tuple[bool, ...]
    n_beams: int

    def as_dict(self, oars: tuple[OAR, ...]) -> dict[str, object]:
        """JSON-able: tumour metrics, then ``oars`` by name (mean, max, limit, priority, pass)."""
        out: dict[str, object] = {
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
        out["oars"] = {
            o.name: {"mean": m, "max": x, "limit": o.limit, "priority": o.priority, "pass": p}
            for o, m, x, p in zip(oars, self.oar_mean, self.oar_max, self.oar_pass)
        }
        out["critical_pass"] = all(self.oar_pass[j] for j in _oar_table(oars).critical)
        return out


def oar_statistics(oar_doses: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(mean, max) dose of each OAR from its voxel doses, each (n_oars,)."""
    return np.array([d.sum() / d.size for d in oar_doses]), np.array([d.max() for d in oar_doses])


def plan_metrics(
    tumour_dose: np.ndarray,
    body_dose: np.ndarray,
    oar_mean: np.ndarray,
    oar_max: np.ndarray,
    oars: tuple[OAR, ...],
    n_beams: int,
) -> PlanMetrics:
    """Every metric of a plan from the tumour's and the body's voxel doses and the OAR statistics."""
    ordered = np.sort(np.asarray(tumour_dose, np.float64), axis=None)  # low to high
    body = np.ascontiguousarray(body_dose, np.float64).ravel()
    stats = np.empty(N_TUMOUR_STATISTICS)
    tumour_statistics(ordered, body, rank_positions(ordered.size), LEVELS, stats)
    return metrics_from_statistics(stats, ordered.size, oar_mean, oar_max, oars, n_beams)


def metrics_from_statistics(
    stats: np.ndarray,
    n: int,
    oar_mean: np.ndarray,
    oar_max: np.ndarray,
    oars: tuple[OAR, ...],
    n_beams: int,
) -> PlanMetrics:
    """The metrics from :func:`~hospital_marl.radiotherapy.core.kernels.tumour_statistics` of ``n``
    tumour voxels (at :func:`rank_positions`, :data:`LEVELS`) and the OAR statistics."""
    d95, d98, d50, d2, total, *counts = stats.tolist()
    below_rx, below_95, below_107, above_rx = (int(c) for c in counts)
    means = tuple(oar_mean.tolist())
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
        oar_mean=means,
        oar_max=tuple(oar_max.tolist()),
        oar_pass=tuple(m <= o.limit for m, o in zip(means, oars)),
        n_beams=n_beams,
    )


class _OarTable(NamedTuple):
    graded: tuple[tuple[int, float, float], ...]  # (index, weight, limit) of each non-critical OAR
    total: float  # their weights' sum
    critical: tuple[int, ...]  # indices of the priority-1 OARs


_OAR_TABLES: dict[int, tuple[tuple[OAR, ...], _OarTable]] = {}


def _oar_table(oars: tuple[OAR, ...]) -> _OarTable:
    """What the score reads from a task's OARs, worked out once per OAR tuple (kept alive here,
    so its id is not reused while cached)."""
    hit = _OAR_TABLES.get(id(oars))
    if hit is None or hit[0] is not oars:
        graded = tuple(
            (j, PRIORITY_WEIGHTS[o.priority], o.limit) for j, o in enumerate(oars) if not o.critical
        )
        critical = tuple(j for j, o in enumerate(oars) if o.critical)
        if len(_OAR_TABLES) >= 64:
            _OAR_TABLES.clear()
        hit = _OAR_TABLES[id(oars)] = (oars, _OarTable(graded, sum(w for _, w, _ in graded), critical))
    return hit[1]


def score_terms(m: PlanMetrics, oars: tuple[OAR, ...]) -> dict[str, float]:
    """The score's terms (coverage, oar, beams, overdose), each in [0, 1]."""
    table, means = _oar_table(oars), m.oar_mean
    total = table.total
    oar = sum(w * oar_fraction(means[j], limit) for j, w, limit in table.graded) / total if total else 1.0
    return {
        "coverage": 0.5 * min(m.d95, 1.0) + 0.5 * m.v95,
        "oar": oar,
        "beams": beam_term(m.n_beams),
        "overdose": min(1.0, max(0.0, (m.d95 - OVERDOSE_START) / OVERDOSE_SPAN)),
    }


def plan_score(m: PlanMetrics, oars: tuple[OAR, ...]) -> float:
    """The plan's score in [0, 1] (module docstring); below the pass mark if a critical OAR fails."""
    t = score_terms(m, oars)
    w = SCORE_WEIGHTS
    score = (
        t["coverage"] * (w["base"] + w["oar"] * t["oar"] + w["beams"] * t["beams"])
        - w["overdose"] * t["overdose"]
    )
    score = min(1.0, max(0.0, score))
    if not all(m.oar_pass[j] for j in _oar_table(oars).critical):
        score = min(score, CRITICAL_CAP)
    return score
