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

Body near-maximum outside the target: ``D1%`` of the body voxels outside the tumour (the
hottest 1 % of normal tissue; a stated choice, half ICRU 83's 2 % because the body is many
times the target) and where it is: the hottest voxel outside the target, and the structure it
lies in (an OAR's name, or "normal tissue").

Score in [0, 1], the third version (SPEC-RT §9). First the plan's *quality* q::

    coverage = ½ · min(D98 / 0.95, 1) + ½ · V95            tumour term, 0 for an empty plan
    short    = clip((0.95 − D98) / (0.95 − 0.93), 0, 1)      cold spot: in proportion below 95 %
    hot      = max(clip((D2 − 1.07) / 0.08, 0, 1),          tumour hot spot (ICRU 83 D2)
                   clip((B1 − 1.10) / 0.05, 0, 1))          body hot spot outside the target
    oar      = Σ w_p f_j / Σ w_p over EVERY OAR, w = 4 / 2 / 1 by priority 1 / 2 / 3,
               f_j = the worst of its constraints' f: 1 at no dose, ½ at the limit (ALARA:
               every organ's dose counts, below its limit too), 0 at 1.5 × the limit
    beams    = 1 for 4–7 beams, ½ for 3, 0 for fewer
    q        = coverage · (0.30 + 0.35 · oar + 0.25 · CI + 0.10 · beams) · (1 − ½ hot) · (1 − ½ short)

then the plan's *tier* ranks constraint satisfaction above conformity:

- **clean** (every constraint of every OAR met, D98 ≥ :data:`D98_MAJOR`, tumour D2 and body
  near-max below :data:`HOT_FAIL`): ``score = 0.60 + 0.40 q`` — it passes;
- **minor deviation** (the only failures are priority-2 or priority-3 constraints):
  ``score = 0.50 + 0.09 q`` — it cannot pass, and ranks below every clean plan however
  conformal it is (the rule for a priority-2 failure);
- **major deviation** (a priority-1 constraint fails, D98 < :data:`D98_MAJOR` — the target is
  under-dosed —, or a hot spot ≥ 115 % of Rx in the target or the body):
  ``score = 0.50 q`` — it cannot pass, and ranks below every plan of the other tiers.

So a plan passes (score ≥ :data:`PASS_THRESHOLD`) exactly when it is clean. The OAR, conformity
and beam terms are multiplied by coverage: an empty or unfocused plan earns nothing for sparing
organs it never irradiated. D98 < 93 %: RTOG H-0225's plan-scoring table counts coverage below
93 % of Rx (65.1 of 70 Gy) as a variation; we take that level at ICRU 83's near-minimum D98 (see
docs/radiotherapy.md, "Sources").
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
"""A major deviation (priority-1 failure, D98 < D98_MAJOR, a hot spot ≥ HOT_FAIL) scores at most
this (< PASS_THRESHOLD)."""
MINOR_BAND = (0.50, 0.59)
"""A minor deviation (only priority-2/3 constraints fail) scores in this band: below every clean plan."""
TIERS = ("major", "minor", "clean")
PRIORITY_WEIGHTS = {1: 4.0, 2: 2.0, 3: 1.0}
"""Weights of the priorities in the OAR (ALARA) term: every organ counts, priority-1 most."""
SCORE_WEIGHTS = {"base": 0.30, "oar": 0.35, "ci": 0.25, "beams": 0.10, "hot": 0.50, "short": 0.50}
OAR_ZERO_AT = 1.5
"""A constraint earns nothing at this multiple of its limit (a parotid at 1.5× its
mean-dose limit is a clinical failure, not a near miss)."""
D98_GOAL = 0.95
"""The target's near-minimum goal: D98 ≥ 95 % of Rx (the 95–107 % window of ICRU 50/62, read at
ICRU 83's D98 and D2 points)."""
D98_MAJOR = 0.93
"""Below this D98 the target is under-dosed: a major deviation (RTOG H-0225 plan scoring: 93 %
of Rx, 65.1 of 70 Gy)."""
D2_GOAL = 1.07
"""The target's near-maximum goal (ICRU 50/62's 107 %); the tumour hot-spot cost starts here."""
BODY_GOAL = 1.10
"""The body near-max outside the target costs from here (RTOG H-0225's 110 % level, 77 of 70 Gy)."""
HOT_FAIL = 1.15
"""A tumour D2 or body near-max at or above this is a major deviation (RTOG H-0225: 80.5 of 70 Gy)."""
D2_FAIL = HOT_FAIL
BODY_NEAR_MAX_PERCENT = 1.0
"""The body's near-max outside the target is its ``D1%``."""
SCORE_FORMULA = (
    "q = coverage*(0.30 + 0.35*oar + 0.25*CI + 0.10*beams)*(1 - 0.5*hot)*(1 - 0.5*short), "
    "coverage = (min(D98/0.95,1) + V95)/2, short = clip((0.95-D98)/0.02, 0, 1), "
    "hot = max(clip((D2-1.07)/0.08), clip((body D1% outside target - 1.10)/0.05)), oar over every OAR "
    "(weights 4/2/1); score = 0.60 + 0.40q if every constraint is met, D98 >= 0.93 and no hot spot >= 1.15 "
    f"(clean: passes), 0.50 + 0.09q if only priority-2/3 constraints fail, {CRITICAL_CAP}q otherwise; "
    f"pass >= {PASS_THRESHOLD}"
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
    body_near_max: float = 0.0  # D1% of the body outside the target
    hot_spot: tuple[int, int] = (-1, -1)  # (row, column) of the hottest voxel outside the target
    hot_spot_in: str = ""  # the structure holding it: an OAR's name or "normal tissue"
    tier: str = ""  # "clean", "minor" or "major" (:func:`plan_tier`); "" = work it out from the rest

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
        out["hot_spot_fail"] = self.d2 >= HOT_FAIL or self.body_near_max >= HOT_FAIL
        out["body_near_max"] = self.body_near_max
        out["hot_spot"] = {
            "row": self.hot_spot[0],
            "col": self.hot_spot[1],
            "in": self.hot_spot_in,
            "near_max_gy": round(self.body_near_max * task.rx_gy, 2),
        }
        out["tier"] = plan_tier(self, task)
        out["violations"] = violations(self, task)
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
    outside_dose: np.ndarray | None = None,
) -> PlanMetrics:
    """Every metric of a plan from the tumour's, the body's and each OAR's voxel doses (NumPy);
    ``outside_dose``: the body's voxels outside the target (its near-max; 0 when not given)."""
    ordered = np.sort(np.asarray(tumour_dose, np.float64), axis=None)  # low to high
    body = np.ascontiguousarray(body_dose, np.float64).ravel()
    stats = np.empty(N_TUMOUR_STATISTICS)
    tumour_statistics(ordered, body, rank_positions(ordered.size), LEVELS, stats)
    oar_mean, oar_max = oar_statistics(oar_doses)
    values = constraint_values_numpy(oar_doses, task.constraint_table)
    near_max = 0.0 if outside_dose is None else body_near_max(np.asarray(outside_dose, np.float64).ravel())
    return metrics_from_statistics(
        stats, ordered.size, oar_mean, oar_max, values, task, n_beams, body_near_max=near_max
    )


