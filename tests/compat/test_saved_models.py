"""A user's saved SB3 / sb3-contrib ``.zip`` graded by path (issue #44, item 1): loaded by the
algorithm that saved it and fed the observation format it was trained on, scoring exactly what the
same model object scores; or refused with one line. A policy whose decisions mostly fault makes
``evaluate`` fail (status 1, the reason on stderr, ``failed`` at the report's top)."""

from __future__ import annotations

import json
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import sb3_contrib
import stable_baselines3 as sb3
from gymnasium.wrappers import FlattenObservation

from grading import grade
from grading.grader import FAULT_LIMIT
from hospital_marl import COMPOSED_ENV_ID

GRADE = {"episodes": 1, "seed": 3, "scenarios": ["normal_day", "validation"]}
SMALL = {"seed": 0, "device": "cpu", "policy_kwargs": {"net_arch": [8]}}


def _maskable_dict(env_id: str) -> object:
    """What sb3-contrib's README has a user type: MaskablePPO on the env as gym.make gives it."""
    model = sb3_contrib.MaskablePPO("MultiInputPolicy", gym.make(env_id), n_steps=64, batch_size=64, **SMALL)
    return model.learn(64)


MODELS = {
    "MaskablePPO, default Dict": _maskable_dict,
    "PPO, FlattenObservation": lambda e: sb3.PPO("MlpPolicy", FlattenObservation(gym.make(e)), **SMALL),
    "A2C, dict_1d": lambda e: sb3.A2C("MultiInputPolicy", gym.make(e, observation_format="dict_1d"), **SMALL),
    "DQN, masked layout flattened": lambda e: sb3.DQN(
        "MlpPolicy", FlattenObservation(gym.make(e, observation_layout="masked")), buffer_size=100, **SMALL
    ),
    "RecurrentPPO, default Dict": lambda e: sb3_contrib.RecurrentPPO(
        "MultiInputLstmPolicy", gym.make(e), n_steps=8, **SMALL
    ),
    "QRDQN, dict_1d": lambda e: sb3_contrib.QRDQN(
        "MultiInputPolicy", gym.make(e, observation_format="dict_1d"), buffer_size=100, **SMALL
    ),
    "TRPO, default Dict": lambda e: sb3_contrib.TRPO("MultiInputPolicy", gym.make(e), **SMALL),
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Callable[[str], tuple[Any, Path, dict[str, Any]]]:
    """``kind`` -> (the model, its saved ``.zip``, ``grade(model)``): built once per module, shared by
    the ``grade(path)`` and CLI tests (each costs a model and a grading run)."""
    cache: dict[str, tuple[Any, Path, dict[str, Any]]] = {}

    def get(kind: str) -> tuple[Any, Path, dict[str, Any]]:
        if kind not in cache:
            model = MODELS[kind](COMPOSED_ENV_ID)
            path = tmp_path_factory.mktemp("saved") / "model"
            model.save(path)  # what the user types; SB3 adds .zip
            cache[kind] = (model, path.with_suffix(".zip"), grade(model, **GRADE))
        return cache[kind]

    return get


@pytest.mark.parametrize("kind", MODELS)
def test_saved_zip__plays_as_the_model_object_does(kind: str, saved) -> None:
    _, path, by_object = saved(kind)
    by_path = grade(str(path), **GRADE)
    assert set(by_path["policy_faults"].values()) == {0}, by_path["policy_fault_messages"]
    assert "failed" not in by_path
    assert by_path["overall_score"] == by_object["overall_score"]
    assert by_path["scenarios"]["validation"]["counts"] == by_object["scenarios"]["validation"]["counts"]
    if kind.startswith("MaskablePPO"):
        assert by_path["invalid_action_rate"] == 0.0  # the mask reached it


def test_cli_evaluate__a_users_maskable_ppo_zip_scores_as_the_model_object(saved, capsys) -> None:
    """``hospital-marl evaluate --agent model.zip`` on what a user saved: exit 0, and the score the
    model object itself gets from ``grade`` (before the fix: a no-op's score, exit 0)."""
    from hospital_marl_cli.app import main

    _, path, by_object = saved("MaskablePPO, default Dict")
    args = ["--episodes", "1", "--seed", str(GRADE["seed"]), "--scenarios", *GRADE["scenarios"]]
    assert main(["evaluate", "--agent", str(path), "--quiet", *args]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["overall_score"] == by_object["overall_score"]
    assert report["policy_fault_rate"] == 0.0 and report["invalid_action_rate"] == 0.0


@pytest.mark.parametrize(
    "content",
    [{"readme.txt": "not a model"}, {"data": "{not json"}, None],
    ids=["zip-without-data", "unreadable-data", "truncated"],
)
def test_cli_evaluate__a_foreign_or_corrupt_zip__one_line_and_nonzero(tmp_path, capsys, content) -> None:
    from hospital_marl_cli.app import main

    path = tmp_path / "model.zip"
    if content is None:  # a real save cut short, as by an interrupted copy
        sb3.PPO("MlpPolicy", gym.make("CartPole-v1"), **SMALL).save(tmp_path / "full")
        path.write_bytes((tmp_path / "full.zip").read_bytes()[:300])
    else:
        with zipfile.ZipFile(path, "w") as archive:
            for name, text in content.items():
                archive.writestr(name, text)
    assert main(["evaluate", "--agent", str(path), "--episodes", "1", "--scenarios", "normal_day"]) != 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hospital-marl: error: "), lines
    assert str(path) in lines[0] and "model" in lines[0]


def test_a_model_of_another_observation__refused_with_one_line(tmp_path) -> None:
    env = gym.make(COMPOSED_ENV_ID)
    env = gym.wrappers.TransformObservation(
        FlattenObservation(env), lambda o: o[:50], gym.spaces.Box(0, np.inf, (50,), np.float32)
    )
    sb3.PPO("MlpPolicy", env, **SMALL).save(tmp_path / "cut")
    with pytest.raises(ValueError, match="none of the composed env's observation formats") as caught:
        grade(str(tmp_path / "cut.zip"), **GRADE)
    assert "\n" not in str(caught.value)


def test_a_model_of_another_action_space__refused_with_one_line(tmp_path) -> None:
    sb3.PPO("MlpPolicy", gym.make("CartPole-v1"), **SMALL).save(tmp_path / "cartpole")
    with pytest.raises(ValueError, match=r"Discrete\(39\)"):
        grade(str(tmp_path / "cartpole.zip"), **GRADE)


def _raises(observation, action_mask) -> int:
    raise RuntimeError("my policy's bug")


def test_every_decision_faulted__report_flags_it_at_the_top() -> None:
    report = grade(_raises, **GRADE)
    assert next(iter(report)) == "failed"
    assert "my policy's bug" in report["failed"]
    assert report["policy_fault_rate"] == 1.0 > FAULT_LIMIT


def test_grading_doc__states_the_fault_rate_as_the_grader_counts_it() -> None:
    """docs/grading.md's definition names the grader's own limits (issue #45: the skipped decisions)."""
    from grading.isolated import MAX_FAULTS

    text = (Path(__file__).resolve().parents[2] / "docs" / "grading.md").read_text()
    assert f"At {MAX_FAULTS} faults in one episode" in text and f"over {FAULT_LIMIT:.0%}" in text
    assert "plus the decisions skipped after the budget dropped it" in text


def test_a_policy_that_never_faults__has_no_failed_key() -> None:
    report = grade("greedy", **GRADE)
    assert "failed" not in report and report["policy_fault_rate"] == 0.0


def test_evaluate__exits_nonzero_with_the_reason_on_stderr(tmp_path, monkeypatch, capsys) -> None:
    """In-process (``main`` is what ``python -m hospital_marl_cli`` exits with): a user's module in the
    current directory, as ``--agent module:attribute`` finds it."""
    from hospital_marl_cli.app import main

    (tmp_path / "broken_agent.py").write_text(
        "def act(observation, action_mask):\n    raise RuntimeError('my policy bug')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # main() appends the current directory
    monkeypatch.delitem(sys.modules, "broken_agent", raising=False)
    status = main(["evaluate", "--agent", "broken_agent:act", "--episodes", "1", "--scenarios", "normal_day"])
    sys.modules.pop("broken_agent", None)
    out = capsys.readouterr()
    assert status == 1, out.err
    assert "my policy bug" in out.err and "faulted" in out.err
    assert "failed" in json.loads(out.out)
