"""Learned RT agents: MaskablePPO models and their torch-free (numpy) form.

A model is trained by :mod:`training.radiotherapy` on the flattened Dict
observation (``gymnasium.spaces.flatten``, the same function as Gymnasium's
``FlattenObservation``) with an MLP policy. :func:`export_numpy` writes the actor's
weights to a ``.npz`` (a few tens of kB); :class:`NumpyMLPPolicy` runs it with numpy
alone (``tanh`` layers, the masked argmax of the logits), so grading and serving need
no torch. The ``.zip`` (sb3-contrib) stays beside it for users who want to resume.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from policies.radiotherapy.base import BaseRTPolicy
from policies.radiotherapy.mlp import flatten_observation, mlp_logits
from policies.radiotherapy.ranker import load_selector
from policies.radiotherapy.residual import ResidualRTPolicy

CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"
SHIPPED: dict[str, str] = {
    "ppo": "rt_ppo.npz",
    "rt_residual": "rt_residual.npz",
    "option_selector": "rt_option_selector.npz",
    "ranked_selector": "rt_ranked_selector.npz",
}
"""Registered name -> numpy checkpoint in :data:`CHECKPOINT_DIR` (metadata in the ``.json`` beside it)."""


class NumpyMLPPolicy(BaseRTPolicy):
    """An SB3 MLP actor (tanh hidden layers, linear logits) evaluated with numpy.

    Deterministic: the most probable valid action.
    """

    name = "ppo"

    def __init__(self, layers: list[tuple[np.ndarray, np.ndarray]], name: str | None = None) -> None:
        super().__init__()
        if not layers:
            raise ValueError("a policy needs at least one layer")
        self.layers = layers
        self.metadata: dict[str, Any] = {}
        if name:
            self.name = name

    def logits(self, features: np.ndarray) -> np.ndarray:
        return mlp_logits(self.layers, features)

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        logits = self.logits(flatten_observation(observation))
        return int(np.argmax(np.where(np.asarray(action_mask, bool), logits, -np.inf)))


def actor_layers(model: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (weight, bias) pairs of an SB3 MlpPolicy's actor: policy_net linears, then action_net."""
    import torch

    linears = [m for m in model.policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)]
    linears.append(model.policy.action_net)
    activations = {
        type(m) for m in model.policy.mlp_extractor.policy_net if not isinstance(m, torch.nn.Linear)
    }
    if activations != {torch.nn.Tanh}:
        raise ValueError(f"numpy export supports tanh MLPs only, found {activations}")
    return [
        (m.weight.detach().cpu().numpy().astype(np.float32), m.bias.detach().cpu().numpy()) for m in linears
    ]


def export_numpy(model: Any, path: Path, metadata: dict[str, Any]) -> None:
    """Write the actor's weights to ``path`` (.npz) and ``metadata`` to the .json beside it."""
    layers = actor_layers(model)
    arrays: dict[str, Any] = {f"w{i}": w for i, (w, _) in enumerate(layers)}
    arrays |= {f"b{i}": b for i, (_, b) in enumerate(layers)}
    np.savez_compressed(path, **arrays)
    path.with_suffix(".json").write_text(json.dumps(metadata, indent=2) + "\n")


def load_path(path: Path, name: str | None = None) -> BaseRTPolicy:
    """A numpy policy from an exported ``.npz`` (or a training run directory holding ``best_model.npz``):
    a :class:`NumpyMLPPolicy`, a :class:`~policies.radiotherapy.residual.ResidualRTPolicy` when its
    metadata has ``"residual"`` (a net trained with ``--residual``, over that base), or an
    :class:`~policies.radiotherapy.options.OptionSelectorPolicy` when it has ``"options"``."""
    if path.is_dir():
        path = path / "best_model.npz"
    if path.suffix != ".npz":
        raise ValueError(f"{path}: export the model to .npz first (hospital-marl train export RUN OUT.npz)")
    meta_path = path.with_suffix(".json")
    if meta_path.exists() and "options" in json.loads(meta_path.read_text()):
        return load_selector(path, name=name)
    with np.load(path) as data:
        n = len([k for k in data.files if k.startswith("w")])
        layers = [(data[f"w{i}"], data[f"b{i}"]) for i in range(n)]
    meta_path = path.with_suffix(".json")
    metadata = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    policy: NumpyMLPPolicy | ResidualRTPolicy
    if metadata.get("residual"):
        residual = metadata["residual"]
        policy = ResidualRTPolicy(
            layers,
            base=residual["base"],
            name=name or metadata.get("name"),
            reentry=residual.get("reentry", "resume"),  # runs before the "keep" re-entry recorded none
        )
    else:
        policy = NumpyMLPPolicy(layers, name=name or metadata.get("name"))
    policy.metadata = metadata
    return policy


def learned_factories() -> dict[str, Callable[[], BaseRTPolicy]]:
    """Registered names of the shipped checkpoints that exist -> loaders."""
    return {
        name: functools.partial(load_path, CHECKPOINT_DIR / file, name=name)
        for name, file in SHIPPED.items()
        if (CHECKPOINT_DIR / file).exists()
    }
