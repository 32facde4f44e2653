"""The ``calibrated`` distribution's days against the published figures docs/calibration.md
states (issue #28): the triage mix and the hourly arrival profile. The figures below are the
page's (the published values), not the simulator's parameters; each check has the tolerance
the page states."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl import DISTRIBUTIONS, Hospital

PUBLISHED_ESI_MIX = {1: 0.01, 2: 0.12, 3: 0.45, 4: 0.32, 5: 0.10}
"""Share of ED visits by ESI level, unknown levels left out (docs/calibration.md)."""
ESI_TOLERANCE = 0.015
PEAK_HOURS = (10, 14)
"""Arrivals peak in the late morning / early afternoon: the busiest hour starts in [10, 14)."""
PEAK_TO_TROUGH = (2.5, 5.0)
"""Busiest hour / quietest hour of mean arrivals (published: about 3 to 4)."""
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


def test_triage_mix__matches_the_published_esi_shares(days) -> None:
    severities = np.concatenate([np.asarray(d.severity) for d in days])
    assert len(severities) > 10_000
    for esi, share in PUBLISHED_ESI_MIX.items():
        simulated = float(np.mean(severities == 6 - esi))  # SPEC §2: severity s = ESI 6 - s
        assert abs(simulated - share) <= ESI_TOLERANCE, (esi, simulated, share)


def _arrivals_per_hour(days) -> np.ndarray:
    """Mean arrivals per clock hour (tick 0 = midnight): each hour's arrivals over its ticks,
    scaled to an hour (an hour holds 4 or 5 ticks of 14.4 minutes)."""
    ticks = np.concatenate([np.asarray(d.arrival_tick) for d in days])
    per_tick = np.bincount(ticks, minlength=100)[:100] / len(days)
    hour_of_tick = np.floor(np.arange(100) * HOURS_PER_TICK).astype(int)
    sums = np.bincount(hour_of_tick, weights=per_tick, minlength=24)
    counts = np.bincount(hour_of_tick, minlength=24)
    return sums / counts / HOURS_PER_TICK


def test_arrival_profile__peaks_late_morning(days) -> None:
    profile = _arrivals_per_hour(days)
    assert PEAK_HOURS[0] <= int(np.argmax(profile)) < PEAK_HOURS[1], profile.round(2)


def test_arrival_profile__peak_to_trough_ratio(days) -> None:
    profile = _arrivals_per_hour(days)
    ratio = profile.max() / profile.min()
    assert PEAK_TO_TROUGH[0] <= ratio <= PEAK_TO_TROUGH[1], ratio


def test_calibrated__is_registered_as_a_distribution() -> None:
    assert DISTRIBUTIONS["calibrated"].sample(0).general_beds == 20
