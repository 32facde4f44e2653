"""The learned edit ranker over ``anatomy_aware``'s edit phase (policies/radiotherapy/ranker.py)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from grading.radiotherapy import grade_task, split_seed
from hospital_marl.radiotherapy.core.plan import LOCK, NEXT, WIDEN
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.radiotherapy import load
from policies.radiotherapy.baselines import AnatomyAwarePolicy
from policies.radiotherapy.options import DEFAULT, Selector, Variant, save, site_key, step0_features
from policies.radiotherapy.ranker import (
    EDITS,
    EditRanker,
    RankedSelectorPolicy,
    RankedVariantPolicy,
    edit_features,
)
from tests.radiotherapy.played import played_actions

N = len(edit_features(RadiotherapyPlanningEnv("prostate").reset(seed=0)[0]))
SITES = {t: site_key(RadiotherapyPlanningEnv(t).reset(seed=0)[0]) for t in BUILTIN_TASKS}


def _biased(favour: Mapping[int, float], taus: Mapping[tuple[int, ...], float] | None = None) -> EditRanker:
    """A ranker whose probability of each edit is a constant (``favour``; other edits 0), every site."""
    zero = (np.zeros(N), np.ones(N), np.zeros(N))
    models = {(key, e): (*zero, float(favour.get(e, 0.0))) for key in SITES.values() for e in EDITS}
    return EditRanker(models, taus)


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_an_empty_ranker_is_the_variant_exactly(task: str) -> None:
    """No model: every edit scores 0, ties go to anatomy_aware's order, no threshold: nothing changes."""
    for i in range(2):
        seed = split_seed(1000, task, "validation", i)
        expected = played_actions(AnatomyAwarePolicy(), task, seed)
        assert played_actions(RankedVariantPolicy(DEFAULT, EditRanker({})), task, seed) == expected
        ranked = RankedSelectorPolicy((DEFAULT,), None, EditRanker({}))
        assert played_actions(ranked, task, seed) == expected


def test_the_ranker_decides_which_edit_is_tried_first() -> None:
    """anatomy_aware tries NARROW first on each beam; a ranker favouring WIDEN makes WIDEN the first
    trial, and the episode differs."""
    task = "prostate"
    seed = split_seed(1000, task, "validation", 0)
    base, _ = played_actions(AnatomyAwarePolicy(), task, seed)
    ranked, _ = played_actions(RankedVariantPolicy(DEFAULT, _biased({WIDEN: 0.9})), task, seed)
    climb = ranked[len(_no_climb_prefix(task, seed)) :]
    assert climb[0] == WIDEN
    assert base[len(_no_climb_prefix(task, seed))] != WIDEN
    assert ranked != base


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_a_threshold_above_every_probability_tries_no_edit(task: str) -> None:
    """tau above every edit's probability: the edit phase goes from beam to beam and locks, no trial."""
    seed = split_seed(1000, task, "validation", 1)
    taus = {key: 0.5 for key in SITES.values()}
    actions, score = played_actions(RankedVariantPolicy(DEFAULT, _biased({}, taus)), task, seed)
    climb = actions[len(_no_climb_prefix(task, seed)) :]
    assert set(climb) <= {NEXT, LOCK} and climb[-1] == LOCK
    _, trimmed_only = played_actions(_trim_only(), task, seed)
    assert score == pytest.approx(trimmed_only, abs=0)


def _trim_only() -> AnatomyAwarePolicy:
    """anatomy_aware locking where its edit phase would begin (its build and trimming only)."""

    class TrimOnly(AnatomyAwarePolicy):
        def _act(self, observation, action_mask):  # type: ignore[no-untyped-def]
            action = super()._act(observation, action_mask)
            return LOCK if self._climbing else action

    return TrimOnly()


def _no_climb_prefix(task: str, seed: int) -> list[int]:
    actions, _ = played_actions(_trim_only(), task, seed)
    return actions[:-1]  # its LOCK is where the edit phase starts


def test_a_ranked_selector_checkpoint_round_trips(tmp_path) -> None:  # type: ignore[no-untyped-def]
    family = (DEFAULT, Variant(n_beams=6, margin=1))
    bias = np.array([0.0, 1.0])  # always the second variant
    n = len(step0_features(RadiotherapyPlanningEnv("prostate").reset(seed=0)[0]))
    selector = Selector(np.zeros(n), np.ones(n), [(np.zeros((2, n)), bias)])
    ranker = _biased({WIDEN: 0.7, EDITS[0]: 0.2}, {SITES["prostate"]: 0.1})
    path = tmp_path / "rt_ranked_selector_seed3.npz"
    save(path, family, selector, {"name": "ranked_selector", "ranker": {"seed": 3}}, extra=ranker.arrays())
    loaded = load(str(path))
    assert isinstance(loaded, RankedSelectorPolicy)
    assert loaded.ranker.taus == ranker.taus and set(loaded.ranker.models) == set(ranker.models)
    seed = split_seed(1000, "prostate", "validation", 2)
    direct = RankedSelectorPolicy(family, selector, ranker)
    assert played_actions(loaded, "prostate", seed) == played_actions(direct, "prostate", seed)
    assert loaded.choice == 1
    empty = EditRanker.from_arrays(EditRanker({}).arrays())  # a ranker with no site at all
    assert empty.models == {} and empty.taus == {}


def test_the_shipped_learner_is_graded_without_the_plan() -> None:
    """The shipped ranked_selector reads only the observation: handed no plan at all it plays the
    grader's (sealed) episode exactly, on every task."""
    for task in BUILTIN_TASKS:
        expected = grade_task("ranked_selector", task, n_episodes=1, seed=1000, split="validation")
        agent = load("ranked_selector")
        assert isinstance(agent, RankedSelectorPolicy) and agent.ranker.models
        env = RadiotherapyPlanningEnv(task, split="validation")
        observation, info = env.reset(seed=split_seed(1000, task, "validation", 0))
        agent.reset(seed=0, plan=None)
        while not env.plan.done:
            observation, _, _, _, info = env.step(agent.act(observation, info["action_mask"]))
        assert info["score"] == expected["episode_scores"][0]
