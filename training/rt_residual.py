"""Labels for the residual learner (``train radiotherapy --residual anatomy_aware --residual-labels N``):
one-step policy improvement over "defer everywhere".

At a state the residual reaches, the value of each valid env action ``a`` is the final score of
the episode in which ``a`` is played and the residual then defers to its base for good (the base
re-entered after ``a`` unless ``a`` is its own proposal, exactly as
:class:`~policies.radiotherapy.residual.DeferringBase` does when graded). The label is
:data:`~policies.radiotherapy.residual.DEFER` unless some ``a`` beats the base's own continuation
by more than a tolerance; then it is that ``a``. A single such departure provably does not lower the
episode's score (the value is the score reached); a net fitted to the labels is then graded on
validation patients like any other candidate.

Only training uses this: it simulates on the live training env (``Plan.snapshot`` /
``Plan.restore``), which a graded policy never may.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.radiotherapy.learned import actor_layers, flatten_observation
from policies.radiotherapy.residual import (
    DEFER,
    FEATURE_SIZE,
    N_RESIDUAL_ACTIONS,
    DeferringBase,
    ResidualRTPolicy,
    env_action,
    residual_features,
    residual_mask,
)
from training.clone import demo_seed, discounted_returns, fit_minibatches

if TYPE_CHECKING:
    from training.radiotherapy import Args

Observation = Mapping[str, np.ndarray]
SPLIT = "train"
"""The only split labelled patients are drawn from."""
LABEL_TAG = 0x5E51D
"""Keys the stream that picks which states are labelled."""


def residual_action(
    observation: Observation, mask: np.ndarray, base: DeferringBase, student: ResidualRTPolicy | None
) -> int:
    """The env action the residual plays (``student`` None: defer, the base's proposal); the base
    is told what was played."""
    action = choose(observation, mask, base.propose(observation, mask), student)
    base.taken(action)
    return action


def choose(
    observation: Observation, mask: np.ndarray, proposal: int, student: ResidualRTPolicy | None
) -> int:
    """The student's env action given the base's proposal (defer everywhere when ``student`` is None)."""
    if student is None:
        return proposal
    logits = student.logits(residual_features(flatten_observation(observation), proposal))
    return env_action(int(np.argmax(np.where(residual_mask(mask, proposal), logits, -np.inf))), proposal)


def play_to_end(
    env: RadiotherapyPlanningEnv,
    observation: Observation,
    base: DeferringBase,
    student: ResidualRTPolicy | None = None,
) -> tuple[float, int]:
    """Play the residual (``student``, or defer everywhere) to the end of the episode; the final
    score and the steps taken."""
    plan, steps = env.plan, 0
    while not plan.done:
        observation, _, _, _, _ = env.step(residual_action(observation, plan.action_mask(), base, student))
        steps += 1
    return plan.score, steps


def action_values(
    env: RadiotherapyPlanningEnv, base: DeferringBase, student: ResidualRTPolicy | None = None
) -> tuple[np.ndarray, int]:
    """Each valid env action's value (the final score of: the action, then the residual ``student``,
    or defer everywhere, to the end; ``-inf`` for masked actions), from the state where ``base`` has
    just proposed; the env and the base are left as they were. Returns the values and the simulated
    steps."""
    plan = env.plan
    if base.proposal is None:
        raise RuntimeError("action_values needs the base's proposal for this state (call propose first)")
    state = plan.snapshot()
    mask = plan.action_mask()
    values = np.full(len(mask), -np.inf)
    steps = 0
    for action in np.flatnonzero(mask):
        branch = copy.deepcopy(base)
        branch.taken(int(action))
        observation, _, _, _, _ = env.step(int(action))
        value, n = (plan.score, 0) if plan.done else play_to_end(env, observation, branch, student)
        values[action] = value
        steps += n + 1
        plan.restore(state)
    return values, steps


def label(values: np.ndarray, proposal: int, tolerance: float) -> int:
    """DEFER unless an action beats the proposal's value by more than ``tolerance`` (the best one)."""
    best = int(np.argmax(values))
    return best if values[best] > values[proposal] + tolerance else DEFER


def good_actions(values: np.ndarray, proposal: int, tolerance: float) -> np.ndarray:
    """The residual actions a label accepts, as a mask over the 11: defer (and the proposal itself,
    which plays the same) when no action beats the proposal by more than ``tolerance``; otherwise
    every action that does and is within ``tolerance`` of the best. Near-ties are many (turning a
    beam or trimming its weight often score alike), so the net is fitted to the set, not to one
    arbitrary member of it."""
    good = np.zeros(len(values) + 1, dtype=bool)
    if label(values, proposal, tolerance) == DEFER:
        good[[proposal, -1]] = True  # the last is defer
    else:
        good[:-1] = (values > values[proposal] + tolerance) & (values >= values.max() - tolerance)
    return good


