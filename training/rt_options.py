"""Fitting the option selector (:mod:`policies.radiotherapy.options`; issue 25 item 6): numpy only.

The labels (every variant's score on training patients, ``tools/rt_options.py label``) are regressed
per site: ridge regression from the standardised step-0 features to each variant's score *gain over
the default variant*; the policy plays the argmax. ``threshold`` is added to the default's predicted
gain (0 by construction of the targets), so a variant is chosen over ``anatomy_aware`` only when its
predicted gain exceeds it. ``ridge=inf`` leaves the intercepts alone: the best variant on average per
site, whatever the patient (the non-contextual bandit, a baseline for the contextual one).
``clip`` bounds the standardised features to their training range (no linear extrapolation to
patients unlike the training ones). :func:`fit_sites` takes each of these per site (a mapping from
the site key), since what generalises differs by site (``checkpoints/README.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import numpy as np

from policies.radiotherapy.options import Selector, SiteSelector


def fit_ridge(
    features: np.ndarray,
    gains: np.ndarray,
    ridge: float,
    threshold: float = 0.0,
    hidden: int = 0,
    seed: int = 0,
    clip: bool = False,
) -> Selector:
    """A :class:`Selector` predicting ``gains`` (N, K) from ``features`` (N, F). ``hidden`` > 0: a
    random tanh layer of that width first (random features; the ridge fits only the output).
    ``clip``: the selector clips standardised features to the range they span here."""
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(gains, dtype=np.float64)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = (x - mean) / scale
    low, high = (z.min(axis=0), z.max(axis=0)) if clip else (None, None)
    layers: list[tuple[np.ndarray, np.ndarray]] = []
    if hidden:
        rng = np.random.default_rng(seed)
        w0 = rng.normal(0.0, 1.0 / np.sqrt(z.shape[1]), (hidden, z.shape[1]))
        b0 = rng.normal(0.0, 0.5, hidden)
        layers.append((w0, b0))
        z = np.tanh(z @ w0.T + b0)
    intercept = y.mean(axis=0)
    if np.isinf(ridge):
        w = np.zeros((y.shape[1], z.shape[1]))
    else:
        zc = z - z.mean(axis=0)
        a = zc.T @ zc + ridge * len(zc) * np.eye(z.shape[1])
        w = np.linalg.solve(a, zc.T @ (y - intercept)).T
        intercept = intercept - w @ z.mean(axis=0)
    bias = intercept.copy()
    bias[0] += threshold
    layers.append((w, bias))
    return Selector(mean, scale, layers, low, high)


V = TypeVar("V")


def per_site(value: V | Mapping[tuple[int, ...], V], key: tuple[int, ...]) -> V:
    """``value`` itself, or its entry for site ``key`` if it is a mapping by site."""
    return value[key] if isinstance(value, Mapping) else value  # type: ignore[return-value]


def fit_sites(
    data: Mapping[tuple[int, ...], tuple[np.ndarray, np.ndarray]],
    ridge: float | Mapping[tuple[int, ...], float],
    threshold: float | Mapping[tuple[int, ...], float] = 0.0,
    hidden: int = 0,
    seed: int = 0,
    clip: bool | Mapping[tuple[int, ...], bool] = False,
) -> SiteSelector:
    """One :func:`fit_ridge` per site key: ``data[key] = (features, scores)``, the default variant's
    scores in column 0 (the gains are taken against it). ``ridge``, ``threshold`` and ``clip`` are
    one value for every site or a mapping by site key."""
    keys: list[tuple[int, ...]] = []
    selectors: list[Selector] = []
    for key, (x, scores) in data.items():
        gains = scores - scores[:, :1]
        keys.append(key)
        selectors.append(
            fit_ridge(
                x,
                gains,
                per_site(ridge, key),
                per_site(threshold, key),
                hidden,
                seed,
                per_site(clip, key),
            )
        )
    return SiteSelector(keys, selectors)


def greedy_family(scores: Sequence[np.ndarray], k: int) -> list[int]:
    """Indices of ``k`` variants (column 0, the default, first) chosen greedily to maximise the summed
    per-task best-of-family mean score on the given patients (one (N, V) array per task)."""
    chosen = [0]
    while len(chosen) < k:
        best, gain = None, -np.inf
        for j in range(scores[0].shape[1]):
            if j in chosen:
                continue
            value = sum(float(s[:, [*chosen, j]].max(axis=1).mean()) for s in scores)
            if value > gain:
                best, gain = j, value
        if best is None:
            break
        chosen.append(best)
    return chosen
