"""Warm start of ``train radiotherapy --warm-start planner|anatomy_aware|rollout``: clone, DAgger, then PPO.

The radiotherapy counterpart of :mod:`training.clone` (the ED's): from scratch, MaskablePPO
flattened 0.02-0.04 below ``anatomy_aware`` (policies/radiotherapy/checkpoints/README.md), so PPO
starts from a clone of an expert: the local-search ``planner`` (which scores above it) or
``anatomy_aware`` itself. The shipped recipe clones ``anatomy_aware``: the planner's next action
depends on the beam set it optimised, which the observation does not show, and its clones agreed
with it on under half the states they reached.

1. :func:`collect_demonstrations` plays the expert on *training* patients (split ``train``) through
   the training env pipeline (:func:`training.radiotherapy.make_env`'s flattened observation and
   mask). Episode ``i`` is task ``i mod 3``; its patient seed is :func:`training.clone.demo_seed`
   (``SeedSequence([DEMO_TAG, seed, i])``), a different stream from the grader's
   (:func:`grading.radiotherapy.split_seed`), and the validation and test splits are never played.
   The expert sees what it is given when graded (SPEC-RT §8): the observation, the mask and a
   read-only :class:`PlanView` of the episode's plan, refreshed before every decision.
2. :func:`training.clone.clone_into` (shared with the ED) fits the actor by masked cross-entropy
   and the critic to the discounted returns.
3. DAgger (``--dagger-rounds``, planner or rollout): the clone plays fresh training patients (masked
   argmax, as graded) and the expert labels every state it reaches: the planner with
   :func:`policies.radiotherapy.planner.steer` (the next action toward the beam set it optimised on
   that patient at reset), the rollout expert (:mod:`training.rt_rollout`) with the action whose
   rollout (the action, then ``--rollout-base`` to the end) scores best. ``anatomy_aware`` cannot
   label states it did not reach (its next edit depends on what it tried before), so it only gives
   demonstrations.

The expert's own play uses the same labels (the planner's demonstrations are steered to its
optimum too, which reaches the same beam set in at most as many steps), so a state has one label.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium.wrappers import FlattenObservation

from hospital_marl.radiotherapy.core.sealed import PlanSeal
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.base import policy_seed
from policies.radiotherapy import load
from policies.radiotherapy.planner import optimise, steer
from training.clone import Demonstrations, clone_into, concat, demo_seed, discounted_returns, student_action
from training.rt_rollout import RolloutExpert

if TYPE_CHECKING:
    from training.radiotherapy import Args

SPLIT = "train"
"""The only split demonstrations are drawn from."""


class Expert:
    """The policy whose actions are cloned, on a sealed view of the training patient's plan; the
    ``rollout`` expert (:class:`training.rt_rollout.RolloutExpert`) instead simulates on the
    training env itself and restores it before the label is used."""

    def __init__(
        self, name: str, rollout_base: str = "anatomy_aware", rollout_tolerance: float = 0.0
    ) -> None:
        self.name = name
        self.seal: PlanSeal | None = None
        self.rollout: RolloutExpert | None = None
        self.env: RadiotherapyPlanningEnv | None = None
        if name == "rollout":
            bases = [b.strip() for b in rollout_base.split(",") if b.strip()]
            # anatomy_aware re-entered from a state is not sequentially consistent: fortify it
            fortified = bases[0] == "anatomy_aware"
            self.rollout = RolloutExpert(bases, fortified, rollout_tolerance)
        self.policy: Any = None if name in ("planner", "rollout") else load(name)
        self.target: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def start(self, env: RadiotherapyPlanningEnv, seed: int, observation: Any = None) -> None:
        self.seal = PlanSeal(env.plan)
        if self.rollout is not None:
            self.env = env
            self.rollout.start(env, observation)
        elif self.policy is None:
            angles, weights, margins, _ = optimise(self.seal.view)
            self.target = (angles, weights, margins)
        else:
            self.policy.reset(seed=policy_seed(seed), plan=self.seal.view)

    def act(self, observation: Any, mask: np.ndarray) -> int:
        if self.rollout is not None:
            return self.rollout.act(self.env, observation)
        self.seal.refresh()
        if self.policy is None:
            return steer(self.seal.view, *self.target)
        return int(self.policy.act(observation, mask))


def collect_demonstrations(
    args: Args, episodes: int, expert: Expert, student: Any = None, first: int = 0
) -> tuple[Demonstrations, list[dict[str, Any]]]:
    """The expert's labels on ``episodes`` training patients (episode ``first + i`` is task
    ``(first + i) mod 3``); with a ``student`` (DAgger) the student plays and the expert labels.
    Returns the demonstrations and, per episode, its task, split, seed and final score."""
    envs = {task: RadiotherapyPlanningEnv(task, split=SPLIT) for task in BUILTIN_TASKS}
    flatten = FlattenObservation(envs[BUILTIN_TASKS[0]])
    obs_rows: list[np.ndarray] = []
    mask_rows: list[np.ndarray] = []
    actions: list[int] = []
    returns: list[np.ndarray] = []
    played: list[dict[str, Any]] = []
    for episode in range(first, first + episodes):
        task = BUILTIN_TASKS[episode % len(BUILTIN_TASKS)]
        env, seed = envs[task], demo_seed(args.seed, episode)
        observation, info = env.reset(seed=seed)
        expert.start(env, seed, observation)
        rewards: list[float] = []
        done = False
        while not done:
            mask = np.asarray(env.action_masks(), dtype=bool)
            label = expert.act(observation, mask)
            if not mask[label]:
                raise RuntimeError(f"the expert {expert.name} chose the masked action {label}")
            encoded = flatten.observation(observation).astype(np.float32)
            obs_rows.append(encoded)
            mask_rows.append(mask)
            actions.append(label)
            action = label if student is None else student_action(student, encoded, mask)
            observation, reward, terminated, truncated, info = env.step(action)
            rewards.append(float(reward))
            done = terminated or truncated
        discounted = discounted_returns(rewards, args.gamma)
        returns.append(discounted)
        played.append({"task": task, "split": env.plan.split, "seed": seed, "score": float(info["score"])})
    demos = Demonstrations(
        np.asarray(obs_rows, np.float32),
        np.asarray(mask_rows, bool),
        np.asarray(actions, np.int64),
        np.concatenate(returns),
        [p["seed"] for p in played],
    )
    return demos, played


def warm_start(model: Any, args: Args) -> dict[str, Any]:
    """Demonstrations, the fit, ``--dagger-rounds`` of DAgger on ``model``; the statistics (the
    clone's agreement with the expert on every label, the episodes played) go in the run's json."""
    expert = Expert(args.warm_start, args.rollout_base, args.rollout_tolerance)
    demos, played = collect_demonstrations(args, args.warm_start_episodes, expert)
    parts = [demos]
    stats: dict[str, Any] = {"expert": args.warm_start, "rounds": []}
    fit = clone_into(model, demos, args)
    stats["rounds"].append({"round": 0, "expert_score": _mean_score(played), **fit})
    for r in range(args.dagger_rounds):
        first = args.warm_start_episodes + r * args.dagger_episodes
        more, seen = collect_demonstrations(args, args.dagger_episodes, expert, model, first)
        played += seen
        parts.append(more)
        # the clone's agreement on the states it reached itself, before refitting on them
        fit = {"clone_agreement_on_own_states": _agreement(model, more)}
        fit |= clone_into(model, concat(parts), args)
        stats["rounds"].append({"round": r + 1, "clone_score": _mean_score(seen), **fit})
    stats |= {k: v for k, v in stats["rounds"][-1].items() if k.startswith("clone_")}
    stats["episodes"] = played
    return stats


def _mean_score(played: list[dict[str, Any]]) -> dict[str, float]:
    return {t: float(np.mean([p["score"] for p in played if p["task"] == t])) for t in BUILTIN_TASKS}


def _agreement(model: Any, demos: Demonstrations) -> float:
    chosen = [student_action(model, o, m) for o, m in zip(demos.observations, demos.masks)]
    return float(np.mean(np.asarray(chosen) == demos.actions))