ADVANTAGE_SCALE = 100.0
"""Residual logits fitted as advantages: 1 logit = 0.01 of final score (so a defer bonus of 1 is a
departure threshold of 0.01)."""
ADVANTAGE_FLOOR = -0.05
"""Advantages below this are fitted as this (a bad departure need only be known to be bad)."""


def advantage_targets(values: np.ndarray, proposal: int) -> np.ndarray:
    """The logits the ``advantage`` fit regresses to: each valid action's final-score gain over the
    proposal (floored at :data:`ADVANTAGE_FLOOR`), times :data:`ADVANTAGE_SCALE`; defer's is 0."""
    gain = np.where(np.isfinite(values), values - values[proposal], 0.0)
    return np.append(ADVANTAGE_SCALE * np.maximum(gain, ADVANTAGE_FLOOR), 0.0).astype(np.float32)


def label_statistics(labels: list[int], gains: list[float]) -> dict[str, Any]:
    """How often the labels depart from the base, and the mean gain where they do."""
    departures = [g for a, g in zip(labels, gains) if a != DEFER]
    return {
        "states": len(labels),
        "departures": len(departures),
        "mean_departure_gain": float(np.mean(departures)) if departures else 0.0,
    }


def collect_labels(
    args: Args, episodes: int, first: int, student: ResidualRTPolicy | None
) -> tuple[Labels, list[dict[str, Any]], dict[str, Any]]:
    """The residual (``student``, or defer everywhere) plays ``episodes`` *training* patients
    (episode ``first + i`` is task ``(first + i) mod 3``, its patient :func:`training.clone.demo_seed`,
    never a validation or test patient); each state is labelled with probability
    ``args.residual_label_fraction`` by :func:`label` over :func:`action_values` (continued by the
    same student). Returns the labelled rows (the net's features, the residual mask, the label, the
    discounted return from there), each episode's task, split, seed and score, and label statistics."""
    envs = {task: RadiotherapyPlanningEnv(task, split=SPLIT) for task in BUILTIN_TASKS}
    rng = np.random.default_rng([LABEL_TAG, args.seed, first])
    rows: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    labels: list[int] = []
    goods: list[np.ndarray] = []
    advantages: list[np.ndarray] = []
    gains: list[float] = []
    returns: list[np.ndarray] = []
    played: list[dict[str, Any]] = []
    simulated = 0
    for episode in range(first, first + episodes):
        task = BUILTIN_TASKS[episode % len(BUILTIN_TASKS)]
        env, seed = envs[task], demo_seed(args.seed, episode)
        observation, info = env.reset(seed=seed)
        base = DeferringBase(args.residual)
        rewards: list[float] = []
        labelled: list[int] = []
        done = False
        while not done:
            mask = np.asarray(env.action_masks(), dtype=bool)
            proposal = base.propose(observation, mask)
            if rng.random() < args.residual_label_fraction:
                values, n = action_values(env, base, student)
                simulated += n
                target = label(values, proposal, args.residual_tolerance)
                rows.append(residual_features(flatten_observation(observation), proposal))
                masks.append(residual_mask(mask, proposal))
                labels.append(target)
                goods.append(good_actions(values, proposal, args.residual_tolerance))
                advantages.append(advantage_targets(values, proposal))
                gains.append(float(values.max() - values[proposal]))
                labelled.append(len(rewards))
            action = choose(observation, mask, proposal, student)
            base.taken(action)
            observation, reward, terminated, truncated, info = env.step(action)
            rewards.append(float(reward))
            done = terminated or truncated
        returns.append(discounted_returns(rewards, args.gamma)[labelled])
        played.append({"task": task, "split": SPLIT, "seed": seed, "score": float(info["score"])})
    demos = Labels(
        np.asarray(rows, np.float32).reshape(len(rows), FEATURE_SIZE),
        np.asarray(masks, bool).reshape(len(masks), N_RESIDUAL_ACTIONS),
        np.asarray(goods, bool).reshape(len(goods), N_RESIDUAL_ACTIONS),
        np.asarray(advantages, np.float32).reshape(len(advantages), N_RESIDUAL_ACTIONS),
        np.concatenate(returns).astype(np.float32),
        [p["seed"] for p in played],
    )
    return demos, played, {**label_statistics(labels, gains), "simulated_steps": simulated}


