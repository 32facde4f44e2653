"""SPEC-RT §6: the RT grader's seeding, report, agent kinds and the scoreboard's ordering."""

from __future__ import annotations

import numpy as np
import pytest

from grading.radiotherapy import comparison_markdown, grade_all, grade_task, split_seed
from hospital_marl.radiotherapy import BUILTIN_TASKS
from hospital_marl.radiotherapy.core.metrics import PASS_THRESHOLD
from policies.baselines import MaskedRandomPolicy


def test_grade_all__report_shape_and_aggregate() -> None:
    report = grade_all("evenly_spaced", n_episodes=2, seed=42)
    assert report["env"] == "radiotherapy" and report["episodes"] == 2 and report["seed"] == 42
    assert report["split"] == "test_id"
    assert list(report["tasks"]) == list(BUILTIN_TASKS)
    assert report["aggregate_score"] == pytest.approx(np.mean([t["score"] for t in report["tasks"].values()]))
    for name, task in report["tasks"].items():
        assert task["episode_seeds"] == [split_seed(42, name, "test_id", i) for i in range(2)]
        assert task["pass_rate"] == np.mean([s >= PASS_THRESHOLD for s in task["episode_scores"]])
        assert set(task["metrics"]) == {"d95", "d98", "d2", "mean", "v95", "v107", "ci", "hi"}
        assert 0.0 <= task["critical_pass_rate"] <= 1.0
        assert set(task["oar_pass_rates"]) == set(task["oar_mean_dose"])


def test_grade_all__deterministic_for_stochastic_agents() -> None:
    first = grade_all("masked_random", n_episodes=3, seed=7, tasks=["head_neck"])
    again = grade_all("masked_random", n_episodes=3, seed=7, tasks=["head_neck"])
    assert first == again
    other = grade_all("masked_random", n_episodes=3, seed=8, tasks=["head_neck"])
    assert other["tasks"]["head_neck"]["episode_seeds"] != first["tasks"]["head_neck"]["episode_seeds"]


def test_grade_all__accepts_the_originals_callable_and_an_ed_style_policy() -> None:
    def sample_agent(obs, env):
        return env.action_space.sample()

    callable_report = grade_all(sample_agent, n_episodes=2, seed=1, tasks=["prostate"])
    assert callable_report == grade_all(sample_agent, n_episodes=2, seed=1, tasks=["prostate"])
    assert callable_report["agent"] == "sample_agent"
    # an ED flat-track policy: act(observation, action_mask), reset(seed, hospital=None)
    ed_report = grade_all(MaskedRandomPolicy(), n_episodes=2, seed=1, tasks=["prostate"])
    assert ed_report["tasks"]["prostate"]["invalid_actions"] == 0


def test_grade__bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="n_episodes"):
        grade_all("random", n_episodes=0)
    with pytest.raises(ValueError, match="seed"):
        grade_task("random", "prostate", seed=-1)
    with pytest.raises(ValueError, match="unknown radiotherapy agent"):
        grade_all("nope")
    with pytest.raises(ValueError, match="unknown task"):
        grade_all("random", tasks=["nope"])


def test_scoreboard__random_below_scripted_below_optimiser() -> None:
    reports = {a: grade_all(a, n_episodes=3, seed=42) for a in ("random", "evenly_spaced", "planner")}
    for task in BUILTIN_TASKS:
        scores = [reports[a]["task_scores"][task] for a in ("random", "evenly_spaced", "planner")]
        assert scores == sorted(scores) and len(set(scores)) == 3, (task, scores)
    assert reports["planner"]["aggregate_score"] > reports["evenly_spaced"]["aggregate_score"]
    table = comparison_markdown(list(reports.values()))
    assert "| planner |" in table and "prostate/rectum" in table
