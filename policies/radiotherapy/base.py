"""Radiotherapy policies on the package's one policy protocol (:class:`policies.base.Policy`).

An RT policy is a :class:`~policies.base.SeededPolicy` on the ``radiotherapy`` track:
``act(observation, action_mask)`` like the ED's flat track, and ``reset(seed, plan=...)``.
A model-based policy (the planner, the LLM's prompt) receives a read-only :class:`PlanView`
of the episode's plan (SPEC §12: never the live, mutable :class:`Plan`): it can read the
patient, the metrics and the beams and evaluate any beam set (:meth:`Plan.evaluate` leaves
the plan untouched), but cannot step, restore or assign.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from hospital_marl.radiotherapy.core.plan import Plan
from hospital_marl.radiotherapy.core.sealed import PlanView
from policies.base import SeededPolicy

TRACK = "radiotherapy"


@runtime_checkable
class RTPolicy(Protocol):
    """What the RT grader, CLI, server and notebook need of an agent (the :class:`policies.base.Policy`
    protocol on the radiotherapy track)."""

    name: str

    def reset(self, seed: int | None = None, plan: Plan | PlanView | None = None) -> None:
        """Start an episode; ``seed`` makes a stochastic policy reproducible."""

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        """One of the actions of :data:`~hospital_marl.radiotherapy.core.plan.ACTIONS`."""


class BaseRTPolicy(SeededPolicy):
    """The package's :class:`~policies.base.SeededPolicy` on the radiotherapy track: an own RNG per
    episode and a read-only view of the plan (when given) where the ED's policies get a simulator."""

    name = "rt_base"
    tracks: tuple[str, ...] = (TRACK,)

    def __init__(self) -> None:
        super().__init__()
        self.plan: PlanView | None = None

    def reset(self, seed: int | None = None, plan: Plan | PlanView | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.plan = PlanView.of(plan)

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        raise NotImplementedError
