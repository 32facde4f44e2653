"""Baseline, learned and planning policies behind one small protocol.

``policies.load(spec)`` returns a policy by registered name (``policies.names()``),
``"name:key=value,..."`` for keyword arguments (e.g. ``"planner:rollouts=8"``), a path to a
saved model or run directory (named by its path), or ``"module:attribute"`` (your own object,
callable or SB3 model, adapted by :func:`policies.adapters.as_policy`).

To add a policy name, add one entry to ``_REGISTRY`` below (or call :func:`register`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from policies.adapters import as_policy
from policies.base import TRACKS, BasePolicy, Policy, load_kwargs
from policies.baselines import FifoSeverityPolicy, GreedyPolicy, MaskedRandomPolicy, RandomPolicy
from policies.heuristic import HeuristicPolicy, TeamHeuristicPolicy
from policies.llm import LLMPolicy

_REGISTRY: dict[str, Callable[..., Policy]] = {
    "random": RandomPolicy,
    "masked_random": MaskedRandomPolicy,
    "greedy": GreedyPolicy,
    "fifo_severity": FifoSeverityPolicy,
    "heuristic": HeuristicPolicy,
    "team_heuristic": TeamHeuristicPolicy,
    "llm": LLMPolicy,  # an OpenAI-compatible endpoint: "llm:model=...,base_url=..." or the API_* variables
}


SHIPPED_TEAM_RUNS: dict[str, str] = {
    "mappo": "marl/fast/mappo_s3",
    "ippo": "marl/fast/ippo_s4",
    "mappo_dagger": "marl/benchmarl/mappo_dagger_s1",
}
"""Registered team-track run directories under ``policies/checkpoints/`` (played with onnxruntime, no
torch), each the seed with the best *validation* score of its row (docs/learning-at-scale.md):
``mappo`` / ``ippo`` are the best *from scratch*: the fast trainer's 20M-frame runs (5 seeds each; the
seed with the best validation score, 76.55 and 76.56 on seed-1000 days against BenchMARL's 384k-frame
best 76.12 and 75.60 on the same days);
``mappo_dagger`` is the best team policy overall (BenchMARL MAPPO cloned from ``team_planner`` with
DAgger)."""


def _shipped_team_run(name: str) -> Policy:
    from policies.learned import CHECKPOINT_DIR

    path = CHECKPOINT_DIR / SHIPPED_TEAM_RUNS[name]
    if not path.is_dir():
        raise FileNotFoundError(f"shipped run {path} is missing (reinstall hospital-marl)")
    policy = load_run(path)
    policy.name = name
    return policy


def register(name: str, factory: Callable[..., Policy], *, overwrite: bool = False) -> None:
    """Make a policy loadable by name (e.g. from a plugin or a notebook). A bad registration is a
    ValueError here, not a surprise at :func:`load`: the name must be one :func:`load_kwargs` can
    parse back (no ':'), the factory callable, and a registered name is replaced only on request."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"a policy name must be a non-empty string without ':', got {name!r}")
    if not callable(factory):
        raise ValueError(f"policy {name!r}: the factory must be callable, got {factory!r}")
    if name in _lazy_registry() and not overwrite:
        raise ValueError(f"policy {name!r} is already registered (pass overwrite=True to replace it)")
    _REGISTRY[name] = factory


def _lazy_registry() -> dict[str, Callable[..., Policy]]:
    """Policies whose imports are heavy (planner: none; learned: torch) load on demand."""
    registry = dict(_REGISTRY)
    try:
        from policies.planner import PlannerPolicy, TeamPlannerPolicy

        registry.setdefault("planner", PlannerPolicy)
        registry.setdefault("team_planner", TeamPlannerPolicy)
    except ImportError:  # pragma: no cover - planner ships with the package
        pass
    for shipped in SHIPPED_TEAM_RUNS:
        registry.setdefault(shipped, lambda shipped=shipped: _shipped_team_run(shipped))
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
    """A policy by name, ``"name:key=value"``, path, or ``"module:attribute"`` (see the module docstring).

    Raises ValueError (unknown name: lists the valid ones), FileNotFoundError (a path that does
    not exist, or a directory without a model: says what was looked for), TypeError (an
    attribute that is not a policy-like object), ImportError (a missing optional dependency).
    """
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"policy spec must be a non-empty string, got {spec!r}")
    name, kwargs = load_kwargs(spec)
    if name in _REGISTRY:  # the light ones, without importing model code (a sandbox starts faster)
        return _REGISTRY[name](**kwargs)
    registry = _lazy_registry()
    if name in registry:
        return registry[name](**kwargs)
    path = Path(spec)
    if path.exists():
        return load_run(path)
    module, _, attribute = spec.partition(":")
    if attribute and "=" not in attribute and module.replace(".", "").replace("_", "").isalnum():
        return _load_attribute(module, attribute)
    if "/" in spec or "\\" in spec or path.suffix in (".zip", ".onnx", ".json"):
        raise FileNotFoundError(f"no policy file or run directory {spec}")
    raise ValueError(
        f"unknown policy {spec!r}; valid names: {', '.join(sorted(registry))} "
        f"(or a model path, or module:attribute){_other_namespace(name)}"
    )


def _other_namespace(name: str) -> str:
    """A hint when ``name`` is a radiotherapy agent (asked of the emergency department's registry)."""
    from policies.radiotherapy import names as rt_names

    if name not in rt_names():
        return ""
    return (
        f"; {name!r} is a radiotherapy agent: policies.radiotherapy.load({name!r}), "
        "or on the command line --env radiotherapy"
    )


def load_run(path: Path) -> Policy:
    """A saved run or model by path (``train ppo|marl|rllib|benchmarl|fast-*``), named by its path."""
    from policies.benchmarl import is_benchmarl_run, load_benchmarl_policy
    from policies.fast import is_fast_run, load_fast_policy
    from policies.marl import is_marl_run, load_marl_policy
    from policies.rllib import is_rllib_run, load_rllib_policy

    if is_benchmarl_run(path):
        return load_benchmarl_policy(path, name=str(path))
    if is_fast_run(path):
        return load_fast_policy(path, name=str(path))
    if is_marl_run(path):
        return load_marl_policy(path, name=str(path))
    if is_rllib_run(path):
        return load_rllib_policy(path, name=str(path))
    from policies.learned import load_path

    return load_path(path, name=str(path))


def _load_attribute(module: str, attribute: str) -> Policy:
    """``"package.module:attr"``: the attribute (a class is instantiated without arguments), adapted."""
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"{module}:{attribute}: cannot import module {module!r} ({exc})") from None
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module}:{attribute}: module {module!r} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    if isinstance(obj, type):
        obj = obj()
    team_only = isinstance(obj, Mapping) or (hasattr(obj, "act_role") and not hasattr(obj, "act"))
    policy = as_policy(obj, "team" if team_only else "flat")
    if not getattr(obj, "name", None) and hasattr(policy, "name"):
        policy.name = f"{module}:{attribute}"
    return policy


__all__ = [
    "TRACKS",
    "BasePolicy",
    "FifoSeverityPolicy",
    "GreedyPolicy",
    "HeuristicPolicy",
    "LLMPolicy",
    "MaskedRandomPolicy",
    "Policy",
    "RandomPolicy",
    "TeamHeuristicPolicy",
    "as_policy",
    "load",
    "load_run",
    "names",
    "register",
]
