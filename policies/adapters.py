"""What users have, as a :class:`~policies.base.Policy`: the grader and the CLI accept any of these.

Flat track (one ``Discrete(39)`` action per tick, from the composed observation and mask):

- a package :class:`~policies.base.Policy` (returned as it is);
- any object with ``act(observation, action_mask) -> int`` (``reset`` and ``name`` optional);
- a plain callable ``f(observation, action_mask) -> int``;
- either of those taking the observation alone, PettingZoo-style: it gets the observation with
  the mask inside, ``observation["action_mask"]`` (a composed ``Dict`` gains that key; a role's
  vector becomes ``{"observation": vector, "action_mask": mask}``, as the AEC env gives it);
- a Stable-Baselines3 / sb3-contrib model (anything with ``predict`` and ``policy``): it acts
  deterministically on the observation format its ``observation_space`` says it was trained on
  (:mod:`policies.sb3_models`; any other space is refused at once), and gets the mask as
  ``action_masks=`` when its ``predict`` takes one (sb3-contrib's MaskablePPO does; plain SB3
  models act unmasked, as they were trained).

Team track (one action per role per tick, from each role's AEC observation and mask):

- an object with ``act_role(role, observation, action_mask) -> int``;
- a mapping role -> any of the flat-track kinds above, applied to that role's observation and mask.

Anything else is a TypeError that names these kinds.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from hospital_marl.core.actions import ROLES
from hospital_marl.core.hospital import Hospital, SimulatorHandle
from policies.base import TRACKS, BasePolicy, Policy
from policies.sb3_models import SB3Actor

ACCEPTED = {
    "flat": "a policies.Policy, an object with act(observation, action_mask), a callable "
    "f(observation, action_mask) -> int, an SB3/sb3-contrib model, or a policy name / model path",
    "team": "a policies.Policy playing the team track, an object with act_role(role, observation, "
    "action_mask), a mapping role -> (object with act / callable / SB3 model), or a policy name / path",
}
"""What :func:`as_policy` accepts on each track (the error message says it)."""


def is_sb3_model(obj: Any) -> bool:
    """An SB3 / sb3-contrib algorithm (duck-typed: no SB3 import needed to recognise one)."""
    return callable(getattr(obj, "predict", None)) and hasattr(obj, "policy") and hasattr(obj, "action_space")


def _accepts(func: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _actor(obj: Any) -> Callable[[Any, np.ndarray], int] | None:
    """A flat-kind object as ``(observation, mask) -> int``, or None when it is none of those kinds."""
    if is_sb3_model(obj):
        return SB3Actor(obj, _name_of(obj))  # its own observation format, its mask, its state
    act = getattr(obj, "act", None)
    if callable(act):
        return _with_mask_inside(act, f"{_name_of(obj)}.act")
    if callable(obj) and not isinstance(obj, type):
        return _with_mask_inside(obj, _name_of(obj))
    return None


def _positional(func: Callable[..., Any]) -> tuple[int, int] | None:
    """(required, at most) positional arguments of ``func``; None when it cannot be told (builtins)."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in params if p.kind in kinds]
    required = sum(p.default is inspect.Parameter.empty for p in positional)
    at_most = 1_000 if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params) else len(positional)
    return required, at_most


def _with_mask_inside(func: Callable[..., Any], label: str) -> Callable[[Any, np.ndarray], int]:
    """``func`` as ``(observation, mask) -> action``: as it is when it takes both, or given the
    observation with the mask inside when it takes the observation alone (PettingZoo's way)."""
    arity = _positional(func)
    if arity is None or arity[0] <= 2 <= arity[1]:
        return func
    if arity[0] <= 1 <= arity[1]:

        def observation_only(observation: Any, mask: np.ndarray) -> int:
            if isinstance(observation, Mapping):
                return func({**observation, "action_mask": mask})
            return func({"observation": observation, "action_mask": mask})

        return observation_only
    raise TypeError(
        f"{label} takes {arity[0]} positional arguments; a policy takes (observation, action_mask), "
        "or the observation alone and reads the mask from observation['action_mask']"
    )


