"""Scripted radiotherapy baselines (SPEC-RT §6).

- ``random``: uniform over the 10 actions, valid or not (invalid ones waste a step);
- ``masked_random``: uniform over the valid actions;
- ``evenly_spaced``: the original's heuristic done properly: ``n`` beams 360°/n apart
  (turned onto the exact spacing), then the weights nudged down (up) one beam at a
  time while the tumour is overdosed (D95 > 1.05 Rx) or short (D95 < 0.97 Rx), then lock;
- ``six_full``: the original's fixed script: six beams at full weight, then lock;
- ``anatomy_aware``: what a planner does at the console: seven evenly spaced beams turned to
  where they cross the OARs least (entry and exit side, by priority, from the observation's
  ``anatomy`` block), the weights trimmed, then one edit at a time (aperture, weight, a turn away
  from the OARs) kept when the score, rebuilt from the observation, rises and undone otherwise.

The scripted ones read only the observation (beam table, tumour status, anatomy), never the phantom.
Weight trimming: one notch per beam in turn, down while the tumour has a hot spot (D2 > 1.07 Rx),
up while D98 is short of its goal; the plan is locked when neither holds or the direction flips.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hospital_marl.radiotherapy.core.calibration import evenly_spaced_angles
from hospital_marl.radiotherapy.core.dose import ANGLE_STEP, MAX_MARGIN, N_ANGLES
from hospital_marl.radiotherapy.core.metrics import (
    D98_GOAL,
    D98_MAJOR,
    PRIORITY_WEIGHTS,
    beam_term,
    cold_term,
    oar_fraction,
    score_from_terms,
)
from hospital_marl.radiotherapy.core.plan import (
    ADD,
    LOCK,
    MAX_BEAMS,
    N_ACTIONS,
    NARROW,
    NEW_MARGIN,
    NEXT,
    REMOVE,
    TURN_CCW,
    TURN_CW,
    WEIGHT_DOWN,
    WEIGHT_UP,
    WIDEN,
)
from policies.radiotherapy.base import BaseRTPolicy


class RandomRTPolicy(BaseRTPolicy):
    """Uniform over every action (like the original's random agent)."""

    name = "random"

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return int(self.rng.integers(N_ACTIONS))


class MaskedRandomRTPolicy(BaseRTPolicy):
    """Uniform over the valid actions."""

    name = "masked_random"

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        valid = np.flatnonzero(action_mask)
        return int(valid[self.rng.integers(len(valid))])


def _turn_towards(current: int, target: int) -> int | None:
    """TURN_CW / TURN_CCW on the shorter way from grid angle ``current`` to ``target``; None if there."""
    delta = (target - current) % N_ANGLES
    if delta == 0:
        return None
    return TURN_CW if delta <= N_ANGLES // 2 else TURN_CCW


class EvenlySpacedPolicy(BaseRTPolicy):
    """``n_beams`` evenly spaced beams, weights trimmed to the prescription, lock."""

    name = "evenly_spaced"

    def __init__(self, n_beams: int = 7, low: float = 0.97, margin: int = NEW_MARGIN) -> None:
        super().__init__()
        if not isinstance(n_beams, int) or not 1 <= n_beams <= MAX_BEAMS:
            raise ValueError(f"n_beams must be an int in [1, {MAX_BEAMS}], got {n_beams!r}")
        if not isinstance(margin, int) or not 0 <= margin <= MAX_MARGIN:
            raise ValueError(f"margin must be an int in [0, {MAX_MARGIN}], got {margin!r}")
        self.n_beams = n_beams
        self.low = low
        self.margin = margin
        self.targets = [a // ANGLE_STEP for a in evenly_spaced_angles(n_beams)]
        self._trimmed = False
        self._direction: int | None = None

    def reset(self, seed: int | None = None, plan=None) -> None:
        super().reset(seed, plan)
        self._trimmed = False
        self._direction = None

    def choose_angles(self, observation: Mapping[str, np.ndarray]) -> list[int]:
        """The grid angles of the beams (here: evenly spaced, whatever the patient)."""
        return self.targets

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        beams = observation["beams"]
        present = round(float(beams[:, 2].sum()))
        if not present:
            self._pool = list(self.choose_angles(observation))
            self._assigned: dict[int, int] = {}
        active = int(np.argmax(beams[:, 3])) if present else -1
        if present and present <= self.n_beams:
            current = round(float(beams[active, 0]) * N_ANGLES) % N_ANGLES
            if active not in self._assigned and self._pool:  # the nearest free target: fewest turns
                near = min(self._pool, key=lambda t: min((t - current) % N_ANGLES, (current - t) % N_ANGLES))
                self._pool.remove(near)
                self._assigned[active] = near
            turn = _turn_towards(current, self._assigned.get(active, current))
            if turn is not None:
                return turn
            margin = round(float(beams[active, 4]) * MAX_MARGIN)
            if margin != self.margin:
                return NARROW if margin > self.margin else WIDEN
        if present < self.n_beams:
            return ADD
        status = observation["tumour_status"]
        short = float(status[1]) > 0 and 1.0 - float(status[1]) < self.low  # D98 / 0.95 below `low`
        want = WEIGHT_DOWN if float(status[2]) > 0 else WEIGHT_UP if short else None
        if want is None or (self._direction is not None and want != self._direction):
            return LOCK
        if self._trimmed and action_mask[NEXT]:
            self._trimmed = False  # one notch per beam in turn, so the weights stay even
            return NEXT
        if action_mask[want]:
            self._trimmed = True
            self._direction = want
            return want
        return LOCK


PRIORITY_COST = {1: 4.0, 2: 2.0, 3: 1.0}
"""How much a beam through an OAR costs, by priority (the anatomy-aware baseline's)."""


def observed_score(observation: Mapping[str, np.ndarray]) -> float:
    """The plan's score rebuilt from the observation alone (what a planner reads off the DVH
    panel): every term of :func:`~hospital_marl.radiotherapy.core.metrics.score_terms` is in it
    (V95, the D98 shortfall, the hot-spot term, CI, D2, the beams, each OAR's priority, worst
    constraint ratio and failure flag), combined by the score's own
    :func:`~hospital_marl.radiotherapy.core.metrics.score_from_terms`; equal to the env's score
    up to the observation's float32 rounding."""
    status = observation["tumour_status"].astype(np.float64)
    oars = observation["oar_status"].astype(np.float64)
    present = observation["oar_present"] > 0
    priority = np.rint(oars[:, 0] * 3).astype(int)
    weights = [PRIORITY_WEIGHTS.get(int(p), 0.0) if ok else 0.0 for p, ok in zip(priority, present)]
    total = sum(weights)
    oar = (
        sum(w * oar_fraction(2.0 * r, 1.0) for w, r in zip(weights, oars[:, 1]) if w) / total
        if total
        else 1.0
    )
    n_beams = round(float(observation["beams"][:, 2].sum()))
    d98 = D98_GOAL * (1.0 - status[1])  # the observation holds 1 − D98/0.95 while D98 < 0.95
    terms = {
        "coverage": 0.5 * (1.0 - status[1]) + 0.5 * (1.0 - status[0]),
        "oar": oar,
        "ci": status[4],
        "beams": beam_term(n_beams),
        "hot": status[2],
        "short": cold_term(d98),
    }
    fails = present & (oars[:, 3] > 0)
    if (fails & (priority == 1)).any() or status[2] >= 1.0 or d98 < D98_MAJOR:
        tier = "major"
    else:
        tier = "minor" if fails.any() else "clean"
    return score_from_terms(terms, tier)


def _anatomy_cost(observation: Mapping[str, np.ndarray]) -> np.ndarray:
    """(N_ANGLES,) how much a beam at each grid angle crosses the OARs, entering or leaving,
    weighted by priority (read from the observation's ``anatomy`` block)."""
    anatomy, status = observation["anatomy"], observation["oar_status"]
    grid = np.arange(N_ANGLES) * 2 * np.pi / N_ANGLES
    cost = np.zeros(N_ANGLES)
    for j in np.flatnonzero(observation["oar_present"] > 0):
        towards = np.arctan2(2 * anatomy[j, 1] - 1, 2 * anatomy[j, 0] - 1)  # gantry angle at the OAR
        distance = max(float(anatomy[j, 2]) * 32, 1.0)
        width = np.arctan2(6.0, distance)  # the field's half width (voxels) seen from the OAR
        priority = round(float(status[j, 0]) * 3)
        for side in (0.0, np.pi):  # the beam enters through it, or leaves through it
            delta = np.angle(np.exp(1j * (grid + side - towards)))
            cost += PRIORITY_COST.get(priority, 1.0) * np.exp(-(delta**2) / (2 * width**2))
    return cost


_INVERSE = {TURN_CW: TURN_CCW, TURN_CCW: TURN_CW, WEIGHT_UP: WEIGHT_DOWN, WEIGHT_DOWN: WEIGHT_UP}
_INVERSE.update({WIDEN: NARROW, NARROW: WIDEN})


class AnatomyAwarePolicy(EvenlySpacedPolicy):
    """The ``anatomy_aware`` baseline of SPEC-RT §8: what a planner does at the console, reading
    only the observation (the CT's anatomy, the DVH panel, the beam table).

    1. Seven evenly spaced beams, the template turned (by at most half its spacing) to where
       the beams cross the OARs least, entering or leaving, weighted by priority; then the
       weights trimmed to coverage (as ``evenly_spaced``).
    2. Then, with the steps left, one edit at a time on the active beam, kept if the plan's
       score (rebuilt from the observation: :func:`observed_score`) rises and undone otherwise:
       narrow or widen its aperture, trim its weight, turn it away from the OARs (the turn whose
       anatomy cost falls); the next beam when none helps; lock after a full round without a
       gain or when the steps run short (an undo must still fit).
    """

    name = "anatomy_aware"

    def __init__(self, n_beams: int = 7, low: float = 0.97, margin: int = NEW_MARGIN) -> None:
        super().__init__(n_beams, low, margin)

    def reset(self, seed: int | None = None, plan=None) -> None:
        super().reset(seed, plan)
        self._steps = 0
        self._max_steps: int | None = None
        self._climbing = False
        self._best = 0.0
        self._trial: int | None = None
        self._tried: list[int] = []  # edits tried (and undone) on the active beam since it last changed
        self._idle = 0  # beams visited in a row without a gain
        self._kept = False  # re-entered by :meth:`reenter`: template beams left off their angle are revisited

    def memory(self) -> dict[str, object]:
        """A copy of what the policy remembers (to :meth:`reenter` from, when the action it is about to
        propose is not the one played)."""
        return {
            k: v.copy() if isinstance(v, (list, dict)) else v
            for k, v in vars(self).items()
            if k.startswith("_")
        }

    def reenter(self, memory: dict[str, object], observation: Mapping[str, np.ndarray], action: int) -> None:
        """Continue after another policy played ``action`` where this one (with ``memory``, taken just
        before it proposed) would have played something else: its memory is kept and only what the
        action changed is re-derived. In the build phase the template and its assignment stay (after a
        ``REMOVE`` the beams present are re-matched to the template, as :func:`resume` does), beams present
        but never placed get the nearest free template angle and are visited (``NEXT``) and turned onto it
        before the next beam or the trimming, whose direction and notch are kept; in the edit phase the
        trial in flight is dropped and the plan as it now stands is the one to beat."""
        vars(self).update({k: v.copy() if isinstance(v, (list, dict)) else v for k, v in memory.items()})
        self._steps += 1  # the step the other policy's action took
        self._kept = True
        if self._climbing:
            self._trial, self._tried, self._idle = None, [], 0
            self._best = observed_score(observation)
            return
        beams = observation["beams"]
        present = round(float(beams[:, 2].sum()))
        if not present:
            return
        if action == REMOVE or not hasattr(self, "_pool"):
            self._pool, self._assigned = list(self.choose_angles(observation)), {}
        for i in range(min(present, self.n_beams)):
            if i in self._assigned or not self._pool:
                continue
            current = round(float(beams[i, 0]) * N_ANGLES) % N_ANGLES
            near = min(self._pool, key=lambda t: min((t - current) % N_ANGLES, (current - t) % N_ANGLES))
            self._pool.remove(near)
            self._assigned[i] = near

    def _off_template(self, beams: np.ndarray, i: int) -> bool:
        """Beam ``i`` is assigned a template angle and is not on it (or not at the template's margin)."""
        if i not in self._assigned:
            return False
        current = round(float(beams[i, 0]) * N_ANGLES) % N_ANGLES
        return current != self._assigned[i] or round(float(beams[i, 4]) * MAX_MARGIN) != self.margin

    def choose_angles(self, observation: Mapping[str, np.ndarray]) -> list[int]:
        cost = _anatomy_cost(observation)
        spacing = N_ANGLES / self.n_beams
        best = min(
            range(int(spacing // 2) + 1),
            key=lambda shift: (sum(cost[(t + shift) % N_ANGLES] for t in self.targets), shift),
        )
        shifts = [best] if best == 0 else [best, -best]
        best = min(shifts, key=lambda s: (sum(cost[(t + s) % N_ANGLES] for t in self.targets), -s))
        return [(t + best) % N_ANGLES for t in self.targets]

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        action = self._act(observation, action_mask)
        self._steps += 1
        return action

    def _left(self, observation: Mapping[str, np.ndarray]) -> int | None:
        """Steps left before truncation (the limit read off ``step_fraction``), None if unknown."""
        if self._max_steps is None and self._steps:
            self._max_steps = round(self._steps / float(observation["step_fraction"][0]))
        return None if self._max_steps is None else self._max_steps - self._steps

    def _act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        left = self._left(observation)
        if not self._climbing and self._kept and action_mask[NEXT]:
            beams = observation["beams"]
            present = round(float(beams[:, 2].sum()))
            active = int(np.argmax(beams[:, 3]))
            if (
                present <= self.n_beams
                and not self._off_template(beams, active)
                and any(self._off_template(beams, i) for i in range(present))
            ):
                return NEXT  # a beam placed by someone else: turn it onto the template before going on
        if not self._climbing:
            action = super().act(observation, action_mask)
            if action != LOCK:
                return action
            self._climbing = True
            self._best = observed_score(observation)
        score = observed_score(observation)
        if self._trial is not None:
            trial, self._trial = self._trial, None
            if score > self._best + 1e-6:
                self._best, self._tried, self._idle = score, [], 0
            else:
                self._tried.append(trial)
                return _INVERSE[trial]
        if left is not None and left < 3:  # a trial and its undo must fit, or lock now
            return LOCK
        candidates = [e for e in self._edits(observation) if e not in self._tried and action_mask[e]]
        edit = self._next_trial(observation, candidates) if candidates else None
        if edit is not None:
            self._trial = edit
            return edit
        self._idle += 1
        present = round(float(observation["beams"][:, 2].sum()))
        if self._idle >= present or not action_mask[NEXT]:
            return LOCK
        self._tried = []
        return NEXT

    def _next_trial(self, observation: Mapping[str, np.ndarray], candidates: list[int]) -> int | None:
        """Which of the active beam's untried valid edits to try next (None: none, go on to the next
        beam); here the first in :meth:`_edits`' order (a learned ranker reorders them and may skip)."""
        return candidates[0]

    def _edits(self, observation: Mapping[str, np.ndarray]) -> list[int]:
        """The active beam's candidate edits, in order: aperture, weight, a turn away from the OARs."""
        beams = observation["beams"]
        active = int(np.argmax(beams[:, 3]))
        status = observation["tumour_status"]
        weight = WEIGHT_DOWN if float(status[2]) > 0 else WEIGHT_UP
        edits = [NARROW, weight, _INVERSE[weight], WIDEN]
        cost = _anatomy_cost(observation)
        current = round(float(beams[active, 0]) * N_ANGLES) % N_ANGLES
        for turn, step in ((TURN_CW, 1), (TURN_CCW, -1)):
            if cost[(current + step) % N_ANGLES] < cost[current]:
                edits.append(turn)
        return edits


def resume(observation: Mapping[str, np.ndarray], steps: int, max_steps: int) -> AnatomyAwarePolicy:
    """``anatomy_aware`` as if it had played up to this state, from the state alone (after another
    policy's action, for the rollout expert and the residual learner's ``reentry="resume"``; its default
    re-entry keeps the memory instead, :meth:`AnatomyAwarePolicy.reenter`): with fewer
    than seven beams its build phase (the beams present, except the active one, take the nearest
    free angles of its template), with seven its edit phase with nothing tried yet."""
    policy = AnatomyAwarePolicy()
    policy.reset()
    policy._steps, policy._max_steps = steps, max_steps
    beams = observation["beams"]
    present = round(float(beams[:, 2].sum()))
    if present >= policy.n_beams:
        policy._climbing = True
        policy._best = observed_score(observation)
        return policy
    if present:
        policy._pool = list(policy.choose_angles(observation))
        policy._assigned = {}
        active = int(np.argmax(beams[:, 3]))
        for i in range(present):
            if i == active or not policy._pool:
                continue
            current = round(float(beams[i, 0]) * N_ANGLES) % N_ANGLES
            near = min(policy._pool, key=lambda t: min((t - current) % N_ANGLES, (current - t) % N_ANGLES))
            policy._pool.remove(near)
            policy._assigned[i] = near
    return policy


class SixFullPolicy(BaseRTPolicy):
    """The original's fixed script: add six beams, each at full weight, then lock."""

    name = "six_full"

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        beams = observation["beams"]
        present = round(float(beams[:, 2].sum()))
        if present and action_mask[WEIGHT_UP]:
            return WEIGHT_UP
        if present < 6:
            return ADD
        return LOCK
