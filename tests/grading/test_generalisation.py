"""Grading across the generalisation split (issue #28): in- and out-of-distribution scores with
standard errors, on the same hospitals and patients for every agent."""

from __future__ import annotations

import math

import pytest

from grading import grade, grade_generalisation
from hospital_marl import DISTRIBUTIONS


@pytest.fixture(scope="module")
def reports() -> dict:
    return {name: grade_generalisation(name, episodes=3, seed=5) for name in ("masked_random", "heuristic")}


def test_report__has_both_sides_and_the_gap(reports) -> None:
    for report in reports.values():
        g = report["generalisation"]
        ind, ood = report["scenarios"]["validation"], report["scenarios"]["test"]
        assert g["in_distribution"]["score"] == ind["score"]
        assert g["out_of_distribution"]["score"] == ood["score"]
        assert g["gap"] == pytest.approx(ind["score"] - ood["score"])
        assert g["gap_stderr"] == pytest.approx(math.hypot(ind["score_stderr"], ood["score_stderr"]))
        assert ind["score_stderr"] > 0 and ood["score_stderr"] > 0


def test_agents__meet_the_same_days(reports) -> None:
    a, b = reports["masked_random"]["scenarios"], reports["heuristic"]["scenarios"]
    for split in ("validation", "test"):
        assert a[split]["episode_seeds"] == b[split]["episode_seeds"]
        assert len(set(a[split]["episode_seeds"])) == 3


def test_heuristic__beats_masked_random_out_of_distribution_too(reports) -> None:
    for split in ("validation", "test"):
        assert (
            reports["heuristic"]["scenarios"][split]["score"]
            > reports["masked_random"]["scenarios"][split]["score"]
        )


def test_grade__takes_a_user_distribution_and_the_team_track() -> None:
    mine = DISTRIBUTIONS["train"].with_overrides(name="my_family", general_beds=(6, 8))
    report = grade("team_heuristic", episodes=1, scenarios=[mine], track="team")
    assert set(report["scenarios"]) == {"my_family"}


def test_generalisation__refuses_the_same_family_twice() -> None:
    with pytest.raises(ValueError, match="must differ"):
        grade_generalisation("random", episodes=1, out_of_distribution="validation")
