"""The reproducible grader: rollouts -> reports."""

from grading.grader import (
    COUNT_KEYS,
    SCORE_FORMULA,
    episode_seed,
    grade,
    grade_generalisation,
    run_flat_episode,
    run_team_episode,
)

__all__ = [
    "COUNT_KEYS",
    "SCORE_FORMULA",
    "episode_seed",
    "grade",
    "grade_generalisation",
    "run_flat_episode",
    "run_team_episode",
]
