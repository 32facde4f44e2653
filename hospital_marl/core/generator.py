"""How a day is drawn: every patient's arrival tick, severity, condition and
latent draws, from one seed, before the first decision (SPEC §2).

Because the whole day is drawn up front from its own stream, the arrival
stream never depends on the actions: every policy meets the same patients
(common random numbers), and per-patient latent uniforms make even the
clinical dynamics paired across policies.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from hospital_marl.core.scenarios import Scenario


@dataclass(frozen=True)
class Day:
    """The day's patients, id-ordered by arrival tick. Immutable; shared by snapshots."""

    arrival_tick: tuple[int, ...]  # (n,) tick the patient joins the queue
    severity: tuple[int, ...]  # (n,) severity on arrival, 1..5
    condition: tuple[int, ...]  # (n,) condition id, 1..5
    q_general: tuple[float, ...]  # (n,) treatment-time quantile for a general bed
    q_icu: tuple[float, ...]  # (n,) treatment-time quantile for the ICU
    latent: tuple[list[float], ...]  # (n, T) per-tick uniform driving the patient's dynamics
    arrivals_at: tuple[tuple[int, ...], ...]  # (T,) patient ids arriving at each tick

    @property
    def n_patients(self) -> int:
        return len(self.arrival_tick)


def arrived_by(day: Day, now: int) -> int:
    """How many patients have arrived by tick ``now`` (ids are in arrival order: they are ids 0..k-1)."""
    return bisect_right(day.arrival_tick, now)


DayGenerator = Callable[[Scenario, np.random.Generator], Day]


@lru_cache(maxsize=64)
def _arrival_rates(scenario: Scenario) -> np.ndarray:
    """scenario.arrival_rates() as a read-only array, once per scenario (a fifth of a reset's cost)."""
    rates = np.asarray(scenario.arrival_rates(), dtype=float)
    rates.flags.writeable = False
    return rates


@lru_cache(maxsize=256)
def _mix_cdf(mix: tuple[float, ...]) -> np.ndarray:
    """The normalised cumulative sum ``Generator.choice(..., p=mix)`` builds on every call."""
    cdf = np.asarray(mix, dtype=np.float64).cumsum()
    cdf /= cdf[-1]
    cdf.flags.writeable = False
    return cdf


def _choose(rng: np.random.Generator, mix: tuple[float, ...], n: int) -> np.ndarray:
    """``rng.choice(len(mix), size=n, p=mix) + 1``, bit for bit and with the same draws (one
    uniform per patient, inverted through the cdf: NumPy's own algorithm), without
    re-validating and re-summing ``mix`` on every call (a third of a day draw's cost)."""
    return _mix_cdf(mix).searchsorted(rng.random(n), side="right") + 1


def _draw_patients(scenario: Scenario, rng: np.random.Generator, first_tick: int) -> tuple[list, ...]:
    """Arrivals for ticks first_tick..T-1: (ticks, severities, conditions) as lists."""
    ticks, sev, cond = _draw_patients_arrays(scenario, rng, first_tick)
    return ticks.tolist(), sev.tolist(), cond.tolist()


