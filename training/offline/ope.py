"""Off-policy evaluation: a target policy's value estimated from a behaviour's dataset.

The estimand is the target's expected *undiscounted episode return* (the env's summed reward over
the shift, ``gamma = 1`` by default) on the dataset's scenario: the quantity the grader reports as
``mean_episode_reward`` for the same scenario, which is the ground truth the estimates are compared
with (tools/offline_ope.py). The grader's 0-100 score is a different quantity (a composite of
episode metrics, not a sum of rewards); no estimator here estimates it.

Estimators (Precup 2000; Jiang & Li 2016; Le et al. 2019), all from the logged behaviour
probabilities (``behaviour_prob``) and the target's probabilities of the logged actions:

- ``pdis``: per-decision importance sampling, ``mean_i sum_t rho_i,0:t r_i,t``;
- ``wpdis``: its weighted (self-normalised) form, normalised per step over episodes;
- ``fqe``: fitted-Q evaluation: a Q-network regressed on ``r + gamma * sum_a pi(a|s') Q(s', a)``
  (a torch MLP, iterated; no offline library that installs beside this package offers FQE:
  d3rlpy's cannot be installed with the rest, docs/offline.md), value ``mean_i V(s_i,0)``;
- ``dr``: per-decision doubly robust with the FQE model (Jiang & Li 2016, eq. 8 unrolled).

A dataset whose behaviour probabilities are unknown (the planner's: NaN) gets ``fqe`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from training.offline.datasets import Transitions

TargetProbs = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""A target policy as the estimators need it: (states (N, D), flat masks (N, 39)) -> (N, 39)
action probabilities (a deterministic policy: one-hot)."""

ESTIMATORS = ("pdis", "wpdis", "dr", "fqe")


def _padded(tr: Transitions, values: np.ndarray, fill: float) -> np.ndarray:
    """(episodes, max steps) of a per-step quantity, ``fill`` after an episode's end."""
    n_ep = int(tr.episode.max()) + 1
    out = np.full((n_ep, int(tr.t.max()) + 1), fill, np.float64)
    out[tr.episode, tr.t] = values
    return out


def step_ratios(tr: Transitions, target: TargetProbs) -> np.ndarray:
    """``pi_e(a_t | s_t) / pi_b(a_t | s_t)`` of every logged step."""
    probs = target(tr.states, tr.masks)
    return probs[np.arange(len(tr.actions)), tr.actions] / tr.behaviour_prob


def pdis(tr: Transitions, target: TargetProbs, gamma: float = 1.0) -> float:
    """Per-decision importance sampling."""
    rho = np.cumprod(_padded(tr, step_ratios(tr, target), 1.0), axis=1)
    rewards = _padded(tr, tr.rewards * gamma**tr.t, 0.0)
    return float((rho * rewards).sum(axis=1).mean())


def wpdis(tr: Transitions, target: TargetProbs, gamma: float = 1.0) -> float:
    """Weighted per-decision importance sampling (each step's weights normalised over episodes;
    a step where every weight is zero adds nothing)."""
    rho = np.cumprod(_padded(tr, step_ratios(tr, target), 1.0), axis=1)
    rewards = _padded(tr, tr.rewards * gamma**tr.t, 0.0)
    total = rho.sum(axis=0)
    per_step = np.divide((rho * rewards).sum(axis=0), total, out=np.zeros_like(total), where=total > 0)
    return float(per_step.sum())


@dataclass
class FQE:
    """A fitted Q-function of one target policy on one dataset (:func:`fit_fqe`)."""

    q: np.ndarray  # (N, 39) Q(s_t, .) of every logged state
    v0: np.ndarray  # (episodes,) V(s_0) = sum_a pi(a|s_0) Q(s_0, a)
    v: np.ndarray  # (N,) V(s_t)

    @property
    def value(self) -> float:
        return float(self.v0.mean())


