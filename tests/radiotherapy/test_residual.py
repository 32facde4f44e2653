"""The residual learner over ``anatomy_aware`` (policies/radiotherapy/residual.py, issue 25 item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grading.radiotherapy import split_seed
from hospital_marl.radiotherapy.core.plan import ADD, N_ACTIONS, NEW_MARGIN, NEXT, WIDEN
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.radiotherapy import learned as learned_module
from policies.radiotherapy import load
from policies.radiotherapy.baselines import AnatomyAwarePolicy, observed_score
from policies.radiotherapy.residual import (
    DEFER,
    FEATURE_SIZE,
    N_RESIDUAL_ACTIONS,
    DeferringBase,
    ResidualRTPolicy,
)
from tests.radiotherapy.played import played_actions
from training.radiotherapy import Args, ResidualEnv

PATIENTS = 2


def _net(rng: np.random.Generator, scale: float, defer: float, hidden: int = 16) -> list:
    """A random tanh MLP of the residual's shape: ``scale`` the weights, ``defer`` defer's bias."""
    last_bias = np.zeros(N_RESIDUAL_ACTIONS)
    last_bias[DEFER] = defer
    return [
        (rng.normal(0, 1 / np.sqrt(FEATURE_SIZE), (hidden, FEATURE_SIZE)), np.zeros(hidden)),
        (rng.normal(0, 1 / np.sqrt(hidden), (hidden, hidden)), np.zeros(hidden)),
        (rng.normal(0, scale, (N_RESIDUAL_ACTIONS, hidden)), last_bias),
    ]


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_an_untrained_residual_plays_anatomy_aware_exactly(task: str) -> None:
    """Deferring everywhere (no net, or a net with small weights and the defer bias the trainer
    starts from) is ``anatomy_aware``: the same actions and score on validation patients."""
    rng = np.random.default_rng(0)
    for i in range(PATIENTS):
        seed = split_seed(1000, task, "validation", i)
        expected = played_actions(AnatomyAwarePolicy(), task, seed)
        assert played_actions(ResidualRTPolicy([]), task, seed) == expected
        assert played_actions(ResidualRTPolicy(_net(rng, 0.01, 4.0)), task, seed) == expected


def _deviating_net(seed: int = 1) -> list:
    """A net that departs from the base often (defer bias 0, large weights)."""
    return _net(np.random.default_rng(seed), 3.0, 0.0)


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_a_residual_that_deviates_never_plays_an_invalid_action(task: str) -> None:
    """Whatever the net picks, the env action is valid (masked argmax over the env's mask and defer's),
    the base keeps proposing valid actions after being re-entered, and the episode ends."""
    policy = ResidualRTPolicy(_deviating_net())
    for i in range(PATIENTS):
        env = RadiotherapyPlanningEnv(task, split="validation")
        observation, info = env.reset(seed=split_seed(1000, task, "validation", i))
        policy.reset()
        done = False
        while not done:
            action = policy.act(observation, info["action_mask"])
            assert info["action_mask"][action], (task, i, action)
            observation, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        assert info["invalid_actions"] == 0
        assert policy.base.deviations > 0  # the test exercises re-entry


def test_the_wrapper_masks_are_the_env_mask_and_defer() -> None:
    """``ResidualEnv.action_masks()`` = the env's mask then defer (valid: the base's proposal is);
    a random residual player (defer half the time) never meets a masked proposal."""
    rng = np.random.default_rng(3)
    for task in BUILTIN_TASKS:
        inner = RadiotherapyPlanningEnv(task)
        env = ResidualEnv(inner)
        features, _ = env.reset(seed=7)
        assert env.observation_space.contains(features) and features.shape == (FEATURE_SIZE,)
        done = False
        while not done:
            mask = env.action_masks()
            assert mask.shape == (N_RESIDUAL_ACTIONS,)
            np.testing.assert_array_equal(mask[:N_ACTIONS], inner.action_masks())
            assert mask[DEFER]
            proposal = int(np.flatnonzero(features[-N_ACTIONS:])[0])
            assert inner.action_masks()[proposal]
            valid = np.flatnonzero(mask[:N_ACTIONS])
            action = DEFER if rng.random() < 0.5 else int(rng.choice(valid))
            features, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_training_view_plays_the_graded_policy(task: str) -> None:
    """The wrapper the trainer learns in and the graded policy are one function: the same net's
    masked argmax through ``ResidualEnv`` plays the graded episode's actions and score."""
    layers = _deviating_net(2)
    graded = ResidualRTPolicy(layers)
    seed = split_seed(1000, task, "validation", 0)
    expected = played_actions(graded, task, seed)
    env = ResidualEnv(RadiotherapyPlanningEnv(task, split="validation"))
    features, _ = env.reset(seed=seed)
    played, done, info = [], False, {}
    while not done:
        logits = graded.logits(features)
        choice = int(np.argmax(np.where(env.action_masks(), logits, -np.inf)))
        proposal = int(np.flatnonzero(features[-N_ACTIONS:])[0])
        played.append(proposal if choice == DEFER else choice)
        features, _, terminated, truncated, info = env.step(choice)
        done = terminated or truncated
    assert (played, info["score"]) == expected


