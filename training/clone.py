"""Warm start of ``train ppo --warm-start heuristic``: clone the flat heuristic, then MaskablePPO.

From a random start, masked PPO spends most of its budget rediscovering the rules the flat
``heuristic`` already follows (docs/reference-policies.md), and at 100-200k steps it did not
reliably reach them on every scenario. Starting from a clone of the rules, PPO only has to
find where to depart from them. Two steps, run on the model :func:`training.ppo.train` built,
before ``model.learn``:

1. :func:`collect_demonstrations` plays the heuristic on *training* days of the training env
   pipeline (:func:`training.ppo.make_env`: the same scenario cycle, reward and encoding PPO
   sees). Each day's seed is drawn from ``SeedSequence([DEMO_TAG, seed, day])``, a different
   stream from the grader's days (:func:`grading.common.episode_seed`: validation 1000+, the
   reported seed 0), which are never played here.
2. :func:`clone_into` fits the actor by masked cross-entropy on the heuristic's actions and the
   critic by least squares to the demonstrations' discounted training returns (``--gamma``), so
   PPO's first advantages measure departures from the rules rather than a random critic's noise.

The same idea, for BenchMARL's team actors, is :mod:`training.benchmarl.warmstart`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from policies.heuristic import flat_heuristic_action

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


def demo_seed(seed: int, day: int) -> int:
    return int(np.random.SeedSequence([DEMO_TAG, seed, day]).generate_state(1)[0])


def collect_demonstrations(args: Args, days: int) -> Demonstrations:
    """The heuristic on ``days`` training days (scenarios cycled as in training)."""
    from training.ppo import make_env

    env = make_env(args, rank=0)  # EncodedObservation on top of the reward wrappers
    inner = env.env  # the Dict observation, the scaled training reward
    encode = env.encoder
    obs_rows: list[np.ndarray] = []
    mask_rows: list[np.ndarray] = []
    actions: list[int] = []
    returns: list[np.ndarray] = []
    seeds = [demo_seed(args.seed, day) for day in range(days)]
    for seed in seeds:
        observation, _ = inner.reset(seed=seed)
        rewards: list[float] = []
        done = False
        while not done:
            env_mask = np.asarray(inner.unwrapped.action_masks(), dtype=bool)
            mask = np.asarray(inner.get_wrapper_attr("action_masks")(), dtype=bool)  # pruned if --prune
            action = flat_heuristic_action(observation, env_mask)
            if not mask[action]:  # pruning never removes the heuristic's action (tests/policies)
                raise RuntimeError(f"the training mask excludes the heuristic's action {action}")
            obs_rows.append(encode(observation))
            mask_rows.append(mask)
            actions.append(action)
            observation, reward, terminated, truncated, _ = inner.step(action)
            rewards.append(float(reward))
            done = terminated or truncated
        discounted = np.zeros(len(rewards), np.float32)
        running = 0.0
        for t in range(len(rewards) - 1, -1, -1):
            running = rewards[t] + args.gamma * running
            discounted[t] = running
        returns.append(discounted)
    env.close()
    return Demonstrations(
        np.asarray(obs_rows, np.float32),
        np.asarray(mask_rows, bool),
        np.asarray(actions, np.int64),
        np.concatenate(returns),
        seeds,
    )


def clone_into(model: Any, demos: Demonstrations, args: Args) -> dict[str, float]:
    """Fit ``model.policy`` (actor and critic) to ``demos``; returns the final fit statistics."""
    import torch

    policy = model.policy
    policy.set_training_mode(True)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.warm_start_lr)
    generator = torch.Generator().manual_seed(args.seed)
    obs = torch.as_tensor(demos.observations)
    masks = torch.as_tensor(demos.masks)
    actions = torch.as_tensor(demos.actions)
    returns = torch.as_tensor(demos.returns)
    n = len(actions)
    stats: dict[str, float] = {}
    for _ in range(args.warm_start_epochs):
        totals = np.zeros(2)
        for batch in torch.randperm(n, generator=generator).split(CLONE_MINIBATCH):
            values, log_prob, _ = policy.evaluate_actions(obs[batch], actions[batch], masks[batch])
            actor_loss = -log_prob.mean()
            critic_loss = torch.nn.functional.mse_loss(values.flatten(), returns[batch])
            loss = actor_loss + args.vf_coef * critic_loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), model.max_grad_norm)
            optimizer.step()
            totals += (actor_loss.item() * len(batch), critic_loss.item() * len(batch))
        stats = {"clone_nll": totals[0] / n, "clone_value_mse": totals[1] / n}
    policy.set_training_mode(False)
    with torch.no_grad():
        agree = 0
        for batch in torch.arange(n).split(4096):
            logits = policy.mlp_extractor.forward_actor(policy.extract_features(obs[batch]))
            logits = logits.masked_fill(~masks[batch], -torch.inf)
            agree += int((logits.argmax(1) == actions[batch]).sum())
    stats["clone_agreement"] = agree / n
    stats["clone_states"] = float(n)
    return stats


def warm_start(model: Any, args: Args) -> dict[str, float]:
    """Steps 1 and 2 of the module docstring on ``model``; the statistics go in the run's metadata."""
    demos = collect_demonstrations(args, args.warm_start_days)
    return clone_into(model, demos, args)
