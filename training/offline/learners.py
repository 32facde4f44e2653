"""Offline learners from Tianshou 2 (a kept library that runs on this package's Gymnasium):
behaviour cloning (``OfflineImitationLearning``), discrete BCQ (``DiscreteBCQ``), discrete CQL
(``DiscreteCQL``) and discrete CRR (``DiscreteCRR``), trained on a dataset's
:class:`~training.offline.datasets.Transitions` (flat track) without Tianshou's env layer: a
``ReplayBuffer`` is filled from the arrays and the algorithm's ``update`` is called on it. The
trained network plays as a package policy that takes the best action the mask allows
(:class:`OfflinePolicy`), so masks are respected whatever the network says.

A method is a spec like the behaviours': ``bc``, ``bcq``, ``cql``, ``crr``, with options for what
the field does on near-expert data: ``bc:top=0.25`` (clone only the episodes with the top quarter
of returns: filtered BC), ``bcq:tau=0.05`` (BCQ's threshold on the imitator's relative probability,
Tianshou's ``unlikely_action_threshold``; lower lets more actions through), ``cql:alpha=0.1``
(CQL's conservative weight, Tianshou's ``min_q_weight``; lower is less conservative) and
``crr:beta=1`` (CRR's advantage temperature).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from hospital_marl.envs.observations import BLOCKS
from policies.base import BasePolicy, load_kwargs
from training.offline.behaviours import state_vector
from training.offline.datasets import Transitions

_BLOCK_KEYS = {b.key for b in BLOCKS}
METHODS = ("bc", "bcq", "cql", "crr")
OPTIONS = {"bc": {"top": 1.0}, "bcq": {"tau": 0.3}, "cql": {"alpha": 1.0}, "crr": {"beta": 1.0}}
"""Each method's options and their defaults (``bcq``'s tau and ``crr``'s beta: Tianshou's defaults;
``cql``'s alpha: 1, the committed baselines' setting, Tianshou's default being 10)."""


def parse_method(spec: str) -> tuple[str, dict[str, float]]:
    """``"cql:alpha=0.1"`` -> ("cql", {"alpha": 0.1}) with the method's defaults filled in (clear
    error for an unknown method or option)."""
    name, kwargs = load_kwargs(spec)
    if name not in METHODS:
        raise ValueError(f"unknown offline method {spec!r}; methods: {', '.join(METHODS)}")
    bad = sorted(set(kwargs) - set(OPTIONS[name]))
    if bad or not all(isinstance(v, int | float) and v > 0 for v in kwargs.values()):
        raise ValueError(f"method {spec!r}: options of {name} are {sorted(OPTIONS[name])}, numbers > 0")
    if name == "bc" and not 0 < kwargs.get("top", 1.0) <= 1:
        raise ValueError(f"method {spec!r}: top is a fraction of the episodes, in (0, 1]")
    return name, {**OPTIONS[name], **{k: float(v) for k, v in kwargs.items()}}


def top_episodes(tr: Transitions, fraction: float) -> Transitions:
    """The steps of the episodes whose return is in the top ``fraction`` (at least one episode)."""
    returns = np.bincount(tr.episode, tr.rewards)
    keep_n = max(1, round(fraction * len(returns)))
    kept = np.zeros(len(returns), bool)
    kept[np.argsort(-returns, kind="stable")[:keep_n]] = True
    rows = kept[tr.episode]
    fields = {f: getattr(tr, f) for f in Transitions.__dataclass_fields__ if f != "keys"}
    return Transitions(**{f: v[rows] for f, v in fields.items()}, keys=tr.keys)


def _buffer(tr: Transitions) -> Any:
    """A Tianshou ``ReplayBuffer`` holding ``tr`` (rewards scaled by their standard deviation), filled
    in one piece (``ReplayBuffer.from_data``; adding row by row took longer than 1000 updates)."""
    from tianshou.data import ReplayBuffer

    scale = float(np.std(tr.rewards)) or 1.0
    no, rew = np.zeros_like(tr.dones), tr.rewards / scale
    buf = ReplayBuffer.from_data(tr.states, tr.actions, rew, tr.dones, no, tr.dones, tr.next_states)
    buf.last_index = np.array([len(tr.rewards) - 1])  # where add() would leave it: the last row
    return buf


