"""The clinical rules of SPEC §2 and the calibrated probabilities of SPEC §8, checked
from the spec's own numbers (not from the code).

Probabilities are measured over thousands of patients with per-tick uniforms drawn
from fixed seeds, and compared with 6-sigma binomial bounds: the tests are exactly
reproducible, and a wrong rule (a wrong table entry, factor or condition) lands far
outside the bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from hospital_marl import Hospital, Scenario
from hospital_marl.core import Day
from hospital_marl.core.actions import ROLE_FLAT, Kind
from hospital_marl.core.hospital import AWAY, DEAD, DISCHARGED, ICU, WAITING
from tests.helpers import FLAT_OF, scripted_hospital

CARDIAC, RESPIRATORY, TRAUMA, INFECTION, NEURO = 1, 2, 3, 4, 5

# SPEC §8, "Dynamics" (the spec's numbers, typed in here on purpose)
B = {1: 0.005, 2: 0.012, 3: 0.035, 4: 0.060}  # b[s]
C = {CARDIAC: 1.5, RESPIRATORY: 1.2, TRAUMA: 1.0, INFECTION: 0.7, NEURO: 1.5}  # c[cond]
M_WAITING, M_BED, NEGLECT_SCALE, CAP = 1.0, 0.8, 6, 0.5
DEATH_WAITING, DEATH_IN_BED, DEATH_ADEQUATE = 0.15, 0.11, 0.01
IMPROVE_GENERAL = {2: 0.04, 3: 0.06}
IMPROVE_ICU = {2: 0.05, 3: 0.08, 4: 0.10, 5: 0.08}
WEAN_TICKS, STEP_DOWN_BLOCK = 3, 8  # SPEC §2
BOUNCE_PER_SEVERITY, BOUNCE_DELAY = 0.1, (4, 24)  # SPEC §2 ("a later tick of the shift")


def within_six_sigma(hits: int, n: int, p: float) -> bool:
    return abs(hits / n - p) <= 6 * math.sqrt(max(p * (1 - p), 1e-12) / n) + 1e-12


def random_day(patients: Sequence[tuple[int, int]], length: int = 40):
    """A day generator: these (severity, condition) patients all arrive at tick 0, with
    treatment quantile 0.99 (long treatment) and per-tick uniforms from the day's rng."""

    def generate(scenario: Scenario, rng: np.random.Generator) -> Day:
        n = len(patients)
        latent = rng.random((n, length))
        return Day(
            arrival_tick=(0,) * n,
            severity=tuple(s for s, _ in patients),
            condition=tuple(c for _, c in patients),
            q_general=(0.99,) * n,
            q_icu=(0.99,) * n,
            latent=tuple(row.tolist() for row in latent),
            arrivals_at=(tuple(range(n)),) + ((),) * (length - 1),
        )

    return generate


def hospital(patients: Sequence[tuple[int, int]], seed: int, length: int = 40, **fields) -> Hospital:
    scenario = Scenario(name="rules", episode_length=length, arrival_rate=0.0, max_deaths=10**6, **fields)
    h = Hospital(scenario, day_generator=random_day(patients, length))
    h.reset(seed)
    return h


def admit_all(h: Hospital, kind: Kind) -> list[int]:
    """Admit the queue head repeatedly (several actions before one tick: the AEC rhythm)."""
    admitted = []
    while h.queue and h.flat_mask()[FLAT_OF[(kind, 0)]]:
        pid = h.queue[0]
        h.act("triage", ROLE_FLAT["triage"].index(FLAT_OF[(kind, 0)]))
        admitted.append(pid)
    return admitted


# -------------------------------------------------------------- waiting room
@pytest.mark.parametrize(
    ("severity", "condition"), [(1, CARDIAC), (2, INFECTION), (3, RESPIRATORY), (4, NEURO), (4, TRAUMA)]
)
def test_waiting__deterioration_probability_is_b_times_neglect_times_condition(severity, condition) -> None:
    """p = min(0.5, b[s] (1 + n/6) c[cond]) with n the ticks waited so far (n = 0 and n = 6)."""
    h = hospital([(severity, condition)] * 6000, seed=severity * 10 + condition, length=10)
    still = list(range(6000))
    for n in range(7):
        before = h.severity
        h.tick()
        after = h.severity
        worse = [p for p in still if after[p] == before[p] + 1]
        if n in (0, 6):
            expected = min(CAP, B[severity] * (1 + n / NEGLECT_SCALE) * C[condition] * M_WAITING)
            assert within_six_sigma(len(worse), len(still), expected), (n, len(worse) / len(still), expected)
        still = [p for p in still if after[p] == severity]


