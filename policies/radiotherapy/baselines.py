"""Scripted radiotherapy baselines (SPEC-RT §6).

- ``random``: uniform over the 10 actions, valid or not (invalid ones waste a step);
- ``masked_random``: uniform over the valid actions;
- ``evenly_spaced``: the original's heuristic done properly: ``n`` beams 360°/n apart
  (turned onto the exact spacing), then the weights nudged down (up) one beam at a
  time while the tumour is overdosed (D95 > 1.05 Rx) or short (D95 < 0.97 Rx), then lock;
- ``six_full``: the original's fixed script: six beams at full weight, then lock;
- ``anatomy_aware``: what a planner does first on the CT: beam angles chosen away from the
  OARs (entry and exit sides, by priority, from the observation's ``anatomy`` block), apertures
  narrowed to a 1-voxel margin, then the weights trimmed to coverage like ``evenly_spaced``.

The scripted ones read only the observation (beam table, tumour status, anatomy), never the phantom.
Weight trimming: one notch per beam in turn, down while the tumour has a hot spot (D2 > 1.07 Rx),
up while D98 is short of its goal; the plan is locked when neither holds or the direction flips.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hospital_marl.radiotherapy.core.calibration import evenly_spaced_angles
from hospital_marl.radiotherapy.core.dose import ANGLE_STEP, MAX_MARGIN, N_ANGLES
from hospital_marl.radiotherapy.core.plan import (
    ADD,
    LOCK,
    MAX_BEAMS,
    N_ACTIONS,
    NARROW,
    NEW_MARGIN,
    NEXT,
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

    def reset(self, seed: int | None = None, plan=None) -> None:  # type: ignore[no-untyped-def]
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


class AnatomyAwarePolicy(EvenlySpacedPolicy):
    """Beams turned away from the OARs by priority (read from the observation), narrow apertures,
    weights trimmed to coverage; the ``anatomy_aware`` baseline of SPEC-RT §8."""

    name = "anatomy_aware"

    def __init__(self, n_beams: int = 6, low: float = 0.97, margin: int = 1, spacing: int = 3) -> None:
        super().__init__(n_beams, low, margin)
        self.spacing = spacing  # grid steps (× 10°) between any two beams at least

    def choose_angles(self, observation: Mapping[str, np.ndarray]) -> list[int]:
        anatomy, status = observation["anatomy"], observation["oar_status"]
        present = observation["oar_present"] > 0
        grid = np.arange(N_ANGLES) * 2 * np.pi / N_ANGLES
        cost = np.zeros(N_ANGLES)
        for j in np.flatnonzero(present):
            towards = np.arctan2(2 * anatomy[j, 1] - 1, 2 * anatomy[j, 0] - 1)  # gantry angle at the OAR
            distance = max(float(anatomy[j, 2]) * 32, 1.0)
            width = np.arctan2(6.0, distance)  # the field's half width (voxels) seen from the OAR
            priority = round(float(status[j, 0]) * 3)
            for side in (0.0, np.pi):  # the beam enters through it, or leaves through it
                delta = np.angle(np.exp(1j * (grid + side - towards)))
                cost += PRIORITY_COST.get(priority, 1.0) * np.exp(-(delta**2) / (2 * width**2))
        chosen: list[int] = []
        for a in np.argsort(cost, kind="stable"):
            gaps = [min((a - c) % N_ANGLES, (c - a) % N_ANGLES) for c in chosen]
            if all(g >= self.spacing for g in gaps):
                chosen.append(int(a))
            if len(chosen) == self.n_beams:
                break
        return chosen + self.targets[len(chosen) :]


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
