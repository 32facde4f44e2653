"""What a day is: every patient's arrival tick, severity, condition, treatment
quantiles and per-tick dynamics uniforms (SPEC §2).

The built-in day is a key: the kernel draws its patients when the episode
starts and every other draw when it is needed, from the counter-based generator
of :mod:`hospital_marl.core.rng`. Every draw is a function of what it is for
(patient, tick), never of the actions, so every policy meets the same patients
with the same clinical luck (common random numbers). :class:`Day` is the
day as a record (for users, tests and renderers); a user's :data:`DayGenerator`
returns one and the kernel then reads its draws instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from hospital_marl.core import kernel
from hospital_marl.core.clinical import DEFAULT_CLINICAL
from hospital_marl.core.rewards import DEFAULT_REWARDS
from hospital_marl.core.rng import fill_dynamics
from hospital_marl.core.scenarios import Scenario
from hospital_marl.core.types import (
    PAT_ARRIVAL,
    PAT_ARRIVAL_SEVERITY,
    PAT_CONDITION,
    S_KEY,
    S_N_PATIENTS,
    State,
    empty_state,
    make_params,
    patient_capacity,
)


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


DayGenerator = Callable[[Scenario, np.random.Generator], Day]
"""A user's arrival model: the day's patients from a NumPy generator seeded by the episode's seed.
The built-in model (:func:`generate_day`) is drawn inside the kernel instead (no generator)."""


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


def day_of_state(state: State, e: int, episode_length: int) -> DayArrays:
    """Row ``e``'s day as arrays: its patients' identities and quantiles as the kernel drew (or a
    user day wrote) them, and their per-tick dynamics uniforms (a user day's own, or the
    key's, computed here: the kernel draws them when it needs them)."""
    n = int(state.scalars[e, S_N_PATIENTS])
    pat = state.pat[e, :n]
    latent = np.empty((n, episode_length), np.float64)
    if state.latent.shape[1] > 0:
        latent[:] = state.latent[e, :, :n].T
    else:
        fill_dynamics(int(state.scalars[e, S_KEY]), latent)
    return DayArrays(
        pat[:, PAT_ARRIVAL].astype(np.int64),
        pat[:, PAT_ARRIVAL_SEVERITY].astype(np.int64),
        pat[:, PAT_CONDITION].astype(np.int64),
        state.quantile[e, :, :n].copy(),
        latent,
    )


def draw_day(scenario: Scenario, key: int) -> DayArrays:
    """The built-in day of ``key`` (a :func:`~hospital_marl.core.rng.seed_key`), as the kernel draws it."""
    params = make_params(scenario, DEFAULT_CLINICAL, DEFAULT_REWARDS, scenario.episode_length)
    capacity = patient_capacity(scenario)
    while True:
        state = empty_state(1, capacity)
        n = kernel.start_row(state, params, 0, key)
        if n <= capacity:
            return day_of_state(state, 0, scenario.episode_length)
        capacity = n


def user_day_rng(seed: int | None) -> np.random.Generator:
    """The NumPy generator a user's :data:`DayGenerator` gets for an episode seed (the day stream
    of the seed's ``SeedSequence``: the same as before the kernel drew the built-in days)."""
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[0])


def generate_day(scenario: Scenario, rng: np.random.Generator) -> Day:
    """The built-in arrival model (SPEC §2) as a day generator: the day of a key drawn from ``rng``.
    (:class:`~hospital_marl.core.hospital.Hospital` draws its default days in the kernel from the
    seed directly; this is for users who wrap or compare with the default model.)"""
    key = int(rng.integers(-(2**63), 2**63 - 1, dtype=np.int64, endpoint=True))
    return day_from_arrays(draw_day(scenario, key))
