"""Behaviour policies of the recorded datasets, batched, with their action probabilities.

A behaviour is a per-step mixture of rules: ``heuristic`` (one rule), ``heuristic:eps=0.2``
(``(1 - eps)`` the rule, ``eps`` uniform over the valid actions: ``masked_random``) or
``mix:heuristic=0.5,random=0.5`` (weights normalised). Its probability of an action in a state is
``sum_i w_i pi_i(a | s)``, where a deterministic rule puts probability 1 on its action,
``masked_random`` ``1 / valid`` on each valid action and ``random`` ``1 / n`` on every action.
That is the probability the datasets log next to each action (importance sampling needs it),
and the same function draws the action, so the two cannot disagree.

The rules read the global state vector (the composed observation's blocks concatenated, as
:data:`hospital_marl.envs.observations.OFFSETS` lays them out) and the flat mask, a whole batch
per call: the deterministic ones are compiled loops over rows calling the package's own rules
(:func:`policies.heuristic_kernel.flat_action`, ``role_rule``) or, for ``greedy`` and
``fifo_severity``, the same rule as :mod:`policies.baselines` (tests check action for action).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from hospital_marl.core.actions import (
    FLAT_OF,
    N_FLAT_ACTIONS,
    NOOP,
    ROLE_ACTION_COUNTS,
    ROLE_FLAT,
    ROLES,
    Kind,
)
from hospital_marl.core.constants import CRITICAL_SEVERITY
from hospital_marl.core.types import QUEUE_SLOTS
from hospital_marl.envs.observations import BLOCK_OFFSETS, BLOCKS, OFFSETS
from policies import heuristic_kernel as hk
from policies.base import BasePolicy, load_kwargs
from policies.heuristic import team_heuristic_action

FLAT_RULES = ("random", "masked_random", "greedy", "fifo_severity", "heuristic")
"""Rules a flat (``Discrete(39)``) behaviour mixes."""
TEAM_RULES = ("random", "masked_random", "team_heuristic")
"""Rules a team (``MultiDiscrete([21, 16, 4])``) behaviour mixes (each role draws on its own)."""
DETERMINISTIC = ("greedy", "fifo_severity", "heuristic", "team_heuristic")

_QUEUE = BLOCK_OFFSETS["waiting_queue"][0]
_ADMIT_GENERAL = np.array([FLAT_OF[(Kind.ADMIT_GENERAL, s)] for s in range(QUEUE_SLOTS)], np.int64)
_ADMIT_ICU = np.array([FLAT_OF[(Kind.ADMIT_ICU, s)] for s in range(QUEUE_SLOTS)], np.int64)
_KEYS = tuple(b.key for b in BLOCKS)
_ROLE_FLAT = {role: np.array(ROLE_FLAT[role], np.int64) for role in ROLES}
_FLAT_TO_ROLE = {role: {flat: i for i, flat in enumerate(ROLE_FLAT[role])} for role in ROLES}
_ROLE_LOOKUP = {}
for _role in ROLES:
    _table = np.full(N_FLAT_ACTIONS, -1, np.int64)
    _table[_ROLE_FLAT[_role]] = np.arange(len(_ROLE_FLAT[_role]))
    _ROLE_LOOKUP[_role] = _table


@njit(nogil=True)
def _heuristic_rows(obs, off, masks, out):  # pragma: no cover - compiled
    for e in range(obs.shape[0]):
        out[e] = hk.flat_action(obs[e], off, masks[e])


@njit(nogil=True)
def _fifo_rows(obs, masks, queue, general, icu, critical, out):  # pragma: no cover - compiled
    """policies.baselines.FifoSeverityPolicy, row by row: the most severe waiting patient (ties:
    the first slot) to the adequate bed kind, else the other kind; slots in that order."""
    n = general.shape[0]
    for e in range(obs.shape[0]):
        out[e] = 0
        taken = np.zeros(n, np.bool_)
        for _ in range(n):
            best, best_sev = -1, 0.0
            for slot in range(n):
                sev = obs[e, queue + 3 * slot]
                if not taken[slot] and (best < 0 or sev > best_sev):
                    best, best_sev = slot, sev
            if best_sev <= 0:
                break
            taken[best] = True
            first, second = icu[best], general[best]
            if best_sev < critical:
                first, second = second, first
            if masks[e, first]:
                out[e] = first
                break
            if masks[e, second]:
                out[e] = second
                break


@njit(nogil=True)
def _team_rows(obs, off, masks, role_masks, out):  # pragma: no cover - compiled
    """Each role's rule on the global state and its own columns of the flat mask (flat actions)."""
    for e in range(obs.shape[0]):
        for r in range(3):
            out[e, r] = hk.role_rule(r, obs[e], off, masks[e] & role_masks[r])[0]