def test_waiting__severity_5_dies_with_0_15_per_tick() -> None:
    h = hospital([(5, TRAUMA)] * 5000, seed=1)
    h.tick()
    died = h.location.count(DEAD)
    assert within_six_sigma(died, 5000, DEATH_WAITING)
    assert h.counters.deaths == died


# -------------------------------------------------------------- in a bed
def beds_outcome(
    severity: int, condition: int, kind: Kind, episodes: int, **fields
) -> tuple[int, int, int, int]:
    """Admit every patient of small days to beds of ``kind`` and run one tick:
    (patients, worse, better, dead)."""
    n = worse = better = dead = 0
    for seed in range(episodes):
        beds = fields.get("general_beds", 20) if kind is Kind.ADMIT_GENERAL else fields.get("icu_beds", 5)
        h = hospital([(severity, condition)] * beds, seed=seed, **fields)
        admitted = admit_all(h, kind)
        h.tick()
        for p in admitted:
            n += 1
            worse += h.severity[p] == severity + 1
            better += h.severity[p] == severity - 1
            dead += h.location[p] == DEAD
    return n, worse, better, dead


@pytest.mark.parametrize("condition", [CARDIAC, INFECTION])
def test_critical_patient_in_a_general_bed__deteriorates_with_the_bed_factor(condition: int) -> None:
    n, worse, better, dead = beds_outcome(4, condition, Kind.ADMIT_GENERAL, episodes=250)
    assert within_six_sigma(worse, n, min(CAP, B[4] * C[condition] * M_BED))
    assert better == dead == 0, "a general bed is not adequate care for a critical patient"


def test_severity_5_in_a_general_bed__dies_with_0_11() -> None:
    n, _, better, dead = beds_outcome(5, TRAUMA, Kind.ADMIT_GENERAL, episodes=250)
    assert within_six_sigma(dead, n, DEATH_IN_BED) and better == 0


@pytest.mark.parametrize("severity", [2, 3])
def test_general_bed__adequate_for_severity_up_to_3_improves_with_spec_probability(severity: int) -> None:
    n, worse, better, dead = beds_outcome(severity, TRAUMA, Kind.ADMIT_GENERAL, episodes=300)
    assert within_six_sigma(better, n, IMPROVE_GENERAL[severity])
    assert worse == dead == 0


@pytest.mark.parametrize("severity", [2, 3, 4])
def test_icu__adequate_care_improves_with_spec_probability(severity: int) -> None:
    """ICU without a ventilator is adequate for a patient who does not need one (trauma, s <= 4)."""
    n, worse, better, dead = beds_outcome(severity, TRAUMA, Kind.ADMIT_ICU, episodes=1500, icu_beds=4)
    assert within_six_sigma(better, n, IMPROVE_ICU[severity])
    assert worse == dead == 0


def test_icu__respiratory_severity_4_without_a_ventilator_is_neglected() -> None:
    """Needs a ventilator (respiratory, severity 4) and has none: inadequate care, bed factor."""
    n, worse, better, dead = beds_outcome(4, RESPIRATORY, Kind.ADMIT_ICU, episodes=1500, icu_beds=4)
    assert within_six_sigma(worse, n, min(CAP, B[4] * C[RESPIRATORY] * M_BED))
    assert better == dead == 0


def test_icu__severity_5_on_a_ventilator_has_residual_mortality_and_may_improve() -> None:
    n = dead = better = 0
    for seed in range(2500):
        h = hospital([(5, CARDIAC)] * 3, seed=seed, icu_beds=3)
        admitted = admit_all(h, Kind.ADMIT_ICU)
        for v in range(3):
            h.act("ventilator_officer", v + 1)
        assert all(h.vent_of[p] != -1 for p in admitted)
        h.tick()
        n += len(admitted)
        dead += sum(h.location[p] == DEAD for p in admitted)
        better += sum(h.severity[p] == 4 for p in admitted if h.location[p] == ICU)
    assert within_six_sigma(dead, n, DEATH_ADEQUATE)
    assert within_six_sigma(better, n, IMPROVE_ICU[5])


# -------------------------------------------------------------- needs-ventilator, weaning
@pytest.mark.parametrize(
    ("severity", "condition", "needs"),
    [(5, CARDIAC, True), (5, INFECTION, True), (4, RESPIRATORY, True), (4, CARDIAC, False),
     (3, RESPIRATORY, False), (1, NEURO, False)],
)  # fmt: skip
def test_needs_ventilator__respiratory_and_severity_4_or_any_severity_5(severity, condition, needs) -> None:
    h = scripted_hospital([{"tick": 0, "severity": severity, "condition": condition}], icu_beds=1)
    h.act_flat(FLAT_OF[(Kind.ADMIT_ICU, 0)])
    assert h.needs_ventilator(0) is needs
    obs_needs = h.handle().needs_ventilator(0)
    assert obs_needs is needs


