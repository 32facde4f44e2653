"""Random baselines: ``random`` (like the original: ignores the mask, so it
makes invalid actions) and ``masked_random`` (uniform over valid actions)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hospital_marl.core.actions import N_FLAT_ACTIONS
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
