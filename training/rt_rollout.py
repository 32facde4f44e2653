"""One-step policy improvement by rollouts: a DAgger expert for ``train radiotherapy --warm-start rollout``.

The planner beats ``anatomy_aware`` but cannot be cloned: its next action follows a beam set it
optimised at reset, which the observation does not show. This expert is better than its base and
labels *any* state from that state alone: for each valid action it copies the plan
(:meth:`Plan.snapshot` / :meth:`Plan.restore` on the training env), takes the action, finishes the
episode with a base policy re-entered at the state it reached, and picks the action whose finished
plan scores highest (the return is the final score, SPEC-RT §5). Ties go to the base's own action.

Bases (:class:`Base`):

- a learned net (``ppo``, a path): a pure function of the observation, so the rollout policy is
  at least as good as the net from every state (the rollout algorithm's improvement property:
  the base is sequentially consistent);
- ``anatomy_aware``, re-entered by :func:`resume` (build phase with its template, or edit phase
  with an empty history). Re-entered it is *not* consistent (its target assignment depends on where
  it starts), and the plain rollout over it can cycle (turn +10°, turn −10°, ...) until the steps
  run out; ``fortified`` (Bertsekas' fortified rollout) keeps the best trajectory found so far and
  leaves it only for a strictly better rollout, so the episode ends no worse than the base's
  own episode.

Only training uses it: it steps the live training env (and restores it), which a graded policy
never may (it gets a read-only :class:`~hospital_marl.radiotherapy.core.sealed.PlanView`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.radiotherapy import load
from policies.radiotherapy.baselines import AnatomyAwarePolicy, resume

Observation = Mapping[str, np.ndarray]


class Base:
    """A completion policy re-entered at any state: ``anatomy_aware`` (:func:`resume`) or a
    loadable RT agent that is a pure function of the observation (a learned net)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.net: Any = None if name == "anatomy_aware" else load(name)

    def start(self, observation: Observation, env: RadiotherapyPlanningEnv) -> Any:
        """The policy that plays on from this state."""
        if self.net is None:
            return resume(observation, env.plan.steps, env.plan.task.max_steps)
        return self.net

    def fresh(self) -> Any:
        """The policy that plays a whole episode from its start (``anatomy_aware`` with memory)."""
        if self.net is None:
            policy = AnatomyAwarePolicy()
            policy.reset()
            return policy
        return self.net


def complete(env: RadiotherapyPlanningEnv, observation: Observation, policy: Any) -> tuple[float, list[int]]:
    """Play ``policy`` to the end of the episode; the final score and the actions taken."""
    plan = env.plan
    actions: list[int] = []
    while not plan.done:
        action = int(policy.act(observation, plan.action_mask()))
        actions.append(action)
        observation, _, _, _, _ = env.step(action)
    return plan.score, actions


class RolloutExpert:
    """One-step lookahead over every valid action, each finished by every base; the best final
    score wins (ties: the first base's own action first). See the module docstring."""

    def __init__(
        self, bases: list[str] | tuple[str, ...] = ("ppo",), fortified: bool = False, tolerance: float = 0.0
    ) -> None:
        if not bases:
            raise ValueError("a rollout expert needs at least one base policy")
        if not tolerance >= 0:
            raise ValueError(f"tolerance must be >= 0, got {tolerance!r}")
        self.bases = [Base(b) for b in bases]
        self.fortified = fortified
        # leave the base's own action only for a gain above this: labels a clone can follow (a
        # flip on a difference the observation cannot show is noise to the student)
        self.tolerance = tolerance
        self.sim_steps = 0
        self.committed: list[int] = []
        self.value = -np.inf
        self._expect: bytes | None = None

    def start(self, env: RadiotherapyPlanningEnv, observation: Observation) -> None:
        """A new episode; fortified: the first base's own episode is the trajectory to beat."""
        self.committed, self.value, self._expect = [], -np.inf, None
        if self.fortified:
            state = env.plan.snapshot()
            self.value, self.committed = complete(env, observation, self.bases[0].fresh())
            self.sim_steps += len(self.committed)
            env.plan.restore(state)
            self._expect = _key(state)

    def act(self, env: RadiotherapyPlanningEnv, observation: Observation) -> int:
        """The label of the env's current state; the env is left exactly as it was."""
        plan = env.plan
        state = plan.snapshot()
        if self._expect != _key(state):  # not the state the commitment leads to (DAgger): drop it
            self.committed, self.value = [], -np.inf
        mask = plan.action_mask()
        own = int(self.bases[0].start(observation, env).act(observation, mask))
        best_value, best_path = -np.inf, [own]
        for action in [own, *(int(a) for a in np.flatnonzero(mask) if a != own)]:
            for base in self.bases:
                obs, _, _, _, _ = env.step(action)
                value, path = complete(env, obs, base.start(obs, env)) if not plan.done else (plan.score, [])
                self.sim_steps += len(path) + 1
                plan.restore(state)
                margin = 1e-9 if action == own or best_path[0] != own else 1e-9 + self.tolerance
                if value > best_value + margin:
                    best_value, best_path = value, [action, *path]
        if not (self.fortified and self.committed and self.value >= best_value - 1e-9):
            self.value, self.committed = best_value, best_path
        action = self.committed.pop(0)
        if self.fortified:
            env.step(action)
            self._expect = _key(plan.snapshot())
            plan.restore(state)
        return action


def _key(state: tuple) -> bytes:
    """A plan snapshot as bytes (beams, active beam, step count), to recognise a state."""
    angles, weights, margins, n_beams, active, steps, _, locked = state
    return b"".join(
        (
            angles.tobytes(),
            weights.tobytes(),
            margins.tobytes(),
            bytes(str((n_beams, active, steps, locked)), "ascii"),
        )
    )


__all__ = ["Base", "RolloutExpert", "complete", "resume"]
