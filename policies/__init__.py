"""Baseline, learned and planning policies behind one small protocol.

``policies.load(name_or_path)`` returns a policy by registered name
(``policies.names()``), ``"name:key=value,..."`` for keyword arguments
(e.g. ``"planner:rollouts=8"``), or a path to a saved model.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from policies.base import TRACKS, BasePolicy, Policy, load_kwargs
from policies.baselines import MaskedRandomPolicy, RandomPolicy
from policies.heuristic import HeuristicPolicy, TeamHeuristicPolicy
from policies.llm import LLMPolicy

_REGISTRY: dict[str, Callable[..., Policy]] = {
    "random": RandomPolicy,
    "masked_random": MaskedRandomPolicy,
    "heuristic": HeuristicPolicy,
    "team_heuristic": TeamHeuristicPolicy,
    "llm": LLMPolicy,  # an OpenAI-compatible endpoint: "llm:model=...,base_url=..." or the API_* variables
}


def register(name: str, factory: Callable[..., Policy]) -> None:
    """Make a policy loadable by name (e.g. from a plugin or a notebook)."""
    _REGISTRY[name] = factory


def _lazy_registry() -> dict[str, Callable[..., Policy]]:
    """Policies whose imports are heavy (planner: none; learned: torch) load on demand."""
    registry = dict(_REGISTRY)
    try:
        from policies.planner import PlannerPolicy

        registry.setdefault("planner", PlannerPolicy)
    except ImportError:  # pragma: no cover - planner ships with the package
        pass
    try:
        from policies.learned import learned_factories

        for name, factory in learned_factories().items():
            registry.setdefault(name, factory)
    except ImportError:
        pass
    return registry


def names() -> list[str]:
    """Every name :func:`load` accepts."""
    return sorted(_lazy_registry())


def load(spec: str) -> Policy:
    """A policy by name (``"heuristic"``, ``"planner:rollouts=8"``) or by path to a saved model."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"policy spec must be a non-empty string, got {spec!r}")
    name, kwargs = load_kwargs(spec)
    registry = _lazy_registry()
    if name in registry:
        return registry[name](**kwargs)
    path = Path(spec)
    if path.exists():
        from policies.marl import is_marl_run, load_marl_policy
        from policies.rllib import is_rllib_run, load_rllib_policy

        if is_marl_run(path):
            return load_marl_policy(path)
        if is_rllib_run(path):
            return load_rllib_policy(path)
        from policies.learned import load_path

        return load_path(path)
    raise ValueError(f"unknown policy {spec!r}; valid names: {', '.join(sorted(registry))} (or a model path)")


__all__ = [
    "TRACKS",
    "BasePolicy",
    "HeuristicPolicy",
    "LLMPolicy",
    "MaskedRandomPolicy",
    "Policy",
    "RandomPolicy",
    "TeamHeuristicPolicy",
    "load",
    "names",
    "register",
]
