"""The one 39-action table (SPEC §3) and its role decomposition."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium import spaces

import hospital_marl
from hospital_marl import N_FLAT_ACTIONS, ROLE_ACTION_COUNTS, ROLES, flat_to_joint, flat_to_role, role_to_flat
from hospital_marl.core.actions import ACTION_TABLE, ROLE_FLAT, Kind, action_table_markdown

RULES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "simulation.md"

# SPEC §3, written out once more on purpose: the table in code must match the spec.
SPEC_LAYOUT = (
    # (first flat, last flat, kind, role, first role action)
    (1, 10, Kind.ADMIT_GENERAL, "triage", 1),
    (11, 20, Kind.ADMIT_ICU, "triage", 11),
    (21, 23, Kind.VENTILATE, "ventilator_officer", 1),
    (24, 28, Kind.TRANSFER_ICU, "bed_manager", 1),
    (29, 33, Kind.EARLY_DISCHARGE, "bed_manager", 6),
    (34, 38, Kind.DISCHARGE_ICU, "bed_manager", 11),
)


def test_roles__are_in_turn_order() -> None:
    assert ROLES == ("triage", "bed_manager", "ventilator_officer")


def test_role_action_counts__are_21_16_4() -> None:
    assert dict(ROLE_ACTION_COUNTS) == {"triage": 21, "bed_manager": 16, "ventilator_officer": 4}
    assert N_FLAT_ACTIONS == len(ACTION_TABLE) == 39


@pytest.mark.parametrize("make", [hospital_marl.raw_env, hospital_marl.env, hospital_marl.parallel_env])
def test_pettingzoo_views__role_action_spaces_are_discrete_21_16_4(make) -> None:
    env = make()
    for role, n in (("triage", 21), ("bed_manager", 16), ("ventilator_officer", 4)):
        assert env.action_space(role) == spaces.Discrete(n)


def test_gym_views__action_spaces_are_discrete_39_and_multidiscrete_21_16_4() -> None:
    assert gym.make(hospital_marl.COMPOSED_ENV_ID).action_space == spaces.Discrete(39)
    assert gym.make(hospital_marl.TEAM_ENV_ID).action_space == spaces.MultiDiscrete([21, 16, 4])


@pytest.mark.parametrize(("first", "last", "kind", "role", "first_role_action"), SPEC_LAYOUT)
def test_action_table__matches_spec_layout(first, last, kind, role, first_role_action) -> None:
    for offset, flat in enumerate(range(first, last + 1)):
        spec = ACTION_TABLE[flat]
        assert (spec.flat, spec.kind, spec.index, spec.role) == (flat, kind, offset, role)
        assert spec.role_action == first_role_action + offset
        assert flat_to_role(flat) == (role, first_role_action + offset)


def test_flat_noop__maps_to_every_role_noop() -> None:
    assert ACTION_TABLE[0].kind is Kind.NOOP
    assert tuple(flat_to_role(0)) == (None, 0)
    assert flat_to_joint(0) == {role: 0 for role in ROLES}
    assert all(role_to_flat(role, 0) == 0 for role in ROLES)


@pytest.mark.parametrize("flat", range(1, 39))
def test_flat_to_role__round_trips_through_role_to_flat(flat: int) -> None:
    role, role_action = flat_to_role(flat)
    assert role_to_flat(role, role_action) == flat
    assert flat_to_joint(flat) == {r: (role_action if r == role else 0) for r in ROLES}


def test_role_to_flat__round_trips_for_every_role_action() -> None:
    for role in ROLES:
        for role_action in range(1, ROLE_ACTION_COUNTS[role]):
            assert tuple(flat_to_role(role_to_flat(role, role_action))) == (role, role_action)


def test_every_flat_action__belongs_to_exactly_one_role() -> None:
    for flat in range(1, N_FLAT_ACTIONS):
        owners = [role for role in ROLES if flat in ROLE_FLAT[role][1:]]
        assert owners == [ACTION_TABLE[flat].role], (flat, owners)
    assert sorted(f for role in ROLES for f in ROLE_FLAT[role][1:]) == list(range(1, N_FLAT_ACTIONS))
    assert {role: len(ROLE_FLAT[role]) for role in ROLES} == dict(ROLE_ACTION_COUNTS)


@pytest.mark.parametrize("bad", [-1, 39, 1000])
def test_flat_to_role__rejects_out_of_range_with_value_error(bad: int) -> None:
    with pytest.raises(ValueError, match=str(bad)):
        flat_to_role(bad)


@pytest.mark.parametrize(("role", "action"), [("nurse", 1), ("triage", 21), ("bed_manager", -1)])
def test_role_to_flat__rejects_unknown_role_or_action_with_value_error(role: str, action: int) -> None:
    with pytest.raises(ValueError):
        role_to_flat(role, action)


def test_action_table_markdown__has_a_row_per_group_and_the_noop() -> None:
    rows = action_table_markdown().splitlines()
    assert len(rows) == 2 + 1 + len(SPEC_LAYOUT)
    for (first, last, _, role, _), row in zip(SPEC_LAYOUT, rows[3:]):
        assert row.startswith(f"| {first}–{last} |") and f"`{role}`" in row


def test_readme__contains_the_generated_action_table_verbatim() -> None:
    """The rules page's action table is generated from the code (one source of truth)."""
    assert action_table_markdown() in RULES_PAGE.read_text(encoding="utf-8")
