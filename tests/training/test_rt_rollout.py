"""The rollout expert of ``train radiotherapy --warm-start rollout`` (training/rt_rollout.py)."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.radiotherapy import load
from policies.radiotherapy.baselines import AnatomyAwarePolicy
from training.radiotherapy import Args
from training.rt_rollout import RolloutExpert, complete, resume


def _play(env: RadiotherapyPlanningEnv, seed: int, policy) -> tuple[float, list[int]]:
    observation, _ = env.reset(seed=seed)
    return complete(env, observation, policy)


def test_resume_at_the_start_is_anatomy_aware() -> None:
    """Re-entered on the empty plan, the base plays exactly ``anatomy_aware``'s episode."""
    for task, seed in (("prostate", 0), ("head_neck", 1), ("pediatric_brain", 2)):
        env = RadiotherapyPlanningEnv(task)
        fresh = AnatomyAwarePolicy()
        fresh.reset()
        expected = _play(env, seed, fresh)
        observation, _ = env.reset(seed=seed)
        assert complete(env, observation, resume(observation, 0, env.plan.task.max_steps)) == expected


def test_a_label_leaves_the_env_as_it_was() -> None:
    """The expert simulates on the live env: after labelling, the plan, its score, its mask and
    the next step's outcome are those of an env that was never simulated on."""
    env, twin = RadiotherapyPlanningEnv("head_neck"), RadiotherapyPlanningEnv("head_neck")
    observation, _ = env.reset(seed=5)
    twin.reset(seed=5)
    expert = RolloutExpert(["anatomy_aware"], fortified=True)
    expert.start(env, observation)
    rng = np.random.default_rng(0)
    for _ in range(12):
        label = expert.act(env, observation)
        assert env.action_masks()[label]
        assert env.plan.score == twin.plan.score
        np.testing.assert_array_equal(env.action_masks(), twin.action_masks())
        # a random valid action (not the label), so later states are ones the expert did not choose
        valid = [a for a in np.flatnonzero(env.action_masks()) if a != 7]
        action = int(rng.choice(valid))
        observation, reward, *_ = env.step(action)
        _, twin_reward, *_ = twin.step(action)
        assert reward == twin_reward
        for key, value in twin._observation().items():
            np.testing.assert_array_equal(observation[key], value)


@pytest.mark.parametrize("task", ["prostate", "pediatric_brain"])
def test_fortified_rollout_never_ends_below_anatomy_aware(task: str) -> None:
    """Fortified, the expert keeps ``anatomy_aware``'s own episode until a rollout beats it, so
    its final score is at least ``anatomy_aware``'s on every patient."""
    env = RadiotherapyPlanningEnv(task, split="validation")
    for seed in range(2):
        fresh = AnatomyAwarePolicy()
        fresh.reset()
        base_score, _ = _play(env, seed, fresh)
        observation, _ = env.reset(seed=seed)
        expert = RolloutExpert(["anatomy_aware"], fortified=True)
        expert.start(env, observation)
        while not env.plan.done:
            observation, *_ = env.step(expert.act(env, observation))
        assert env.plan.score >= base_score - 1e-12


def test_rollout_over_a_pure_policy_is_at_least_that_policy() -> None:
    """A base that is a function of the observation alone is sequentially consistent: the plain
    (unfortified) rollout over it ends at least where the base ends, from every start."""
    base = load("ppo")
    env = RadiotherapyPlanningEnv("head_neck", split="validation")
    for seed in range(2):
        base_score, _ = _play(env, seed, base)
        observation, _ = env.reset(seed=seed)
        expert = RolloutExpert(["ppo"])
        expert.start(env, observation)
        while not env.plan.done:
            observation, *_ = env.step(expert.act(env, observation))
        assert env.plan.score >= base_score - 1e-12


def test_rollout_arguments() -> None:
    assert Args(warm_start="rollout", dagger_rounds=2).dagger_rounds == 2
    with pytest.raises(ValueError, match="rollout_base"):
        Args(warm_start="rollout", rollout_base=" , ")
    with pytest.raises(ValueError, match="at least one"):
        RolloutExpert([])


def test_a_tolerance_above_any_gain_gives_the_base_its_own_episode() -> None:
    """Scores lie in [0, 1], so no rollout gains more than 1: with that tolerance the expert never
    leaves the base, and its episode is the base's, action for action."""
    base = load("ppo")
    env = RadiotherapyPlanningEnv("prostate", split="validation")
    expected = _play(env, 3, base)
    observation, _ = env.reset(seed=3)
    expert = RolloutExpert(["ppo"], tolerance=1.0)
    expert.start(env, observation)
    actions = []
    while not env.plan.done:
        actions.append(expert.act(env, observation))
        observation, *_ = env.step(actions[-1])
    assert (env.plan.score, actions) == expected
    with pytest.raises(ValueError, match="tolerance"):
        RolloutExpert(["ppo"], tolerance=-0.1)
