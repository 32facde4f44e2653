"""A masked actor-critic RLModule for one role (RLlib's new API stack).

The env's observation for a role is ``{"observation": (D,) float32, "action_mask":
(A,) int8}`` (PettingZoo's masking convention, our keys). The module reads the
vector under ``"observation"``, computes logits, and replaces the logits of
masked-out actions by the most negative float32: their probability is exactly 0
when sampling, in the PPO ratio and in the entropy, and no gradient reaches
them. (The no-op is always valid, so a row is never all-masked.)

The vector under ``"observation"`` is already encoded: the training env
(:mod:`training.rllib.env`) and the loader (:mod:`policies.rllib.policy`) both apply
the per-role encoding named by ``model_config["encoding"]``
(:data:`policies.marl.ROLE_ENCODINGS`: the fixed scales every per-role trainer shares;
modules saved without the key were trained on ``"log1p"``). The module itself never
encodes, so the encoding has one implementation, and the loader plays the actor
(:attr:`pi`) through the same logits helper as the other per-role policies.

Actor and critic are separate MLPs over the role's own observation (no shared
trunk: the critic's targets are on another scale). The critic is dropped on
inference-only copies (the env runners'): :meth:`get_non_inference_attributes`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI, ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

OBS_KEY = "observation"
MASK_KEY = "action_mask"
DEFAULT_HIDDEN: tuple[int, ...] = (64, 64)
LEGACY_ENCODING = "log1p"
"""The encoding of a module whose ``model_config`` names none (saved before the key existed)."""
MASKED_LOGIT = torch.finfo(torch.float32).min
"""What a masked-out action's logit becomes: finite (no inf - inf = NaN in the KL), probability 0."""


def mlp(n_in: int, hidden: tuple[int, ...], n_out: int, out_gain: float) -> nn.Sequential:
    """tanh MLP with orthogonal init (CleanRL's PPO defaults); a small ``out_gain`` starts the
    policy near uniform over the valid actions."""
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(n_in, width), nn.Tanh()]
        n_in = width
    layers.append(nn.Linear(n_in, n_out))
    for layer in layers:
        if isinstance(layer, nn.Linear):
            is_out = layer is layers[-1]
            nn.init.orthogonal_(layer.weight, gain=out_gain if is_out else 2**0.5)
            nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


def apply_mask(logits: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """``logits`` where the mask allows the action, :data:`MASKED_LOGIT` elsewhere."""
    return torch.where(action_mask.bool(), logits, torch.full_like(logits, MASKED_LOGIT))


class MaskedRoleModule(TorchRLModule, ValueFunctionAPI, InferenceOnlyAPI):
    """Actor-critic for one role: masked logits from ``obs["observation"]`` and ``obs["action_mask"]``.

    Arguments (``model_config``):
        hidden: hidden layer widths of both the actor and the critic (default ``(64, 64)``);
        encoding: the name (:data:`policies.marl.ROLE_ENCODINGS`) of the encoding its inputs
            went through; recorded with the checkpoint, read by the loader (default
            :data:`LEGACY_ENCODING`, for modules saved before the key existed).

    Spaces: ``observation_space`` must be the role's ``Dict(observation=Box, action_mask=Box)``,
    ``action_space`` its ``Discrete(A)`` with ``A`` the mask's length.
    """

    def setup(self) -> None:
        space = self.observation_space
        if not (isinstance(space, gym.spaces.Dict) and {OBS_KEY, MASK_KEY} <= set(space.spaces)):
            raise ValueError(
                f"MaskedRoleModule needs a Dict observation space with keys {OBS_KEY!r} and "
                f"{MASK_KEY!r} (the hospital_marl AEC/parallel envs'), got {space}"
            )
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise ValueError(f"MaskedRoleModule needs a Discrete action space, got {self.action_space}")
        n_actions = int(self.action_space.n)
        mask_shape, obs_shape = space[MASK_KEY].shape, space[OBS_KEY].shape
        if mask_shape != (n_actions,):
            raise ValueError(f"action_mask shape {mask_shape} does not match the action space {n_actions}")
        if not obs_shape:
            raise ValueError(f"MaskedRoleModule needs a vector {OBS_KEY!r}, got shape {obs_shape}")
        config = self._config()
        hidden = tuple(int(w) for w in config.get("hidden", DEFAULT_HIDDEN))
        n_obs = int(obs_shape[0])
        self.pi = mlp(n_obs, hidden, n_actions, out_gain=0.01)
        self.vf = mlp(n_obs, hidden, 1, out_gain=1.0)

    @property
    def encoding(self) -> str:
        """The name of the encoding this module's inputs go through (see the class docstring)."""
        return str(self._config().get("encoding", LEGACY_ENCODING))

    def _config(self) -> dict[str, Any]:
        """``model_config`` as a dict (RLlib passes a dict, or its ``DefaultModelConfig`` dataclass)."""
        config = self.model_config or {}
        return dict(config) if isinstance(config, dict) else dataclasses.asdict(config)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = batch[Columns.OBS]
        logits = self.pi(obs[OBS_KEY].float())
        return {Columns.ACTION_DIST_INPUTS: apply_mask(logits, obs[MASK_KEY])}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """State values, one per row (PPO's critic and GAE)."""
        return self.vf(batch[Columns.OBS][OBS_KEY].float()).squeeze(-1)

    def get_non_inference_attributes(self) -> list[str]:
        return ["vf"]
