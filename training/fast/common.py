"""What the fast trainers (:mod:`training.fast.mappo`, :mod:`training.fast.ppo`) share: the MLP,
masked sampling, GAE, the clipped PPO loss, the ONNX export and the run directory's metadata; and
the options of the ablations (running observation / return normalisation, the GRU core).

Kept small and in one place so that the two single-file trainers read top to bottom like CleanRL's
and cannot drift apart on the parts that must be identical (how a mask is applied, how an
advantage is computed, how an actor is shipped).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from policies.learned import (
    ONNX_HIDDEN_IN,
    ONNX_HIDDEN_OUT,
    ONNX_INPUT,
    ONNX_OUTPUT,
    OnnxLogits,
    OnnxRecurrentLogits,
)
from training.export import torch_to_onnx

MASKED_LOGIT = -1e9
"""The logit a masked action gets: finite (no NaN in the entropy), never sampled (exp underflows to 0)."""


def mlp(sizes: Sequence[int], out_gain: float) -> nn.Sequential:
    """Tanh MLP with CleanRL's init: orthogonal sqrt(2) hidden layers, ``out_gain`` on the last
    (0.01 for an actor: a near-uniform first policy; 1 for a critic)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        linear = nn.Linear(sizes[i], sizes[i + 1])
        last = i == len(sizes) - 2
        nn.init.orthogonal_(linear.weight, out_gain if last else np.sqrt(2))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


