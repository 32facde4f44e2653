"""Mid-day ventilator outages (issue #28's resource shocks within a day): from tick ``start`` to
``end`` the highest-numbered ``ventilators`` take no new patient; one in use when the outage
begins stays with its patient until released. Expected values are derived here from that
definition, not from the kernel's rule.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import hospital_marl
from hospital_marl.core.scenarios import Outage, Scenario, ScenarioDistribution
from hospital_marl.core.types import EMPTY
from hospital_marl.envs.vector import HospitalEDVectorEnv

OUTAGE = Outage(start=10, end=30, ventilators=2)
SICK = Scenario(name="vent_outage", outage=OUTAGE, arrival_rate=1.2, severity_mix=(0, 0, 0.2, 0.4, 0.4))


def _in_service(tick: int, scenario: Scenario = SICK) -> int:
    o = scenario.outage
    return scenario.ventilators - (o.ventilators if o and o.start <= tick <= o.end else 0)


def _unvented_icu_patient(h) -> bool:
    vent_of = h.vent_of
    return any(p != EMPTY and vent_of[p] == EMPTY for p in h.icu)


def test_outage__validated() -> None:
    with pytest.raises(ValueError, match="end"):
        Outage(start=5, end=4, ventilators=1)
    with pytest.raises(ValueError, match="ventilators"):
        Outage(start=5, end=9, ventilators=0)
    with pytest.raises(ValueError, match="at least one must stay"):
        Scenario(name="x", ventilators=2, outage=Outage(start=5, end=9, ventilators=2))
    with pytest.raises(ValueError, match="Outage"):
        Scenario(name="x", outage=(5, 9, 1))  # type: ignore[arg-type]


def test_mask__offers_only_ventilators_in_service() -> None:
    """SPEC §3's ventilate validity with the outage: ventilator v is valid exactly when it is
    in service at this tick, free, and some ICU patient has none."""
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=SICK)
    rng = np.random.default_rng(0)
    seen_out = seen_in = 0
    for seed in range(4):
        obs, info = env.reset(seed=seed)
        h, done = env.unwrapped.hospital, False
        while not done:
            t, mask = h.tick_count, info["action_mask"]
            for v in range(3):
                expected = v < _in_service(t) and h.vents[v] == EMPTY and _unvented_icu_patient(h)
                assert mask[21 + v] == expected, (seed, t, v)
            assert obs["capacity"][2] == sum(h.vents[v] == EMPTY for v in range(_in_service(t)))
            seen_out += OUTAGE.start <= t <= OUTAGE.end and _unvented_icu_patient(h)
            seen_in += not OUTAGE.start <= t <= OUTAGE.end and mask[22]
            # prefer ventilating with the highest valid slot, then ICU admissions, else random
            valid = np.flatnonzero(mask)
            vent = [a for a in (23, 22, 21) if mask[a]]
            action = vent[0] if vent else (11 if mask[11] else int(rng.choice(valid)))
            obs, _, term, trunc, info = env.step(action)
            done = term or trunc
    assert seen_out and seen_in, "the days must test both sides of the outage"


def test_in_use_ventilator__stays_with_its_patient_when_the_outage_begins() -> None:
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=SICK)
    obs, info = env.reset(seed=1)
    h = env.unwrapped.hospital
    while h.tick_count < OUTAGE.start:  # put ventilator 2 (an outage one) on a patient first
        mask = info["action_mask"]
        action = 23 if mask[23] else (11 if mask[11] else 0)
        obs, _, _, _, info = env.step(action)
    patient = h.vents[2]
    assert patient != EMPTY, "ventilator 2 must be in use when the outage begins"
    obs, _, _, _, info = env.step(0)
    assert h.tick_count > OUTAGE.start and h.vents[2] in (patient, EMPTY)
    if h.vents[2] == patient:
        assert obs["ventilator_status"][2] == 1.0  # in use, shown as such


def test_presence__follows_the_tick_in_every_view() -> None:
    composed = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=SICK, observation_layout="masked")
    aec = hospital_marl.env(scenario=SICK, observation_layout="masked")
    vec = HospitalEDVectorEnv(2, scenario=SICK, observation_layout="masked")
    obs, _ = composed.reset(seed=3)
    aec.reset(seed=3)
    vobs, _ = vec.reset(seed=3)
    for _ in range(40):
        t = composed.unwrapped.hospital.tick_count
        expected = (np.arange(3) < _in_service(t)).astype(np.float32)
        np.testing.assert_array_equal(obs["ventilator_present"], expected)
        np.testing.assert_array_equal(vobs["ventilator_present"][0], expected)
        np.testing.assert_array_equal(aec.state()[-4:-1], expected)
        obs, *_ = composed.step(0)
        vobs, *_ = vec.step(np.zeros(2, np.int64))
        for _role in hospital_marl.ROLES:
            aec.step(0)


def test_vector__final_observation_shows_the_last_ticks_presence() -> None:
    short = SICK.with_overrides(name="short_outage", episode_length=20, outage=Outage(15, 40, 1))
    vec = HospitalEDVectorEnv(1, scenario=short, observation_layout="masked")
    vec.reset(seed=0)
    for _ in range(19):
        vec.step(np.zeros(1, np.int64))
    obs, _, term, trunc, info = vec.step(np.zeros(1, np.int64))
    assert trunc[0] or term[0]
    final = info["final_obs"][0]
    end_tick = int(final["time_step"][0])
    assert final["ventilator_present"].tolist() == (np.arange(3) < _in_service(end_tick, short)).tolist()
    assert obs["ventilator_present"][0].tolist() == [1.0, 1.0, 1.0]  # the next day starts before it


def test_distribution__draws_outages_inside_their_ranges_and_never_the_last_ventilator() -> None:
    family = ScenarioDistribution(
        "outage_family",
        ventilators=(1, 3),
        shock_probability=0.5,
        outage_probability=0.7,
        outage_start=(5, 50),
        outage_length=(3, 9),
        outage_ventilators=(1, 2),
    )
    draws = [family.sample(seed) for seed in range(2000)]
    outages = [s for s in draws if s.outage is not None]
    assert 0.3 < len(outages) / len(draws) < 0.7  # 70 % asked, none where one ventilator is left
    for s in outages:
        o = s.outage
        assert 5 <= o.start <= 50 and 3 <= o.end - o.start + 1 <= 9
        assert 1 <= o.ventilators < s.ventilators
    assert {s.outage.ventilators for s in outages} == {1, 2}
    assert all(s.outage is None for s in draws if s.ventilators == 1)
    without = family.with_overrides(name="outage_family", outage_probability=0.0)
    for seed in range(200):  # the outage draws leave every other draw as it was
        a, b = family.sample(seed), without.sample(seed)
        assert a.with_overrides(outage=None, description="") == b.with_overrides(description="")
