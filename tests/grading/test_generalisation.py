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


def _fake_report(track: str, test_scores: list[float], seeds: list[int]) -> dict:
    def side(scores: list[float]) -> dict:
        return {"score": sum(scores) / len(scores), "score_stderr": 0.5, "episode_scores": scores,
                "episode_seeds": seeds}  # fmt: skip

    flat = [70.0] * len(seeds)
    sides = {"validation": side(flat), "test": side(test_scores)}
    sides.update(night_shift=side(flat), night_shift_lean=side(flat))
    return {"track": track, "scenarios": sides}


def test_tiers__are_set_by_the_reference_agents_scores_on_each_day() -> None:
    """A day is hard when the heuristic scored low on it; another agent's cells average its own
    scores over those same days (by seed), whatever its own scores are."""
    from benchmarks.generalisation import tables

    seeds = [11, 12, 13, 14, 15, 16]
    reference = _fake_report("flat", [90.0, 50.0, 70.0, 91.0, 49.0, 71.0], seeds)
    other = _fake_report("flat", [10.0, 30.0, 20.0, 10.0, 30.0, 20.0], seeds)
    text = tables({"heuristic": reference, "other": other})
    other_row = next(line for line in text.splitlines() if line.startswith("| other | 10.0"))
    assert other_row.split(" | ")[1:4] == ["10.0 ± 0.0", "20.0 ± 0.0", "30.0 ± 0.0 |"]
    assert "| other | flat | 6 | 70.0 ± 0.0 | 20.0 ± 3.7 | +50.0 ± 0.7 |" in text
