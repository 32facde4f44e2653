"""``hospital-marl train benchmarl`` end to end: a tiny MAPPO run through the CLI (in a subprocess),
a tiny IPPO run through :func:`training.benchmarl.train.train` with an evaluation function passed
in, tiny QMIX and VDN runs, then loading the saved actors with ``policies.load`` and grading them
on the team track."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("benchmarl", reason="benchmarl not installed: pip install 'hospital-marl[marl]'")

from grading import grade
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS
from policies import load
from policies.benchmarl import load_benchmarl_policy
from training.benchmarl.train import HELDOUT_SEED, Args, train

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("marl")]

TINY = [
    "--frames", "400",
    "--n-envs", "5",
    "--steps-per-batch", "40",
    "--minibatch-size", "100",
    "--epochs", "1",
    "--hidden", "16", "16",
    "--eval-interval", "200",
    "--eval-episodes", "1",
]  # fmt: skip
"""Two PPO iterations of 5 envs x 40 ticks; a validation grading after each."""

PROBE = """
import json, sys
from hospital_marl_cli import main
code = main(sys.argv[2:])
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torchvision", "av"})
json.dump({"code": code, "heavy": heavy}, open(sys.argv[1], "w"))
"""


@pytest.fixture(scope="module")
def mappo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    run_dir = tmp_path_factory.mktemp("benchmarl") / "mappo"
    probe = run_dir.parent / "probe.json"
    cmd = [sys.executable, "-c", PROBE, str(probe), "train", "benchmarl", "--algorithm", "mappo"]
    cmd += [*TINY, "--all-scenarios", "--seed", "3", "--save", str(run_dir), "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout[done.stdout.index("{") :])
    return run_dir, summary, json.loads(probe.read_text())


def test_cli_run_writes_a_loadable_run(mappo_run: tuple[Path, dict, dict]) -> None:
    run_dir, summary, probe = mappo_run
    assert probe["code"] == 0
    assert summary["algorithm"] == "mappo"
    assert summary["frames"] == 400 and summary["role_decisions"] == 1200  # 3 roles decide per tick
    assert summary["audit"]["masked_actions_taken"] == 0
    assert summary["audit"]["audited_actions"] == 1200
    meta = json.loads((run_dir / "benchmarl.json").read_text())
    assert meta["format"] == "hospital_marl.benchmarl/1"
    assert [row["frames"] for row in json.loads((run_dir / "curve.json").read_text())] == [200, 400]
    assert meta["command"].startswith("hospital-marl train benchmarl --algorithm mappo --frames 400")


def test_training_never_imports_torchvision(mappo_run: tuple[Path, dict, dict]) -> None:
    """PyPI's torchvision (pulled by BenchMARL) may not load beside a CPU torch: never import it."""
    assert mappo_run[2]["heavy"] == []


def test_saved_model_loads_and_grades_on_the_team_track(mappo_run: tuple[Path, dict, dict]) -> None:
    run_dir = mappo_run[0]
    policy = load(str(run_dir))
    assert policy.tracks == ("team",)
    report = grade(str(run_dir), episodes=1, seed=HELDOUT_SEED, scenarios=["surge"], track="team")
    assert report["invalid_action_rate"] == 0.0
    assert 0.0 <= report["overall_score"] <= 100.0
    # deterministic: the same days give the same score
    again = grade(policy, episodes=1, seed=HELDOUT_SEED, scenarios=["surge"], track="team")
    assert again["overall_score"] == report["overall_score"]


