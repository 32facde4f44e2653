"""The entity actor (``--actor entity``, issue #40): one role's policy as a shared network over the
entities its observation lists (waiting-queue slots, general-board rows, ICU beds, ventilators),
so "this patient -> the ICU" is one decision learned once, not ten columns of a flat softmax.

Each entity block of the role's encoded observation (:func:`policies.marl.encode_role`'s layout,
:func:`hospital_marl.envs.observations.role_slices`) is read as rows of features plus a presence
bit (its first feature > 0: a severity, or a ventilator in use); one small MLP per block embeds
every row; the rows' mean and max (DeepSets) and the role's other numbers (capacity, clock) make a
context; each row then gets one logit per action type that targets it (from its embedding and the
context), and the no-op one logit from the context. The logits are laid out in the role's own
action order, read from the action table (:data:`hospital_marl.core.actions.ROLE_KIND_INDEX`), so
masks apply as for the MLP actor and the exported ONNX file has the same signature (encoded role
observation -> logits). Permuting the queue slots permutes the admission logits the same way.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from hospital_marl.core.actions import ROLE_KIND_INDEX, Kind
from hospital_marl.envs.observations import role_slices
from training.fast.common import mlp

ENTITY_BLOCKS: dict[str, dict[str, tuple[str, ...]]] = {
    "triage": {"queue": ("waiting_queue",)},
    "bed_manager": {
        "board": ("bed_occupancy", "board_remaining"),
        "icu": ("icu_occupancy", "icu_remaining", "icu_needs_vent", "icu_on_vent", "icu_ready"),
        "queue": ("waiting_queue",),
    },
    "ventilator_officer": {
        "icu": ("icu_occupancy", "icu_needs_vent", "icu_on_vent", "icu_ready"),
        "vent": ("ventilator_status",),
    },
}
"""Per role, its entity groups: the observation blocks read side by side as one row per entity
(``waiting_queue`` is already ``[severity, condition, waiting time]`` per slot)."""

TARGETS: dict[Kind, tuple[str, int]] = {
    Kind.ADMIT_GENERAL: ("queue", 0),
    Kind.ADMIT_ICU: ("queue", 1),
    Kind.TRANSFER_ICU: ("board", 0),
    Kind.EARLY_DISCHARGE: ("board", 1),
    Kind.DISCHARGE_ICU: ("icu", 0),
    Kind.VENTILATE: ("vent", 0),
}
"""Which entity group (and which of its per-row heads) an action kind's index addresses."""


def _group_index(role: str, blocks: tuple[str, ...]) -> np.ndarray:
    """``(rows, features)`` indices into the role's vector: the blocks' columns side by side."""
    where = dict(role_slices()[role])
    columns = []
    for key in blocks:
        sl = where[key]
        width = 3 if key == "waiting_queue" else 1
        columns.append(np.arange(sl.start, sl.stop).reshape(-1, width))
    rows = {len(c) for c in columns}
    assert len(rows) == 1, f"{role}: blocks {blocks} have different row counts"
    return np.concatenate(columns, axis=1)


def _relu_mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers with ReLU between (orthogonal sqrt(2) init); ReLU, not the MLP actor's tanh: a
    per-entity network evaluates it ~40 times per decision, and tanh was a fifth of its CPU time."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        linear = nn.Linear(sizes[i], sizes[i + 1])
        nn.init.orthogonal_(linear.weight, np.sqrt(2))
        nn.init.zeros_(linear.bias)
        layers += [linear, nn.ReLU()] if i < len(sizes) - 2 else [linear]
    return nn.Sequential(*layers)


