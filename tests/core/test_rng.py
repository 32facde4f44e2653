"""The counter-based generator (core/rng.py): uniform draws, exact Poisson counts, the day's
arrival model (SPEC §2, §8) and the seeding contract.

Statistical checks use fixed keys and 6-sigma bounds: deterministic, and a correct
generator sits far inside them (they can fail only if the distribution is wrong).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hospital_marl import BUILTIN_SCENARIOS, Hospital
from hospital_marl.core.rng import D_COUNT, D_DYNAMICS, imagine_key, poisson, seed_key, uniform
from hospital_marl.core.scenarios import get_scenario
from hospital_marl.core.types import S_KEY


def test_uniform__is_in_unit_interval_with_uniform_bins_and_uncorrelated_neighbours() -> None:
    key = seed_key(2026)
    u = np.array([uniform(key, D_DYNAMICS, pid, t) for pid in range(200) for t in range(100)])
    assert ((u >= 0.0) & (u < 1.0)).all()
    n, bins = len(u), 10
    counts = np.histogram(u, bins, (0.0, 1.0))[0]
    p = 1 / bins
    assert (np.abs(counts - n * p) <= 6 * math.sqrt(n * p * (1 - p))).all()
    # consecutive ticks of one patient: correlation ~ N(0, 1/n)
    grid = u.reshape(200, 100)
    r = np.corrcoef(grid[:, :-1].ravel(), grid[:, 1:].ravel())[0, 1]
    assert abs(r) <= 6 / math.sqrt(grid[:, 1:].size)


@pytest.mark.parametrize("lam", [0.35, 1.1, 5.0, 42.0])
def test_poisson__counts_follow_the_poisson_pmf(lam: float) -> None:
    key, n = seed_key(7), 20_000
    draws = np.array([poisson(lam, key, D_COUNT, i) for i in range(n)])
    assert abs(draws.mean() - lam) <= 6 * math.sqrt(lam / n)
    for k in range(int(lam) - 2, int(lam) + 3):
        if k < 0:
            continue
        p = math.exp(k * math.log(lam) - lam - math.lgamma(k + 1))
        assert abs((draws == k).mean() - p) <= 6 * math.sqrt(p * (1 - p) / n), k


@pytest.mark.parametrize("name", BUILTIN_SCENARIOS)
def test_days__have_the_scenarios_expected_arrivals_and_severity_mix(name: str) -> None:
    scenario = get_scenario(name)
    h = Hospital(scenario)
    days = 400
    arrivals, severities = [], []
    for seed in range(days):
        h.reset(seed)
        arrivals.append(h.day.n_patients)
        severities.extend(h.day.severity)
    mean = scenario.expected_arrivals  # Poisson: variance = mean
    assert abs(np.mean(arrivals) - mean) <= 6 * math.sqrt(mean / days)
    if scenario.burst is None:  # the background mix only (a burst adds its own)
        n = len(severities)
        for s, p in enumerate(scenario.severity_mix, start=1):
            share = severities.count(s) / n
            assert abs(share - p) <= 6 * math.sqrt(p * (1 - p) / n), s


def test_seed_key__takes_every_non_negative_seed_and_imagine_keys_differ() -> None:
    seeds = [0, 1, 2**32, 2**63 - 1, 2**63 - 1 + 4096, 2**64, 2**200]
    keys = [seed_key(s) for s in seeds]
    assert len(set(keys)) == len(seeds)
    assert all(-(2**63) <= k < 2**63 for k in keys)
    assert all(imagine_key(s) != seed_key(s) for s in seeds)
    h = Hospital("normal_day")
    h.reset(2**63 - 1)  # the largest seed the server accepts
    assert int(h.state.scalars[0, S_KEY]) == seed_key(2**63 - 1)


def test_imagine__with_the_episode_seed_does_not_replay_the_real_future() -> None:
    h = Hospital("surge")
    h.reset(11)
    real = h.day.arrival_tick
    assert h.imagine(11).day.arrival_tick != real
