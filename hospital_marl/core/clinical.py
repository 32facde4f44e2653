"""Clinical dynamics parameters (SPEC §2, calibrated defaults §8).

One tick = 14.4 minutes. Severity 1..5; index 0 of every per-severity tuple is
unused so that ``table[severity]`` reads naturally.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClinicalParams:
    """How patients evolve. Frozen data, injected into the simulator."""

    deteriorate_base: tuple[float, ...] = (0.0, 0.005, 0.012, 0.035, 0.060)
    """b[s]: per-tick probability of severity +1 without adequate care (severity 1..4)."""
    neglect_scale: float = 6.0
    """p = b[s] * (1 + n / neglect_scale) * c[cond] * m, n = ticks without adequate care."""
    deteriorate_cap: float = 0.5
    condition_factor: tuple[float, ...] = (0.0, 1.5, 1.2, 1.0, 0.7, 1.5)
    """c[cond]: cardiac and neuro are time-critical."""
    bed_factor: float = 0.8
    """m: inadequate care in a bed is better than the waiting room."""
    death_waiting: float = 0.15
    """Severity 5 without adequate care, waiting."""
    death_in_bed: float = 0.11
    """Severity 5 without adequate care, in a bed."""
    death_residual: float = 0.01
    """Severity 5 under adequate care."""
    improve_general: tuple[float, ...] = (0.0, 0.0, 0.04, 0.06, 0.0, 0.0)
    improve_icu: tuple[float, ...] = (0.0, 0.0, 0.05, 0.08, 0.10, 0.08)
    treatment_general: tuple[tuple[int, int], ...] = ((0, 0), (3, 8), (5, 12), (8, 20), (8, 20), (8, 20))
    """Treatment ticks (inclusive range) in a general bed by severity."""
    treatment_icu: tuple[tuple[int, int], ...] = ((0, 0), (3, 8), (5, 12), (8, 20), (6, 14), (8, 18))
    """Treatment ticks in ICU by severity; never shorter than general for severity <= 3."""
    wean_ticks: int = 3
    """A ventilator is released after this many consecutive ticks its patient did not need it."""
    step_down_block_ticks: int = 8
    """A ready ICU patient is discharged automatically after this many ticks (bed blocking)."""
    bounce_back_per_severity: float = 0.1
    """Early discharge: probability of bouncing back = this times severity."""
    bounce_back_delay: tuple[int, int] = (4, 24)
    """Ticks until a bounce-back returns (inclusive); past the shift it never returns."""

    def __post_init__(self) -> None:
        for s in (1, 2, 3):
            if self.treatment_icu[s][0] < self.treatment_general[s][0]:
                raise ValueError(
                    f"ClinicalParams.treatment_icu[{s}] {self.treatment_icu[s]} is shorter than "
                    f"treatment_general[{s}] {self.treatment_general[s]}: "
                    "parking mild patients in ICU would pay"
                )


DEFAULT_CLINICAL = ClinicalParams()