class EntityActor(nn.Module):
    """One role's actor: encoded role observation ``(N, dim)`` -> logits ``(N, n_actions)``."""

    static: torch.Tensor
    from_bottom: torch.Tensor
    context_index: torch.Tensor

    def __init__(self, role: str, width: int = 64) -> None:
        super().__init__()
        self.role = role
        groups = ENTITY_BLOCKS[role]
        self.names = tuple(groups)
        used: set[int] = set()
        self.encoders = nn.ModuleDict()
        for name, blocks in groups.items():
            index = _group_index(role, blocks)
            used.update(index.ravel().tolist())
            self.register_buffer(f"index_{name}", torch.as_tensor(index, dtype=torch.long))
            self.encoders[name] = nn.Sequential(mlp([index.shape[1] + 1, width], np.sqrt(2)), nn.ReLU())
        dim = role_slices()[role][-1][1].stop
        context = np.array([i for i in range(dim) if i not in used], np.int64)
        self.register_buffer("context_index", torch.as_tensor(context))
        self.context = nn.Sequential(
            _relu_mlp([len(context) + 2 * width * len(groups), width, width]), nn.ReLU()
        )
        kinds = ROLE_KIND_INDEX[role]
        heads: dict[str, int] = {}
        for kind, _ in kinds[1:]:
            group, head = TARGETS[kind]
            heads[group] = max(heads.get(group, 0), head + 1)
        # Per targeted group: relu(A row + B context) -> one logit per head. A and B together are one
        # linear layer on [row, context]; split so the context's share is computed once per sample.
        self.row_in = nn.ModuleDict({group: nn.Linear(width, width) for group in heads})
        self.ctx_in = nn.ModuleDict({group: nn.Linear(width, width, bias=False) for group in heads})
        self.heads = nn.ModuleDict({group: mlp([width, n], 0.01) for group, n in heads.items()})
        for group in heads:  # in this order: the seeded runs' initial weights depend on it
            for layer in (self.row_in[group], self.ctx_in[group]):
                assert isinstance(layer, nn.Linear)
                nn.init.orthogonal_(layer.weight, np.sqrt(2))
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)
        self.noop = mlp([width, 1], 0.01)
        # Where each role action's logit sits in the concatenation [no-op, group logits (rows x heads)...]
        offsets, start = {}, 1
        rows = {name: int(self.rows_of(name).shape[0]) for name in self.names}
        for group, n in heads.items():
            offsets[group] = start
            start += rows[group] * n
        static, from_bottom = [0], [-1]
        for kind, i in kinds[1:]:
            group, head = TARGETS[kind]
            if kind == Kind.EARLY_DISCHARGE:  # index i counts from the board's bottom: the row moves
                from_bottom.append(i)
                static.append(offsets[group] + head)
            else:
                from_bottom.append(-1)
                static.append(offsets[group] + i * heads[group] + head)
        self.register_buffer("static", torch.as_tensor(static, dtype=torch.long))
        self.register_buffer("from_bottom", torch.as_tensor(from_bottom, dtype=torch.long))
        self.moves = bool(max(from_bottom) >= 0)
        self.board_heads = heads.get("board", 0)

    def rows_of(self, name: str) -> torch.Tensor:
        """``(rows, features)``: where entity group ``name``'s rows sit in the role's vector."""
        index = getattr(self, f"index_{name}")
        assert isinstance(index, torch.Tensor)
        return index

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        rows, pooled = {}, []
        for name in self.names:
            feats = obs[:, self.rows_of(name)]  # (N, rows, features)
            present = (feats[..., :1] > 0).to(obs.dtype)
            h = self.encoders[name](torch.cat([feats, present], dim=-1))
            rows[name] = h
            pooled += [h.mean(dim=1), h.amax(dim=1)]
        ctx = self.context(torch.cat([obs[:, self.context_index], *pooled], dim=-1))
        parts = [self.noop(ctx)]
        for group, head in self.heads.items():
            z = torch.relu(self.row_in[group](rows[group]) + self.ctx_in[group](ctx).unsqueeze(1))
            parts.append(head(z).flatten(1))
        table = torch.cat(parts, dim=1)
        index = self.static.unsqueeze(0).expand(obs.shape[0], -1)
        if self.moves:  # early discharge i: the i-th occupied row from the bottom of the board
            occupied = (obs[:, self.rows_of("board")[:, 0]] > 0).sum(dim=1, keepdim=True)
            row = (occupied - 1 - self.from_bottom.unsqueeze(0)).clamp(min=0)
            index = index + (self.from_bottom >= 0).long().unsqueeze(0) * row * self.board_heads
        return torch.gather(table, 1, index)
