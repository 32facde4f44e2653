"""A learned per-patient choice among scripted variants of ``anatomy_aware`` (options; issue 25 item 6).

The options framework (Sutton, Precup & Singh 1999) as a contextual bandit: at the episode's first
step the selector reads the observation (the anatomy is in it) and picks one of K scripted variants
of :class:`~policies.radiotherapy.baselines.AnatomyAwarePolicy` (:data:`FAMILY`: beam count, coverage
trim threshold, aperture margin, edit order), which then plays the whole episode. The learned part
is the selector only: per site (the OARs the observation shows tell the task), a regressor from
step-0 features to each variant's score gain over the default (argmax). The variants and the
selector read only the observation and the mask, so the agent does too (SPEC-RT §8 sealed
evaluation). The default variant is in the family, so the selector can always fall back to
``anatomy_aware`` itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hospital_marl.radiotherapy.core.plan import NARROW, NEW_MARGIN, TURN_CCW, TURN_CW, WIDEN
from policies.radiotherapy.base import BaseRTPolicy
from policies.radiotherapy.baselines import AnatomyAwarePolicy, _anatomy_cost

EDIT_ORDERS = ("aperture", "weight", "turn")
"""Which of the edit phase's candidate edits come first (``aperture`` is ``anatomy_aware``'s)."""


@dataclass(frozen=True)
class Variant:
    """One option: ``anatomy_aware`` with these settings (the defaults are ``anatomy_aware``)."""

    n_beams: int = 7
    low: float = 0.97
    margin: int = NEW_MARGIN
    edits: str = "aperture"

    def label(self) -> str:
        return f"n{self.n_beams}_low{self.low:g}_m{self.margin}_{self.edits}"


DEFAULT = Variant()


class VariantPolicy(AnatomyAwarePolicy):
    """``anatomy_aware`` with a :class:`Variant`'s settings; the default variant is it exactly."""

    name = "anatomy_aware_variant"

    def __init__(self, variant: Variant = DEFAULT) -> None:
        if variant.edits not in EDIT_ORDERS:
            raise ValueError(f"edits must be one of {EDIT_ORDERS}, got {variant.edits!r}")
        super().__init__(variant.n_beams, variant.low, variant.margin)
        self.variant = variant

    def _edits(self, observation: Mapping[str, np.ndarray]) -> list[int]:
        edits = super()._edits(observation)
        if self.variant.edits == "aperture":
            return edits
        turns = [e for e in edits if e in (TURN_CW, TURN_CCW)]
        apertures = [e for e in edits if e in (NARROW, WIDEN)]
        weights = [e for e in edits if e not in turns and e not in apertures]
        if self.variant.edits == "weight":
            return weights + apertures + turns
        return turns + apertures + weights


def step0_features(observation: Mapping[str, np.ndarray]) -> np.ndarray:
    """What the selector reads at step 0: the anatomy block, which OARs are present and their
    status row, the tumour status, and the anatomy cost of a beam at each grid angle (the
    quantity ``anatomy_aware``'s template minimises), as one float64 vector."""
    parts = [
        observation["anatomy"].ravel(),
        observation["oar_present"].ravel(),
        observation["oar_status"].ravel(),
        observation["tumour_status"].ravel(),
        _anatomy_cost(observation) / 10.0,
    ]
    return np.concatenate([np.asarray(p, dtype=np.float64) for p in parts])


def step1_features(observation: Mapping[str, np.ndarray]) -> np.ndarray:
    """What the selector reads at step 1, after the family's common first action (``ADD``: one beam at
    the default margin): :func:`step0_features`, then what that beam's dose shows of the tumour's size
    and the organs (the tumour DVH and status, the OARs' status and every fifth point of their DVHs)."""
    parts = [
        step0_features(observation),
        observation["tumour_dvh"].ravel(),
        observation["oar_status"].ravel(),
        observation["oar_dvh"][:, ::5].ravel(),
    ]
    return np.concatenate([np.asarray(p, dtype=np.float64) for p in parts])


