"""The ``calibrated`` distribution's days against the sourced figures docs/calibration.md
quotes (issues #28, #45): the hour arrivals peak. The page's other rows are the simulator's
own targets and are not checked here as if they were published; the triage mix is checked
only as a sampling check against the configured mix."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl import DISTRIBUTIONS, Hospital
from hospital_marl.core.scenarios import CALIBRATED_SEVERITY

PUBLISHED_PEAK_HOURS = (10, 13)
"""Karas 1977 (JACEP 6(10):449-452), abstract: load "peaks between 10:00 am and 1:00 pm"; the
busiest hour starts in [10, 13)."""
SAMPLING_TOLERANCE = 0.015
"""Per ESI level, over 300 days (~25,000 patients: a binomial standard error below 0.35 points)."""
DAYS = 300
HOURS_PER_TICK = 24 / 100


@pytest.fixture(scope="module")
def days() -> list:
    h = Hospital("calibrated")
    out = []
    for seed in range(DAYS):
        h.reset(seed)
        out.append(h.day)
    return out


def test_triage_mix__days_draw_the_configured_mix(days) -> None:
    """A sampling check: the mix is the simulator's own target (no published share was read)."""
    severities = np.concatenate([np.asarray(d.severity) for d in days])
    assert len(severities) > 10_000
    for severity, share in enumerate(CALIBRATED_SEVERITY, start=1):
        simulated = float(np.mean(severities == severity))
        assert abs(simulated - share) <= SAMPLING_TOLERANCE, (severity, simulated, share)


def _arrivals_per_hour(days) -> np.ndarray:
    """Mean arrivals per clock hour (tick 0 = midnight): each hour's arrivals over its ticks,
    scaled to an hour (an hour holds 4 or 5 ticks of 14.4 minutes)."""
    ticks = np.concatenate([np.asarray(d.arrival_tick) for d in days])
    per_tick = np.bincount(ticks, minlength=100)[:100] / len(days)
    hour_of_tick = np.floor(np.arange(100) * HOURS_PER_TICK).astype(int)
    sums = np.bincount(hour_of_tick, weights=per_tick, minlength=24)
    counts = np.bincount(hour_of_tick, minlength=24)
    return sums / counts / HOURS_PER_TICK


def test_arrival_profile__peaks_in_the_published_late_morning_window(days) -> None:
    profile = _arrivals_per_hour(days)
    assert PUBLISHED_PEAK_HOURS[0] <= int(np.argmax(profile)) < PUBLISHED_PEAK_HOURS[1], profile.round(2)


def test_calibrated__is_registered_as_a_distribution() -> None:
    assert DISTRIBUTIONS["calibrated"].sample(0).general_beds == 20
