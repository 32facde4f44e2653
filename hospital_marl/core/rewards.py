"""THE reward table. Injected into the simulator, so users can swap it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RewardTable:
    """Dense rewards, from the original system.

    The team reward of a tick is the sum of all its events, invalid-action
    penalties included.
    """

    discharge: float = 5.0
    """Successful discharge (treatment done)."""
    critical_discharge: float = 10.0
    """Successful discharge of a patient who was ever critical (instead of ``discharge``)."""
    death: float = -15.0
    """A patient dies (waiting, in a bed, or in ICU)."""
    critical_unattended_per_tick: float = -0.5
    """Per tick, per critical patient without adequate care (waiting, or in a general bed)."""
    waiting_per_tick: float = -0.1
    """Per tick, per waiting non-critical patient."""
    invalid_action: float = -1.0
    """An action the mask calls invalid: it does nothing and is counted."""
    early_discharge_per_severity: float = -3.0
    """Early discharge costs this times the patient's severity."""
    icu_busy_bonus: float = 0.1
    """Per tick with ICU utilisation above ``icu_busy_threshold``."""
    icu_busy_threshold: float = 0.6
    """ICU utilisation (occupied / ICU beds) that earns ``icu_busy_bonus``."""
    survival_bonus: float = 20.0
    """End of episode: this times the survival rate."""


DEFAULT_REWARDS = RewardTable()
