"""Statistics the field reports for learned policies, over several training seeds (rliable).

Agarwal et al. (2021, "Deep RL at the Edge of the Statistical Precipice") and the rliable
library are the field's standard: a score matrix per algorithm of shape ``(runs, tasks)``
(here: training seeds x scenarios, each entry a run's mean held-out score on that
scenario), aggregated by the **interquartile mean** (IQM) with **stratified-bootstrap
95 % confidence intervals**; the **probability of improvement** of one algorithm over
another; **sample-efficiency curves** (IQM against training frames, CI bands). marl-eval
(InstaDeep) reads one JSON layout for such runs: :func:`marl_eval_json` writes it
(the layout BenchMARL's own ``JsonWriter`` writes).

A deterministic baseline (``team_heuristic``) is one "run": its score matrix has one row.

rliable (and its arch bootstrap) load only when a function needs them (the ``marl`` extra).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

CONFIDENCE = 0.95
DEFAULT_REPS = 2_000
"""Bootstrap resamples. rliable's paper figures use 50,000; its probability-of-improvement estimate
loops in Python and is slow at that count on a 2-core box, so the table uses fewer (the CI
bounds then move slightly between bootstrap seeds; ``benchmarks/marl_stats.py`` prints them)."""


@contextmanager
def _bootstrap_seed(seed: int) -> Iterator[None]:
    """Seed rliable's bootstrap for one call, leaving the caller's global NumPy generator as it
    was. rliable 1.2's ``get_interval_estimates`` takes a ``random_state``, but its stratified
    bootstrap draws the resampled runs with ``np.random.choice`` (``update_indices``), so that
    argument does not make the intervals reproducible; only NumPy's global generator does."""
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(saved)


def score_matrix(runs: Sequence[Mapping[str, Sequence[float]]], scenarios: Sequence[str]) -> np.ndarray:
    """``(runs, tasks)``: each run's mean per-episode score on each scenario (in ``scenarios`` order)."""
    if not runs:
        raise ValueError("no runs")
    return np.array([[float(np.mean(run[s])) for s in scenarios] for run in runs], dtype=np.float64)


def aggregate_estimates(
    matrices: Mapping[str, np.ndarray], reps: int = DEFAULT_REPS, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """IQM and mean of each algorithm's ``(runs, tasks)`` matrix with stratified-bootstrap 95 % CIs."""
    from rliable import library as rly
    from rliable import metrics

    def aggregate(scores: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(scores), metrics.aggregate_mean(scores)])

    with _bootstrap_seed(seed):
        points, intervals = rly.get_interval_estimates(
            dict(matrices), aggregate, reps=reps, confidence_interval_size=CONFIDENCE
        )
    return {
        name: {
            "iqm": float(points[name][0]),
            "iqm_ci": [float(intervals[name][0, 0]), float(intervals[name][1, 0])],
            "mean": float(points[name][1]),
            "mean_ci": [float(intervals[name][0, 1]), float(intervals[name][1, 1])],
            "runs": int(matrices[name].shape[0]),
        }
        for name in matrices
    }


def probability_of_improvement(
    matrices: Mapping[str, np.ndarray], baseline: str, reps: int = DEFAULT_REPS, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """P(X > baseline) of every other algorithm X (ties count half), with its stratified-bootstrap CI."""
    from rliable import library as rly
    from rliable import metrics

    pairs = {
        f"{name},{baseline}": (m, matrices[baseline]) for name, m in matrices.items() if name != baseline
    }
    with _bootstrap_seed(seed):
        points, intervals = rly.get_interval_estimates(
            pairs, metrics.probability_of_improvement, reps=reps, confidence_interval_size=CONFIDENCE
        )
    return {
        key.split(",")[0]: {
            "p": float(points[key]),
            "ci": [float(np.ravel(intervals[key])[0]), float(np.ravel(intervals[key])[1])],
        }
        for key in pairs
    }


def sample_efficiency(
    curves: Mapping[str, np.ndarray], reps: int = DEFAULT_REPS, seed: int = 0
) -> dict[str, dict[str, list[float]]]:
    """IQM over (runs, tasks) at each evaluation point of ``(runs, tasks, points)`` arrays, with CIs."""
    from rliable import library as rly
    from rliable import metrics

    def iqm_per_point(scores: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(scores[..., k]) for k in range(scores.shape[-1])])

    with _bootstrap_seed(seed):
        points, intervals = rly.get_interval_estimates(
            dict(curves), iqm_per_point, reps=reps, confidence_interval_size=CONFIDENCE
        )
    return {
        name: {
            "iqm": points[name].tolist(),
            "low": intervals[name][0].tolist(),
            "high": intervals[name][1].tolist(),
        }
        for name in curves
    }


def paired_margin(
    runs: Sequence[Mapping[str, Sequence[float]]], reference: Mapping[str, Sequence[float]], scenario: str
) -> tuple[float, float]:
    """Mean over runs of (run - reference) on the same held-out days, and its standard error over runs.

    The days are paired (same seeds for every policy), so the day-to-day variation cancels;
    what remains is the spread between training seeds (and each run's own episode noise).
    """
    ref = np.asarray(reference[scenario], np.float64)
    margins = np.array([np.mean(np.asarray(run[scenario], np.float64) - ref) for run in runs])
    se = float(np.std(margins, ddof=1) / np.sqrt(len(margins))) if len(margins) > 1 else 0.0
    return float(margins.mean()), se


def run_stderr(runs: Sequence[Mapping[str, Sequence[float]]], scenario: str) -> float:
    """Standard error of an algorithm's scenario score: episodes of every run pooled per run, then
    the spread of run means (training seeds) -- the error of the row a table prints."""
    means = np.array([np.mean(run[scenario]) for run in runs])
    if len(means) < 2:
        scores = np.asarray(runs[0][scenario], np.float64)
        return float(np.std(scores, ddof=1) / np.sqrt(len(scores)))
    return float(np.std(means, ddof=1) / np.sqrt(len(means)))


def marl_eval_json(
    environment: str,
    task: str,
    algorithms: Mapping[str, Sequence[Mapping[str, Any]]],
    metric: str = "score",
) -> dict[str, Any]:
    """marl-eval's raw-data layout: ``{env: {task: {algorithm: {"seed_<k>": {"step_<i>":
    {"step_count": frames, metric: [per-episode values]}, ..., "absolute_metrics": {metric: [...]}}}}}}``.

    Each run is ``{"seed": k, "curve": [(frames, [episode scores]), ...], "final": [episode scores]}``;
    ``absolute_metrics`` holds the held-out evaluation (marl-eval's final, larger evaluation).
    """
    out: dict[str, Any] = {}
    for name, runs in algorithms.items():
        per_seed: dict[str, Any] = {}
        for run in runs:
            data: dict[str, Any] = {}
            for i, (frames, values) in enumerate(run["curve"]):
                data[f"step_{i}"] = {"step_count": int(frames), metric: [float(v) for v in values]}
            data["absolute_metrics"] = {metric: [float(v) for v in run["final"]]}
            per_seed[f"seed_{run['seed']}"] = data
        out[name] = per_seed
    return {environment: {task: out}}


__all__ = [
    "aggregate_estimates",
    "marl_eval_json",
    "paired_margin",
    "probability_of_improvement",
    "run_stderr",
    "sample_efficiency",
    "score_matrix",
]