class RunningMeanStd(nn.Module):
    """Running mean and population variance of every batch fed to :meth:`update` (Chan et al.'s
    parallel update, as CleanRL / SB3 ``VecNormalize`` / Gymnasium ``NormalizeObservation``), and
    the normalisation ``clip((x - mean) / sqrt(var + eps), -clip, clip)`` they apply.

    It starts empty (count 0, not SB3's 1e-4 pseudo-count), so after any sequence of batches
    ``mean`` and ``var`` are numpy's ``mean`` / ``var`` of all rows fed; float64 so that stays exact
    over millions of rows. The statistics are buffers: they travel in the state dict."""

    def __init__(self, shape: tuple[int, ...] = (), clip: float = 10.0, eps: float = 1e-8) -> None:
        super().__init__()
        self.clip, self.eps = clip, eps
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Fold a batch (rows along the leading axes, the statistic's shape last) in."""
        x = x.to(torch.float64).reshape(-1, *self.mean.shape)
        n = x.shape[0]
        if n == 0:
            return
        batch_mean, batch_var = x.mean(0), x.var(0, unbiased=False)
        total = self.count + n
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return normalise(x, self.mean, self.var, self.clip, self.eps)

    def frozen(self, index: torch.Tensor | None = None) -> FrozenNorm:
        """The current statistics (of the columns ``index``) as a fixed, exportable layer."""
        mean, var = (self.mean, self.var) if index is None else (self.mean[index], self.var[index])
        return FrozenNorm(mean, var, self.clip, self.eps)


def normalise(
    x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, clip: float, eps: float
) -> torch.Tensor:
    """``clip((x - mean) / sqrt(var + eps))``, in ``x``'s dtype (one formula for training and export)."""
    std = torch.sqrt(var + eps).to(x.dtype)
    return torch.clamp((x - mean.to(x.dtype)) / std, -clip, clip)


class FrozenNorm(nn.Module):
    """A :class:`RunningMeanStd`'s statistics frozen in front of an exported actor: the ONNX file
    takes the raw encoded observation, as every loader gives it, and needs nothing else."""

    def __init__(self, mean: torch.Tensor, var: torch.Tensor, clip: float, eps: float) -> None:
        super().__init__()
        self.clip, self.eps = clip, eps
        self.register_buffer("mean", mean.detach().clone().to(torch.float32))
        self.register_buffer("var", var.detach().clone().to(torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return normalise(x, self.mean, self.var, self.clip, self.eps)


class ReturnNormaliser:
    """SB3 ``VecNormalize``'s reward normalisation: each env's discounted return so far
    (``ret = gamma * ret + r``, zeroed after its episode ends) feeds a running variance, and each
    reward is divided by that running standard deviation (clipped to +-clip). The mean is not
    subtracted: the reward's sign, and so what is good, is kept."""

    def __init__(self, num_envs: int, gamma: float, clip: float = 10.0, eps: float = 1e-8) -> None:
        self.gamma, self.clip, self.eps = gamma, clip, eps
        self.returns = np.zeros(num_envs)
        self.stats = RunningMeanStd(())

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        self.returns = self.returns * self.gamma + rewards
        self.stats.update(torch.from_numpy(self.returns))
        scaled = rewards / np.sqrt(float(self.stats.var) + self.eps)
        self.returns[np.asarray(dones, bool)] = 0.0
        return np.clip(scaled, -self.clip, self.clip)


class RecurrentNet(nn.Module):
    """An MLP body, a GRU core (hidden size = the last hidden width) and a linear head, as CleanRL's
    ``ppo_atari_lstm.py``: the hidden state is zeroed where an episode starts (``starts``), so a
    sequence recomputed in the update from its stored initial state is exactly the rollout's."""

    def __init__(self, sizes: Sequence[int], out_gain: float) -> None:
        super().__init__()
        self.body = nn.Sequential(mlp(sizes[:-1], np.sqrt(2)), nn.Tanh())
        width = sizes[-2]
        self.gru = nn.GRU(width, width)
        for name, param in self.gru.named_parameters():
            if "bias" in name:
                nn.init.zeros_(param)
            else:
                nn.init.orthogonal_(param, 1.0)
        self.head = nn.Linear(width, sizes[-1])
        nn.init.orthogonal_(self.head.weight, out_gain)
        nn.init.zeros_(self.head.bias)
        self.hidden_size = width

    def forward(
        self, x: torch.Tensor, hidden: torch.Tensor, starts: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` ``(T, N, in)``, ``hidden`` ``(N, H)`` before step 0, ``starts`` ``(T, N)`` (1 where
        that step's observation opens an episode) -> outputs ``(T, N, out)`` and the hidden state after
        step T-1. The GRU runs whole segments between the steps where some row restarts (days end
        together, so there are few)."""
        z = self.body(x)
        cuts = [0, *torch.nonzero(starts[1:].any(dim=1)).flatten().add(1).tolist(), x.shape[0]]
        outputs = []
        for lo, hi in itertools.pairwise(cuts):
            hidden = hidden * (1.0 - starts[lo]).unsqueeze(-1)
            out, last = self.gru(z[lo:hi], hidden.unsqueeze(0))
            hidden = last[0]
            outputs.append(out)
        return self.head(torch.cat(outputs)), hidden


def masked(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Logits with the invalid actions (``mask`` False) set to :data:`MASKED_LOGIT`."""
    return torch.where(mask, logits, torch.full_like(logits, MASKED_LOGIT))


def sample(logits: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One action per row from masked logits (Gumbel-max: the categorical draw without building a
    ``torch.distributions`` object per step) and its log-probability."""
    uniform = torch.rand(logits.shape, generator=generator, device=logits.device).clamp_(1e-20, 1.0)
    action = torch.argmax(logits - torch.log(-torch.log(uniform)), dim=-1)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, action.unsqueeze(-1)).squeeze(-1)
    return action, logp


def logp_entropy(logits: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of ``action`` and the entropy of masked logits (masked actions add 0)."""
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Generalised advantage estimates ``(T, B, ...)``. ``dones[t]`` marks that step t ended its
    episode (no bootstrap across it): a day has a fixed length and its clock is observed, so the
    last tick is a true end, not a truncation to bootstrap through."""
    advantages = torch.zeros_like(values)
    last = torch.zeros_like(next_value)
    for t in reversed(range(rewards.shape[0])):
        following = next_value if t == rewards.shape[0] - 1 else values[t + 1]
        alive = 1.0 - dones[t]
        delta = rewards[t] + gamma * following * alive - values[t]
        last = delta + gamma * lam * alive * last
        advantages[t] = last
    return advantages


def clipped_surrogate(
    new_logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, clip: float
) -> torch.Tensor:
    """PPO's clipped policy loss (to minimise), and nothing else."""
    ratio = torch.exp(new_logp - old_logp)
    return -torch.min(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv).mean()


def export_onnx(actor: nn.Module, in_dim: int, path: Path) -> Path:
    """Write ``actor`` (encoded observation -> logits) as ONNX with the input/output names every
    loader reads (:class:`policies.learned.OnnxLogits`), and check onnxruntime reproduces torch's
    logits on random inputs before keeping it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    actor = actor.to("cpu").eval()
    torch_to_onnx(actor, (torch.zeros(1, in_dim),), path)
    probe = torch.rand(in_dim, generator=torch.Generator().manual_seed(0)) * 3
    with torch.no_grad():
        expected = actor(probe.unsqueeze(0))[0].numpy()
    if not np.allclose(OnnxLogits(path)(probe.numpy()), expected, atol=1e-4):
        raise RuntimeError(f"{path}: the exported actor does not reproduce torch's logits")
    return path


class OneStep(nn.Module):
    """A recurrent actor as one decision: (observation (1, in), hidden (1, H)) -> (logits (1, out),
    hidden (1, H)), no episode start inside (the player zeroes the state at a day's start)."""

    def __init__(self, actor: nn.Module) -> None:
        super().__init__()
        self.actor = actor

    def forward(self, x: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, after = self.actor(x.unsqueeze(0), hidden, torch.zeros((1, 1)))
        return out[0], after


def export_recurrent_onnx(actor: nn.Module, in_dim: int, hidden_size: int, path: Path) -> Path:
    """Write a recurrent ``actor`` (``RecurrentNet``, or one behind its frozen normalisation) as ONNX:
    one decision, the hidden state in and out (:class:`~policies.learned.OnnxRecurrentLogits`), and
    check onnxruntime reproduces torch's logits along a 6-step sequence before keeping it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    step = OneStep(actor.to("cpu").eval()).eval()
    torch_to_onnx(
        step,
        (torch.zeros(1, in_dim), torch.zeros(1, hidden_size)),
        path,
        input_names=(ONNX_INPUT, ONNX_HIDDEN_IN),
        output_names=(ONNX_OUTPUT, ONNX_HIDDEN_OUT),
        batch_axis=False,
        ignore=Warning,  # also the tracer's notes on RecurrentNet's segment loop (one segment here)
    )
    exported = OnnxRecurrentLogits(path)
    generator = torch.Generator().manual_seed(0)
    hidden, carried = torch.zeros(1, hidden_size), np.zeros(hidden_size, np.float32)
    for _ in range(6):
        probe = torch.rand(1, in_dim, generator=generator) * 3
        with torch.no_grad():
            expected, hidden = step(probe, hidden)
        logits, carried = exported(probe.numpy()[0], carried)
        if not np.allclose(logits, expected[0].numpy(), atol=1e-4) or not np.allclose(
            carried, hidden[0], atol=1e-4
        ):
            raise RuntimeError(f"{path}: the exported recurrent actor does not reproduce torch's")
    return path


def pick_device(name: str) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N``; a clear error when CUDA is asked for and absent."""
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: torch sees no CUDA device here (use --device cpu)")
    return device
