"""The radiotherapy policy protocol: what the RT grader, CLI and notebook need of an agent.

Like the ED's :class:`policies.base.Policy` (flat track): ``act(observation, action_mask)``.
A model-based policy (the planner) receives the core :class:`Plan` at ``reset`` and
may evaluate beam sets on it with :meth:`Plan.evaluate` (which leaves the plan untouched).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from hospital_marl.radiotherapy.core.plan import Plan


@runtime_checkable
class RTPolicy(Protocol):
    name: str

    def reset(self, seed: int | None = None, plan: Plan | None = None) -> None:
        """Start an episode; ``seed`` makes a stochastic policy reproducible."""

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        """One of the 8 actions."""


class BaseRTPolicy:
    """Default plumbing: an own RNG per episode and the bound plan (when given)."""

    name = "rt_base"

    def __init__(self) -> None:
        self.rng = np.random.default_rng()
        self.plan: Plan | None = None

    def reset(self, seed: int | None = None, plan: Plan | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.plan = plan

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
