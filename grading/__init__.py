"""The reproducible grader: rollouts -> reports.

Its names are loaded on first use (PEP 562): the sandboxed policy's process
(:mod:`grading.sandbox_child`) starts inside this package and must set numba's cache before
anything imports the kernels.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "COUNT_KEYS",
    "SCORE_FORMULA",
    "episode_seed",
    "grade",
    "grade_generalisation",
    "run_flat_episode",
    "run_team_episode",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from grading import grader

        return getattr(grader, name)
    raise AttributeError(f"module 'grading' has no attribute {name!r}")