def train(
    method: str, tr: Transitions, steps: int = 3000, batch_size: int = 256, seed: int = 0, gamma: float = 0.99
) -> Any:
    """Train ``method`` (a spec: :func:`parse_method`) on ``tr``; returns a function
    (states (N, D)) -> (N, 39) scores (logits or Q)."""
    import torch
    from tianshou.algorithm import DiscreteBCQ, DiscreteCQL, DiscreteCRR
    from tianshou.algorithm.imitation.discrete_bcq import DiscreteBCQPolicy
    from tianshou.algorithm.imitation.imitation_base import ImitationPolicy, OfflineImitationLearning
    from tianshou.algorithm.modelfree.qrdqn import QRDQNPolicy
    from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.utils.net.common import Net
    from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic
    from tianshou.utils.torch_utils import policy_within_training_step

    method, options = parse_method(method)
    if method == "bc" and options["top"] < 1:
        tr = top_episodes(tr, options["top"])
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
                                   observation_space=obs_space, target_update_freq=500,
                                   unlikely_action_threshold=options["tau"])  # fmt: skip
        algo = DiscreteBCQ(policy=policy, optim=optim, gamma=gamma, target_update_freq=500)
        score = _BCQScore(policy)
    elif method == "crr":
        # Tianshou's actor and critic take a feature net (its output size), so the states are
        # normalised inside it rather than by a wrapper
        class Features(Net):
            def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple:
                return super().forward((torch.as_tensor(obs, dtype=torch.float32) - mean) / std, state, info)

        actor = DiscreteActor(preprocess_net=Features(state_shape=dim, hidden_sizes=hidden), action_shape=n,
                              softmax_output=False)  # fmt: skip
        critic = DiscreteCritic(preprocess_net=Features(state_shape=dim, hidden_sizes=hidden), last_size=n)
        policy = DiscreteActorPolicy(actor=actor, action_space=act_space, observation_space=obs_space)
        algo = DiscreteCRR(policy=policy, critic=critic, optim=optim, gamma=gamma, beta=options["beta"],
                           target_update_freq=500)  # fmt: skip
        score = actor
    else:
        quantiles = 32
        model = Normalised(Net(state_shape=dim, action_shape=n * quantiles, hidden_sizes=hidden), quantiles)
        policy = QRDQNPolicy(model=model, action_space=act_space, observation_space=obs_space)
        algo = DiscreteCQL(policy=policy, optim=optim, gamma=gamma, num_quantiles=quantiles,
                           min_q_weight=options["alpha"], target_update_freq=500)  # fmt: skip

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
    """A trained offline learner as a flat-track package policy (the grader grades it). ``keys``:
    the dataset's state layout (:attr:`Transitions.keys`): the global state's blocks, then any
    presence blocks (the ``train`` split's), read from the observation in that order."""

    tracks = ("flat",)

    def __init__(self, scores: Any, name: str, keys: Sequence[str] = ()) -> None:
        super().__init__()
        self.scores, self.name = scores, name
        self.extra = [k for k in keys if k not in _BLOCK_KEYS]

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        state = state_vector(observation)
        if self.extra:
            extra = [np.asarray(observation[k], np.float32).ravel() for k in self.extra]
            state = np.concatenate([state, *extra])
        return int(masked_argmax(self.scores(state[None]), np.asarray(action_mask, bool)[None])[0])

    def probabilities(self, states: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """One-hot on the chosen action (the OPE estimators' target interface)."""
        out = np.zeros((len(states), 39))
        out[np.arange(len(states)), masked_argmax(self.scores(states), masks)] = 1.0
        return out


__all__ = ["METHODS", "OPTIONS", "OfflinePolicy", "masked_argmax", "parse_method", "top_episodes", "train"]
