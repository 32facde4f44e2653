"""The residual learner's labels and fit (``train radiotherapy --residual --residual-rounds``;
training/rt_residual.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from grading.radiotherapy import grade_all, split_seed
from hospital_marl.radiotherapy.core.plan import N_ACTIONS
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.radiotherapy.baselines import AnatomyAwarePolicy
from policies.radiotherapy.learned import load_path
from policies.radiotherapy.residual import DEFER, DeferringBase, ResidualRTPolicy
from tests.training.rt_support import tiny_rt_args
from training import rt_residual
from training.radiotherapy import Args, train


def _anatomy_aware_score(task: str, seed: int) -> float:
    env = RadiotherapyPlanningEnv(task)
    observation, _ = env.reset(seed=seed)
    policy = AnatomyAwarePolicy()
    policy.reset()
    while not env.plan.done:
        observation, *_ = env.step(int(policy.act(observation, env.action_masks())))
    return env.plan.score


@pytest.mark.parametrize("task", ["prostate", "pediatric_brain"])
def test_action_values_leave_env_and_base_as_they_were(task: str) -> None:
    """The proposal's value is the base's own episode's final score (its memory kept); valuing every
    action leaves the plan and the base's memory unchanged, so the episode then plays on as the base."""
    env = RadiotherapyPlanningEnv(task)
    observation, _ = env.reset(seed=4)
    expected = _anatomy_aware_score(task, 4)
    base = DeferringBase()
    for step in range(25):
        mask = env.action_masks()
        proposal = base.propose(observation, mask)
        before = env.plan.snapshot()
        values, simulated = rt_residual.action_values(env, base)
        assert values[proposal] == expected, step
        assert simulated > 0 and np.all(np.isinf(values[~mask])) and np.all(np.isfinite(values[mask]))
        after = env.plan.snapshot()
        assert all(np.array_equal(a, b) for a, b in zip(before, after))
        base.taken(proposal)
        observation, *_ = env.step(proposal)
    while not env.plan.done:
        observation, *_ = env.step(rt_residual.residual_action(observation, env.action_masks(), base, None))
    assert env.plan.score == expected


def test_labels_depart_only_beyond_the_tolerance() -> None:
    values = np.array([0.5, 0.60, 0.603, -np.inf])
    assert rt_residual.label(values, 1, 0.002) == 2
    assert rt_residual.label(values, 1, 0.005) == DEFER
    assert rt_residual.label(values, 2, 0.0) == DEFER
    values = np.full(N_ACTIONS, -np.inf)
    values[:5] = [0.5, 0.60, 0.610, 0.609, 0.6021]
    # defer (and the proposal, which plays the same) when nothing beats the proposal by the tolerance
    np.testing.assert_array_equal(np.flatnonzero(rt_residual.good_actions(values, 1, 0.02)), [1, DEFER])
    # else the actions above the proposal by the tolerance and within it of the best
    np.testing.assert_array_equal(np.flatnonzero(rt_residual.good_actions(values, 1, 0.002)), [2, 3])


def test_advantage_targets_are_gains_over_the_proposal() -> None:
    """The ``advantage`` fit's targets: x100 the gain over the proposal (floored at -0.05), 0 for the
    proposal and defer; masked actions (-inf) are 0 (and left out of the loss by the mask)."""
    values = np.full(N_ACTIONS, -np.inf)
    values[:4] = [0.70, 0.80, 0.81, 0.20]
    np.testing.assert_allclose(
        rt_residual.advantage_targets(values, 1), [-5.0, 0.0, 1.0, -5.0, 0, 0, 0, 0, 0, 0, 0.0], atol=1e-5
    )


def test_labels_come_from_training_patients_only(monkeypatch) -> None:
    built: list[str] = []
    init = RadiotherapyPlanningEnv.__init__

    def record(self, task=None, render_mode=None, split="train"):
        built.append(split)
        init(self, task, render_mode, split)

    monkeypatch.setattr(rt_residual.RadiotherapyPlanningEnv, "__init__", record)
    args = Args(seed=0, residual="anatomy_aware", residual_label_fraction=0.1)
    demos, played, stats = rt_residual.collect_labels(args, 3, 0, None)
    assert set(built) == {"train"} and {p["split"] for p in played} == {"train"}
    assert [p["task"] for p in played] == list(BUILTIN_TASKS)
    graded = {
        split_seed(seed, task, split, i)
        for seed in (args.eval_seed, 42)
        for task in BUILTIN_TASKS
        for split in ("validation", "test_id", "test_ood")
        for i in range(50)
    }
    assert not graded & {p["seed"] for p in played}
    # defer everywhere plays anatomy_aware's episodes
    assert [p["score"] for p in played] == [_anatomy_aware_score(p["task"], p["seed"]) for p in played]
    # every label accepts at least one action, and only valid ones
    assert len(demos.good) == stats["states"] > 0 and demos.good.any(axis=1).all()
    assert not (demos.good & ~demos.masks).any()


def test_tiny_residual_run_is_a_residual_checkpoint(tmp_path) -> None:
    """A tiny run: the base is the curve's first point (margin 0: it is anatomy_aware), the fitted
    net the second, the checkpoint loads as a residual policy, and a seed reproduces the run."""
    pytest.importorskip("sb3_contrib")

    def run(name: str):
        args = tiny_rt_args(
            tmp_path / name,
            seed=2,
            residual="anatomy_aware",
            residual_rounds=2,
            residual_episodes=3,
            residual_label_fraction=0.2,
            warm_start_epochs=2,
            defer_bonuses="0,2",
        )
        return train(args, grade_all)

    first, second = run("a"), run("b")
    meta = json.loads((first / "best_model.json").read_text())
    assert meta["residual"]["base"] == "anatomy_aware" and meta["name"] == "rt_residual"
    assert [(p.get("stage"), p["defer_bonus"]) for p in meta["curve"][:3]] == [
        ("base", 0.0),
        ("clone", 0.0),
        ("clone", 2.0),
    ]
    assert meta["curve"][0]["margin"] == 0.0
    assert len(meta["warm_start"]["rounds"]) == 2
    assert isinstance(load_path(first / "best_model.npz"), ResidualRTPolicy)
    a, b = np.load(first / "best_model.npz"), np.load(second / "best_model.npz")
    for key in a.files:
        np.testing.assert_array_equal(a[key], b[key])


def test_residual_round_arguments() -> None:
    with pytest.raises(ValueError, match="needs --residual"):
        Args(residual_rounds=1)
    with pytest.raises(ValueError, match="label_fraction"):
        Args(residual="anatomy_aware", residual_label_fraction=0.0)
