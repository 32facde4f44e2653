"""Warm start of ``train ppo --warm-start heuristic``: clone the flat heuristic, then MaskablePPO.

From a random start, masked PPO spends most of its budget rediscovering the rules the flat
``heuristic`` already follows (docs/reference-policies.md), and at 100-200k steps it did not
reliably reach them on every scenario. Starting from a clone of the rules, PPO only has to
find where to depart from them. Two steps, run on the model :func:`training.ppo.train` built,
before ``model.learn``:

1. :func:`collect_demonstrations` plays the heuristic on *training* days of the training env
   pipeline (:func:`training.ppo_env.make_env`: the same scenario cycle, reward and encoding PPO
   sees). Each day's seed is drawn from ``SeedSequence([DEMO_TAG, seed, day])``, a different
   stream from the grader's days (:func:`grading.common.episode_seed`: validation 1000+, the
   reported seed 0), which are never played here.
2. :func:`clone_into` fits the actor by masked cross-entropy on the heuristic's actions and the
   critic by least squares to the demonstrations' discounted training returns (``--gamma``), so
   PPO's first advantages measure departures from the rules rather than a random critic's noise.

The same idea, for BenchMARL's team actors, is :mod:`training.benchmarl.warmstart`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hospital_marl.core.hospital import Hospital, Seal
from policies.base import policy_seed
from policies.heuristic import flat_heuristic_action
from policies.planner import PlannerPolicy
from training.ppo_env import make_env

if TYPE_CHECKING:
    from training.ppo import Args

DEMO_TAG = 0xC10E
"""First word of every demonstration day's seed: keeps them off the grader's seed stream."""
CLONE_MINIBATCH = 256


@dataclass
class Demonstrations:
    """The heuristic's play as the learner sees it: one row per tick."""

    observations: np.ndarray  # (N, FEATURE_SIZE) float32, the encoded observation
    masks: np.ndarray  # (N, 39) bool, the training mask (pruned with --prune)
    actions: np.ndarray  # (N,) int64, the heuristic's action
    returns: np.ndarray  # (N,) float32, discounted training return from that tick on
    day_seeds: list[int]


def discounted_returns(rewards: list[float], gamma: float) -> np.ndarray:
    """Each step's discounted return to the episode's end (the critic's fitting target)."""
    discounted = np.zeros(len(rewards), np.float32)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        discounted[t] = running
    return discounted


def demo_seed(seed: int, day: int) -> int:
    return int(np.random.SeedSequence([DEMO_TAG, seed, day]).generate_state(1)[0])


class Expert:
    """The policy whose actions are cloned: ``heuristic`` (a function of the observation) or
    ``planner``, which plans on a sealed view of the training day (SPEC §12), as when graded."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.planner = PlannerPolicy() if name == "planner" else None
        self.seal: Seal | None = None

    def start(self, hospital: Hospital, seed: int) -> None:
        if self.planner is not None:
            self.seal = Seal(hospital)
            self.planner.reset(seed=policy_seed(seed), hospital=self.seal.handle)

    def act(self, observation: dict[str, np.ndarray], mask: np.ndarray) -> int:
        if self.planner is None:
            return flat_heuristic_action(observation, mask)
        self.seal.refresh()
        return self.planner.act(observation, mask)


def collect_demonstrations(
    args: Args, days: int, expert: str = "heuristic", student: Any = None, first_day: int = 0
) -> Demonstrations:
    """``expert``'s actions on ``days`` training days (scenarios cycled as in training).

    With a ``student`` (a model: DAgger), the student's masked argmax is played and the expert
    only labels the states the student reaches. States whose expert action the training mask
    excludes (possible with ``--prune`` and the planner) are played but not kept.
    """
    env = make_env(args, rank=0)  # EncodedObservation on top of the reward wrappers
    inner = env.env  # the Dict observation, the scaled training reward
    encode = env.encoder
    teacher = Expert(expert)
    obs_rows: list[np.ndarray] = []
    mask_rows: list[np.ndarray] = []
    actions: list[int] = []
    returns: list[np.ndarray] = []
    seeds = [demo_seed(args.seed, day) for day in range(first_day, first_day + days)]
    for seed in seeds:
        observation, _ = inner.reset(seed=seed)
        teacher.start(inner.unwrapped.hospital, seed)
        rewards: list[float] = []
        kept: list[int] = []
        done = False
        while not done:
            env_mask = np.asarray(inner.unwrapped.action_masks(), dtype=bool)
            mask = np.asarray(inner.get_wrapper_attr("action_masks")(), dtype=bool)  # pruned if --prune
            label = teacher.act(observation, env_mask)
            encoded = encode(observation)
            if mask[label]:
                kept.append(len(rewards))
                obs_rows.append(encoded)
                mask_rows.append(mask)
                actions.append(label)
            elif student is None and expert == "heuristic":
                raise RuntimeError(f"the training mask excludes the heuristic's action {label}")
            action = label if student is None else student_action(student, encoded, mask)
            observation, reward, terminated, truncated, _ = inner.step(action)
            rewards.append(float(reward))
            done = terminated or truncated
        discounted = discounted_returns(rewards, args.gamma)
        returns.append(discounted[kept])
    env.close()
    return Demonstrations(
        np.asarray(obs_rows, np.float32).reshape(len(actions), -1),
        np.asarray(mask_rows, bool).reshape(len(actions), -1),
        np.asarray(actions, np.int64),
        np.concatenate(returns),
        seeds,
    )


def student_action(model: Any, encoded: np.ndarray, mask: np.ndarray) -> int:
    """The model's deterministic choice (masked argmax), as graded."""
    action, _ = model.predict(encoded, action_masks=mask, deterministic=True)
    return int(action)


