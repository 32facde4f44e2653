"""Per-role rules and their two compositions: ``heuristic`` (flat track: the single
most valuable role action per tick) and ``team_heuristic`` (team track: every
role plays its own rule each tick).

Each rule reads only its role's observation blocks and proposes one action with
a priority; priorities are what make the flat composition pick the most
valuable action when only one is allowed per tick.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from hospital_marl.core.actions import FLAT_OF, NOOP, ROLE_FLAT, ROLES, Kind
from policies.base import BasePolicy, flat_mask_from_role, role_blocks

Blocks = Mapping[str, np.ndarray]
Proposal = tuple[int, float]  # (flat action, priority); priority 0 = nothing to do

# Priorities: life first (ventilate, ICU for the critical, freeing ICU for them),
# then flow (admissions by severity), then housekeeping.
VENTILATE = 100.0
STEP_DOWN_UNDER_PRESSURE = 98.0
ADMIT_CRITICAL_ICU = 90.0
TRANSFER_CRITICAL = 85.0
ADMIT_CRITICAL_GENERAL = 70.0
ADMIT = 60.0
STEP_DOWN = 50.0
EARLY_DISCHARGE_UNDER_PRESSURE = 40.0


def _occupied_queue(blocks: Blocks) -> list[tuple[int, int, int]]:
    """(slot, severity, wait) of visible waiting patients, most severe then longest waiting first."""
    q = blocks["waiting_queue"]
    rows = [(slot, int(q[slot, 0]), int(q[slot, 2])) for slot in range(len(q)) if q[slot, 0] > 0]
    return sorted(rows, key=lambda r: (-r[1], -r[2], r[0]))


def triage_rule(blocks: Blocks, mask: np.ndarray) -> Proposal:
    """Most severe first; critical patients to ICU (a general bed if no ICU bed is free)."""
    for slot, sev, _ in _occupied_queue(blocks):
        if sev >= 4:
            icu, general = FLAT_OF[(Kind.ADMIT_ICU, slot)], FLAT_OF[(Kind.ADMIT_GENERAL, slot)]
            if mask[icu]:
                return icu, ADMIT_CRITICAL_ICU + sev
            if mask[general]:
                return general, ADMIT_CRITICAL_GENERAL + sev
        else:
            general = FLAT_OF[(Kind.ADMIT_GENERAL, slot)]
            if mask[general]:
                return general, ADMIT + sev
    return NOOP, 0.0


def bed_manager_rule(blocks: Blocks, mask: np.ndarray) -> Proposal:
    """Step down ready ICU patients, move deteriorating general patients to ICU,
    early-discharge the mildest general patient only when critical patients wait for beds."""
    board = blocks["bed_occupancy"]
    free_general, free_icu = blocks["capacity"][0], blocks["capacity"][1]
    queue_sev = blocks["waiting_queue"][:, 0]
    critical_waiting = bool((queue_sev >= 4).any())
    critical_on_board = bool((board >= 4).any())
    icu_needed = free_icu == 0 and (critical_waiting or critical_on_board)
    best: Proposal = (NOOP, 0.0)
    for j, ready in enumerate(blocks["icu_ready"]):
        action = FLAT_OF[(Kind.DISCHARGE_ICU, j)]
        if ready and mask[action]:
            best = max(best, (action, STEP_DOWN_UNDER_PRESSURE if icu_needed else STEP_DOWN), key=_priority)
            break
    for k in range(5):
        action = FLAT_OF[(Kind.TRANSFER_ICU, k)]
        if board[k] >= 4 and mask[action]:
            best = max(best, (action, TRANSFER_CRITICAL + board[k]), key=_priority)
            break
    n_board = int((board > 0).sum())
    if free_general == 0 and n_board and (queue_sev >= 3).any() and board[n_board - 1] == 1:
        action = FLAT_OF[(Kind.EARLY_DISCHARGE, 0)]
        if mask[action]:
            best = max(best, (action, EARLY_DISCHARGE_UNDER_PRESSURE), key=_priority)
    return best


def ventilator_rule(blocks: Blocks, mask: np.ndarray) -> Proposal:
    """A free ventilator only when an ICU patient needs one (it goes to them): never waste one."""
    needing = blocks["icu_needs_vent"] * (1 - blocks["icu_on_vent"])
    if not needing.any():
        return NOOP, 0.0
    for v in range(3):
        action = FLAT_OF[(Kind.VENTILATE, v)]
        if mask[action]:
            return action, VENTILATE + float((blocks["icu_occupancy"] * needing).max())
    return NOOP, 0.0


def _priority(p: Proposal) -> float:
    return p[1]


ROLE_RULES: dict[str, Callable[[Blocks, np.ndarray], Proposal]] = {
    "triage": triage_rule,
    "bed_manager": bed_manager_rule,
    "ventilator_officer": ventilator_rule,
}
assert set(ROLE_RULES) == set(ROLES)


def flat_heuristic_action(blocks: Blocks, mask: np.ndarray) -> int:
    """The single most valuable role action (ties: role order)."""
    best: Proposal = (NOOP, 0.0)
    for role in ROLES:
        proposal = ROLE_RULES[role](blocks, mask)
        if proposal[1] > best[1]:
            best = proposal
    return best[0]


class HeuristicPolicy(BasePolicy):
    """Flat track: per-role rules, the highest-priority proposal wins the tick.

    On the team track every role plays its own rule (that is ``team_heuristic``).
    """

    name = "heuristic"
    tracks = ("flat", "team")

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return flat_heuristic_action(observation, np.asarray(action_mask, dtype=bool))

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        flat, _ = ROLE_RULES[role](role_blocks(role, observation), flat_mask_from_role(role, action_mask))
        return ROLE_FLAT[role].index(flat) if flat != NOOP else 0


class TeamHeuristicPolicy(HeuristicPolicy):
    """Team track: each role's rule, every tick."""

    name = "team_heuristic"
    tracks = ("team",)
