"""The grader: report schema, composite formula, reproducibility across processes, paired seeds."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from grading import COUNT_KEYS, episode_seed, grade
from hospital_marl import BUILTIN_SCENARIOS, composite_score
from hospital_marl.core.metrics import METRIC_NAMES

GRADE_SNIPPET = (
    "import json, sys; from grading import grade; "
    "print(json.dumps(grade(sys.argv[1], episodes=2, seed=3, track=sys.argv[2])))"
)


@pytest.fixture(scope="module")
def heuristic_report() -> dict:
    return grade("heuristic", episodes=3, seed=0)


def test_report__has_the_documented_schema(heuristic_report: dict) -> None:
    r = heuristic_report
    assert r["track"] == "flat" and r["episodes"] == 3 and r["seed"] == 0 and r["agent"] == "heuristic"
    for metric in METRIC_NAMES:
        assert 0.0 <= r[metric] <= (100.0 if metric == "avg_wait_time" else 1.0)
    assert list(r["scenario_scores"]) == list(BUILTIN_SCENARIOS)
    for name, s in r["scenarios"].items():
        assert set(s["counts"]) == set(COUNT_KEYS)
        assert len(s["episode_scores"]) == len(s["episode_seeds"]) == 3
        assert s["score_stderr"] >= 0
        assert s["score"] == r["scenario_scores"][name]
        assert s["counts"]["critical_deaths"] <= s["counts"]["critical_total"]
        assert s["counts"]["deaths"] <= s["counts"]["arrivals"]


def test_overall__is_the_mean_of_the_scenario_scores(heuristic_report: dict) -> None:
    scores = list(heuristic_report["scenario_scores"].values())
    assert heuristic_report["overall_score"] == pytest.approx(sum(scores) / len(scores), abs=1e-12)


def test_scenario_score__is_the_mean_composite_of_its_episodes(heuristic_report: dict) -> None:
    s = heuristic_report["scenarios"]["surge"]
    assert s["score"] == pytest.approx(sum(s["episode_scores"]) / 3, abs=1e-12)
    mean = s["score"]
    sd = math.sqrt(sum((x - mean) ** 2 for x in s["episode_scores"]) / 2)
    assert s["score_stderr"] == pytest.approx(sd / math.sqrt(3), abs=1e-12)


def test_composite__matches_the_spec_formula() -> None:
    m = {
        "survival_rate": 0.9,
        "critical_patient_survival": 0.5,
        "avg_wait_time": 5.0,
        "resource_utilization": 0.4,
        "invalid_action_rate": 0.1,
    }
    assert composite_score(m) == pytest.approx(40 * 0.9 + 20 * 0.5 + 20 * 0.75 + 10 * 0.4 + 10 * 0.9)
    m["avg_wait_time"] = 50.0
    assert composite_score(m) == pytest.approx(40 * 0.9 + 20 * 0.5 + 0 + 10 * 0.4 + 10 * 0.9)


@pytest.mark.parametrize(("agent", "track"), [("masked_random", "flat"), ("team_heuristic", "team")])
def test_grade__is_bit_for_bit_reproducible_across_processes(agent: str, track: str) -> None:
    runs = [
        subprocess.run(
            [sys.executable, "-c", GRADE_SNIPPET, agent, track], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    ]
    in_process = json.dumps(grade(agent, episodes=2, seed=3, track=track))
    assert runs[0] == runs[1] == in_process + "\n"


def test_every_policy__is_graded_on_the_same_days() -> None:
    a = grade("random", episodes=2, seed=7, scenarios=["night_shift"])["scenarios"]["night_shift"]
    b = grade("heuristic", episodes=2, seed=7, scenarios=["night_shift"])["scenarios"]["night_shift"]
    assert a["episode_seeds"] == b["episode_seeds"]
    assert a["counts"]["ticks"] == b["counts"]["ticks"] == 200  # full shifts: the whole day arrived
    assert a["counts"]["arrivals"] == b["counts"]["arrivals"]


def test_episode_seeds__differ_by_base_seed_scenario_and_index() -> None:
    seeds = {episode_seed(base, s, i) for base in (0, 1) for s in BUILTIN_SCENARIOS for i in range(3)}
    assert len(seeds) == 2 * len(BUILTIN_SCENARIOS) * 3


def test_team_track__counts_one_action_per_role_per_tick() -> None:
    r = grade("team_heuristic", episodes=1, track="team", scenarios=["normal_day"])
    counts = r["scenarios"]["normal_day"]["counts"]
    assert r["track"] == "team"
    assert counts["actions"] == 3 * counts["ticks"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"track": "team", "policy": "heuristic_flat_only"}, None),
        ({"episodes": 0}, "episodes must be a positive int"),
        ({"seed": -1}, "seed must be a non-negative int"),
        ({"track": "solo"}, "track must be one of"),
        ({"scenarios": ["nope"]}, "unknown scenario 'nope'; valid names"),
    ],
)
def test_grade__rejects_bad_arguments_clearly(kwargs: dict, message: str | None) -> None:
    if message is None:
        from policies import RandomPolicy

        class FlatOnly(RandomPolicy):
            name = "flat_only"
            tracks = ("flat",)

        with pytest.raises(ValueError, match="plays \\('flat',\\), not the 'team' track"):
            grade(FlatOnly(), episodes=1, track="team")
        return
    with pytest.raises(ValueError, match=message):
        grade("heuristic", **kwargs)
