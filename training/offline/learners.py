"""Offline learners from Tianshou 2 (a kept library that runs on this package's Gymnasium):
behaviour cloning (``OfflineImitationLearning``), discrete BCQ (``DiscreteBCQ``) and discrete CQL
(``DiscreteCQL``), trained on a dataset's :class:`~training.offline.datasets.Transitions` (flat
track) without Tianshou's env layer: a ``ReplayBuffer`` is filled from the arrays and the algorithm's
``update`` is called on it. The trained network plays as a package policy that takes the best
action the mask allows (:class:`OfflinePolicy`), so masks are respected whatever the network says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from policies.base import BasePolicy
from training.offline.behaviours import state_vector
from training.offline.datasets import Transitions

METHODS = ("bc", "bcq", "cql")


def _buffer(tr: Transitions) -> Any:
    from tianshou.data import Batch, ReplayBuffer

    buf = ReplayBuffer(len(tr.rewards))
    scale = float(np.std(tr.rewards)) or 1.0
    batch = Batch(
        obs=tr.states,
        act=tr.actions,
        rew=tr.rewards / scale,
        terminated=tr.dones,
        truncated=np.zeros_like(tr.dones),
        obs_next=tr.next_states,
        info=Batch(),
    )
    for i in range(len(tr.rewards)):
        buf.add(batch[i])
    return buf


def train(
    method: str, tr: Transitions, steps: int = 3000, batch_size: int = 256, seed: int = 0, gamma: float = 0.99
) -> Any:
    """Train ``method`` on ``tr``; returns a function (states (N, D)) -> (N, 39) scores (logits or Q)."""
    import torch
    from tianshou.algorithm import DiscreteBCQ, DiscreteCQL
    from tianshou.algorithm.imitation.discrete_bcq import DiscreteBCQPolicy
    from tianshou.algorithm.imitation.imitation_base import ImitationPolicy, OfflineImitationLearning
    from tianshou.algorithm.modelfree.qrdqn import QRDQNPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.utils.net.common import Net
    from tianshou.utils.torch_utils import policy_within_training_step

    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    torch.manual_seed(seed)
    np.random.seed(seed)
    dim, n = tr.states.shape[1], 39
    mean = torch.as_tensor(tr.states.mean(0))
    std = torch.as_tensor(tr.states.std(0) + 1e-3)
    obs_space = gym.spaces.Box(-np.inf, np.inf, (dim,), np.float32)
    act_space = gym.spaces.Discrete(n)
    hidden = (128, 128)

    class Normalised(torch.nn.Module):
        def __init__(self, net: torch.nn.Module, quantiles: int = 0) -> None:
            super().__init__()
            self.net, self.quantiles = net, quantiles

        def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple:
            x = (torch.as_tensor(obs, dtype=torch.float32) - mean) / std
            out, state = self.net(x)
            if self.quantiles:
                out = out.view(-1, n, self.quantiles)
            return out, state

    optim = AdamOptimizerFactory(lr=1e-3)
    if method == "bc":
        actor = Normalised(Net(state_shape=dim, action_shape=n, hidden_sizes=hidden))
        policy: Any = ImitationPolicy(actor=actor, action_space=act_space, observation_space=obs_space)
        algo: Any = OfflineImitationLearning(policy=policy, optim=optim)
        score = actor
    elif method == "bcq":
        model = Normalised(Net(state_shape=dim, action_shape=n, hidden_sizes=hidden))
        imitator = Normalised(Net(state_shape=dim, action_shape=n, hidden_sizes=hidden))
        policy = DiscreteBCQPolicy(model=model, imitator=imitator, action_space=act_space,
                                   observation_space=obs_space, target_update_freq=500)  # fmt: skip
        algo = DiscreteBCQ(policy=policy, optim=optim, gamma=gamma, target_update_freq=500)
        score = _BCQScore(policy)
    else:
        quantiles = 32
        model = Normalised(Net(state_shape=dim, action_shape=n * quantiles, hidden_sizes=hidden), quantiles)
        policy = QRDQNPolicy(model=model, action_space=act_space, observation_space=obs_space)
        algo = DiscreteCQL(policy=policy, optim=optim, gamma=gamma, num_quantiles=quantiles,
                           min_q_weight=1.0, target_update_freq=500)  # fmt: skip

        def score(obs: Any) -> tuple:
            out, _ = model(obs)
            return out.mean(2), None

    buf = _buffer(tr)
    buf = algo.process_buffer(buf)
    for _ in range(steps):
        with policy_within_training_step(algo.policy):
            algo.update(buf, batch_size)

    def scores(states: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return score(states)[0].numpy()

    return scores


class _BCQScore:
    """BCQ's action choice as scores: Q where the imitator allows the action, -inf elsewhere."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def __call__(self, obs: Any) -> tuple:
        import torch

        q, _ = self.policy.model(obs)
        logits, _ = self.policy.imitator(obs)
        ratio = logits - logits.max(dim=-1, keepdim=True).values
        return torch.where(ratio < self.policy._log_tau, torch.full_like(q, -1e9), q), None


def masked_argmax(scores: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """The best-scored valid action of each row (the no-op, always valid, when nothing else is)."""
    return np.where(np.asarray(masks, bool), scores, -np.inf).argmax(axis=1)


class OfflinePolicy(BasePolicy):
    """A trained offline learner as a flat-track package policy (the grader grades it)."""

    tracks = ("flat",)

    def __init__(self, scores: Any, name: str) -> None:
        super().__init__()
        self.scores, self.name = scores, name

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        state = state_vector(observation)[None]
        return int(masked_argmax(self.scores(state), np.asarray(action_mask, bool)[None])[0])

    def probabilities(self, states: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """One-hot on the chosen action (the OPE estimators' target interface)."""
        out = np.zeros((len(states), 39))
        out[np.arange(len(states)), masked_argmax(self.scores(states), masks)] = 1.0
        return out


__all__ = ["METHODS", "OfflinePolicy", "masked_argmax", "train"]