def body_near_max(outside_dose: np.ndarray) -> float:
    """THE body near-max outside the target: ``D1%`` of those voxels' doses (0 if there are none)."""
    return dose_at_volume(outside_dose, BODY_NEAR_MAX_PERCENT)


def metrics_from_statistics(
    stats: np.ndarray,
    n: int,
    oar_mean: np.ndarray,
    oar_max: np.ndarray,
    values: np.ndarray,
    task: Task,
    n_beams: int,
    body_near_max: float = 0.0,
    hot_spot: tuple[int, int] = (-1, -1),
    hot_spot_in: str = "",
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
    if (
        d98 < D98_MAJOR
        or hot_term(d2, body_near_max) >= 1.0
        or not passes[_oar_table(task.oars, table).critical_rows].all()
    ):
        tier = "major"
    else:
        tier = "clean" if passes.all() else "minor"
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
        body_near_max=body_near_max,
        hot_spot=hot_spot,
        hot_spot_in=hot_spot_in,
        tier=tier,
    )


class _OarTable(NamedTuple):
    graded: tuple[tuple[int, float, tuple[int, ...]], ...]  # (OAR index, weight, its constraint rows)
    total: float  # their weights' sum
    critical: tuple[int, ...]  # indices of the priority-1 OARs
    limits: tuple[float, ...]  # every constraint's limit
    critical_rows: np.ndarray  # (n_constraints,) bool: the rows of priority-1 OARs


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
        )
        critical = tuple(j for j, o in enumerate(oars) if o.critical)
        if len(_OAR_TABLES) >= 64:
            _OAR_TABLES.clear()
        critical_rows = np.isin(table.oar, critical)
        summary = _OarTable(
            graded, sum(w for _, w, _ in graded), critical, tuple(table.limit.tolist()), critical_rows
        )
        hit = _OAR_TABLES[id(oars)] = (oars, summary)
    if hit is None or hit[0] is not oars:
        return _OarTable((), 0.0, tuple(j for j, o in enumerate(oars) if o.critical), (), np.zeros(0, bool))
    return hit[1]


