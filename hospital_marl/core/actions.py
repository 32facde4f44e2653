"""THE action table (SPEC §3): the 39 flat actions, the three roles and the
mapping between them. Everything else (role action spaces, masks, docs, the
README table) is derived from :data:`ACTION_GROUPS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

ROLES: tuple[str, ...] = ("triage", "bed_manager", "ventilator_officer")
"""The AEC turn order; the tick runs after the last role."""
N_ROLES = len(ROLES)


class Kind(IntEnum):
    """What an action does. The per-kind index addresses a queue slot, board position, ...."""

    NOOP = 0
    ADMIT_GENERAL = 1  # index: waiting-queue slot 0..9
    ADMIT_ICU = 2  # index: waiting-queue slot 0..9
    VENTILATE = 3  # index: ventilator 0..2
    TRANSFER_ICU = 4  # index: general-board position 0..4 (0 = most severe)
    EARLY_DISCHARGE = 5  # index: 0..4 from the bottom of the board (0 = least severe)
    DISCHARGE_ICU = 6  # index: ICU bed 0..4


@dataclass(frozen=True)
class ActionGroup:
    kind: Kind
    role: str
    count: int
    label: str  # with "{i}" for the index


# In flat order; role actions are numbered 1.. per role in this order (0 = no-op).
ACTION_GROUPS: tuple[ActionGroup, ...] = (
    ActionGroup(Kind.ADMIT_GENERAL, "triage", 10, "assign waiting patient [{i}] to a general bed"),
    ActionGroup(Kind.ADMIT_ICU, "triage", 10, "assign waiting patient [{i}] to an ICU bed"),
    ActionGroup(
        Kind.VENTILATE,
        "ventilator_officer",
        3,
        "put ventilator [{i}] on the most severe ICU patient without one",
    ),
    ActionGroup(Kind.TRANSFER_ICU, "bed_manager", 5, "transfer general-board patient [{i}] to an ICU bed"),
    ActionGroup(Kind.EARLY_DISCHARGE, "bed_manager", 5, "early-discharge general-board patient [{i}]"),
    ActionGroup(Kind.DISCHARGE_ICU, "bed_manager", 5, "discharge ICU bed [{i}]"),
)


@dataclass(frozen=True)
class ActionSpec:
    """One row of the flat table."""

    flat: int
    kind: Kind
    index: int
    role: str | None  # None for the flat no-op (every role no-ops)
    role_action: int
    label: str


class RoleAction(NamedTuple):
    role: str | None
    action: int


def _build() -> tuple[tuple[ActionSpec, ...], dict[str, int]]:
    table = [ActionSpec(0, Kind.NOOP, 0, None, 0, "no-op")]
    next_role_action = {role: 1 for role in ROLES}
    for group in ACTION_GROUPS:
        for i in range(group.count):
            role_action = next_role_action[group.role]
            next_role_action[group.role] += 1
            table.append(
                ActionSpec(len(table), group.kind, i, group.role, role_action, group.label.format(i=i))
            )
    return tuple(table), next_role_action


ACTION_TABLE, ROLE_ACTION_COUNTS = _build()
"""ACTION_TABLE[flat] -> ActionSpec; ROLE_ACTION_COUNTS[role] -> size of its Discrete space."""

N_FLAT_ACTIONS: int = len(ACTION_TABLE)  # 39
NOOP = 0

GROUP_SIZE: dict[Kind, int] = {group.kind: group.count for group in ACTION_GROUPS}
"""GROUP_SIZE[kind] -> how many indices the kind's actions address. The table's limits on the
department (queue slots, ICU beds, ventilators, board positions) are read from here."""
QUEUE_SLOTS = GROUP_SIZE[Kind.ADMIT_GENERAL]
"""Waiting-queue slots an admission addresses (the first ten waiting)."""
MAX_ICU_BEDS = GROUP_SIZE[Kind.DISCHARGE_ICU]
"""ICU beds the table addresses, so the most a scenario may have."""
MAX_VENTILATORS = GROUP_SIZE[Kind.VENTILATE]
"""Ventilators the table addresses, so the most a scenario may have."""
BOARD_TRANSFER_SLOTS = GROUP_SIZE[Kind.TRANSFER_ICU]
"""General-board positions a transfer addresses (the most severe first)."""
BOARD_DISCHARGE_SLOTS = GROUP_SIZE[Kind.EARLY_DISCHARGE]
"""General-board positions an early discharge addresses (the least severe first)."""
assert GROUP_SIZE[Kind.ADMIT_ICU] == QUEUE_SLOTS, "both admissions address the same queue slots"

_ROLE_TO_FLAT: dict[tuple[str, int], int] = {
    (spec.role, spec.role_action): spec.flat for spec in ACTION_TABLE if spec.role is not None
}
ROLE_KIND_INDEX: dict[str, tuple[tuple[Kind, int], ...]] = {
    role: ((Kind.NOOP, 0), *tuple((spec.kind, spec.index) for spec in ACTION_TABLE if spec.role == role))
    for role in ROLES
}
"""ROLE_KIND_INDEX[role][role_action] -> (kind, index)."""

ROLE_FLAT: dict[str, tuple[int, ...]] = {
    role: (NOOP, *tuple(spec.flat for spec in ACTION_TABLE if spec.role == role)) for role in ROLES
}
"""ROLE_FLAT[role][role_action] -> flat action (role no-op -> flat 0)."""

FLAT_OF: dict[tuple[Kind, int], int] = {(spec.kind, spec.index): spec.flat for spec in ACTION_TABLE}
"""FLAT_OF[(kind, index)] -> flat action: name actions by meaning, not by number."""


def flat_to_role(flat: int) -> RoleAction:
    """Flat action -> (role, role action). Flat 0 maps to ``(None, 0)``: all roles no-op."""
    spec = ACTION_TABLE[int(flat)] if 0 <= int(flat) < N_FLAT_ACTIONS else None
    if spec is None:
        raise ValueError(f"flat action must be in 0..{N_FLAT_ACTIONS - 1}, got {flat!r}")
    return RoleAction(spec.role, spec.role_action)


def role_to_flat(role: str, role_action: int) -> int:
    """(role, role action) -> flat action; every role's no-op (0) is flat 0."""
    if role not in ROLE_ACTION_COUNTS:
        raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    if not 0 <= int(role_action) < ROLE_ACTION_COUNTS[role]:
        raise ValueError(f"{role} action must be in 0..{ROLE_ACTION_COUNTS[role] - 1}, got {role_action!r}")
    return NOOP if int(role_action) == 0 else _ROLE_TO_FLAT[(role, int(role_action))]


def flat_to_joint(flat: int) -> dict[str, int]:
    """Flat action -> one role action per role (the others no-op)."""
    role, action = flat_to_role(flat)
    return {r: (action if r == role else 0) for r in ROLES}


def action_table_markdown() -> str:
    """The flat table as Markdown (used by the README; generated, never hand-written)."""
    rows = ["| flat | meaning | role | role action |", "|---|---|---|---|"]
    rows.append("| 0 | no-op | all roles | 0 |")
    flat = 1
    for group in ACTION_GROUPS:
        first = ACTION_TABLE[flat]
        last = ACTION_TABLE[flat + group.count - 1]
        rows.append(
            f"| {first.flat}–{last.flat} | {group.label.format(i='i')} | `{group.role}` "
            f"| {first.role_action}–{last.role_action} |"
        )
        flat += group.count
    return "\n".join(rows)
