"""The radiotherapy policy's read-only plan view (SPEC §12).

A model-based RT policy (the planner, the LLM's summary) reads the plan and evaluates beam
sets on its phantom; it must not change the graded plan (lock it, set its score, move its
beams). :class:`PlanSeal` gives it :class:`PlanView`: a *copy* of the plan, brought up to
date before every decision, whose mutators refuse. Nothing the view refers to is the live
plan or anything it shares (the copy has its own phantom, beam cache and arrays).
"""

from __future__ import annotations

import copy
from typing import Any

from hospital_marl.radiotherapy.core.plan import Plan

READABLE = frozenset(
    {
        "task",
        "split",
        "phantom",
        "metrics",
        "score",
        "steps",
        "n_beams",
        "active",
        "locked",
        "truncated",
        "done",
        "invalid_actions",
        "dose_scale",
        "beams",
        "apertures",
        "evaluate",
        "score_dose",
        "dose_grid",
        "dvhs",
        "oar_centroids",
        "angles",
        "weights",
        "margins",
    }
)
"""The plan's attributes a view exposes (an allow-list: methods among them change nothing)."""
_COPIED = frozenset({"angles", "weights", "margins"})


class PlanView:
    """A read-only view of a plan: the attributes in :data:`READABLE` (never ``step``, ``reset``,
    ``restore``, the beam cache or a private name); the beam arrays as copies; ``evaluate``
    leaves the plan untouched, as on the plan itself."""

    __slots__ = ("_plan",)

    def __init__(self, plan: Plan) -> None:
        object.__setattr__(self, "_plan", plan)

    @classmethod
    def of(cls, plan: Plan | PlanView | None) -> PlanView | None:
        """``plan`` as a view (a view or ``None`` as it is)."""
        return plan if plan is None or isinstance(plan, PlanView) else cls(plan)

    def __getattr__(self, name: str) -> Any:
        if name not in READABLE:
            raise AttributeError(f"a policy's plan view has no {name!r} (read-only: {sorted(READABLE)})")
        value = getattr(self._plan, name)
        return value.copy() if name in _COPIED else value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"the plan view is read-only: cannot set {name!r}")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a plan view cannot be pickled: it is a view of a running episode")

    def __repr__(self) -> str:
        return f"PlanView({self._plan.task.name!r}, beams={self._plan.n_beams})"


class PlanSeal:
    """The grader's side: ``seal.view`` is what the policy gets, ``seal.refresh()`` (before
    every decision) copies the live plan's state into the view's own plan."""

    __slots__ = ("_copy", "_live", "view")

    def __init__(self, live: Plan) -> None:
        self._live = live
        self._copy = copy.deepcopy(live)
        self.view = PlanView(self._copy)

    def refresh(self) -> None:
        """The view's plan becomes the live plan's state (whatever the policy did to its copy)."""
        self._copy.restore(self._live.snapshot())

    def export(self) -> Plan:
        """A copy of the plan as it is now, for a policy in another process (which reads it
        through its own :class:`PlanView`)."""
        self.refresh()
        return copy.deepcopy(self._copy)

    def snapshot(self) -> tuple:
        """The live plan's state (:meth:`Plan.snapshot`: copies), for that process's copy."""
        return self._live.snapshot()


__all__ = ["READABLE", "PlanSeal", "PlanView"]