def hot_term(d2: float, body_near_max: float) -> float:
    """The hot-spot term in [0, 1]: the worse of the tumour's (D2 from 107 % to 115 %) and the
    body's outside the target (near-max from 110 % to 115 %); 1 is a major deviation."""
    tumour = (d2 - D2_GOAL) / (HOT_FAIL - D2_GOAL)
    body = (body_near_max - BODY_GOAL) / (HOT_FAIL - BODY_GOAL)
    return min(1.0, max(0.0, tumour, body))


def cold_term(d98: float) -> float:
    """The cold-spot term in [0, 1]: 0 at D98 ≥ 95 %, 1 at the major-deviation level 93 %."""
    return min(1.0, max(0.0, (D98_GOAL - d98) / (D98_GOAL - D98_MAJOR)))


def score_terms(m: PlanMetrics, task: Task) -> dict[str, float]:
    """The quality's terms (coverage, oar, ci, beams, hot, short), each in [0, 1]."""
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
        "hot": hot_term(m.d2, m.body_near_max),
        "short": cold_term(m.d98),
    }


def plan_tier(m: PlanMetrics, task: Task) -> str:
    """``"major"``, ``"minor"`` or ``"clean"`` (module docstring): what ranks the plan first."""
    if m.tier:
        return m.tier
    critical = _oar_table(task.oars).critical
    major = (
        m.d98 < D98_MAJOR
        or hot_term(m.d2, m.body_near_max) >= 1.0
        or not all(m.oar_pass[j] for j in critical)
    )
    return "major" if major else "clean" if all(m.constraint_pass) else "minor"


def violations(m: PlanMetrics, task: Task) -> list[str]:
    """What keeps the plan from being clean, in words a physicist reads (empty for a clean plan)."""
    out = []
    rx = task.rx_gy
    if m.d98 < D98_MAJOR:
        out.append(
            f"target under-dosed: D98 {100 * m.d98:.1f} % of Rx ({m.d98 * rx:.1f} Gy) "
            f"< {100 * D98_MAJOR:g} % (major deviation)"
        )
    if m.d2 >= HOT_FAIL:
        out.append(f"target hot spot: D2 {100 * m.d2:.1f} % of Rx ≥ {100 * HOT_FAIL:g} % (major deviation)")
    if m.body_near_max >= HOT_FAIL:
        out.append(
            f"hot spot outside the target: body D1% {100 * m.body_near_max:.1f} % of Rx "
            f"({m.body_near_max * rx:.1f} Gy) ≥ {100 * HOT_FAIL:g} %, hottest at row {m.hot_spot[0]}, "
            f"column {m.hot_spot[1]} in {m.hot_spot_in or 'normal tissue'} (major deviation)"
        )
    table = task.constraint_table
    rows = [(o, c) for o in task.oars for c in o.constraints]
    for (oar, constraint), value, ok, kind in zip(rows, m.constraint_values, m.constraint_pass, table.metric):
        if ok:
            continue
        shown = f"{100 * value:.1f} %" if kind == 2 else f"{value * rx:.1f} Gy"
        level = "major" if oar.critical else "minor"
        out.append(
            f"{oar.name} (priority {oar.priority}) {constraint.describe()} failed: {shown} "
            f"({level} deviation)"
        )
    return out


def plan_score(m: PlanMetrics, task: Task) -> float:
    """The plan's score in [0, 1] (module docstring): its tier first, then its quality."""
    return score_from_terms(score_terms(m, task), plan_tier(m, task))


def score_from_terms(t: Mapping[str, float], tier: str) -> float:
    """THE combination of the quality's terms (:func:`score_terms`) and the plan's tier
    (:func:`plan_tier`). Shared by :func:`plan_score` and by scripts that rebuild the score
    from an observation."""
    w = SCORE_WEIGHTS
    quality = t["coverage"] * (w["base"] + w["oar"] * t["oar"] + w["ci"] * t["ci"] + w["beams"] * t["beams"])
    quality *= (1.0 - w["hot"] * t["hot"]) * (1.0 - w["short"] * t["short"])  # costs in proportion
    quality = min(1.0, max(0.0, quality))
    if tier == "clean":
        return PASS_THRESHOLD + (1.0 - PASS_THRESHOLD) * quality
    if tier == "minor":
        low, high = MINOR_BAND
        return low + (high - low) * quality
    if tier != "major":
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")
    return CRITICAL_CAP * quality
