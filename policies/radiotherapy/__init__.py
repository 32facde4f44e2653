"""Radiotherapy-planning agents behind one small protocol (:class:`RTPolicy`).

``policies.radiotherapy.load(name_or_path)`` returns an agent by registered name
(:func:`names`), ``"name:key=value,..."`` for keyword arguments (``"evenly_spaced:n_beams=5"``),
or a path to a model trained by ``hospital-marl train radiotherapy``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from policies.base import load_kwargs
from policies.radiotherapy.base import BaseRTPolicy, PlanView, RTPolicy
from policies.radiotherapy.baselines import (
    AnatomyAwarePolicy,
    EvenlySpacedPolicy,
    MaskedRandomRTPolicy,
    RandomRTPolicy,
    SixFullPolicy,
)
from policies.radiotherapy.planner import PlannerRTPolicy

_REGISTRY: dict[str, Callable[..., RTPolicy]] = {
    "random": RandomRTPolicy,
    "masked_random": MaskedRandomRTPolicy,
    "evenly_spaced": EvenlySpacedPolicy,
    "six_full": SixFullPolicy,
    "anatomy_aware": AnatomyAwarePolicy,
    "planner": PlannerRTPolicy,
}
SCRIPTED = ("evenly_spaced", "six_full", "anatomy_aware")
"""The scripted baselines a learned agent must beat on every task (anatomy_aware the strongest)."""


def register(name: str, factory: Callable[..., RTPolicy], *, overwrite: bool = False) -> None:
    """Make an RT agent loadable by name (a bad registration is a ValueError, as for the ED's)."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"an agent name must be a non-empty string without ':', got {name!r}")
    if not callable(factory):
        raise ValueError(f"agent {name!r}: the factory must be callable, got {factory!r}")
    if name in _registry() and not overwrite:
        raise ValueError(f"agent {name!r} is already registered (pass overwrite=True to replace it)")
    _REGISTRY[name] = factory


def _registry() -> dict[str, Callable[..., RTPolicy]]:
    from policies.radiotherapy.learned import learned_factories

    return {**_REGISTRY, **learned_factories()}


def names() -> list[str]:
    """Every name :func:`load` accepts."""
    return sorted(_registry())


def load(spec: str) -> RTPolicy:
    """An RT agent by name (``"planner"``, ``"evenly_spaced:n_beams=5"``, ``"ppo"``) or model path."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"agent spec must be a non-empty string, got {spec!r}")
    name, kwargs = load_kwargs(spec)
    registry = _registry()
    if name in registry:
        return registry[name](**kwargs)
    if Path(spec).exists():
        from policies.radiotherapy.learned import load_path

        return load_path(Path(spec))
    raise ValueError(
        f"unknown radiotherapy agent {spec!r}; valid names: {', '.join(sorted(registry))} (or a path)"
    )


__all__ = [
    "SCRIPTED",
    "AnatomyAwarePolicy",
    "BaseRTPolicy",
    "EvenlySpacedPolicy",
    "MaskedRandomRTPolicy",
    "PlanView",
    "PlannerRTPolicy",
    "RTPolicy",
    "RandomRTPolicy",
    "SixFullPolicy",
    "load",
    "names",
    "register",
]
