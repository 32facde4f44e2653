"""Episode counters, the five metrics and the composite score."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

METRIC_NAMES: tuple[str, ...] = (
    "survival_rate",
    "critical_patient_survival",
    "avg_wait_time",
    "resource_utilization",
    "invalid_action_rate",
)

SCORE_WEIGHTS: dict[str, float] = {
    "survival_rate": 40.0,
    "critical_patient_survival": 20.0,
    "avg_wait_time": 20.0,  # applied to 1 - min(avg_wait_time / WAIT_SCALE, 1)
    "resource_utilization": 10.0,
    "invalid_action_rate": 10.0,  # applied to 1 - invalid_action_rate
}
WAIT_SCALE = 20.0


@dataclass
class EpisodeCounters:
    """What happened so far this episode. Plain ints: cheap to copy."""

    arrivals: int = 0
    deaths: int = 0
    critical_total: int = 0
    critical_deaths: int = 0
    discharges: int = 0
    critical_saved: int = 0
    early_discharges: int = 0
    bounce_backs: int = 0
    deteriorations: int = 0
    invalid_actions: int = 0
    conflicts: int = 0
    actions: int = 0
    admissions: int = 0
    wait_ticks: int = 0
    """Sum over patients of ticks spent waiting (re-waits after a bounce-back included)."""
    occupancy_sum: float = 0.0
    """Sum over ticks of occupied beds (general + ICU) / all beds."""
    ticks: int = 0
    cumulative_reward: float = 0.0

    def copy(self) -> EpisodeCounters:
        return copy.copy(self)  # every field is an immutable number

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def episode_metrics(c: EpisodeCounters) -> dict[str, float]:
    """The five graded metrics of one episode (so far)."""
    return {
        "survival_rate": 1.0 - c.deaths / c.arrivals if c.arrivals else 1.0,
        "critical_patient_survival": (
            1.0 - c.critical_deaths / c.critical_total if c.critical_total else 1.0
        ),
        # Patients never admitted count their wait until death or the end.
        "avg_wait_time": c.wait_ticks / c.arrivals if c.arrivals else 0.0,
        "resource_utilization": c.occupancy_sum / c.ticks if c.ticks else 0.0,
        "invalid_action_rate": c.invalid_actions / c.actions if c.actions else 0.0,
    }


def composite_score(m: dict[str, float], weights: Mapping[str, float] = SCORE_WEIGHTS) -> float:
    """overall = 40*survival + 20*critical + 20*(1-min(wait/20,1)) + 10*util + 10*(1-invalid).

    ``weights`` re-weights the five terms (training experiments); grading always uses the default.
    """
    return (
        weights["survival_rate"] * m["survival_rate"]
        + weights["critical_patient_survival"] * m["critical_patient_survival"]
        + weights["avg_wait_time"] * (1.0 - min(m["avg_wait_time"] / WAIT_SCALE, 1.0))
        + weights["resource_utilization"] * m["resource_utilization"]
        + weights["invalid_action_rate"] * (1.0 - m["invalid_action_rate"])
    )
