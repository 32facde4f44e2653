"""The PPO network: an *entity-scoring* actor for MaskablePPO (torch; the ``train`` extra).

Most of the 39 actions address an entity: a waiting-queue slot (admit to a
general / ICU bed), a general-board position (transfer to ICU, early
discharge), an ICU bed (discharge), a ventilator. A plain MLP must learn the
same rule ten times over ("admit slot i to ICU if slot i is critical" for each
i). Here each action's logit comes from one small head shared by all entities
of its kind, applied to that entity's features (:data:`policies.learned.FEATURE_LAYOUT`)
and a context vector computed from the whole observation:

    logit(admit slot i to ICU) = head_queue([queue_i, context])[1]
    logit(transfer board k)    = head_board([board_k, context])
    ...
    logit(no-op)               = linear(context)

The actions' order comes from :data:`hospital_marl.core.actions.ACTION_TABLE`
(flat track) or :data:`~hospital_marl.core.actions.ROLE_KIND_INDEX` (team
track: ``MultiDiscrete([21, 16, 4])``, one no-op logit per role), never
written out here. The critic is a plain MLP on the same features.

:class:`EntityPolicy` is a drop-in ``policy=`` for ``sb3_contrib.MaskablePPO``;
saved models refer to it by import path (``policies.ppo_net.EntityPolicy``).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from torch import nn

from hospital_marl.core.actions import ACTION_TABLE, ROLE_KIND_INDEX, ROLES, Kind
from policies.learned import FEATURE_SIZE, feature_slices

# Which feature segment scores which action kind, and which output column of its head.
KIND_HEAD: dict[Kind, tuple[str, int]] = {
    Kind.ADMIT_GENERAL: ("queue", 0),
    Kind.ADMIT_ICU: ("queue", 1),
    Kind.VENTILATE: ("vents", 0),
    Kind.TRANSFER_ICU: ("board", 0),  # the board's top rows are the transfer candidates
    Kind.EARLY_DISCHARGE: ("bottom", 0),
    Kind.DISCHARGE_ICU: ("icu", 0),
}
HEAD_OUTPUTS = {"queue": 2, "vents": 1, "board": 1, "bottom": 1, "icu": 1}


def _mlp(sizes: list[int], activation: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


class EntityActorCritic(nn.Module):
    """SB3's ``mlp_extractor`` slot: ``forward_actor`` returns the action logits themselves."""

    order: torch.Tensor  # (latent_dim_pi,) int64 buffer: the flat order of the candidate scores

    def __init__(
        self,
        team: bool,
        context_dim: int,
        head_dim: int,
        critic_arch: list[int],
        activation: type[nn.Module] = nn.Tanh,
    ) -> None:
        super().__init__()
        self.slices = feature_slices()
        self.context = nn.Sequential(_mlp([FEATURE_SIZE, context_dim, context_dim], activation), activation())
        self.heads = nn.ModuleDict(
            {
                name: _mlp([self.slices[name][1][1] + context_dim, head_dim, out], activation)
                for name, out in HEAD_OUTPUTS.items()
            }
        )
        self.n_noops = len(ROLES) if team else 1
        self.noop = nn.Linear(context_dim, self.n_noops)
        self.critic = nn.Sequential(_mlp([FEATURE_SIZE, *critic_arch], activation), activation())
        self.latent_dim_vf = critic_arch[-1]
        self.register_buffer("order", torch.as_tensor(self._action_order(team)), persistent=False)
        self.latent_dim_pi = len(self.order)

    def _candidate_offsets(self) -> dict[tuple[str, int], int]:
        """Where each head output column starts in the concatenated candidate scores."""
        offsets, start = {}, self.n_noops
        for name, out in HEAD_OUTPUTS.items():
            rows = self.slices[name][1][0]
            for col in range(out):
                offsets[(name, col)] = start
                start += rows
        return offsets

    def _action_order(self, team: bool) -> np.ndarray:
        """Candidate index of each action, in the action space's order."""
        offsets = self._candidate_offsets()

        def index(kind: Kind, i: int, noop: int) -> int:
            if kind is Kind.NOOP:
                return noop
            name, col = KIND_HEAD[kind]
            return offsets[(name, col)] + i

        if team:
            return np.array(
                [index(kind, i, r) for r, role in enumerate(ROLES) for kind, i in ROLE_KIND_INDEX[role]]
            )
        return np.array([index(spec.kind, spec.index, 0) for spec in ACTION_TABLE])

    def output_layers(self) -> list[nn.Linear]:
        """The layers producing logits (initialised small: a near-uniform first policy)."""
        last = [[m for m in head.modules() if isinstance(m, nn.Linear)][-1] for head in self.heads.values()]
        return [self.noop, *last]

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        context = self.context(features)
        scores = [self.noop(context)]
        per_head = {}
        for name, head in self.heads.items():
            sl, (rows, cols) = self.slices[name]
            entities = features[:, sl].reshape(-1, rows, cols)
            ctx = context.unsqueeze(1).expand(-1, rows, -1)
            per_head[name] = head(torch.cat([entities, ctx], dim=2))  # (batch, rows, outputs)
        for name, out in HEAD_OUTPUTS.items():
            for col in range(out):
                scores.append(per_head[name][:, :, col])
        return torch.cat(scores, dim=1)[:, self.order]

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        return self.critic(features)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)


class EntityPolicy(MaskableActorCriticPolicy):
    """MaskableActorCriticPolicy whose actor scores entities with shared heads.

    Keyword arguments (``policy_kwargs``): ``team`` (MultiDiscrete team env),
    ``context_dim``, ``head_dim``, and ``net_arch`` (the critic's hidden layers).
    """

    def __init__(
        self, *args: Any, team: bool = False, context_dim: int = 64, head_dim: int = 32, **kwargs: Any
    ) -> None:
        self.team = team
        self.context_dim = context_dim
        self.head_dim = head_dim
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        arch = self.net_arch["vf"] if isinstance(self.net_arch, dict) else list(self.net_arch)
        # SB3 types the slot as its MlpExtractor, while its docs' custom-network recipe puts any module
        # with latent_dim_pi/vf and forward_actor/critic there (as this does)
        self.mlp_extractor = EntityActorCritic(  # type: ignore[assignment]
            self.team, self.context_dim, self.head_dim, arch or [64, 64], self.activation_fn
        )

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the extractor's actor output already is the logits
        extractor = self.mlp_extractor
        if not isinstance(extractor, EntityActorCritic):
            raise TypeError(f"EntityPolicy builds its own extractor, found {type(extractor).__name__}")
        for layer in extractor.output_layers():
            nn.init.orthogonal_(layer.weight, gain=0.01)
            nn.init.zeros_(layer.bias)
        # type[Optimizer] cannot say the class takes lr (SB3's own _build ignores the same error)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[call-arg]

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(team=self.team, context_dim=self.context_dim, head_dim=self.head_dim)
        return data