def warm_start(model: Any, args: Args) -> dict[str, Any]:
    """``--residual-rounds`` of approximate policy iteration on ``model``'s actor: the residual plays
    training patients, its states are labelled by one-step lookahead over its own continuation, the
    actor (and critic) are fitted to every round's labels (:func:`fit`). The
    statistics go in the run's json."""
    parts: list[Labels] = []
    student: ResidualRTPolicy | None = None
    stats: dict[str, Any] = {"expert": "one-step lookahead over the residual", "rounds": []}
    played_all: list[dict[str, Any]] = []
    for r in range(args.residual_rounds):
        demos, played, labels = collect_labels(
            args, args.residual_episodes, r * args.residual_episodes, student
        )
        played_all += played
        round_stats: dict[str, Any] = {"round": r, "student_score": _mean_score(played), **labels}
        if student is not None:  # the student's agreement with the labels of the states it reached
            round_stats["agreement_on_own_states"] = _agreement(student, demos)
        parts.append(demos)
        round_stats |= fit(model, Labels.concat(parts), args)
        student = ResidualRTPolicy(actor_layers(model), base=args.residual)
        stats["rounds"].append(round_stats)
        print(json.dumps({k: v for k, v in round_stats.items()}), flush=True)
    stats["episodes"] = played_all
    return stats


def _mean_score(played: list[dict[str, Any]]) -> dict[str, float]:
    return {t: float(np.mean([p["score"] for p in played if p["task"] == t])) for t in BUILTIN_TASKS}


def _agreement(student: ResidualRTPolicy, demos: Labels) -> float:
    """How often the student's choice is one its label accepts."""
    chosen = [
        int(np.argmax(np.where(m, student.logits(x), -np.inf))) for x, m in zip(demos.features, demos.masks)
    ]
    return float(np.mean(demos.good[np.arange(len(chosen)), chosen]))


@dataclass
class Labels:
    """Labelled states: the net's features, the residual mask, the accepted actions, the return."""

    features: np.ndarray  # (N, FEATURE_SIZE) float32
    masks: np.ndarray  # (N, 11) bool
    good: np.ndarray  # (N, 11) bool, :func:`good_actions`
    advantages: np.ndarray  # (N, 11) float32, :func:`advantage_targets`
    returns: np.ndarray  # (N,) float32, discounted return from the state on
    seeds: list[int]

    @staticmethod
    def concat(parts: list[Labels]) -> Labels:
        return Labels(
            *(
                np.concatenate([getattr(p, k) for p in parts])
                for k in ("features", "masks", "good", "advantages", "returns")
            ),
            [seed for p in parts for seed in p.seeds],
        )


def fit(model: Any, labels: Labels, args: Args) -> dict[str, float]:
    """Fit the actor (``--residual-fit set``: maximise the probability of the accepted actions,
    masked; ``advantage``: the raw logits regress :func:`advantage_targets`, so a wrong departure's
    cost is learned, not only the right one) and the critic to the returns, ``--warm-start-epochs``
    at ``--warm-start-lr`` (:func:`training.clone.fit_minibatches`); the
    statistics of the last epoch."""
    import torch

    policy = model.policy
    obs = torch.as_tensor(labels.features)
    masks = torch.as_tensor(labels.masks)
    good = torch.as_tensor(labels.good)
    advantages = torch.as_tensor(labels.advantages)
    returns = torch.as_tensor(labels.returns)
    n = len(returns)

    def losses(batch: Any) -> tuple[Any, Any]:
        if args.residual_fit == "advantage":  # the raw logits regress the advantages (valid ones)
            latent, _ = policy.mlp_extractor(
                policy.extract_features(obs[batch], policy.pi_features_extractor)
            )
            error = (policy.action_net(latent) - advantages[batch]) ** 2
            actor_loss = (error * masks[batch]).sum() / masks[batch].sum()
        else:
            dist = policy.get_distribution(obs[batch], action_masks=masks[batch].numpy())
            log_probs = torch.log_softmax(dist.distribution.logits, dim=1)
            actor_loss = -torch.logsumexp(log_probs.masked_fill(~good[batch], -1e9), dim=1).mean()
        values = policy.predict_values(obs[batch])
        return actor_loss, torch.nn.functional.mse_loss(values.flatten(), returns[batch])

    means = fit_minibatches(model, n, args, losses)
    stats = {} if means is None else {"fit_nll": means[0], "fit_value_mse": means[1]}
    with torch.no_grad():
        dist = policy.get_distribution(obs, action_masks=masks.numpy())
        chosen = dist.distribution.logits.argmax(1)
    stats["fit_agreement"] = float(good[torch.arange(n), chosen].float().mean())
    stats["fit_states"] = float(n)
    return stats


__all__ = [
    "action_values",
    "advantage_targets",
    "choose",
    "collect_labels",
    "fit",
    "good_actions",
    "label",
    "label_statistics",
    "play_to_end",
    "residual_action",
    "warm_start",
]