def _save(path: Path, layers: list, residual: bool = True) -> None:
    arrays = {f"w{i}": w for i, (w, _) in enumerate(layers)} | {f"b{i}": b for i, (_, b) in enumerate(layers)}
    np.savez_compressed(path, **arrays)
    meta = {
        "name": "rt_residual",
        "residual": {"base": "anatomy_aware", "reentry": "keep"} if residual else None,
    }
    path.with_suffix(".json").write_text(json.dumps(meta))


def test_loading_by_path_and_by_registered_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A residual checkpoint (its metadata says residual) loads as a ResidualRTPolicy from a path and,
    shipped as ``rt_residual.npz``, by the name ``rt_residual``; it plays as the net it was saved from."""
    layers = _deviating_net(4)
    _save(tmp_path / "rt_residual.npz", layers)
    by_path = load(str(tmp_path / "rt_residual.npz"))
    assert isinstance(by_path, ResidualRTPolicy) and by_path.base.name == "anatomy_aware"
    monkeypatch.setattr(learned_module, "CHECKPOINT_DIR", tmp_path)
    by_name = load("rt_residual")
    assert isinstance(by_name, ResidualRTPolicy) and by_name.name == "rt_residual"
    seed = split_seed(1000, "head_neck", "validation", 0)
    expected = played_actions(ResidualRTPolicy(layers), "head_neck", seed)
    assert (
        played_actions(by_path, "head_neck", seed) == expected == played_actions(by_name, "head_neck", seed)
    )
    # a run from before the "keep" re-entry recorded none: it was trained with ``resume``
    meta = json.loads((tmp_path / "rt_residual.json").read_text())
    del meta["residual"]["reentry"]
    (tmp_path / "rt_residual.json").write_text(json.dumps(meta))
    assert load(str(tmp_path / "rt_residual.npz")).base.reentry == "resume"


def test_a_residual_net_has_the_residual_shape() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="outputs"):
        ResidualRTPolicy([*_net(rng, 0.01, 4.0)[:-1], (np.zeros((N_ACTIONS, 16)), np.zeros(N_ACTIONS))])
    with pytest.raises(ValueError, match="residual base"):
        ResidualRTPolicy([], base="planner")


def test_residual_arguments() -> None:
    assert Args(residual="anatomy_aware").residual == "anatomy_aware"
    with pytest.raises(ValueError, match="residual"):
        Args(residual="planner")
    with pytest.raises(ValueError, match="warm-start"):
        Args(residual="anatomy_aware", warm_start="anatomy_aware")


def test_the_trainer_starts_at_the_base() -> None:
    """``start_at_base`` on a fresh MaskablePPO actor: its exported numpy policy is anatomy_aware."""
    pytest.importorskip("sb3_contrib")
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from policies.radiotherapy.learned import actor_layers
    from training.radiotherapy import TaskCycle, start_at_base

    vec = DummyVecEnv([lambda: ResidualEnv(TaskCycle(BUILTIN_TASKS))])
    model = MaskablePPO("MlpPolicy", vec, n_steps=16, batch_size=16, seed=0, device="cpu")
    start_at_base(model, 4.0)
    policy = ResidualRTPolicy(actor_layers(model))
    for task in BUILTIN_TASKS:
        seed = split_seed(1000, task, "validation", 0)
        assert played_actions(policy, task, seed) == played_actions(AnatomyAwarePolicy(), task, seed)


def _add_first(
    task: str, seed: int, reentry: str
) -> tuple[RadiotherapyPlanningEnv, DeferringBase, list[int], dict]:
    """The departure PPO learned on ``resume``: ``ADD`` at steps 1-6 (seven beams before any is
    turned), then defer; stops at the state where the base proposes its first edit."""
    env = RadiotherapyPlanningEnv(task, split="validation")
    observation, _ = env.reset(seed=seed)
    base = DeferringBase(reentry=reentry)
    template = sorted(AnatomyAwarePolicy().choose_angles(observation))
    step = 0
    while not env.plan.done:
        proposal = base.propose(observation, env.action_masks())
        if base.policy._climbing:  # this proposal is its first edit: stop before it is played
            break
        action = ADD if 1 <= step <= 6 else proposal
        base.taken(action)
        observation, *_ = env.step(action)
        step += 1
    return env, base, template, observation


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_keep_reentry_finishes_the_template_after_adding_all_beams_first(task: str) -> None:
    """After "add all seven first", the kept base still does its build phase (anatomy_aware's
    ``choose_angles`` template: seven beams on the template's angles, at the template margin) before its
    edit phase; the ``resume`` re-entry went straight to the edit phase with the default angles
    (``default_angle_index``, not the template), which is what this test must tell apart."""
    for i in range(PATIENTS):
        seed = split_seed(1000, task, "validation", i)
        env, base, template, _ = _add_first(task, seed, "keep")
        plan = env.plan
        assert base.deviations > 0
        assert plan.n_beams == 7 and not plan.done
        assert sorted(int(a) for a in plan.angles[:7]) == template
        assert all(int(m) == NEW_MARGIN for m in plan.margins[:7])
        env, base, template, _ = _add_first(task, seed, "resume")
        default = sorted(int(a) for a in env.plan.angles[:7])
        # resume: no build phase, so not the template (on some patients it then trims or turns)
        assert default != template


def test_keep_reentry_in_the_edit_phase_drops_the_trial_and_beats_the_plan_as_it_stands() -> None:
    """A departure in the edit phase: the base's next proposal is the first candidate edit of
    anatomy_aware's ``_edits`` on the plan as it now stands (nothing tried, no undo of its own trial),
    and the score to beat is that plan's ``observed_score``."""
    task, seed = "head_neck", split_seed(1000, "head_neck", "validation", 0)
    env = RadiotherapyPlanningEnv(task, split="validation")
    observation, _ = env.reset(seed=seed)
    base = DeferringBase()
    while not base.policy._climbing:  # play the base up to its edit phase
        proposal = base.propose(observation, env.action_masks())
        base.taken(proposal)
        observation, *_ = env.step(proposal)
    mask = env.action_masks()
    proposal = base.propose(observation, mask)
    departure = NEXT if proposal != NEXT else WIDEN
    assert mask[departure]
    base.taken(departure)
    observation, *_ = env.step(departure)
    mask = env.action_masks()
    edits = [e for e in base.policy._edits(observation) if mask[e]]
    assert base.propose(observation, mask) == edits[0]
    assert base.policy._best == observed_score(observation) and base.policy._trial == edits[0]
