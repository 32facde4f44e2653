"""What the fast trainers (:mod:`training.fast.mappo`, :mod:`training.fast.ppo`) share: the MLP,
masked sampling, GAE, the clipped PPO loss, the ONNX export and the run directory's metadata.

Kept small and in one place so that the two single-file trainers read top to bottom like CleanRL's
and cannot drift apart on the parts that must be identical (how a mask is applied, how an
advantage is computed, how an actor is shipped).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from policies.learned import ONNX_INPUT, ONNX_OUTPUT, OnnxLogits

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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(  # the TorchScript exporter (dynamo=False): no onnxscript needed
            actor,
            (torch.zeros(1, in_dim),),
            str(path),
            input_names=[ONNX_INPUT],
            output_names=[ONNX_OUTPUT],
            dynamic_axes={ONNX_INPUT: {0: "batch"}, ONNX_OUTPUT: {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    probe = torch.rand(in_dim, generator=torch.Generator().manual_seed(0)) * 3
    with torch.no_grad():
        expected = actor(probe.unsqueeze(0))[0].numpy()
    if not np.allclose(OnnxLogits(path)(probe.numpy()), expected, atol=1e-4):
        raise RuntimeError(f"{path}: the exported actor does not reproduce torch's logits")
    return path


def pick_device(name: str) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N``; a clear error when CUDA is asked for and absent."""
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: torch sees no CUDA device here (use --device cpu)")
    return device
