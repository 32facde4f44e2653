"""The optimiser reference (the RT "planner", SPEC-RT §6).

At reset the planner reads the phantom through the core :class:`Plan` and
searches beam sets with :meth:`Plan.evaluate` (the env's own scoring, so the
optimiser and the grader can never disagree), then plays the plan through the
env's actions:

1. for each beam count n in ``beam_counts`` and each of ``starts`` rotations of
   the evenly spaced set: coordinate ascent, beam by beam, over every grid angle
   (36), every weight (0.1–1.0) and every aperture margin (0–5 voxels), until a sweep
   improves nothing;
2. only beam sets reachable within the step limit count: a beam costs one add,
   its turns from the default angle it is added at, and its weight notches;
3. the best set is played: add, turn, weight, next beam ...; then lock.

Deterministic: no randomness; ties keep the incumbent.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hospital_marl.radiotherapy.core.dose import MAX_MARGIN, N_ANGLES
from hospital_marl.radiotherapy.core.plan import (
    ADD,
    LOCK,
    MAX_BEAMS,
    NARROW,
    NEW_BEAM_WEIGHT,
    NEW_MARGIN,
    NEXT,
    REMOVE,
    TURN_CCW,
    TURN_CW,
    WEIGHT_DOWN,
    WEIGHT_UP,
    WIDEN,
    Plan,
    default_angle_index,
)
from hospital_marl.radiotherapy.core.sealed import PlanView
from policies.radiotherapy.base import BaseRTPolicy

WEIGHTS = np.arange(1, 11)  # tenths


def action_sequence(angles: np.ndarray, weights: np.ndarray, margins: np.ndarray | None = None) -> list[int]:
    """The actions that build this beam set from an empty plan, in order (lock not included)."""
    actions: list[int] = []
    placed: list[int] = []
    margins = np.full(len(angles), NEW_MARGIN) if margins is None else margins
    for angle, weight, margin in zip(angles, weights, margins):
        start = default_angle_index(np.array(placed, np.int64))
        delta = (int(angle) - start) % N_ANGLES
        actions.append(ADD)
        actions += [TURN_CW] * delta if delta <= N_ANGLES // 2 else [TURN_CCW] * (N_ANGLES - delta)
        notch = int(weight) - NEW_BEAM_WEIGHT
        actions += [WEIGHT_UP] * notch if notch > 0 else [WEIGHT_DOWN] * -notch
        wider = int(margin) - NEW_MARGIN
        actions += [WIDEN] * wider if wider > 0 else [NARROW] * -wider
        placed.append(int(angle))
    return actions


def plan_cost(angles: np.ndarray, weights: np.ndarray, margins: np.ndarray | None = None) -> int:
    """Steps to build the set (without the lock: truncation grades the plan too)."""
    return len(action_sequence(angles, weights, margins))


def optimise(
    plan: Plan | PlanView,
    beam_counts: tuple[int, ...] = (3, 4, 5, 6, 7),
    starts: int = 1,
    max_sweeps: int = 6,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The best beam set found: (angles (n,), weights in tenths (n,), margins (n,), score)."""
    budget = plan.task.max_steps
    best = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), -1.0)

    def better(angles: np.ndarray, weights: np.ndarray, margins: np.ndarray, than: float) -> float | None:
        """The trial's score if it beats ``than`` and is reachable in the step limit (cost checked last)."""
        s = plan.evaluate(angles, weights, margins)[1]
        return s if s > than + 1e-12 and plan_cost(angles, weights, margins) <= budget else None

    for n in beam_counts:
        for start in range(starts):
            offset = start * (N_ANGLES // n) // max(starts, 1)
            angles = np.array([(round(i * N_ANGLES / n) + offset) % N_ANGLES for i in range(n)], np.int64)
            weights = np.full(n, NEW_BEAM_WEIGHT, np.int64)
            margins = np.full(n, NEW_MARGIN, np.int64)
            reachable = plan_cost(angles, weights, margins) <= budget
            current = plan.evaluate(angles, weights, margins)[1] if reachable else -1.0
            for _ in range(max_sweeps):
                improved = False
                for i in range(n):
                    for a in range(N_ANGLES):
                        if a == angles[i]:
                            continue
                        trial = angles.copy()
                        trial[i] = a
                        s = better(trial, weights, margins, current)
                        if s is not None:
                            angles, current, improved = trial, s, True
                    for w in WEIGHTS:
                        if w == weights[i]:
                            continue
                        trial = weights.copy()
                        trial[i] = w
                        s = better(angles, trial, margins, current)
                        if s is not None:
                            weights, current, improved = trial, s, True
                    for m in range(MAX_MARGIN + 1):
                        if m == margins[i]:
                            continue
                        trial = margins.copy()
                        trial[i] = m
                        s = better(angles, weights, trial, current)
                        if s is not None:
                            margins, current, improved = trial, s, True
                if not improved:
                    break
            if current > best[3]:
                best = (angles, weights, margins, current)
    return best


class PlannerRTPolicy(BaseRTPolicy):
    """Optimises the beam set on the phantom at reset, then plays it (model-based, deterministic)."""

    name = "planner"

    def __init__(
        self, starts: int = 1, max_sweeps: int = 6, beam_counts: tuple[int, ...] = (3, 4, 5, 6, 7)
    ) -> None:
        super().__init__()
        if not 1 <= max(beam_counts) <= MAX_BEAMS:
            raise ValueError(f"beam_counts must lie in [1, {MAX_BEAMS}], got {beam_counts!r}")
        self.starts, self.max_sweeps, self.beam_counts = starts, max_sweeps, tuple(beam_counts)
        self._queue: list[int] = []
        self.expected_score = 0.0

    def reset(self, seed: int | None = None, plan: Plan | PlanView | None = None) -> None:
        super().reset(seed, plan)
        if plan is None:
            raise ValueError("the planner needs the plan: reset(seed, plan=env.unwrapped.plan)")
        angles, weights, margins, self.expected_score = optimise(
            plan, self.beam_counts, self.starts, self.max_sweeps
        )
        self._queue = [*action_sequence(angles, weights, margins), LOCK]

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        action = self._queue.pop(0) if self._queue else LOCK
        return action if action_mask[action] else int(np.flatnonzero(action_mask)[-1])


def steer(plan: Plan | PlanView, angles: np.ndarray, weights: np.ndarray, margins: np.ndarray) -> int:
    """The next action that moves ``plan``'s beams toward the beam set (angles, weights in tenths,
    margins) from any state: the planner's label for a state it did not reach itself (DAgger).

    The plan's beams are matched to the target's at least total edit cost (turns the short way,
    weight and margin notches); the active beam is fixed first (turn, weight, margin), or removed
    if it has no match; then the next beam that needs work; then a beam is added while the plan
    has fewer; then lock. Every edit lowers the matched cost by one, so this ends at the target.
    """
    from scipy.optimize import linear_sum_assignment

    n, k = int(plan.n_beams), int(plan.active)
    if n == 0:
        return ADD if len(angles) else LOCK
    have = (np.asarray(plan.angles)[:n], np.asarray(plan.weights)[:n], np.asarray(plan.margins)[:n])
    turn = (np.asarray(angles)[None, :] - have[0][:, None]) % N_ANGLES  # clockwise steps
    cost = (
        np.minimum(turn, N_ANGLES - turn)
        + np.abs(np.asarray(weights)[None, :] - have[1][:, None])
        + np.abs(np.asarray(margins)[None, :] - have[2][:, None])
    )
    rows, cols = linear_sum_assignment(cost)
    match = dict(zip(rows.tolist(), cols.tolist()))
    todo = [i for i in range(n) if i not in match or cost[i, match[i]] > 0]
    if k in match and cost[k, match[k]] > 0:
        j = match[k]
        if turn[k, j]:
            return TURN_CW if turn[k, j] <= N_ANGLES // 2 else TURN_CCW
        if weights[j] != have[1][k]:
            return WEIGHT_UP if weights[j] > have[1][k] else WEIGHT_DOWN
        return WIDEN if margins[j] > have[2][k] else NARROW
    if k not in match:
        return REMOVE
    if todo:
        return NEXT
    return ADD if n < len(angles) else LOCK
