"""The option selector over variants of ``anatomy_aware`` (policies/radiotherapy/options.py; issue 25, 6)."""

from __future__ import annotations

import numpy as np
import pytest

from grading.radiotherapy import grade_task, split_seed
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.radiotherapy import RTPolicy
from policies.radiotherapy.baselines import AnatomyAwarePolicy
from policies.radiotherapy.options import (
    DEFAULT,
    OptionSelectorPolicy,
    Selector,
    SiteSelector,
    Variant,
    VariantPolicy,
    save,
    site_key,
    step0_features,
    step1_features,
)
from policies.radiotherapy.ranker import load_selector
from tests.radiotherapy.played import played_actions

PATIENTS = 2
N_FEATURES = len(step0_features(RadiotherapyPlanningEnv("prostate").reset(seed=0)[0]))
N_FEATURES1 = len(step1_features(RadiotherapyPlanningEnv("prostate").reset(seed=0)[0]))


def _constant(k: int, best: int, n: int = N_FEATURES) -> Selector:
    """A selector that predicts variant ``best`` highest whatever the patient (``n`` features)."""
    bias = np.zeros(k)
    bias[best] = 1.0
    return Selector(np.zeros(n), np.ones(n), [(np.zeros((k, n)), bias)])


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_a_one_variant_family_is_anatomy_aware_exactly(task: str) -> None:
    for i in range(PATIENTS):
        seed = split_seed(1000, task, "validation", i)
        expected = played_actions(AnatomyAwarePolicy(), task, seed)
        assert played_actions(OptionSelectorPolicy(), task, seed) == expected
        assert played_actions(OptionSelectorPolicy((DEFAULT,), _constant(1, 0)), task, seed) == expected
        one = OptionSelectorPolicy((DEFAULT,), _constant(1, 0, N_FEATURES1), decide_at=1)
        assert played_actions(one, task, seed) == expected


def test_a_variant_is_anatomy_aware_with_those_settings() -> None:
    seed = split_seed(1000, "head_neck", "validation", 0)
    variant = Variant(n_beams=5, low=0.95, margin=3)
    expected = played_actions(AnatomyAwarePolicy(5, 0.95, 3), "head_neck", seed)
    assert played_actions(VariantPolicy(variant), "head_neck", seed) == expected
    # another edit order is another policy: it plays differently somewhere on these patients
    other = [
        played_actions(VariantPolicy(Variant(edits="turn")), t, split_seed(1000, t, "validation", 0))[0]
        for t in BUILTIN_TASKS
    ]
    base = [
        played_actions(AnatomyAwarePolicy(), t, split_seed(1000, t, "validation", 0))[0]
        for t in BUILTIN_TASKS
    ]
    assert other != base
    with pytest.raises(ValueError):
        VariantPolicy(Variant(edits="sideways"))


@pytest.mark.parametrize("decide_at", [0, 1])
def test_the_chosen_variant_plays_the_whole_episode(decide_at: int) -> None:
    """Whatever step it chooses at, the episode is the chosen variant's own, action for action."""
    family = (DEFAULT, Variant(n_beams=5, margin=1), Variant(n_beams=6, low=0.99, edits="turn"))
    task = "pediatric_brain"
    seed = split_seed(1000, task, "validation", 1)
    n = (N_FEATURES, N_FEATURES1)[decide_at]
    for k in range(len(family)):
        agent = OptionSelectorPolicy(family, _constant(len(family), k, n), decide_at=decide_at)
        choices: list[int | None] = []
        act = agent.act

        def watching(observation, action_mask, act=act, agent=agent, choices=choices):  # type: ignore[no-untyped-def]
            action = act(observation, action_mask)
            choices.append(agent.choice)
            return action

        agent.act = watching
        played = played_actions(agent, task, seed)
        assert set(choices[decide_at:]) == {k}
        assert choices[:decide_at] == [None] * decide_at  # not chosen before its step
        assert played == played_actions(VariantPolicy(family[k]), task, seed)


def test_the_selector_reads_the_step0_observation() -> None:
    """A selector keyed on the anatomy picks per patient, from the first observation only."""
    family = (DEFAULT, Variant(n_beams=5))
    env = RadiotherapyPlanningEnv("head_neck", split="validation")
    obs = [env.reset(seed=split_seed(1000, "head_neck", "validation", i))[0] for i in range(6)]
    feats = np.array([step0_features(o) for o in obs])
    j = int(np.argmax(feats.std(axis=0)))  # a feature that varies between these patients
    w = np.zeros((2, N_FEATURES))
    w[1, j] = 1.0
    mean = np.zeros(N_FEATURES)
    mean[j] = float(np.median(feats[:, j]))
    agent = OptionSelectorPolicy(family, Selector(mean, np.ones(N_FEATURES), [(w, np.zeros(2))]))
    picks = [agent.choose(o) for o in obs]
    assert picks == [int(f[j] > mean[j]) for f in feats]


