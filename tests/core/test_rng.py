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
from hospital_marl.core.rng import D_COUNT, D_DYNAMICS, imagine_key, poisson, seed_key, seed_keys, uniform
from hospital_marl.core.scenarios import get_scenario
from hospital_marl.core.types import S_KEY, S_N_PATIENTS


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
    one_word = [s for s in seeds if s < 2**64]  # the batched form the vector envs use
    assert seed_keys(np.array(one_word, np.uint64)).tolist() == [seed_key(s) for s in one_word]


def test_imagine__with_the_episode_seed_does_not_replay_the_real_future() -> None:
    h = Hospital("surge")
    h.reset(11)
    real = h.day.arrival_tick
    assert h.imagine(11).day.arrival_tick != real


def test_days_beyond_the_capacity_grow_the_state_never_overflow(monkeypatch: pytest.MonkeyPatch) -> None:
    """The capacity guarantee: a day (or an imagined one) with more patients than slots gets room
    for all of them and is the same day as with room to spare."""
    import gymnasium as gym

    import hospital_marl.core.hospital as hospital_module
    import hospital_marl.envs.vector as vector_module
    from hospital_marl import COMPOSED_ENV_ID

    roomy = Hospital("surge")
    roomy.reset(5)
    monkeypatch.setattr(hospital_module, "patient_capacity", lambda scenario: 3)
    tight = Hospital("surge")
    tight.reset(5)
    assert tight.day == roomy.day and tight.state.pat.shape[1] == tight.day.n_patients > 3
    for _ in range(10):
        tight.tick()
    futures = [tight.imagine(seed) for seed in range(20)]
    assert all(f.day.n_patients <= f.state.pat.shape[1] for f in futures)
    assert any(f.day.n_patients > tight.day.n_patients for f in futures), "some imagined day is larger"

    monkeypatch.setattr(vector_module, "patient_capacity", lambda scenario: 3)
    envs = gym.make_vec(COMPOSED_ENV_ID, num_envs=2, scenario="surge")
    envs.reset(seed=5)
    assert envs.unwrapped._batch.state.pat.shape[1] >= roomy.day.n_patients
    assert int(envs.unwrapped._batch.state.scalars[0, S_N_PATIENTS]) == roomy.day.n_patients


def test_seeds__numpy_ints_are_their_value_and_bad_seeds_are_clear_errors() -> None:
    assert seed_key(np.int64(12)) == seed_key(12) and imagine_key(np.uint32(3)) == imagine_key(3)
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match="non-negative int"):
            seed_key(bad)  # type: ignore[arg-type]
    h = Hospital("normal_day")
    h.reset(0)
    with pytest.raises(ValueError, match="non-negative int"):
        h.imagine(-1)
