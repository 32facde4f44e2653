"""Trivial baselines, the floor every reference must clear (issue #23):

- ``random`` (like the original: ignores the mask, so it makes invalid actions);
- ``masked_random`` (uniform over valid actions);
- ``greedy``: the first valid action that is not the no-op, in the flat table's order
  (SPEC §3): admit the first waiting patient to a general bed, else to an ICU bed, else a
  ventilator, a transfer, an early discharge, a step-down;
- ``fifo_severity``: admit the most severe waiting patient (ties: the longest waiting, i.e.
  the first in the queue) to the bed that is adequate care for them — ICU when critical
  (severity >= 4), a general bed otherwise — or, when that kind is full, to the other kind;
  the no-op when nobody waiting can be placed. Admissions only: it never ventilates,
  transfers or discharges.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hospital_marl.core.actions import FLAT_OF, N_FLAT_ACTIONS, NOOP, Kind
from hospital_marl.core.constants import CRITICAL_SEVERITY
from hospital_marl.core.types import QUEUE_SLOTS
from policies.base import BasePolicy


class RandomPolicy(BasePolicy):
    """Uniform over every action, valid or not."""

    name = "random"
    tracks = ("flat", "team")

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return int(self.rng.integers(N_FLAT_ACTIONS))

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return int(self.rng.integers(len(action_mask)))


class MaskedRandomPolicy(BasePolicy):
    """Uniform over the actions the mask calls valid (the no-op always is)."""

    name = "masked_random"
    tracks = ("flat", "team")

    def _pick(self, action_mask: np.ndarray) -> int:
        valid = np.flatnonzero(action_mask)
        return int(valid[self.rng.integers(len(valid))])

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return self._pick(action_mask)

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return self._pick(action_mask)


class GreedyPolicy(BasePolicy):
    """The first valid action that is not the no-op (the lowest flat index): the one-line rule a
    reviewer tries first. Flat track only (the team track has no single action order)."""

    name = "greedy"
    tracks = ("flat",)

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        valid = np.flatnonzero(np.asarray(action_mask, dtype=bool)[NOOP + 1 :])
        return int(valid[0]) + NOOP + 1 if len(valid) else NOOP


class FifoSeverityPolicy(BasePolicy):
    """Most severe waiting patient first (ties: first in the queue), to the adequate bed kind
    (ICU for the critical, general otherwise), else the other kind; otherwise the no-op."""

    name = "fifo_severity"
    tracks = ("flat",)

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        mask = np.asarray(action_mask, dtype=bool)
        severity = np.asarray(observation["waiting_queue"])[:, 0]
        for slot in sorted(range(QUEUE_SLOTS), key=lambda i: (-severity[i], i)):
            if severity[slot] <= 0:
                break
            kinds = (Kind.ADMIT_ICU, Kind.ADMIT_GENERAL)
            if severity[slot] < CRITICAL_SEVERITY:
                kinds = kinds[::-1]
            for kind in kinds:
                if mask[FLAT_OF[(kind, slot)]]:
                    return FLAT_OF[(kind, slot)]
        return NOOP
