"""The planner's horizon table is derived from the clinical parameters (issue #23 item 5), so a
user's own ``ClinicalParams`` are planned with: SPEC §2's rules read from the table."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hospital_marl.core.clinical import DEFAULT_CLINICAL, ClinicalParams
from hospital_marl.core.constants import CRITICAL_SEVERITY, MAX_SEVERITY
from hospital_marl.core.hospital import Hospital
from policies.planner import FLAT_DELAYS, PLACES, TEAM_DELAYS, derive_death_by_place, horizon_value

DELAYS = (FLAT_DELAYS, TEAM_DELAYS)


@pytest.mark.parametrize("delays", DELAYS)
def test_adequate_care_kills_only_at_the_highest_severity(delays) -> None:
    """SPEC §2: under adequate care only severity 5 keeps a (residual) mortality."""
    table = derive_death_by_place(DEFAULT_CLINICAL, delays)
    for sev in range(1, MAX_SEVERITY):
        assert table["icu_vent"][sev] == 0.0 and table["icu"][sev] == 0.0
    for sev in range(1, CRITICAL_SEVERITY):  # a general bed is adequate below critical
        assert table["general"][sev] == 0.0
    assert 0.0 < table["icu_vent"][MAX_SEVERITY] < table["icu_no_vent"][MAX_SEVERITY]


@pytest.mark.parametrize("delays", DELAYS)
def test_without_adequate_care_the_sicker_die_more(delays) -> None:
    table = derive_death_by_place(DEFAULT_CLINICAL, delays)
    for place in ("waiting", "general", "icu_no_vent"):
        row = table[place]
        assert all(row[s] <= row[s + 1] for s in range(1, MAX_SEVERITY)), (place, row)
    assert table["waiting"][MAX_SEVERITY] > table["icu_vent"][MAX_SEVERITY]


def test_no_death_and_no_deterioration_gives_an_all_zero_table() -> None:
    harmless = replace(
        DEFAULT_CLINICAL,
        deteriorate_base=(0.0,) * 5,
        death_waiting=0.0,
        death_in_bed=0.0,
        death_residual=0.0,
    )
    table = derive_death_by_place(harmless, FLAT_DELAYS)
    assert set(table) == set(PLACES)
    assert all(q == 0.0 for row in table.values() for q in row)


def test_a_deadlier_waiting_room_is_planned_with() -> None:
    """A user's own ClinicalParams move the table where (and only where) they act."""
    deadly = replace(DEFAULT_CLINICAL, death_waiting=0.5)
    base = derive_death_by_place(DEFAULT_CLINICAL, FLAT_DELAYS)
    table = derive_death_by_place(deadly, FLAT_DELAYS)
    assert table["waiting"][MAX_SEVERITY] > base["waiting"][MAX_SEVERITY]
    assert table["icu_vent"] == base["icu_vent"] and table["general"] == base["general"]


def test_horizon_value_reads_the_hospitals_own_clinical_parameters() -> None:
    """The same state valued under deadlier parameters for the waiting is worth less: the horizon
    value reads ``hospital.clinical`` (set after the ticks, so the state itself is the same)."""
    h = Hospital("surge")
    h.reset(3)
    for _ in range(10):
        h.tick()  # nobody admitted: a queue builds up
    assert h.queue
    default = horizon_value(h)
    h.clinical = ClinicalParams(death_waiting=0.6, deteriorate_base=(0.0, 0.05, 0.1, 0.2, 0.3))
    assert horizon_value(h) < default