def test_publish_keeps_the_best_actors_and_they_play_the_same(
    mappo_run: tuple[Path, dict, dict], tmp_path: Path
) -> None:
    """``marl_stats.py publish`` copies what grading needs into the committed home: the published
    run loads, plays exactly as the original's best actors, and says it has no final actors."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("marl_stats", root / "benchmarks" / "marl_stats.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    run_dir = mappo_run[0]
    (out,) = module.publish(run_dir.parent, dest=tmp_path, only=(run_dir.name,))
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "benchmarl.json", "best/bed_manager.onnx", "best/triage.onnx", "best/ventilator_officer.onnx",
        "curve.json",
    ]  # fmt: skip
    days = dict(episodes=1, seed=HELDOUT_SEED, scenarios=["surge"], track="team")
    assert (
        grade(str(out), **days)["scenarios"]["surge"]["episode_scores"]
        == (grade(str(run_dir), **days)["scenarios"]["surge"]["episode_scores"])
    )
    with pytest.raises(FileNotFoundError, match="no final actors"):
        load_benchmarl_policy(out, final=True)


def test_ippo_in_process_uses_the_evaluation_function_given(tmp_path: Path) -> None:
    calls: list[dict] = []

    def evaluate(policy, **kwargs):  # the grader (training.common.Evaluate), recording each periodic call
        calls.append(kwargs)
        return grade(policy, **kwargs)

    args = Args(
        algorithm="ippo", frames=400, n_envs=2, steps_per_batch=100, minibatch_size=100, epochs=1,
        hidden=(16,), eval_interval=200, eval_episodes=1, scenario="ventilator_crisis", seed=1,
        save=str(tmp_path / "ippo"), progress=False, reward="score", reward_scale=0.3,
    )  # fmt: skip
    run_dir = train(args, evaluate=evaluate)
    assert len(calls) == 2  # after each of the two 200-frame iterations
    # validation days of the team track, as the args ask (never the held-out seed)
    expected = {"episodes": 1, "seed": 1000, "scenarios": ("ventilator_crisis",), "track": "team"}
    assert all({**c, "scenarios": tuple(c["scenarios"])} == expected for c in calls)
    meta = json.loads((run_dir / "benchmarl.json").read_text())
    assert meta["algorithm"] == "ippo" and meta["validation"]["seed"] == 1000
    assert meta["args"]["reward"] == "score" and "--reward score" in meta["command"]
    policy = load(str(run_dir))
    obs = np.zeros(28, np.float32)
    mask = np.array([1, 0, 0, 0], np.int8)  # only the no-op allowed
    assert policy.act_role("ventilator_officer", obs, mask) == 0


@pytest.mark.parametrize("algorithm", ["qmix", "vdn"])
def test_q_learning_run_trains_saves_loads_and_grades(algorithm: str, tmp_path: Path) -> None:
    """QMIX / VDN (off-policy, epsilon-greedy collection): no collected action breaks a mask, and
    the saved Q-networks play the team track by their greedy masked argmax."""
    args = Args(
        algorithm=algorithm, frames=400, n_envs=2, steps_per_batch=100, optimizer_steps=4, replay_batch=32,
        hidden=(16,), eval_interval=200, eval_episodes=1, scenario="surge", seed=2,
        save=str(tmp_path / algorithm), progress=False,
    )  # fmt: skip
    run_dir = train(args, evaluate=grade)
    meta = json.loads((run_dir / "benchmarl.json").read_text())
    assert meta["algorithm"] == algorithm and meta["frames"] == 400
    assert meta["audit"] == {"masked_actions_taken": 0, "audited_actions": 1200}
    assert [row["frames"] for row in json.loads((run_dir / "curve.json").read_text())] == [200, 400]
    policy = load(str(run_dir))
    assert policy.tracks == ("team",)
    report = grade(policy, episodes=1, seed=HELDOUT_SEED, scenarios=["surge"], track="team")
    assert report["invalid_action_rate"] == 0.0
    assert 0.0 <= report["overall_score"] <= 100.0
    obs = np.zeros(28, np.float32)
    assert policy.act_role("ventilator_officer", obs, np.array([0, 0, 1, 0], np.int8)) == 2


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="held-out"):
        Args(eval_seed=HELDOUT_SEED)
    with pytest.raises(ValueError, match="algorithm"):
        Args(algorithm="maddpg")  # continuous actions only: not offered
    with pytest.raises(ValueError, match="n_envs"):
        Args(all_scenarios=True, n_envs=len(BUILTIN_SCENARIOS) - 1)
    with pytest.raises(ValueError, match="replaces"):
        Args(reward="score", reward_overrides="death=-20")
    with pytest.raises(ValueError, match="reward-mode team"):
        Args(reward="score", reward_mode="role")
    with pytest.raises(ValueError, match="reward must be"):
        Args(reward="points")
    done = subprocess.run(
        [sys.executable, "-m", "hospital_marl", "train", "benchmarl", "--algorithm", "maddpg"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "invalid choice" in done.stderr
