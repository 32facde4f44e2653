"""Trainers receive their evaluation function (``train(args, evaluate)``) instead of importing the
grader (issue 13, item 1): they call exactly what they are given, with the validation days their
``Args`` name, and refuse to start without it. That ``training`` imports no ``grading`` is an
import-linter contract (tests/test_layers.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grading import grade
from grading.radiotherapy import grade_all


def _trainer(name: str) -> Any:
    if name == "ppo":
        from training import ppo as module
    elif name == "marl":
        from training.marl import trainer as module
    elif name == "benchmarl":
        from training.benchmarl import train as module
    elif name == "rllib":
        from training.rllib import train as module
    else:
        from training import radiotherapy as module
    return module


@pytest.mark.parametrize("name", ["ppo", "marl", "rllib", "benchmarl", "radiotherapy"])
def test_train__without_an_evaluation_function_is_refused_before_anything_is_written(
    name: str, tmp_path: Path
) -> None:
    module = _trainer(name)
    args = module.Args(save=str(tmp_path / "run"))
    with pytest.raises(TypeError, match="evaluate"):
        module.train(args)  # the layer above must say how to grade
    with pytest.raises(TypeError, match="evaluate must be the grading function, as in training"):
        module.train(args, None)
    assert not (tmp_path / "run").exists()


class Recorder:
    """The real grader, recording the keyword arguments of each call."""

    def __init__(self, grader: Any) -> None:
        self.grader, self.calls, self.policies = grader, [], []

    def __call__(self, policy: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        self.policies.append(policy)
        return self.grader(policy, **kwargs)


def test_ppo_train__grades_with_the_function_given_on_the_validation_days(tmp_path: Path) -> None:
    pytest.importorskip("sb3_contrib")
    from training.ppo import Args, train

    evaluate = Recorder(grade)
    args = Args(
        scenario="night_shift", timesteps=512, n_envs=2, n_steps=128, n_epochs=1, batch_size=64,
        eval_freq=256, eval_episodes=1, eval_seed=7, select="margin", progress=False,
        save=str(tmp_path / "run"),
    )  # fmt: skip
    run = train(args, evaluate)
    flat_validation = {"episodes": 1, "seed": 7, "scenarios": ("night_shift",), "track": "flat"}
    assert evaluate.calls
    assert all({**c, "scenarios": tuple(c["scenarios"])} == flat_validation for c in evaluate.calls)
    assert evaluate.policies[0] == "heuristic"  # --select margin: the reference, graded first
    curve = json.loads((run / "curve.json").read_text())
    assert len(curve) == len(evaluate.calls) - 1  # one row per model grading


def test_radiotherapy_train__grades_baselines_and_actor_with_the_function_given(tmp_path: Path) -> None:
    pytest.importorskip("sb3_contrib")
    from policies.radiotherapy import SCRIPTED
    from training.radiotherapy import Args, train

    evaluate = Recorder(grade_all)
    args = Args(
        timesteps=256, n_envs=2, n_steps=128, batch_size=64, n_epochs=1, eval_freq=256, eval_episodes=1,
        eval_seed=5, save=str(tmp_path / "rt"),
    )  # fmt: skip
    run = train(args, evaluate)
    # Checkpoints are chosen on the validation patients, never the test splits (SPEC-RT §8).
    validation = {"n_episodes": 1, "seed": 5, "split": "validation"}
    assert evaluate.calls and all(c == validation for c in evaluate.calls)
    assert evaluate.policies[: len(SCRIPTED)] == list(SCRIPTED)  # the validation baselines, by name
    meta = json.loads((run / "best_model.json").read_text())
    assert meta["command"].startswith("hospital-marl train radiotherapy --seed 0 --timesteps 256")


def test_train_radiotherapy_cli__trains_and_exports_the_numpy_checkpoint(tmp_path: Path) -> None:
    """The command that replaced ``python -m training.radiotherapy run|export`` (now in the CLI layer)."""
    pytest.importorskip("sb3_contrib")
    tiny = "--timesteps 256 --n-envs 2 --n-steps 128 --batch-size 64 --n-epochs 1 --eval-episodes 1"
    run, out = tmp_path / "rt", tmp_path / "ship" / "rt.npz"

    def cli(*argv: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "hospital_marl", "train", *argv]
        return subprocess.run(command, capture_output=True, text=True, timeout=300)

    done = cli("radiotherapy", *tiny.split(), "--save", str(run))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(run)
    wrong = cli("export", str(run), str(tmp_path / "rt.zip"))
    assert wrong.returncode != 0 and "must end in .npz" in wrong.stderr
    shipped = cli("export", str(run), str(out))
    assert shipped.returncode == 0, shipped.stderr
    from policies.radiotherapy.learned import NumpyMLPPolicy

    assert isinstance(_load_rt(out), NumpyMLPPolicy)
    assert out.with_suffix(".json").exists() and out.with_suffix(".zip").exists()


def _load_rt(path: Path) -> Any:
    from policies.radiotherapy import load

    return load(str(path))
