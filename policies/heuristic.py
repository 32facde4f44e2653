"""Per-role rules and their two compositions: ``heuristic`` (flat track: the team's
priorities serialised into one action per tick, :func:`policies.heuristic_kernel.flat_action`)
and ``team_heuristic`` (team track: every role plays its own rule each tick).

Each rule reads only its role's observation blocks and proposes one action with
a priority; priorities are what make the flat composition pick the most
valuable action when only one is allowed per tick (docs/reference-policies.md). The rules
are written once, compiled, in :mod:`policies.heuristic_kernel` (where the planner's rollouts
also call them); this module is their Python face: named blocks or a role's AEC vector in, an
action out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from hospital_marl.core.actions import N_FLAT_ACTIONS, ROLE_FLAT, ROLES
from hospital_marl.envs.observations import BLOCK_BY_KEY, BLOCKS, OFFSETS, PRESENCE_SIZE, ROLE_BLOCKS
from policies import heuristic_kernel as hk
from policies.base import BasePolicy, flat_mask_from_role

Blocks = Mapping[str, np.ndarray]
Proposal = tuple[int, float]  # (flat action, priority); priority 0 = nothing to do

_COMPOSED_KEYS = tuple(b.key for b in BLOCKS)  # the global state layout, block by block


def _size(keys: tuple[str, ...]) -> int:
    return sum(int(np.prod(BLOCK_BY_KEY[key].shape)) for key in keys)


_SIZE = {keys: _size(keys) for keys in (_COMPOSED_KEYS, *ROLE_BLOCKS.values())}


def _vector(blocks: Blocks, keys: tuple[str, ...]) -> np.ndarray:
    """The named blocks concatenated (float32, the observation dtype) in ``keys`` order."""
    vector = np.concatenate([np.asarray(blocks[key], np.float32).ravel() for key in keys])
    if vector.shape != (_SIZE[keys],):  # the compiled rules read by offset: never past the end
        shapes = {key: np.shape(blocks[key]) for key in keys}
        raise ValueError(f"observation blocks of the wrong shapes: {shapes}")
    return vector


def _mask(mask: np.ndarray) -> np.ndarray:
    mask = np.asarray(mask, dtype=np.bool_)
    if mask.shape != (N_FLAT_ACTIONS,):
        raise ValueError(f"a flat action mask has {N_FLAT_ACTIONS} entries, got shape {mask.shape}")
    return mask


def _role_rule(role: str) -> Callable[[Blocks, np.ndarray], Proposal]:
    r, keys, offsets = hk.ROLE_NUMBER[role], ROLE_BLOCKS[role], hk.ROLE_OFFSETS[role]

    def rule(blocks: Blocks, mask: np.ndarray) -> Proposal:
        flat, priority = hk.role_rule(r, _vector(blocks, keys), offsets, _mask(mask))
        return int(flat), float(priority)

    rule.__name__ = f"{role}_rule"
    rule.__doc__ = (
        f"The {role}'s rule on its observation blocks (compiled: policies.heuristic_kernel.{role})."
    )
    return rule


ROLE_RULES: dict[str, Callable[[Blocks, np.ndarray], Proposal]] = {role: _role_rule(role) for role in ROLES}
"""Each role's rule on named blocks (its own role's keys) and a flat mask: (flat action, priority)."""
triage_rule, bed_manager_rule, ventilator_rule = (ROLE_RULES[r] for r in ROLES)


def flat_heuristic_action(blocks: Blocks, mask: np.ndarray) -> int:
    """The flat heuristic's action (the team's priorities serialised, see
    :func:`policies.heuristic_kernel.flat_action`), from a composed observation (every block)
    and the 39-entry mask."""
    return int(hk.flat_action(_vector(blocks, _COMPOSED_KEYS), OFFSETS, _mask(mask)))


def pressure(blocks: Blocks) -> tuple[bool, bool]:
    """(the ICU is full while a critical patient waits or lies in a general bed; the general ward
    is full while a serious patient waits and its mildest patient is severity 1): the rules'
    conditions for freeing a bed (compiled: ``policies.heuristic_kernel._pressure``), from the
    bed manager's blocks."""
    icu_needed, ward_needed = hk._pressure(
        _vector(blocks, ROLE_BLOCKS["bed_manager"]), hk.ROLE_OFFSETS["bed_manager"]
    )
    return bool(icu_needed), bool(ward_needed)


def role_vector(role: str, observation: np.ndarray) -> np.ndarray:
    """A role's AEC observation as the compiled rules read it (float32, contiguous), checked."""
    if role not in hk.ROLE_NUMBER:
        raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    vector = np.ascontiguousarray(observation, np.float32)  # the role's AEC vector, as laid out
    size = _SIZE[ROLE_BLOCKS[role]]
    if vector.shape == (size + PRESENCE_SIZE,):  # the "masked" layout: the same blocks, then presence
        return vector[:size]
    if vector.shape != (size,):
        raise ValueError(
            f"{role}'s observation has {size} entries (or {size + PRESENCE_SIZE}), got {vector.shape}"
        )
    return vector


def team_heuristic_action(role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
    """The role's rule on its AEC observation vector and role mask: a flat action (the no-op
    or one of the role's own; ``ROLE_FLAT[role].index`` maps it to the role's action)."""
    vector = role_vector(role, observation)
    mask = flat_mask_from_role(role, action_mask)
    flat, _ = hk.role_rule(hk.ROLE_NUMBER[role], vector, hk.ROLE_OFFSETS[role], mask)
    return int(flat)


class HeuristicPolicy(BasePolicy):
    """Flat track: the team's priorities serialised into one action per tick.

    On the team track every role plays its own rule (that is ``team_heuristic``).
    """

    name = "heuristic"
    tracks: tuple[str, ...] = ("flat", "team")

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return flat_heuristic_action(observation, action_mask)

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        flat = team_heuristic_action(role, observation, action_mask)  # checks the role first
        return ROLE_FLAT[role].index(flat)


class TeamHeuristicPolicy(HeuristicPolicy):
    """Team track: each role's rule, every tick."""

    name = "team_heuristic"
    tracks = ("team",)
