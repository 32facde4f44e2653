"""A learned edit ranker for ``anatomy_aware``'s edit phase (issue 25 item 6).

``anatomy_aware`` (and every variant of :mod:`policies.radiotherapy.options`) spends the steps left
after building its plan on trials: one edit on the active beam, kept if the score rebuilt from the
observation rises and undone otherwise. The step budget binds (every episode of every task runs
to it), so each failed trial costs two steps another trial could have used. The ranker learns, per
site and per edit, the probability that the edit raises the score from the observation (a ridge
regression on the indicator, i.e. a linear probability model, fitted to simulated trials on
training patients), and the climber tries the most promising untried edit first and none at all
when no edit's probability exceeds the site's threshold ``tau`` (then it goes on to the next beam).
Every trial is still checked against the observed score, so a wrong ranking wastes steps; it never
keeps an edit that lowers the score. The ranker reads only the observation (SPEC-RT §8 sealed
evaluation); labelling its training data simulates trials on the training env
(:mod:`training.rt_edits`), as a planner's experience would.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from hospital_marl.radiotherapy.core.dose import N_ANGLES
from hospital_marl.radiotherapy.core.plan import NARROW, TURN_CCW, TURN_CW, WEIGHT_DOWN, WEIGHT_UP, WIDEN
from policies.radiotherapy.baselines import _anatomy_cost, observed_score
from policies.radiotherapy.options import (
    OptionSelectorPolicy,
    Selector,
    SiteSelector,
    Variant,
    VariantPolicy,
    site_key,
)

EDITS = (NARROW, WIDEN, WEIGHT_UP, WEIGHT_DOWN, TURN_CW, TURN_CCW)
"""The edits the edit phase tries (:meth:`AnatomyAwarePolicy._edits`), one model each per site."""

_KEYS = ("tumour_dvh", "oar_dvh", "oar_status", "tumour_status", "beams", "anatomy", "step_fraction")


def edit_features(observation: Mapping[str, np.ndarray]) -> np.ndarray:
    """What the ranker reads: the whole observation, the active beam's row again, the anatomy cost at
    its angle and one grid step either way (what a turn changes), and the observed score."""
    beams = observation["beams"]
    active = int(np.argmax(beams[:, 3]))
    cost = _anatomy_cost(observation) / 10.0
    current = round(float(beams[active, 0]) * N_ANGLES) % N_ANGLES
    extra = [cost[current], cost[(current + 1) % N_ANGLES], cost[(current - 1) % N_ANGLES]]
    parts = [np.asarray(observation[k], dtype=np.float64).ravel() for k in _KEYS]
    parts += [np.asarray(beams[active], dtype=np.float64), np.array([*extra, observed_score(observation)])]
    return np.concatenate(parts)


def site_rows(keys: Sequence[tuple[int, ...]]) -> np.ndarray:
    """Site keys as an (n, width) int array (an empty ranker's too)."""
    return np.array(keys, dtype=np.int64).reshape(len(keys), len(keys[0]) if keys else 0)


class EditRanker:
    """Per (site, edit): standardised features -> linear score (the probability the edit helps);
    per site a threshold ``tau`` below which no edit is tried. A site or edit it has no model for
    scores 0, so an untrained site keeps ``anatomy_aware``'s order and tries everything (tau -inf)."""

    def __init__(
        self,
        models: Mapping[tuple[tuple[int, ...], int], tuple[np.ndarray, np.ndarray, np.ndarray, float]],
        taus: Mapping[tuple[int, ...], float] | None = None,
    ) -> None:
        self.models = {(tuple(int(v) for v in k), int(e)): m for (k, e), m in models.items()}
        self.taus = {tuple(int(v) for v in k): float(t) for k, t in (taus or {}).items()}

    def probabilities(self, observation: Mapping[str, np.ndarray], edits: Sequence[int]) -> np.ndarray:
        key = site_key(observation)
        x = edit_features(observation)
        out = np.zeros(len(edits))
        for i, edit in enumerate(edits):
            model = self.models.get((key, int(edit)))
            if model is not None:
                mean, scale, w, c = model
                out[i] = float(((x - mean) / scale) @ w + c)
        return out

    def tau(self, observation: Mapping[str, np.ndarray]) -> float:
        return self.taus.get(site_key(observation), -np.inf)

    def with_taus(self, taus: Mapping[tuple[int, ...], float]) -> EditRanker:
        return EditRanker(self.models, taus)

    def arrays(self, prefix: str = "ranker_") -> dict[str, np.ndarray]:
        keys = sorted(self.models)
        out: dict[str, np.ndarray] = {
            f"{prefix}sites": site_rows([k for k, _ in keys]),
            f"{prefix}edits": np.array([e for _, e in keys], dtype=np.int64),
            f"{prefix}mean": np.array([self.models[k][0] for k in keys]),
            f"{prefix}scale": np.array([self.models[k][1] for k in keys]),
            f"{prefix}w": np.array([self.models[k][2] for k in keys]),
            f"{prefix}c": np.array([self.models[k][3] for k in keys]),
        }
        taus = sorted(self.taus)
        out[f"{prefix}tau_sites"] = site_rows(taus)
        out[f"{prefix}taus"] = np.array([self.taus[k] for k in taus], dtype=np.float64)
        return out

    @classmethod
    def from_arrays(cls, data: Mapping[str, np.ndarray], prefix: str = "ranker_") -> EditRanker:
        sites, edits = data[f"{prefix}sites"], data[f"{prefix}edits"]
        models = {
            (tuple(sites[i]), int(edits[i])): (
                data[f"{prefix}mean"][i],
                data[f"{prefix}scale"][i],
                data[f"{prefix}w"][i],
                float(data[f"{prefix}c"][i]),
            )
            for i in range(len(edits))
        }
        taus = dict(zip(map(tuple, data[f"{prefix}tau_sites"]), data[f"{prefix}taus"]))
        return cls(models, taus)


class RankedVariantPolicy(VariantPolicy):
    """A :class:`~policies.radiotherapy.options.Variant` whose edit phase tries the ranker's most
    promising untried edit first, and none when no edit's probability exceeds the site's ``tau``."""

    name = "ranked_variant"

    def __init__(self, variant: Variant, ranker: EditRanker) -> None:
        super().__init__(variant)
        self.ranker = ranker

    def _next_trial(self, observation: Mapping[str, np.ndarray], candidates: list[int]) -> int | None:
        p = self.ranker.probabilities(observation, candidates)
        best = int(np.argmax(p))  # ties: the first in anatomy_aware's order
        return candidates[best] if p[best] > self.ranker.tau(observation) else None


class RankedSelectorPolicy(OptionSelectorPolicy):
    """The option selector whose chosen variant plays with a learned :class:`EditRanker`: which
    variant per patient (learned from training patients' outcomes) and which edit per state (learned
    from training patients' simulated trials)."""

    name = "ranked_selector"

    def __init__(
        self,
        family: Sequence[Variant],
        selector: Selector | SiteSelector | None,
        ranker: EditRanker,
        name: str | None = None,
        decide_at: int = 0,
    ) -> None:
        super().__init__(family, selector, name=name, decide_at=decide_at)
        self.ranker = ranker

    def _option(self, variant: Variant) -> VariantPolicy:
        return RankedVariantPolicy(variant, self.ranker)


def load_selector(path: Path, name: str | None = None) -> OptionSelectorPolicy:
    """An :class:`OptionSelectorPolicy` from :func:`~policies.radiotherapy.options.save`'s ``.npz`` +
    ``.json`` (a :class:`RankedSelectorPolicy` when it was saved with an edit ranker: here, beside the
    ranker, so that the options module does not import back the module built on it)."""
    metadata = json.loads(path.with_suffix(".json").read_text())
    family = [Variant(**v) for v in metadata["options"]]
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    selector: Selector | SiteSelector
    if metadata.get("selector") == "site":
        selector = SiteSelector.from_arrays(arrays)
    else:
        selector = Selector.from_arrays(arrays)
    policy: OptionSelectorPolicy
    if "ranker" in metadata:  # the selector's variants play with a learned edit ranker
        policy = RankedSelectorPolicy(
            family,
            selector,
            EditRanker.from_arrays(arrays),
            name=name or metadata.get("name"),
            decide_at=int(metadata.get("decide_at", 0)),
        )
    else:
        policy = OptionSelectorPolicy(
            family, selector, name=name or metadata.get("name"), decide_at=int(metadata.get("decide_at", 0))
        )
    policy.metadata = metadata
    return policy
