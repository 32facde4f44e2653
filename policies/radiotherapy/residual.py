"""A residual learner over ``anatomy_aware`` (residual policy learning: Silver et al. 2018,
Johannink et al. 2019; issue 25 item 6).

The network's action space is the env's ten actions plus :data:`DEFER` ("take ``anatomy_aware``'s
proposal for this observation"), and it reads the observation together with that proposal (one-hot).
Initialised to defer everywhere, the combined policy *starts exactly at* the baseline and learns
only when and how to depart from it. Both the net and the baseline read only the observation and
the mask (SPEC-RT §8 sealed evaluation), so the combination is an observation-only agent.

After a departure :class:`DeferringBase` re-enters the baseline (``reentry``): ``"keep"`` (the
default) keeps its memory from before it proposed and re-derives only what the departure changed
(:meth:`~policies.radiotherapy.baselines.AnatomyAwarePolicy.reenter`: the template, its assignment
and the pending trimming stay, beams it never placed are turned onto the template); ``"resume"`` (the
first pilots') rebuilds it from the state alone with :func:`~policies.radiotherapy.baselines.resume`,
which goes straight to the edit phase once seven beams exist, so "add all seven beams first" skipped
the template and the trimming. When the net defers, or picks the very action proposed, the baseline
keeps its memory and its episode is unchanged.

The same :class:`DeferringBase` and :func:`residual_features` drive training
(:mod:`training.radiotherapy`'s ``--residual``) and grading (:class:`ResidualRTPolicy`), so the
trained and the graded policy are one function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hospital_marl.radiotherapy.core.plan import N_ACTIONS
from hospital_marl.radiotherapy.envs.planning import OBSERVATION_SIZE
from policies.radiotherapy.base import BaseRTPolicy
from policies.radiotherapy.baselines import AnatomyAwarePolicy, resume
from policies.radiotherapy.mlp import flatten_observation, mlp_logits

DEFER = N_ACTIONS
"""The residual action "take the base's proposal" (the last index)."""
N_RESIDUAL_ACTIONS = N_ACTIONS + 1
FEATURE_SIZE = OBSERVATION_SIZE + N_ACTIONS
"""The net's input: the flat observation, then the base's proposal one-hot."""
BASES = ("anatomy_aware",)
"""The baselines a residual learner can sit on."""
REENTRIES = ("keep", "resume")
"""How the base continues after a departure (see the module docstring)."""


class DeferringBase:
    """``anatomy_aware`` as the residual's base: :meth:`propose` its action for an observation,
    :meth:`taken` the action actually played (a different one makes it re-enter at the next state)."""

    def __init__(self, name: str = "anatomy_aware", reentry: str = "keep") -> None:
        if name not in BASES:
            raise ValueError(f"residual base must be one of {BASES}, got {name!r}")
        if reentry not in REENTRIES:
            raise ValueError(f"reentry must be one of {REENTRIES}, got {reentry!r}")
        self.name = name
        self.reentry = reentry
        self.reset()

    def reset(self) -> None:
        self.policy = AnatomyAwarePolicy()
        self.policy.reset()
        self.steps = 0
        self.deviations = 0
        self.proposal: int | None = None
        self._reenter = False
        self._memory: dict[str, object] = {}
        self._played = 0

    def propose(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        """The base's action for this observation (call once per step, before :meth:`taken`)."""
        if self._reenter and self.reentry == "keep":
            self.policy.reenter(self._memory, observation, self._played)
            self._reenter = False
        elif self._reenter:
            fraction = float(observation["step_fraction"][0])
            max_steps = round(self.steps / fraction) if fraction > 0 else 0
            self.policy = resume(observation, self.steps, max_steps)
            self._reenter = False
        if self.reentry == "keep":
            self._memory = self.policy.memory()
        self.proposal = int(self.policy.act(observation, action_mask))
        return self.proposal

    def taken(self, action: int) -> None:
        """The env action played this step."""
        if self.proposal is None:
            raise RuntimeError("taken() before propose()")
        if action != self.proposal:
            self.deviations += 1
            self._reenter = True
            self._played = int(action)
        self.steps += 1
        self.proposal = None


def residual_mask(action_mask: np.ndarray, proposal: int) -> np.ndarray:
    """The env's mask, then :data:`DEFER` (valid when the proposal is: ``anatomy_aware`` proposes
    only valid actions, so always)."""
    mask = np.asarray(action_mask, dtype=bool)
    return np.append(mask, mask[proposal])


def residual_features(flat_observation: np.ndarray, proposal: int) -> np.ndarray:
    """The net's input: the flattened observation and the base's proposal one-hot."""
    onehot = np.zeros(N_ACTIONS, dtype=np.float32)
    onehot[proposal] = 1.0
    return np.concatenate([np.asarray(flat_observation, dtype=np.float32), onehot])


def env_action(residual_action: int, proposal: int) -> int:
    """The env action a residual action plays."""
    return proposal if residual_action == DEFER else int(residual_action)


class ResidualRTPolicy(BaseRTPolicy):
    """A numpy MLP over (observation, base proposal) choosing an env action or :data:`DEFER`;
    deterministic (the masked argmax). ``layers`` empty: the untrained policy, which always defers."""

    name = "rt_residual"

    def __init__(
        self,
        layers: list[tuple[np.ndarray, np.ndarray]],
        base: str = "anatomy_aware",
        name: str | None = None,
        reentry: str = "keep",
    ) -> None:
        super().__init__()
        if layers and layers[-1][0].shape[0] != N_RESIDUAL_ACTIONS:
            raise ValueError(f"a residual net has {N_RESIDUAL_ACTIONS} outputs, got {layers[-1][0].shape[0]}")
        if layers and layers[0][0].shape[1] != FEATURE_SIZE:
            raise ValueError(f"a residual net reads {FEATURE_SIZE} features, got {layers[0][0].shape[1]}")
        self.layers = layers
        self.base = DeferringBase(base, reentry)
        self.metadata: dict[str, Any] = {}
        if name:
            self.name = name

    def reset(self, seed: int | None = None, plan=None) -> None:
        super().reset(seed, plan)
        self.base.reset()

    def logits(self, features: np.ndarray) -> np.ndarray:
        if not self.layers:
            logits = np.zeros(N_RESIDUAL_ACTIONS)
            logits[DEFER] = 1.0
            return logits
        return mlp_logits(self.layers, features)

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        proposal = self.base.propose(observation, action_mask)
        logits = self.logits(residual_features(flatten_observation(observation), proposal))
        mask = residual_mask(action_mask, proposal)
        action = env_action(int(np.argmax(np.where(mask, logits, -np.inf))), proposal)
        self.base.taken(action)
        return action


__all__ = [
    "BASES",
    "DEFER",
    "FEATURE_SIZE",
    "N_RESIDUAL_ACTIONS",
    "REENTRIES",
    "DeferringBase",
    "ResidualRTPolicy",
    "env_action",
    "residual_features",
    "residual_mask",
]