_ROLE_MASKS = np.zeros((len(ROLES), N_FLAT_ACTIONS), np.bool_)
for _r, _role in enumerate(ROLES):
    _ROLE_MASKS[_r, _ROLE_FLAT[_role]] = True
assert [hk.ROLE_NUMBER[r] for r in ROLES] == [0, 1, 2], "role_rule numbers roles in ROLES order"


def flat_rule_actions(rule: str, states: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """A deterministic flat rule's action for every row of ``states`` (B, 106) and ``masks`` (B, 39)."""
    states = np.ascontiguousarray(states, np.float32)
    masks = np.ascontiguousarray(masks, np.bool_)
    out = np.empty(len(states), np.int64)
    if rule == "greedy":
        valid = masks[:, NOOP + 1 :]
        return np.where(valid.any(axis=1), valid.argmax(axis=1) + NOOP + 1, NOOP).astype(np.int64)
    if rule == "fifo_severity":
        _fifo_rows(states, masks, _QUEUE, _ADMIT_GENERAL, _ADMIT_ICU, float(CRITICAL_SEVERITY), out)
        return out
    if rule == "heuristic":
        _heuristic_rows(states, OFFSETS, masks, out)
        return out
    raise ValueError(f"no deterministic flat rule {rule!r}; rules: greedy, fifo_severity, heuristic")


def team_rule_actions(states: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """The team heuristic's role actions (B, 3) from the global state and the flat mask (B, 39):
    each role's rule on the state at the start of the tick."""
    states = np.ascontiguousarray(states, np.float32)
    flat = np.empty((len(states), len(ROLES)), np.int64)
    _team_rows(states, OFFSETS, np.ascontiguousarray(masks, np.bool_), _ROLE_MASKS, flat)
    return np.stack([_ROLE_LOOKUP[role][flat[:, r]] for r, role in enumerate(ROLES)], axis=1)


def _one_hot(actions: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((len(actions), n))
    out[np.arange(len(actions)), actions] = 1.0
    return out


def _valid_uniform(masks: np.ndarray) -> np.ndarray:
    masks = masks.astype(np.float64)
    return masks / np.maximum(masks.sum(axis=1, keepdims=True), 1.0)  # an ended episode's mask: none


@dataclass(frozen=True)
class Behaviour:
    """A mixture of rules on one track: ``components`` are (rule, weight), weights summing to 1."""

    components: tuple[tuple[str, float], ...]
    track: str = "flat"

    @property
    def name(self) -> str:
        """A canonical spec: ``heuristic``, ``heuristic:eps=0.2`` or ``mix:a=0.5,b=0.5``."""
        if len(self.components) == 1:
            return self.components[0][0]
        (rule, _), (other, eps) = self.components[0], self.components[-1]
        if len(self.components) == 2 and other == "masked_random" and rule != "masked_random":
            return f"{rule}:eps={eps:g}"
        return "mix:" + ",".join(f"{r}={w:g}" for r, w in self.components)

    @property
    def slug(self) -> str:
        """The name as a dataset-id part (letters, digits, ``_``): weights in percent
        (``heuristic_eps20``, ``mix_heuristic50_random50``)."""
        pct = {rule: round(100 * w) for rule, w in self.components}
        if self.name.startswith("mix:"):
            return "mix_" + "_".join(f"{r}{pct[r]}" for r, _ in self.components)
        if ":eps=" in self.name:
            return f"{self.components[0][0]}_eps{pct['masked_random']}"
        return self.name

    @property
    def deterministic(self) -> bool:
        return len(self.components) == 1 and self.components[0][0] in DETERMINISTIC

    def probabilities(self, states: np.ndarray, masks: np.ndarray) -> Any:
        """Flat: (B, 39) action probabilities. Team: a tuple of (B, n_role) per role (the roles draw
        independently; ``masks`` is the flat mask (B, 39), each role reads its own columns)."""
        masks = np.asarray(masks, np.bool_)
        if self.track == "flat":
            probs = np.zeros((len(states), N_FLAT_ACTIONS))
            for rule, weight in self.components:
                if rule == "random":
                    probs += weight / N_FLAT_ACTIONS
                elif rule == "masked_random":
                    probs += weight * _valid_uniform(masks)
                else:
                    probs += weight * _one_hot(flat_rule_actions(rule, states, masks), N_FLAT_ACTIONS)
            return probs
        out = [np.zeros((len(states), ROLE_ACTION_COUNTS[role])) for role in ROLES]
        team = None
        for rule, weight in self.components:
            for r, role in enumerate(ROLES):
                n = ROLE_ACTION_COUNTS[role]
                if rule == "random":
                    out[r] += weight / n
                elif rule == "masked_random":
                    out[r] += weight * _valid_uniform(masks[:, _ROLE_FLAT[role]])
                else:
                    team = team_rule_actions(states, masks) if team is None else team
                    out[r] += weight * _one_hot(team[:, r], n)
        return tuple(out)

    def sample(self, states: np.ndarray, masks: np.ndarray, rng: np.random.Generator) -> tuple:
        """Actions drawn from :meth:`probabilities` and the probability of each drawn action
        (flat: ``(B,)`` actions; team: ``(B, 3)``, the product of the roles' probabilities)."""
        probs = self.probabilities(states, masks)
        if self.track == "flat":
            actions = _draw(probs, rng)
            return actions, probs[np.arange(len(actions)), actions]
        actions = np.stack([_draw(p, rng) for p in probs], axis=1)
        rows = np.arange(len(actions))
        joint = np.prod([p[rows, actions[:, r]] for r, p in enumerate(probs)], axis=0)
        return actions, joint


def _draw(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row by inverse CDF (a deterministic row: exactly its action)."""
    cdf = np.cumsum(probs, axis=1)
    u = rng.random((len(probs), 1)) * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=1), probs.shape[1] - 1).astype(np.int64)


def parse_behaviour(spec: str, track: str = "flat") -> Behaviour:
    """``rule``, ``rule:eps=E`` or ``mix:rule=w,...`` as a :class:`Behaviour` (clear error otherwise)."""
    rules = FLAT_RULES if track == "flat" else TEAM_RULES
    if track not in ("flat", "team"):
        raise ValueError(f"track must be 'flat' or 'team', got {track!r}")
    name, kwargs = load_kwargs(spec)
    if name == "mix":
        parts = [(rule, float(w)) for rule, w in kwargs.items()]
    elif name in rules:
        eps = kwargs.pop("eps", 0.0)
        if kwargs:
            raise ValueError(f"behaviour {spec!r}: only eps=... is accepted after {name}")
        if not isinstance(eps, float | int) or not 0 <= eps <= 1:
            raise ValueError(f"behaviour {spec!r}: eps must be a number in [0, 1]")
        parts = [(name, 1.0 - eps), ("masked_random", float(eps))] if eps else [(name, 1.0)]
    else:
        raise ValueError(f"unknown behaviour {spec!r} on the {track} track; rules: {', '.join(rules)}")
    bad = [rule for rule, _ in parts if rule not in rules]
    if bad or not parts or any(w < 0 for _, w in parts) or sum(w for _, w in parts) <= 0:
        raise ValueError(f"behaviour {spec!r}: a mixture of {', '.join(rules)} with weights >= 0")
    total = sum(w for _, w in parts)
    return Behaviour(tuple((rule, w / total) for rule, w in parts if w > 0), track)


def state_vector(observation: Mapping[str, np.ndarray]) -> np.ndarray:
    """The global state vector (106,) or (B, 106) of a composed observation (either layout)."""
    blocks = [np.asarray(observation[key], np.float32) for key in _KEYS]
    lead = np.shape(observation["time_step"])[:-1]  # (1,) for one env, (B, 1) for a batch
    return np.concatenate([b.reshape(*lead, -1) for b in blocks], axis=-1)


class BehaviourPolicy(BasePolicy):
    """A :class:`Behaviour` as a package policy (the grader grades it on held-out days). Flat: one
    action per tick from the composed observation. Team: the grader's team track asks each role in
    turn (AEC), so every role plays its rule on the state it sees; the recorded team datasets draw
    all three from the state at the start of the tick (the same rules; the states can differ by the
    earlier roles' actions of that tick)."""

    def __init__(self, behaviour: Behaviour) -> None:
        super().__init__()
        self.behaviour = behaviour
        self.name = behaviour.name
        self.tracks = (behaviour.track,)

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        state = state_vector(observation)[None]
        action, _ = self.behaviour.sample(state, np.asarray(action_mask, bool)[None], self.rng)
        return int(action[0])

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        probs = np.zeros(ROLE_ACTION_COUNTS[role])
        for rule, weight in self.behaviour.components:
            if rule == "random":
                probs += weight / len(probs)
            elif rule == "masked_random":
                probs += weight * _valid_uniform(np.asarray(action_mask, bool)[None])[0]
            else:
                probs[ROLE_FLAT[role].index(team_heuristic_action(role, observation, action_mask))] += weight
        return int(_draw(probs[None], self.rng)[0])


__all__ = [
    "DETERMINISTIC",
    "FLAT_RULES",
    "TEAM_RULES",
    "Behaviour",
    "BehaviourPolicy",
    "flat_rule_actions",
    "parse_behaviour",
    "state_vector",
    "team_rule_actions",
]