FEATURES = {0: step0_features, 1: step1_features}
"""The step at which the selector chooses -> what it reads there."""


class Selector:
    """Per-variant score regressor: standardised features -> (optional tanh hidden layers) -> K scores.

    ``low``/``high`` (optional): the range of the standardised features seen in training; a feature
    outside it is clipped to it before the regression, so a patient unlike any training one (another
    anatomy distribution) gets the prediction of the nearest training range, not a linear
    extrapolation (which is what lost out of distribution; ``checkpoints/README.md``)."""

    def __init__(
        self,
        mean: np.ndarray,
        scale: np.ndarray,
        layers: Sequence[tuple[np.ndarray, np.ndarray]],
        low: np.ndarray | None = None,
        high: np.ndarray | None = None,
    ) -> None:
        if (low is None) != (high is None):
            raise ValueError("clip bounds come in pairs: give both low and high or neither")
        self.mean = np.asarray(mean, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        self.layers = [(np.asarray(w, np.float64), np.asarray(b, np.float64)) for w, b in layers]
        self.low = None if low is None else np.asarray(low, dtype=np.float64)
        self.high = None if high is None else np.asarray(high, dtype=np.float64)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """(..., K) predicted scores (or score gains) of each variant."""
        x = (np.asarray(features, dtype=np.float64) - self.mean) / self.scale
        if self.low is not None:
            x = np.clip(x, self.low, self.high)
        for w, b in self.layers[:-1]:
            x = np.tanh(x @ w.T + b)
        w, b = self.layers[-1]
        return x @ w.T + b

    def scores(self, observation: Mapping[str, np.ndarray], decide_at: int = 0) -> np.ndarray | None:
        return self.predict(FEATURES[decide_at](observation))

    def arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        out = {f"{prefix}mean": self.mean, f"{prefix}scale": self.scale}
        for i, (w, b) in enumerate(self.layers):
            out[f"{prefix}w{i}"], out[f"{prefix}b{i}"] = w, b
        if self.low is not None and self.high is not None:
            out[f"{prefix}low"], out[f"{prefix}high"] = self.low, self.high
        return out

    @classmethod
    def from_arrays(cls, data: Mapping[str, np.ndarray], prefix: str = "") -> Selector:
        n = len([k for k in data if k.startswith(f"{prefix}w")])
        layers = [(data[f"{prefix}w{i}"], data[f"{prefix}b{i}"]) for i in range(n)]
        return cls(
            data[f"{prefix}mean"],
            data[f"{prefix}scale"],
            layers,
            data.get(f"{prefix}low"),
            data.get(f"{prefix}high"),
        )


def site_key(observation: Mapping[str, np.ndarray]) -> tuple[int, ...]:
    """Which OARs the observation shows, and their priorities: it tells the treatment site (each
    task has its own set in every split), so a selector can keep one regressor per site."""
    present = np.asarray(observation["oar_present"]) > 0
    priority = np.rint(np.asarray(observation["oar_status"])[:, 0] * 3).astype(int)
    return tuple(int(p) for p in np.where(present, priority, 0))


class SiteSelector:
    """One :class:`Selector` per site (:func:`site_key`); a site it was not trained on gets no scores,
    so the policy falls back to the family's first (default) variant."""

    def __init__(self, keys: Sequence[Sequence[int]] | np.ndarray, selectors: Sequence[Selector]) -> None:
        if len(keys) != len(selectors):
            raise ValueError("one selector per site key")
        self.selectors = {tuple(int(v) for v in k): s for k, s in zip(keys, selectors)}

    def scores(self, observation: Mapping[str, np.ndarray], decide_at: int = 0) -> np.ndarray | None:
        selector = self.selectors.get(site_key(observation))
        return None if selector is None else selector.scores(observation, decide_at)

    def arrays(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {"keys": np.array(list(self.selectors), dtype=np.int64)}
        for i, selector in enumerate(self.selectors.values()):
            out |= selector.arrays(f"s{i}_")
        return out

    @classmethod
    def from_arrays(cls, data: Mapping[str, np.ndarray]) -> SiteSelector:
        keys = data["keys"]
        return cls(keys, [Selector.from_arrays(data, f"s{i}_") for i in range(len(keys))])


class OptionSelectorPolicy(BaseRTPolicy):
    """Pick the variant with the highest predicted score for this patient, then let it play the
    episode (the choice is fixed until the next :meth:`reset`). ``decide_at=0`` chooses from the first
    observation; ``decide_at=1`` lets the family's first variant play the first step (every variant's
    first action is ``ADD``, checked when the chosen one replays it) and chooses from what that beam's
    dose shows (:func:`step1_features`). With one variant (or no selector) it is that variant; with
    ``family=(DEFAULT,)`` it is ``anatomy_aware``."""

    name = "option_selector"

    def __init__(
        self,
        family: Sequence[Variant] = (DEFAULT,),
        selector: Selector | SiteSelector | None = None,
        name: str | None = None,
        decide_at: int = 0,
    ) -> None:
        super().__init__()
        if not family:
            raise ValueError("an option selector needs at least one variant")
        if selector is None and len(family) > 1:
            raise ValueError("a family of more than one variant needs a selector")
        if decide_at not in FEATURES:
            raise ValueError(f"decide_at must be one of {sorted(FEATURES)}, got {decide_at!r}")
        self.family = tuple(family)
        self.selector = selector
        self.decide_at = decide_at
        self.metadata: dict[str, Any] = {}
        if name:
            self.name = name
        self.choice: int | None = None
        self.option: VariantPolicy | None = None
        self._history: list[tuple[dict[str, np.ndarray], np.ndarray, int]] = []

    def reset(self, seed: int | None = None, plan=None) -> None:
        super().reset(seed, plan)
        self.choice = None
        self.option = None
        self._history = []

    def _option(self, variant: Variant) -> VariantPolicy:
        """The policy that plays a chosen variant (:class:`~policies.radiotherapy.ranker.RankedSelectorPolicy`
        plays it with a learned edit ranker)."""
        return VariantPolicy(variant)

    def choose(self, observation: Mapping[str, np.ndarray]) -> int:
        """The variant index for this observation (the one at step :attr:`decide_at`)."""
        scores = None if self.selector is None else self.selector.scores(observation, self.decide_at)
        return 0 if scores is None else int(np.argmax(scores))

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        if self.option is None and len(self._history) < self.decide_at:
            # before the choice: the first variant plays; the steps are kept to replay into the chosen one
            opener = self._option(self.family[0])
            opener.reset()
            for obs, mask, _ in self._history:
                opener.act(obs, mask)
            action = int(opener.act(observation, action_mask))
            copy = {k: np.array(v, copy=True) for k, v in observation.items()}
            self._history.append((copy, np.array(action_mask, copy=True), action))
            return action
        if self.option is None:
            self.choice = self.choose(observation)
            self.option = self._option(self.family[self.choice])
            self.option.reset()
            for obs, mask, played in self._history:
                if int(self.option.act(obs, mask)) != played:
                    raise RuntimeError(
                        f"variant {self.family[self.choice]} would not have opened with {played}"
                    )
            self._history = []
        return self.option.act(observation, action_mask)


def save(
    path: Path,
    family: Sequence[Variant],
    selector: Selector | SiteSelector,
    metadata: Mapping[str, Any],
    extra: Mapping[str, np.ndarray] | None = None,
) -> None:
    """The selector's arrays to ``path`` (.npz) and the family and ``metadata`` to the .json beside it."""
    arrays: dict[str, Any] = dict(selector.arrays())
    extras: dict[str, Any] = dict(extra or {})
    np.savez_compressed(path, **arrays, **extras)  # a name in both is a TypeError, as it should be
    kind = "site" if isinstance(selector, SiteSelector) else "single"
    meta = dict(metadata) | {"options": [asdict(v) for v in family], "selector": kind}
    meta.setdefault("decide_at", 0)
    path.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