def _name_of(obj: Any) -> str:
    name = getattr(obj, "name", None)
    if isinstance(name, str) and name:
        return name
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        return obj.__qualname__
    return type(obj).__name__


def _reset(obj: Any, seed: int | None, hospital: Hospital | SimulatorHandle | None) -> None:
    """Call ``obj.reset`` with whichever of ``seed`` / ``hospital`` it takes (if it has a reset)."""
    reset = getattr(obj, "reset", None)
    if not callable(reset) or is_sb3_model(obj):
        return
    kwargs = {k: v for k, v in (("seed", seed), ("hospital", hospital)) if _accepts(reset, k)}
    reset(**kwargs)


class UserPolicy(BasePolicy):
    """A user's object, callable, SB3 model or role mapping behind the :class:`Policy` protocol."""

    def __init__(
        self,
        obj: Any,
        tracks: tuple[str, ...],
        act: Callable[[Any, np.ndarray], int] | None = None,
        roles: Mapping[str, Callable[[np.ndarray, np.ndarray], int]] | None = None,
    ) -> None:
        super().__init__()
        self.wrapped = obj
        self.tracks = tracks
        self.name = (
            _name_of(obj)
            if not isinstance(obj, Mapping)
            else "team:" + "+".join(_name_of(obj[r]) for r in ROLES)
        )
        self._act = act
        self._roles = dict(roles or {})

    def reset(self, seed: int | None = None, hospital: Hospital | SimulatorHandle | None = None) -> None:
        super().reset(seed, hospital)
        for actor in (self._act, *self._roles.values()):
            if isinstance(actor, SB3Actor):
                actor.reset(hospital)
        for obj in self.wrapped.values() if isinstance(self.wrapped, Mapping) else (self.wrapped,):
            _reset(obj, seed, hospital)

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        if self._act is None:
            raise NotImplementedError(f"{self.name} does not play the flat track")
        return int(self._act(observation, action_mask))

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        if role in self._roles:
            return int(self._roles[role](observation, action_mask))
        act_role = getattr(self.wrapped, "act_role", None)
        if callable(act_role):
            return int(act_role(role, observation, action_mask))
        raise NotImplementedError(f"{self.name} does not play the team track")


def _is_policy(obj: Any) -> bool:
    return isinstance(obj, Policy) and isinstance(getattr(obj, "tracks", None), tuple)


def as_policy(obj: Any, track: str = "flat") -> Policy:
    """``obj`` as a :class:`Policy` for ``track`` (see the module docstring for the accepted kinds).

    Raises TypeError naming what was expected when ``obj`` is none of them.
    """
    if track not in TRACKS:
        raise ValueError(f"track must be one of {TRACKS}, got {track!r}")
    if _is_policy(obj):
        return obj
    if track == "team":
        if isinstance(obj, Mapping):
            missing = [r for r in ROLES if r not in obj]
            if missing:
                raise TypeError(f"a role mapping needs every role {ROLES}; missing {missing}")
            roles = {}
            for role in ROLES:
                actor = _actor(obj[role])
                if actor is None:
                    raise TypeError(
                        f"role {role!r}: expected an object with act(observation, action_mask), a callable "
                        f"or an SB3 model, got {type(obj[role]).__name__}"
                    )
                roles[role] = actor
            return UserPolicy(obj, ("team",), roles=roles)
        if callable(getattr(obj, "act_role", None)):
            tracks = ("flat", "team") if callable(getattr(obj, "act", None)) else ("team",)
            return UserPolicy(obj, tracks, act=getattr(obj, "act", None))
    else:
        actor = _actor(obj)
        if actor is not None:
            team = callable(getattr(obj, "act_role", None))
            return UserPolicy(obj, ("flat", "team") if team else ("flat",), act=actor)
    raise TypeError(f"cannot grade a {type(obj).__name__} on the {track} track: expected {ACCEPTED[track]}")


__all__ = ["ACCEPTED", "UserPolicy", "as_policy", "is_sb3_model"]