def concat(parts: list[Demonstrations]) -> Demonstrations:
    return Demonstrations(
        *(
            np.concatenate([getattr(d, k) for d in parts])
            for k in ("observations", "masks", "actions", "returns")
        ),
        [seed for d in parts for seed in d.day_seeds],
    )


def fit_minibatches(
    model: Any, n: int, args: Any, losses: Callable[[Any], tuple[Any, Any]]
) -> tuple[float, float] | None:
    """Fit ``model.policy`` to ``n`` labelled states: ``args.warm_start_epochs`` passes over them in
    shuffled minibatches of :data:`CLONE_MINIBATCH` (Adam at ``args.warm_start_lr``, the generator
    seeded with ``args.seed``, gradients clipped at the model's ``max_grad_norm``), minimising
    ``actor + vf_coef * critic`` from ``losses(batch indices)``. Returns the last epoch's mean
    (actor, critic) losses (None without epochs); the policy is left in evaluation mode.

    The loop of both fits to labels: the clone (:func:`clone_into`) and the radiotherapy
    residual's (:func:`training.rt_residual.fit`), which differ only in their losses."""
    import torch

    policy = model.policy
    policy.set_training_mode(True)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.warm_start_lr)
    generator = torch.Generator().manual_seed(args.seed)
    means = None
    for _ in range(args.warm_start_epochs):
        totals = np.zeros(2)
        for batch in torch.randperm(n, generator=generator).split(CLONE_MINIBATCH):
            actor_loss, critic_loss = losses(batch)
            loss = actor_loss + model.vf_coef * critic_loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), model.max_grad_norm)
            optimizer.step()
            totals += (actor_loss.item() * len(batch), critic_loss.item() * len(batch))
        means = (totals[0] / n, totals[1] / n)
    policy.set_training_mode(False)
    return means


def clone_into(model: Any, demos: Demonstrations, args: Any) -> dict[str, float]:
    """Fit ``model.policy`` (actor and critic) to ``demos``; returns the final fit statistics.

    Shared by the ED's and the radiotherapy trainer: ``args`` needs ``seed``, ``warm_start_epochs``
    and ``warm_start_lr``; the critic's weight is the model's own ``vf_coef``."""
    import torch

    policy = model.policy
    obs = torch.as_tensor(demos.observations)
    masks = torch.as_tensor(demos.masks)
    actions = torch.as_tensor(demos.actions)
    returns = torch.as_tensor(demos.returns)
    n = len(actions)

    def losses(batch: Any) -> tuple[Any, Any]:
        values, log_prob, _ = policy.evaluate_actions(obs[batch], actions[batch], masks[batch])
        return -log_prob.mean(), torch.nn.functional.mse_loss(values.flatten(), returns[batch])

    means = fit_minibatches(model, n, args, losses)
    stats = {} if means is None else {"clone_nll": means[0], "clone_value_mse": means[1]}
    with torch.no_grad():
        agree = 0
        for batch in torch.arange(n).split(4096):
            # the masked argmax the model plays when graded (action_net included, whatever the net)
            dist = policy.get_distribution(obs[batch], action_masks=masks[batch].numpy())
            agree += int((dist.distribution.logits.argmax(1) == actions[batch]).sum())
    stats["clone_agreement"] = agree / n
    stats["clone_states"] = float(n)
    return stats


def warm_start(model: Any, args: Args) -> dict[str, float]:
    """Steps 1 and 2 of the module docstring on ``model`` (then ``--dagger-rounds`` of DAgger);
    the statistics go in the run's ``clone.json``."""
    demos = [collect_demonstrations(args, args.warm_start_days, args.warm_start)]
    stats = clone_into(model, demos[0], args)
    for r in range(args.dagger_rounds):
        first = args.warm_start_days + r * args.dagger_days
        demos.append(collect_demonstrations(args, args.dagger_days, args.warm_start, model, first))
        stats = clone_into(model, concat(demos), args)
    return stats
