"""``train ppo --warm-start heuristic`` (training/clone.py): demonstrations on training days only,
deterministic, and a clone that plays the heuristic's rules before PPO starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from grading.common import episode_seed
from hospital_marl import BUILTIN_SCENARIOS
from policies.heuristic import flat_heuristic_action
from training.clone import collect_demonstrations, demo_seed
from training.ppo import Args

ROOT = Path(__file__).resolve().parents[2]


def test_demonstrations__never_play_the_graders_days() -> None:
    """Validation (1000) and reported (0) days must stay unseen by the clone, as by PPO."""
    graded = {episode_seed(base, s, e) for base in (0, 1000) for s in BUILTIN_SCENARIOS for e in range(100)}
    played = {demo_seed(seed, day) for seed in range(3) for day in range(400)}
    assert len(played) == 3 * 400  # seeds differ across training seeds too
    assert not played & graded


def test_demonstrations__are_deterministic_legal_and_not_idle() -> None:
    args = Args(all_scenarios=True, reward="score", reward_scale=0.3, gamma=0.9)
    demos = collect_demonstrations(args, days=2)
    again = collect_demonstrations(args, days=2)
    for name in ("observations", "masks", "actions", "returns"):
        np.testing.assert_array_equal(getattr(demos, name), getattr(again, name), err_msg=name)
    assert demos.masks[np.arange(len(demos.actions)), demos.actions].all()  # every action legal
    assert (demos.actions != 0).any()  # not a no-op stream
    assert len(demos.day_seeds) == 2 and len(demos.returns) == len(demos.actions)
    assert np.isfinite(demos.returns).all()


def test_demonstration_actions__equal_the_heuristic_on_the_same_observations() -> None:
    from hospital_marl.envs.composed import HospitalEDEnv

    args = Args(scenario="surge")
    demos = collect_demonstrations(args, days=1)
    env = HospitalEDEnv(scenario="surge", rewards=args.rewards)
    observation, _ = env.reset(seed=demos.day_seeds[0])
    for action in demos.actions:
        assert action == flat_heuristic_action(observation, env.action_masks())
        observation, *_ = env.step(int(action))


def test_train_ppo_cli__warm_start_clones_the_heuristic_and_grades_the_clone_first(tmp_path: Path) -> None:
    run = tmp_path / "ws"
    argv = "--all-scenarios --warm-start heuristic --warm-start-days 40 --warm-start-epochs 30"
    argv += " --timesteps 256 --n-envs 2 --n-steps 128 --n-epochs 1 --eval-freq 0 --eval-episodes 1"
    argv += " --no-progress"
    done = subprocess.run(
        [sys.executable, "-m", "hospital_marl", "train", "ppo", *argv.split(), "--save", str(run)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout, not an installed copy
    )
    assert done.returncode == 0, done.stderr
    clone = json.loads((run / "clone.json").read_text())
    assert clone["clone_agreement"] >= 0.9  # the entity network can express the rules
    curve = json.loads((run / "curve.json").read_text())
    assert curve[0]["timesteps"] == 0  # the clone, graded before any PPO update
    meta = json.loads((run / "best_model.json").read_text())
    assert "--warm-start heuristic" in meta["command"] and meta["args"]["warm_start_days"] == 40


def test_args__warm_start_is_flat_only() -> None:
    with pytest.raises(ValueError, match="flat"):
        Args(track="team", warm_start="heuristic")
    with pytest.raises(ValueError, match="warm_start_days"):
        Args(warm_start="heuristic", warm_start_days=0)
    with pytest.raises(ValueError, match="dagger_rounds"):
        Args(dagger_rounds=1)


class _Idle:
    """A student that always plays the no-op (SB3's ``predict`` signature)."""

    def predict(self, observation, action_masks=None, deterministic=True):
        return 0, None


def test_dagger__the_student_plays_and_the_expert_labels_the_states_it_reaches() -> None:
    from hospital_marl.envs.composed import HospitalEDEnv

    args = Args(scenario="surge")
    demos = collect_demonstrations(args, days=1, student=_Idle())
    env = HospitalEDEnv(scenario="surge", rewards=args.rewards)
    observation, _ = env.reset(seed=demos.day_seeds[0])
    for label in demos.actions:  # the idle student's day, labelled by the heuristic
        assert label == flat_heuristic_action(observation, env.action_masks())
        observation, *_ = env.step(0)
    assert (demos.actions != 0).any()  # patients pile up: the expert would have acted


def test_planner_demonstrations__legal_and_reproducible() -> None:
    args = Args(scenario="ventilator_crisis")
    demos = collect_demonstrations(args, days=1, expert="planner")
    again = collect_demonstrations(args, days=1, expert="planner")
    np.testing.assert_array_equal(demos.actions, again.actions)
    assert demos.masks[np.arange(len(demos.actions)), demos.actions].all()
