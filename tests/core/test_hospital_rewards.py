"""The reward table (SPEC §4) on hand-built days, and reward-hack regressions.

Hand-built days (:func:`tests.helpers.scripted_hospital`) fix every patient's
arrival, severity, condition, treatment quantile and per-tick latent draw, so
each reward below is exact. A latent draw of 0.999 makes every event
improbable; small draws force an improvement or a death on that tick.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from hospital_marl import BUILTIN_SCENARIOS, Hospital
from hospital_marl.core.hospital import AWAY, DEAD, DISCHARGED, GENERAL, ICU, Outcome
from tests.helpers import (
    ADMIT_GENERAL_0,
    ADMIT_ICU_0,
    BAD_ACTIONS,
    DISCHARGE_ICU_0,
    EARLY_DISCHARGE_0,
    NOOP,
    admit_and_wait,
    admit_then_discharge_early,
    clinical_state,
    episode_return,
    play_flat,
    scripted_hospital,
    value_id,
)

INFECTION, RESPIRATORY, TRAUMA, CARDIAC = 4, 2, 3, 1
EXACT = 1e-9


def ticks(h: Hospital, n: int) -> list[float]:
    return [h.tick().reward for _ in range(n)]


# ------------------------------------------------------------- the table
def test_successful_discharge__earns_5() -> None:
    h = scripted_hospital([{"tick": 0, "severity": 1, "condition": INFECTION}])
    assert h.act_flat(ADMIT_GENERAL_0) is Outcome.DONE
    assert ticks(h, 3) == [0.0, 0.0, 5.0]  # severity 1, shortest general treatment: 3 ticks
    assert h.location[0] == DISCHARGED and h.counters.discharges == 1 and h.counters.critical_saved == 0


def icu_patient_ready_for_step_down() -> Hospital:
    """A severity-4 cardiac patient in ICU who improved to 3 on the first tick and finished treatment."""
    h = scripted_hospital([{"tick": 0, "severity": 4, "condition": CARDIAC, "latent": {0: 0.05}}])
    assert h.act_flat(ADMIT_ICU_0) is Outcome.DONE
    assert ticks(h, 6) == [0.0] * 6  # ICU severity-4 treatment: 6 ticks at quantile 0
    assert h.severity[0] == 3 and h.is_ready(0)
    return h


def test_discharge_of_a_once_critical_patient__earns_10() -> None:
    h = icu_patient_ready_for_step_down()
    assert h.flat_mask()[DISCHARGE_ICU_0]
    assert h.act_flat(DISCHARGE_ICU_0) is Outcome.DONE
    assert h.tick().reward == 10.0
    assert h.location[0] == DISCHARGED and h.counters.critical_saved == 1 == h.counters.critical_total


def test_ready_icu_patient__is_discharged_automatically_after_8_ticks_for_10() -> None:
    h = icu_patient_ready_for_step_down()
    assert ticks(h, 8) == [0.0] * 7 + [10.0]
    assert h.location[0] == DISCHARGED and h.icu.count(0) == 0


def test_death__costs_15() -> None:
    h = scripted_hospital([{"tick": 0, "severity": 5, "condition": TRAUMA, "latent": {0: 0.0}}])
    assert h.tick().reward == -15.0
    assert h.location[0] == DEAD and h.counters.deaths == 1 == h.counters.critical_deaths


def test_waiting__costs_0_1_per_patient_and_0_5_per_critical_patient() -> None:
    h = scripted_hospital(
        [
            {"tick": 0, "severity": 1, "condition": INFECTION},
            {"tick": 0, "severity": 2, "condition": INFECTION},
            {"tick": 0, "severity": 4, "condition": INFECTION},
        ]
    )
    assert h.tick().reward == pytest.approx(-0.1 - 0.1 - 0.5, abs=EXACT)


def test_critical_patient_in_a_general_bed__costs_0_5_per_tick() -> None:
    h = scripted_hospital([{"tick": 0, "severity": 4, "condition": TRAUMA}])
    h.act_flat(ADMIT_GENERAL_0)
    assert ticks(h, 3) == [-0.5] * 3


@pytest.mark.parametrize(("occupied", "bonus"), [(3, 0.0), (4, 0.1), (5, 0.1)])
def test_icu_busy_bonus__0_1_when_more_than_60_percent_occupied(occupied: int, bonus: float) -> None:
    h = scripted_hospital([{"tick": 0, "severity": 1, "condition": INFECTION}] * occupied)
    for _ in range(occupied):
        assert h.act_flat(ADMIT_ICU_0) is Outcome.DONE
    assert h.tick().reward == pytest.approx(bonus, abs=EXACT)


def test_end_of_shift__adds_20_times_survival_rate() -> None:
    patients = [
        {"tick": 0, "severity": 5, "condition": TRAUMA, "latent": {0: 0.0}},  # dies on the first tick
        {"tick": 0, "severity": 1, "condition": INFECTION},  # waits all shift
    ]
    h = scripted_hospital(patients, episode_length=2)
    first, last = h.tick(), h.tick()
    assert first.reward == pytest.approx(-15.0 - 0.1, abs=EXACT) and not (first.terminated or first.truncated)
    assert last.reward == pytest.approx(-0.1 + 20.0 * 0.5, abs=EXACT)
    assert last.truncated and not last.terminated


def test_termination_at_max_deaths__adds_20_times_survival_rate() -> None:
    patients = [
        {"tick": 0, "severity": 5, "condition": TRAUMA, "latent": {0: 0.0}},
        {"tick": 0, "severity": 1, "condition": INFECTION},
    ]
    h = scripted_hospital(patients, episode_length=10, max_deaths=1)
    result = h.tick()
    assert result.terminated and not result.truncated
    assert result.reward == pytest.approx(-15.0 - 0.1 + 20.0 * 0.5, abs=EXACT)


def test_perfect_shift__ends_with_the_full_20_bonus() -> None:
    h = scripted_hospital([{"tick": 0, "severity": 1, "condition": INFECTION}], episode_length=4)
    h.act_flat(ADMIT_GENERAL_0)
    assert ticks(h, 4) == [0.0, 0.0, 5.0, 20.0]


@pytest.mark.parametrize("severity", [1, 2, 3])
def test_early_discharge_from_a_general_bed__costs_3_times_severity(severity: int) -> None:
    h = scripted_hospital([{"tick": 0, "severity": severity, "condition": INFECTION}])
    h.act_flat(ADMIT_GENERAL_0)
    assert h.tick().reward == 0.0
    assert h.act_flat(EARLY_DISCHARGE_0) is Outcome.DONE
    assert h.tick().reward == -3.0 * severity
    assert h.location[0] in (AWAY,) and h.counters.early_discharges == 1 and h.counters.discharges == 0


@pytest.mark.parametrize("severity", [1, 2, 3])
def test_discharge_from_icu_before_treatment_is_done__costs_3_times_severity(severity: int) -> None:
    h = scripted_hospital([{"tick": 0, "severity": severity, "condition": INFECTION}])
    h.act_flat(ADMIT_ICU_0)
    assert h.tick().reward == 0.0 and not h.is_ready(0)
    assert h.act_flat(DISCHARGE_ICU_0) is Outcome.DONE
    assert h.tick().reward == -3.0 * severity
    assert h.counters.early_discharges == 1 and h.counters.discharges == 0


# -------------------------------------------- critical patients stay in
@pytest.mark.parametrize("severity", [4, 5])
@pytest.mark.parametrize(
    ("admit", "discharge", "where"),
    [(ADMIT_GENERAL_0, EARLY_DISCHARGE_0, GENERAL), (ADMIT_ICU_0, DISCHARGE_ICU_0, ICU)],
    ids=["general_board", "icu"],
)
def test_critical_patient__can_never_be_discharged_early(severity, admit, discharge, where) -> None:
    """The mask says invalid; acting anyway is counted invalid and costs exactly -1; nobody leaves."""
    h = scripted_hospital([{"tick": 0, "severity": severity, "condition": TRAUMA}])
    h.act_flat(admit)
    for _ in range(15):  # before and after the treatment time is up: still critical, still in
        assert not h.flat_mask()[discharge]
        noop = copy.deepcopy(h)
        noop.act_flat(NOOP)
        before = clinical_state(h)
        assert h.act_flat(discharge) is Outcome.INVALID
        assert clinical_state(h) == before and h.location[0] == where
        assert h.tick().reward == pytest.approx(noop.tick().reward - 1.0, abs=EXACT)
        assert h.counters.invalid_actions == noop.counters.invalid_actions + 1
    assert h.counters.early_discharges == 0 and h.counters.discharges == 0


# --------------------------------------------------------- invalid actions


@pytest.mark.parametrize("bad", BAD_ACTIONS, ids=value_id)
def test_malformed_flat_action__never_raises_costs_1_and_is_counted(bad) -> None:
    h = Hospital("surge")
    h.reset(3)
    play_flat(h, 20, np.random.default_rng(3))
    noop = copy.deepcopy(h)
    noop.act_flat(NOOP)
    before = clinical_state(h)
    assert h.act_flat(bad) is Outcome.INVALID
    assert clinical_state(h) == before
    assert h.counters.invalid_actions == noop.counters.invalid_actions + 1
    assert h.counters.actions == noop.counters.actions
    assert h.tick().reward == pytest.approx(noop.tick().reward - 1.0, abs=EXACT)


@pytest.mark.parametrize("role", ["triage", "bed_manager", "ventilator_officer"])
@pytest.mark.parametrize("bad", [-1, 21, 99, 1.0, "1", None, True, np.array([0, 1])], ids=value_id)
def test_malformed_role_action__never_raises_costs_1_and_is_counted(role: str, bad) -> None:
    h = Hospital("normal_day")
    h.reset(4)
    play_flat(h, 10, np.random.default_rng(4))
    noop = copy.deepcopy(h)
    assert h.act(role, bad) is Outcome.INVALID
    assert h.counters.invalid_actions == noop.counters.invalid_actions + 1
    assert h.tick().reward == pytest.approx(noop.tick().reward - 1.0, abs=EXACT)


def test_masked_out_actions__each_cost_exactly_1() -> None:
    h = Hospital("ventilator_crisis")
    h.reset(5)
    play_flat(h, 30, np.random.default_rng(5))
    invalid = [a for a, ok in enumerate(h.flat_mask()) if not ok]
    assert invalid, "need a state with masked-out actions"
    noop = copy.deepcopy(h)
    for a in invalid:
        assert h.act_flat(a) is Outcome.INVALID
    assert h.counters.invalid_actions == len(invalid)
    assert h.tick().reward == pytest.approx(noop.tick().reward - len(invalid), abs=EXACT)


def test_integer_like_actions__are_accepted_as_their_value() -> None:
    """numpy integers and 0-d integer arrays are actions (what Gymnasium's sample() and SB3 give)."""
    for action in (np.int64(ADMIT_GENERAL_0), np.int32(ADMIT_GENERAL_0), np.array(ADMIT_GENERAL_0)):
        h = scripted_hospital([{"tick": 0, "severity": 2, "condition": 1}])  # someone to admit
        assert h.act_flat(action) is Outcome.DONE


# ------------------------------------------------------ reward hacking
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_early_discharge_loop__earns_less_than_admit_and_wait(scenario: str, seed: int) -> None:
    loop = episode_return(scenario, seed, admit_then_discharge_early)
    assert loop < episode_return(scenario, seed, admit_and_wait)


# Not a contract: "the loop earns less than doing nothing". Doing nothing lets
# patients die in the waiting room (-15 each), so a loop that sends them home
# can beat it on quiet days; the hack the spec closes is the loop beating
# legitimate care, tested above.


def test_early_discharge_loop__sends_patients_home_and_some_bounce_back() -> None:
    h = Hospital("normal_day")
    h.reset(0)
    while not h.done:
        h.act_flat(admit_then_discharge_early(h))
        h.tick()
    assert h.counters.early_discharges >= 10 and h.counters.bounce_backs >= 1