def fit_fqe(
    tr: Transitions,
    target: TargetProbs,
    gamma: float = 1.0,
    iterations: int = 150,
    steps_per_iteration: int = 40,
    batch_size: int = 512,
    hidden: int = 128,
    seed: int = 0,
) -> FQE:
    """Fitted-Q evaluation: ``iterations`` rounds, each regressing the network on targets from its
    previous round (rewards scaled by their standard deviation for the fit). Undiscounted values
    propagate one step per round: ``iterations`` must exceed the episode length (100 ticks)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    states = torch.as_tensor(tr.states)
    next_states = torch.as_tensor(tr.next_states)
    mean, std = states.mean(0), states.std(0) + 1e-3
    scale = float(np.std(tr.rewards)) or 1.0
    rewards = torch.as_tensor(tr.rewards / scale, dtype=torch.float32)
    not_done = torch.as_tensor(~tr.dones, dtype=torch.float32)
    actions = torch.as_tensor(tr.actions)
    next_pi = torch.as_tensor(target(tr.next_states, tr.next_masks), dtype=torch.float32)
    pi = torch.as_tensor(target(tr.states, tr.masks), dtype=torch.float32)
    n_actions = pi.shape[1]
    net = nn.Sequential(
        nn.Linear(states.shape[1], hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, n_actions),
    )  # fmt: skip
    optimiser = torch.optim.Adam(net.parameters(), lr=1e-3)

    def q_of(x: torch.Tensor) -> torch.Tensor:
        return net((x - mean) / std)

    n = len(rewards)
    for _ in range(iterations):
        with torch.no_grad():
            y = rewards + gamma * not_done * (q_of(next_states) * next_pi).sum(1)
        for _ in range(steps_per_iteration):
            idx = torch.as_tensor(rng.integers(n, size=min(batch_size, n)))
            pred = q_of(states[idx]).gather(1, actions[idx, None])[:, 0]
            loss = nn.functional.smooth_l1_loss(pred, y[idx])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    with torch.no_grad():
        q = q_of(states).numpy() * scale
    v = (q * pi.numpy()).sum(axis=1)
    return FQE(q, v[tr.t == 0], v)


def doubly_robust(tr: Transitions, target: TargetProbs, model: FQE, gamma: float = 1.0) -> float:
    """Per-decision doubly robust:
    ``mean_i sum_t gamma^t [rho_0:t (r_t - Q(s_t, a_t)) + rho_0:t-1 V(s_t)]``."""
    rho = np.cumprod(_padded(tr, step_ratios(tr, target), 1.0), axis=1)
    rho_prev = np.concatenate([np.ones((len(rho), 1)), rho[:, :-1]], axis=1)
    q_taken = model.q[np.arange(len(tr.actions)), tr.actions]
    disc = gamma**tr.t
    corr = _padded(tr, disc * (tr.rewards - q_taken), 0.0)
    base = _padded(tr, disc * model.v, 0.0)
    return float((rho * corr + rho_prev * base).sum(axis=1).mean())


def estimate(tr: Transitions, target: TargetProbs, gamma: float = 1.0, seed: int = 0, **fqe_options) -> dict:
    """Every estimator's value of ``target`` from ``tr`` (NaN where the behaviour's probabilities
    are unknown)."""
    model = fit_fqe(tr, target, gamma, seed=seed, **fqe_options)
    known = bool(np.isfinite(tr.behaviour_prob).all())
    nan = float("nan")
    return {
        "pdis": pdis(tr, target, gamma) if known else nan,
        "wpdis": wpdis(tr, target, gamma) if known else nan,
        "dr": doubly_robust(tr, target, model, gamma) if known else nan,
        "fqe": model.value,
    }


def ope_metrics(estimates: dict[str, float], truth: dict[str, float]) -> dict[str, float]:
    """Over target policies: mean absolute error, Spearman's rank correlation with the truth, and
    regret@1 (the truth's best value minus the true value of the estimator's top pick)."""
    from scipy.stats import spearmanr

    names = sorted(truth)
    est = np.array([estimates[n] for n in names])
    true = np.array([truth[n] for n in names])
    if not np.isfinite(est).all():
        return {"abs_error": float("nan"), "spearman": float("nan"), "regret_at_1": float("nan")}
    rho = spearmanr(est, true).statistic if len(names) > 2 else float("nan")
    return {
        "abs_error": float(np.abs(est - true).mean()),
        "spearman": float(rho),
        "regret_at_1": float(true.max() - true[int(est.argmax())]),
    }


__all__ = [
    "ESTIMATORS",
    "FQE",
    "doubly_robust",
    "estimate",
    "fit_fqe",
    "ope_metrics",
    "pdis",
    "step_ratios",
    "wpdis",
]
