"""The radiotherapy trainer's warm start (``--warm-start``, ``--dagger-rounds``; training/rt_clone.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from grading.radiotherapy import grade_all, split_seed
from hospital_marl.radiotherapy.core.plan import LOCK, MAX_BEAMS, N_ACTIONS
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.radiotherapy.planner import optimise, steer
from tests.training.rt_support import tiny_rt_args
from training import rt_clone
from training.radiotherapy import Args, train

pytest.importorskip("sb3_contrib")


def tiny(tmp_path, **kw) -> Args:
    base = dict(
        seed=3,
        warm_start="planner",
        warm_start_episodes=3,
        warm_start_epochs=2,
        dagger_rounds=1,
        dagger_episodes=3,
    )
    return tiny_rt_args(tmp_path / "run", **(base | kw))


@pytest.fixture
def guarded(monkeypatch):
    """Every env the warm start builds, and every action stepped: a masked action fails the test."""
    built: list[str] = []
    init, step = RadiotherapyPlanningEnv.__init__, RadiotherapyPlanningEnv.step

    def record(self, task=None, render_mode=None, split="train"):
        built.append(split)
        init(self, task, render_mode, split)

    def checked(self, action):
        assert self.action_masks()[int(action)], f"masked action {action} taken"
        return step(self, action)

    monkeypatch.setattr(rt_clone.RadiotherapyPlanningEnv, "__init__", record)
    monkeypatch.setattr(rt_clone.RadiotherapyPlanningEnv, "step", checked)
    return built


@pytest.mark.parametrize("expert", ["planner", "anatomy_aware", "rollout"])
def test_demonstrations_are_training_patients_only(guarded, expert: str) -> None:
    args = Args(seed=0)
    demos, played = rt_clone.collect_demonstrations(args, 6, rt_clone.Expert(expert, args.rollout_base))
    assert set(guarded) == {"train"}
    assert {p["split"] for p in played} == {"train"}
    assert [p["task"] for p in played] == [*BUILTIN_TASKS, *BUILTIN_TASKS]
    # never a seed the grader gives a validation or test patient (selection's and the reports')
    graded = {
        split_seed(seed, task, split, i)
        for seed in (args.eval_seed, 42)
        for task in BUILTIN_TASKS
        for split in ("validation", "test_id", "test_ood")
        for i in range(50)
    }
    assert not graded & {p["seed"] for p in played}
    assert len(demos.actions) == len(demos.masks) == len(demos.observations) == len(demos.returns)
    assert demos.masks[np.arange(len(demos.actions)), demos.actions].all()


def test_the_planner_demonstrations_reach_its_optimum() -> None:
    """Steered play ends on the beam set the planner optimised, so it scores what the planner expects."""
    args = Args(seed=1)
    expert = rt_clone.Expert("planner")
    _, played = rt_clone.collect_demonstrations(args, 3, expert)
    for p in played:
        env = RadiotherapyPlanningEnv(p["task"], split="train")
        env.reset(seed=p["seed"])
        expected = optimise(env.plan)[3]
        assert p["score"] == pytest.approx(expected, abs=1e-12)


def test_steer_reaches_the_target_from_any_state() -> None:
    rng = np.random.default_rng(0)
    env = RadiotherapyPlanningEnv("head_neck")
    for trial in range(12):
        env.reset(seed=trial)
        n = int(rng.integers(1, MAX_BEAMS + 1))
        target = (
            rng.integers(0, 36, n),
            rng.integers(1, 11, n),
            rng.integers(0, 6, n),
        )
        for _ in range(int(rng.integers(0, 15))):  # wander off: random valid edits (no lock)
            valid = np.flatnonzero(env.action_masks())
            valid = valid[valid != LOCK]
            env.plan.step(int(rng.choice(valid)))
        for _ in range(400):
            env.plan.steps = 0  # convergence, not the step budget, is under test
            action = steer(env.plan, *target)
            assert 0 <= action < N_ACTIONS and env.action_masks()[action]
            if action == LOCK:
                break
            env.plan.step(action)
        else:
            pytest.fail("steer did not lock")
        k = env.plan.n_beams
        have = sorted(zip(env.plan.angles[:k], env.plan.weights[:k], env.plan.margins[:k]))
        assert have == sorted(zip(*target))


def test_tiny_run_records_agreement_and_is_deterministic(tmp_path, guarded) -> None:
    first = train(tiny(tmp_path / "a"), grade_all)
    second = train(tiny(tmp_path / "b"), grade_all)
    meta = json.loads((first / "best_model.json").read_text())
    clone = meta["warm_start"]
    assert 0.0 <= clone["clone_agreement"] <= 1.0
    assert clone["expert"] == "planner" and len(clone["rounds"]) == 2
    assert json.loads((first / "clone.json").read_text())["clone_agreement"] == clone["clone_agreement"]
    assert meta["curve"][0]["timesteps"] == 0  # the clone is a graded candidate
    assert {p["split"] for p in clone["episodes"]} == {"train"}
    a, b = np.load(first / "best_model.npz"), np.load(second / "best_model.npz")
    assert sorted(a.files) == sorted(b.files)
    for key in a.files:
        np.testing.assert_array_equal(a[key], b[key])
    assert json.loads((second / "clone.json").read_text()) == json.loads((first / "clone.json").read_text())


def test_bad_warm_start_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="warm_start"):
        Args(warm_start="heuristic")
    with pytest.raises(ValueError, match="planner or rollout"):
        Args(warm_start="anatomy_aware", dagger_rounds=1)
    with pytest.raises(ValueError, match="dagger_rounds"):
        Args(warm_start="planner", dagger_rounds=-1)
