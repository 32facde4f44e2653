"""What every trainer shares: the evaluation function's type, the scenario cycle, the run clock,
the learning curve's rows and files."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hospital_marl.core.rewards import DEFAULT_REWARDS, RewardTable


class Evaluate(Protocol):
    """How a trainer grades its current policy: :func:`grading.grade`'s signature.

    Trainers never import :mod:`grading` (a contract in pyproject.toml): they receive this function,
    ``train(args, evaluate)``, so the layer that calls them chooses how they are graded (the CLI
    passes :func:`grading.grade`; a test can pass a recording wrapper). ``policy`` is a policy
    object or a registered name; the result is a grader report (``overall_score``,
    ``scenario_scores``, ``scenarios``, ``invalid_action_rate``).
    """

    def __call__(
        self, policy: Any, *, episodes: int, seed: int, scenarios: Sequence[str], track: str
    ) -> dict[str, Any]: ...


class EvaluateRT(Protocol):
    """How the radiotherapy trainer grades: :func:`grading.radiotherapy.grade_all`'s signature
    (``aggregate_score``, ``task_scores``); given to it like :class:`Evaluate`."""

    def __call__(self, policy: Any, *, n_episodes: int, seed: int, split: str = ...) -> dict[str, Any]: ...


def require_evaluate(evaluate: Any, example: str) -> None:
    """Refuse a non-callable evaluation function before training starts (not at the first grading,
    minutes later); ``example`` shows the call the layer above makes."""
    if not callable(evaluate):
        raise TypeError(f"evaluate must be the grading function, as in {example}; got {evaluate!r}")


class ScenarioCycler:
    """The scenario of each next episode: ``scenarios`` in turn, starting at ``start % len``.

    Start env ``rank`` at ``rank`` (or any stride coprime with the list's length) so that a
    vector of envs covers the mix evenly at every moment, not one scenario at a time.
    """

    def __init__(self, scenarios: Sequence[str], start: int = 0) -> None:
        if not scenarios:
            raise ValueError("scenarios must name at least one scenario")
        self.scenarios = tuple(scenarios)
        self._next = start % len(self.scenarios)

    @property
    def first(self) -> str:
        """The scenario the next episode will use (without advancing)."""
        return self.scenarios[self._next]

    def __call__(self) -> str:
        """The next episode's scenario (advances the cycle)."""
        scenario = self.scenarios[self._next]
        self._next = (self._next + 1) % len(self.scenarios)
        return scenario


class Clock:
    """Wall and CPU seconds since a run started (CPU time is less disturbed by a shared machine);
    a resumed run starts from the seconds its earlier sessions took."""

    def __init__(self, wall: float = 0.0, cpu: float = 0.0) -> None:
        self._wall, self._cpu = time.perf_counter() - wall, time.process_time() - cpu

    def wall(self) -> float:
        return round(time.perf_counter() - self._wall, 2)

    def cpu(self) -> float:
        return round(time.process_time() - self._cpu, 2)


def eval_row(report: Mapping[str, Any], timesteps: int, clock: Clock) -> dict[str, Any]:
    """One learning-curve row from a grader report: the same columns for every trainer."""
    return {
        "timesteps": int(timesteps),
        "wall_time_s": clock.wall(),
        "cpu_time_s": clock.cpu(),
        "eval_score": round(report["overall_score"], 3),
        "eval_stderr": round(float(np.mean([s["score_stderr"] for s in report["scenarios"].values()])), 3),
        "invalid_action_rate": round(report["invalid_action_rate"], 4),
        **{f"score_{k}": round(v, 3) for k, v in report["scenario_scores"].items()},
    }


def write_curve(rows: list[dict[str, Any]], run_dir: Path) -> None:
    """``curve.json`` and ``curve.csv`` (one row per periodic evaluation)."""
    (run_dir / "curve.json").write_text(json.dumps(rows, indent=2) + "\n")
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with open(run_dir / "curve.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, columns)
        writer.writeheader()
        writer.writerows(rows)


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def reward_table(overrides: str) -> RewardTable:
    """The training envs' reward table: the env's own with ``"field=number,..."`` changes
    (training-only shaping; the grader scores episodes, never rewards)."""
    changes = {}
    for item in filter(None, overrides.replace(" ", "").split(",")):
        key, _, value = item.partition("=")
        if key not in {f.name for f in fields(RewardTable)}:
            raise ValueError(f"reward_overrides: {key!r} is not a RewardTable field")
        try:
            changes[key] = float(value)
        except ValueError:
            raise ValueError(f"reward_overrides: {item!r} is not field=number") from None
    return replace(DEFAULT_REWARDS, **changes)