def _draw_patients_arrays(
    scenario: Scenario, rng: np.random.Generator, first_tick: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arrivals for ticks first_tick..T-1: (ticks, severities, conditions)."""
    n_ticks = scenario.episode_length
    rates = _arrival_rates(scenario)[first_tick:]
    counts = rng.poisson(rates) if len(rates) else np.zeros(0, dtype=int)
    ticks = np.repeat(np.arange(first_tick, n_ticks), counts)
    sev = _choose(rng, scenario.severity_mix, len(ticks))
    cond = _choose(rng, scenario.condition_mix, len(ticks))
    burst = scenario.burst
    if burst is not None:
        lo, hi = max(burst.start, first_tick), min(burst.end, n_ticks - 1)
        b_counts = rng.poisson(burst.rate, size=max(0, hi - lo + 1))
        b_ticks = np.repeat(np.arange(lo, lo + len(b_counts)), b_counts)
        b_sev = _choose(rng, burst.severity_mix, len(b_ticks))
        # Stable merge by tick: background arrivals first within a tick.
        ticks = np.concatenate([ticks, b_ticks])
        sev = np.concatenate([sev, b_sev])
        cond = np.concatenate([cond, np.full(len(b_ticks), burst.condition)])
        order = np.argsort(ticks, kind="stable")
        ticks, sev, cond = ticks[order], sev[order], cond[order]
    return ticks, sev, cond


def _assemble(ticks: list, sev: list, cond: list, qg: list, qi: list, latent: list, n_ticks: int) -> Day:
    arrivals_at: list[list[int]] = [[] for _ in range(n_ticks)]
    for pid, t in enumerate(ticks):
        arrivals_at[t].append(pid)
    return Day(
        tuple(ticks),
        tuple(sev),
        tuple(cond),
        tuple(qg),
        tuple(qi),
        tuple(latent),
        tuple(map(tuple, arrivals_at)),
    )


class DayArrays(NamedTuple):
    """A day as arrays (what the kernel reads): ``arrival``, ``severity``, ``condition`` (n,) ints,
    ``quantile`` (2, n) [general, ICU], ``latent`` (n, T) float64."""

    arrival: np.ndarray
    severity: np.ndarray
    condition: np.ndarray
    quantile: np.ndarray
    latent: np.ndarray


def draw_day(scenario: Scenario, rng: np.random.Generator) -> DayArrays:
    """The default day, as arrays: Poisson arrivals with the scenario's profile and mixes,
    then the treatment quantiles, then the latent uniforms (this order defines the day)."""
    ticks, sev, cond = _draw_patients_arrays(scenario, rng, 0)
    n = len(ticks)
    quantiles = rng.random((2, n))
    latent = rng.random((n, scenario.episode_length))
    return DayArrays(ticks, sev, cond, quantiles, latent)


def day_from_arrays(arrays: DayArrays) -> Day:
    """The immutable :class:`Day` record of a day drawn as arrays."""
    return _assemble(
        arrays.arrival.tolist(),
        arrays.severity.tolist(),
        arrays.condition.tolist(),
        arrays.quantile[0].tolist(),
        arrays.quantile[1].tolist(),
        arrays.latent.tolist(),
        arrays.latent.shape[1],
    )


def day_arrays(day: Day, episode_length: int) -> DayArrays:
    """A :class:`Day` (e.g. from a user's day generator) as arrays."""
    n = day.n_patients
    latent = np.array(day.latent, dtype=np.float64).reshape(n, episode_length)
    return DayArrays(
        np.array(day.arrival_tick, dtype=np.int64).reshape(n),
        np.array(day.severity, dtype=np.int64).reshape(n),
        np.array(day.condition, dtype=np.int64).reshape(n),
        np.array([day.q_general, day.q_icu], dtype=np.float64).reshape(2, n),
        latent,
    )


def generate_day(scenario: Scenario, rng: np.random.Generator) -> Day:
    """The default day generator: Poisson arrivals with the scenario's profile and mixes."""
    return day_from_arrays(draw_day(scenario, rng))


def resample_future(day: DayArrays, scenario: Scenario, now: int, rng: np.random.Generator) -> DayArrays:
    """The same day up to tick ``now``, with everything not yet revealed redrawn from ``rng``.

    Patients who have arrived (arrival tick <= now) keep their identity and
    treatment quantiles; their latent draws from ``now`` on, and all later
    arrivals, are new. This is what a planner may imagine without seeing the future.
    """
    known = int(np.searchsorted(day.arrival, now, side="right"))
    ticks, sev, cond = _draw_patients_arrays(scenario, rng, now + 1)
    n_new = len(ticks)
    quantiles = rng.random((2, n_new))
    n_ticks = scenario.episode_length
    fresh = rng.random((known + n_new, max(0, n_ticks - now)))
    latent = np.empty((known + n_new, n_ticks))
    latent[:known, :now] = day.latent[:known, :now]
    latent[known:, :now] = 0.0  # ticks before a new patient's arrival are never read
    latent[:, now:] = fresh
    return DayArrays(
        np.concatenate([day.arrival[:known], ticks]),
        np.concatenate([day.severity[:known], sev]),
        np.concatenate([day.condition[:known], cond]),
        np.concatenate([day.quantile[:, :known], quantiles], axis=1),
        latent,
    )
