"""Scripted radiotherapy baselines (SPEC-RT §6).

- ``random``: uniform over the 8 actions, valid or not (invalid ones waste a step);
- ``masked_random``: uniform over the valid actions;
- ``evenly_spaced``: the original's heuristic done properly: ``n`` beams 360°/n apart
  (turned onto the exact spacing), then the weights nudged down (up) one beam at a
  time while the tumour is overdosed (D95 > 1.05 Rx) or short (D95 < 0.97 Rx), then lock;
- ``six_full``: the original's fixed script: six beams at full weight, then lock.

The scripted ones read only the observation (beam table, tumour status), never the phantom.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hospital_marl.radiotherapy.core.calibration import evenly_spaced_angles
from hospital_marl.radiotherapy.core.dose import ANGLE_STEP, N_ANGLES
from hospital_marl.radiotherapy.core.plan import (
    ADD,
    LOCK,
    MAX_BEAMS,
    N_ACTIONS,
    NEXT,
    TURN_CCW,
    TURN_CW,
    WEIGHT_DOWN,
    WEIGHT_UP,
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

    def __init__(self, n_beams: int = 7, low: float = 0.97) -> None:
        super().__init__()
        if not isinstance(n_beams, int) or not 1 <= n_beams <= MAX_BEAMS:
            raise ValueError(f"n_beams must be an int in [1, {MAX_BEAMS}], got {n_beams!r}")
        self.n_beams = n_beams
        self.low = low
        self.targets = [a // ANGLE_STEP for a in evenly_spaced_angles(n_beams)]
        self._trimmed = False

    def reset(self, seed: int | None = None, plan=None) -> None:  # type: ignore[no-untyped-def]
        super().reset(seed, plan)
        self._trimmed = False

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        beams = observation["beams"]
        present = round(float(beams[:, 2].sum()))
        active = int(np.argmax(beams[:, 3])) if present else -1
        if present and present <= self.n_beams:
            current = round(float(beams[active, 0]) * N_ANGLES) % N_ANGLES
            turn = _turn_towards(current, self.targets[active])
            if turn is not None:
                return turn
        if present < self.n_beams:
            return ADD
        status = observation["tumour_status"]
        d95 = 1.0 - float(status[1])  # exact below 1 Rx (the shortfall), 1 above
        want = WEIGHT_DOWN if float(status[2]) > 0 else WEIGHT_UP if d95 < self.low else None
        if want is None:
            return LOCK
        if self._trimmed and action_mask[NEXT]:
            self._trimmed = False  # one notch per beam in turn, so the weights stay even
            return NEXT
        if action_mask[want]:
            self._trimmed = True
            return want
        return LOCK


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