def test_it_is_an_rt_policy_graded_without_the_plan() -> None:
    family = (DEFAULT, Variant(n_beams=6))
    agent = OptionSelectorPolicy(family, _constant(2, 1))
    assert isinstance(agent, RTPolicy)
    report = grade_task(agent, "prostate", n_episodes=2, seed=1000, split="validation")
    expected = grade_task(VariantPolicy(family[1]), "prostate", n_episodes=2, seed=1000, split="validation")
    assert report["episode_scores"] == expected["episode_scores"]
    # the grader hands it a sealed plan view; it never needs one: no plan gives the same play
    env = RadiotherapyPlanningEnv("prostate", split="validation")
    observation, info = env.reset(seed=split_seed(1000, "prostate", "validation", 0))
    agent.reset(seed=0, plan=None)
    while not env.plan.done:
        observation, _, _, _, info = env.step(agent.act(observation, info["action_mask"]))
    assert info["score"] == expected["episode_scores"][0]


def test_a_checkpoint_round_trips(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    family = (DEFAULT, Variant(n_beams=5), Variant(margin=3, edits="weight"))
    selector = Selector(
        rng.normal(size=N_FEATURES),
        rng.uniform(0.5, 2, N_FEATURES),
        [
            (rng.normal(size=(8, N_FEATURES)), rng.normal(size=8)),
            (rng.normal(size=(3, 8)), rng.normal(size=3)),
        ],
    )
    save(tmp_path / "sel.npz", family, selector, {"name": "option_selector", "seed": 3})
    loaded = load_selector(tmp_path / "sel.npz")
    assert loaded.family == family
    assert loaded.metadata["seed"] == 3
    assert loaded.decide_at == 0
    x = rng.normal(size=(5, N_FEATURES))
    np.testing.assert_array_equal(loaded.selector.predict(x), selector.predict(x))
    seed = split_seed(1000, "prostate", "validation", 0)
    assert played_actions(loaded, "prostate", seed) == played_actions(
        OptionSelectorPolicy(family, selector), "prostate", seed
    )


def test_clip_bounds_round_trip_and_bound_the_features(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A selector with clip bounds saves and loads them; a feature beyond them reads as the bound."""
    rng = np.random.default_rng(1)
    family = (DEFAULT, Variant(n_beams=5))
    low, high = -np.ones(N_FEATURES1), np.ones(N_FEATURES1)
    inner = Selector(
        np.zeros(N_FEATURES1),
        np.ones(N_FEATURES1),
        [(rng.normal(size=(2, N_FEATURES1)), np.zeros(2))],
        low,
        high,
    )
    key = site_key(RadiotherapyPlanningEnv("prostate").reset(seed=0)[0])
    save(
        tmp_path / "c.npz", family, SiteSelector([key], [inner]), {"name": "option_selector", "decide_at": 1}
    )
    loaded = load_selector(tmp_path / "c.npz").selector.selectors[key]  # type: ignore[union-attr]
    np.testing.assert_array_equal(loaded.low, low)
    np.testing.assert_array_equal(loaded.high, high)
    x = rng.normal(size=(4, N_FEATURES1)) * 5
    np.testing.assert_array_equal(loaded.predict(x), loaded.predict(np.clip(x, -1, 1)))
    with pytest.raises(ValueError):
        Selector(np.zeros(2), np.ones(2), [(np.zeros((1, 2)), np.zeros(1))], low=np.zeros(2))


def test_a_family_needs_a_selector() -> None:
    with pytest.raises(ValueError):
        OptionSelectorPolicy((DEFAULT, Variant(n_beams=5)))
    with pytest.raises(ValueError):
        OptionSelectorPolicy(())
    with pytest.raises(ValueError):
        OptionSelectorPolicy((DEFAULT,), decide_at=2)


def test_a_site_selector_round_trips_through_load_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A per-site checkpoint loads by path like the RT learners; an unknown site gets the default."""
    from policies.radiotherapy import load

    family = (DEFAULT, Variant(n_beams=6), Variant(n_beams=5, margin=1))
    env = RadiotherapyPlanningEnv("head_neck", split="validation")
    key = site_key(env.reset(seed=0)[0])
    selector = SiteSelector([key], [_constant(3, 2, N_FEATURES1)])
    save(
        tmp_path / "rt_option_selector_seed7.npz",
        family,
        selector,
        {"name": "option_selector", "decide_at": 1},
    )
    loaded = load(str(tmp_path / "rt_option_selector_seed7.npz"))
    assert isinstance(loaded, OptionSelectorPolicy) and loaded.decide_at == 1
    hn = split_seed(1000, "head_neck", "validation", 0)
    assert played_actions(loaded, "head_neck", hn) == played_actions(
        VariantPolicy(family[2]), "head_neck", hn
    )
    pr = split_seed(1000, "prostate", "validation", 0)
    assert played_actions(loaded, "prostate", pr) == played_actions(AnatomyAwarePolicy(), "prostate", pr)