def test_weaning__a_ventilator_on_a_patient_who_does_not_need_it_is_freed_after_3_ticks() -> None:
    h = scripted_hospital([{"tick": 0, "severity": 3, "condition": TRAUMA}], icu_beds=1, ventilators=1)
    h.act("triage", ROLE_FLAT["triage"].index(FLAT_OF[(Kind.ADMIT_ICU, 0)]))
    h.act("ventilator_officer", 1)
    assert h.vents == [0]
    for tick in range(1, WEAN_TICKS + 1):
        h.tick()
        assert (h.vents == [0]) is (tick < WEAN_TICKS), tick
    assert h.vent_of[0] == -1
    assert h.flat_mask()[FLAT_OF[(Kind.VENTILATE, 0)]], "free again, and the ICU patient has none"


def test_weaning__a_patient_who_stops_needing_it_loses_it_after_3_ticks_without_need() -> None:
    """Severity 5 cardiac improves to 4 during tick 0 (latent 0.05: above the 0.01 death, below
    0.01 + 0.08): ticks 0, 1, 2 end without need, so the ventilator is released after tick 2."""
    h = scripted_hospital(
        [{"tick": 0, "severity": 5, "condition": CARDIAC, "latent": {0: 0.05}}], icu_beds=1, ventilators=1
    )
    h.act("triage", ROLE_FLAT["triage"].index(FLAT_OF[(Kind.ADMIT_ICU, 0)]))
    h.act("ventilator_officer", 1)
    h.tick()
    assert h.severity[0] == 4 and h.vents == [0]
    h.tick()
    assert h.vents == [0]
    h.tick()
    assert h.vents == [-1] and h.vent_of[0] == -1


# -------------------------------------------------------------- ICU step-down
def test_ready_icu_patient__holds_the_bed_neither_worsens_nor_dies_then_leaves_after_8_ticks() -> None:
    """Severity 3 trauma in ICU, shortest treatment (ICU severity 3: 8 ticks at quantile 0), and
    uniforms of 0.0 from then on: any deterioration, death or improvement would happen."""
    latent = {t: 0.999 for t in range(8)} | {t: 0.0 for t in range(8, 30)}
    h = scripted_hospital([{"tick": 0, "severity": 3, "condition": TRAUMA, "latent": latent}], icu_beds=1)
    h.act_flat(FLAT_OF[(Kind.ADMIT_ICU, 0)])
    for _ in range(8):
        h.tick()
    assert h.is_ready(0) and h.location[0] == ICU
    for blocked in range(1, STEP_DOWN_BLOCK):
        h.tick()
        assert h.location[0] == ICU and h.severity[0] == 3, blocked
    h.tick()
    assert h.location[0] == DISCHARGED and h.counters.discharges == 1 and h.icu == [-1]


# -------------------------------------------------------------- bounce-backs
EARLY_DISCHARGE_ROLE_ACTION = ROLE_FLAT["bed_manager"].index(FLAT_OF[(Kind.EARLY_DISCHARGE, 0)])


@pytest.mark.parametrize("severity", [1, 3])
def test_bounce_back__probability_0_1_times_severity_one_level_worse_same_patient(severity: int) -> None:
    sent = back = 0
    delays: set[int] = set()
    for seed in range(300):
        h = hospital([(severity, INFECTION)] * 20, seed=seed, length=40)
        admitted = admit_all(h, Kind.ADMIT_GENERAL)
        for _ in admitted:  # all sent home at tick 0, before any treatment
            assert h.act("bed_manager", EARLY_DISCHARGE_ROLE_ACTION).value == "done"
        assert all(h.location[p] == AWAY for p in admitted)
        sent += len(admitted)
        for tick in range(1, 30):
            h.tick()
            returned = [p for p in admitted if h.location[p] != AWAY]
            for p in returned:  # the same patient, back in the queue, one level worse
                assert h.location[p] == WAITING and h.severity[p] == severity + 1 and h.wait[p] == 0
                delays.add(tick)
            admitted = [p for p in admitted if h.location[p] == AWAY]
            back += len(returned)
        assert h.counters.bounce_backs == h.counters.early_discharges - h.location.count(AWAY)
    assert within_six_sigma(back, sent, BOUNCE_PER_SEVERITY * severity)
    assert delays == set(range(BOUNCE_DELAY[0], BOUNCE_DELAY[1] + 1))
