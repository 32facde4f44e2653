"""Training data and fit for the edit ranker (:mod:`policies.radiotherapy.ranker`; issue 25 item 6).

A label is one simulated trial: at a state where the edit phase is about to try an edit, every
untried valid edit is played on the training env (``Plan.snapshot`` / ``Plan.restore``) and labelled
1 if the score rebuilt from the observation rises (the edit phase's own keep rule), else 0. The
behaviour that visits the states: the option selector of the same training seed playing its chosen
variant, in round 1 with ``anatomy_aware``'s order (``base``) and with the best simulated edit
(``oracle``, so good plans' states are seen too), in later rounds with the ranker fitted so far
(``ranked``: the states the learned policy itself reaches, as DAgger). Only training-split patients
(their own seed stream per training seed) are played. The fit is a ridge regression per (site, edit)
kept as sufficient statistics, so a ridge strength is chosen later without replaying anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.radiotherapy.baselines import observed_score
from policies.radiotherapy.options import OptionSelectorPolicy, Variant, site_key
from policies.radiotherapy.ranker import EditRanker, RankedVariantPolicy, edit_features, site_rows
from training.rt_rollout import complete

MODES = ("base", "oracle", "ranked")
GAIN = 1e-6
"""A trial is kept when the observed score rises by more than this (``AnatomyAwarePolicy``'s rule)."""


class Statistics:
    """Per (site, edit) sums for a standardised ridge fit: count, Σx, Σxxᵀ, Σxy, Σy."""

    def __init__(self) -> None:
        self.sums: dict[tuple[tuple[int, ...], int], list[Any]] = {}
        self._rows: dict[tuple[tuple[int, ...], int], list[tuple[np.ndarray, float]]] = {}

    def add(self, key: tuple[int, ...], edit: int, x: np.ndarray, y: float) -> None:
        rows = self._rows.setdefault((key, edit), [])
        rows.append((x, y))
        if len(rows) >= 4096:  # one matrix product per block, not an outer product per row
            self._flush((key, edit))

    def _flush(self, group: tuple[tuple[int, ...], int]) -> None:
        rows = self._rows.pop(group, [])
        if not rows:
            return
        x = np.array([r[0] for r in rows])
        y = np.array([r[1] for r in rows])
        block = [len(rows), x.sum(axis=0), x.T @ x, x.T @ y, float(y.sum())]
        s = self.sums.get(group)
        if s is None:
            self.sums[group] = block
        else:
            for i in range(5):
                s[i] = s[i] + block[i]

    def flush(self) -> None:
        for group in list(self._rows):
            self._flush(group)

    def merge(self, other: Statistics) -> None:
        other.flush()
        for k, t in other.sums.items():
            s = self.sums.get(k)
            if s is None:
                self.sums[k] = [t[0], t[1].copy(), t[2].copy(), t[3].copy(), t[4]]
            else:
                for i in range(5):
                    s[i] = s[i] + t[i]

    def fit(self, ridge: float | Mapping[tuple[int, ...], float]) -> EditRanker:
        """Per (site, edit): the ridge regression of the label on the standardised features
        (penalty ``ridge`` × count, as :func:`training.rt_options.fit_ridge`), intercept the mean."""
        self.flush()
        models = {}
        for (key, edit), (n, sx, sxx, sxy, sy) in self.sums.items():
            lam = ridge[key] if isinstance(ridge, Mapping) else ridge
            mean = sx / n
            var = np.diag(sxx) / n - mean**2
            scale = np.sqrt(np.maximum(var, 0.0))
            scale[scale < 1e-9] = 1.0
            y_mean = sy / n
            zz = (sxx - n * np.outer(mean, mean)) / np.outer(scale, scale)
            zy = (sxy - n * mean * y_mean) / scale
            w = np.linalg.solve(zz + lam * n * np.eye(len(mean)), zy)
            models[(key, edit)] = (mean, scale, w, float(y_mean))
        return EditRanker(models)

    def arrays(self) -> dict[str, np.ndarray]:
        self.flush()
        keys = sorted(self.sums)
        return {
            "sites": site_rows([k for k, _ in keys]),
            "edits": np.array([e for _, e in keys], dtype=np.int64),
            "n": np.array([self.sums[k][0] for k in keys], dtype=np.int64),
            "sx": np.array([self.sums[k][1] for k in keys]),
            "sxx": np.array([self.sums[k][2] for k in keys]),
            "sxy": np.array([self.sums[k][3] for k in keys]),
            "sy": np.array([self.sums[k][4] for k in keys]),
        }

    @classmethod
    def from_arrays(cls, data: Mapping[str, np.ndarray]) -> Statistics:
        out = cls()
        for i, edit in enumerate(data["edits"]):
            out.sums[(tuple(int(v) for v in data["sites"][i]), int(edit))] = [
                int(data["n"][i]),
                data["sx"][i],
                data["sxx"][i],
                data["sxy"][i],
                float(data["sy"][i]),
            ]
        return out

    def save(self, path: Path) -> None:
        np.savez_compressed(path, **self.arrays())

    @classmethod
    def load(cls, paths: Sequence[Path | str]) -> Statistics:
        out = cls()
        for path in paths:
            with np.load(path) as data:
                out.merge(cls.from_arrays({k: data[k] for k in data.files}))
        return out


class _Labelling(RankedVariantPolicy):
    """A variant that labels every candidate edit by simulating it on the training env, then tries
    the one its ``mode`` picks."""

    def __init__(
        self, variant: Variant, ranker: EditRanker, env: RadiotherapyPlanningEnv, stats: Statistics, mode: str
    ) -> None:
        super().__init__(variant, ranker)
        self.env, self.stats, self.mode = env, stats, mode

    def _next_trial(self, observation: Mapping[str, np.ndarray], candidates: list[int]) -> int | None:
        plan = self.env.plan
        state = plan.snapshot()
        now = observed_score(observation)
        gains = []
        for edit in candidates:
            after, *_ = self.env.step(edit)
            gains.append(observed_score(after) - now)
            plan.restore(state)
        x, key = edit_features(observation), site_key(observation)
        for edit, gain in zip(candidates, gains):
            self.stats.add(key, edit, x, float(gain > GAIN))
        if self.mode == "base":
            return candidates[0]
        if self.mode == "oracle":
            best = int(np.argmax(gains))
            return candidates[best] if gains[best] > GAIN else None
        return super()._next_trial(observation, candidates)


class _LabellingSelector(OptionSelectorPolicy):
    def __init__(
        self,
        selector: OptionSelectorPolicy,
        ranker: EditRanker,
        env: RadiotherapyPlanningEnv,
        stats: Statistics,
        mode: str,
    ) -> None:
        super().__init__(selector.family, selector.selector, decide_at=selector.decide_at)
        self.ranker, self.env, self.stats, self.mode = ranker, env, stats, mode

    def _option(self, variant: Variant) -> _Labelling:
        return _Labelling(variant, self.ranker, self.env, self.stats, self.mode)


def label(
    selector: OptionSelectorPolicy,
    task: str,
    seeds: Sequence[int],
    mode: str,
    stats: Statistics,
    ranker: EditRanker | None = None,
) -> list[float]:
    """Play ``selector`` (its variants labelling every trial) on training patients ``seeds`` of
    ``task``; the episodes' final scores."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "ranked" and ranker is None:
        raise ValueError("mode 'ranked' needs a ranker")
    env = RadiotherapyPlanningEnv(task, split="train")
    scores = []
    for seed in seeds:
        observation, _ = env.reset(seed=int(seed))
        policy = _LabellingSelector(selector, ranker or EditRanker({}), env, stats, mode)
        policy.reset()
        scores.append(float(complete(env, observation, policy)[0]))
    return scores


__all__ = ["MODES", "Statistics", "label"]
