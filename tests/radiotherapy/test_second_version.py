"""SPEC-RT §8: patient splits from different anatomy, the read-only plan view, one parser,
one error type for bad registrations."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.radiotherapy.core.plan import ADD, Plan
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, SPLITS, TASKS


def _inside(value: float, intervals: tuple[tuple[float, float], ...]) -> bool:
    return any(lo < value < hi for lo, hi in intervals)


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_splits__ood_test_anatomy_lies_outside_every_training_range(task: str) -> None:
    anatomy = TASKS[task].anatomy
    assert anatomy is not None and set(anatomy) == set(SPLITS)
    train, ood = anatomy["train"], anatomy["test_ood"]
    assert not set(ood.body) & set(train.body)
    rng = np.random.default_rng(0)
    for _ in range(200):
        body, tumour, offset, layout = ood.draw(rng)
        assert body not in train.body
        assert not _inside(tumour, train.tumour)
        assert not _inside(layout, train.layout)
        if train.offset != ood.offset:  # the brain's offset is unused (its layout places the tumour)
            assert not _inside(offset, train.offset)
    assert anatomy["test_id"] == train  # in-distribution test: the training ranges, held-out seeds


def test_splits__prostate_ood_tumours_are_never_training_sized() -> None:
    """Measured on the drawn patients: the tumour's equivalent radius (from its voxel count)."""
    radii = {}
    for split in ("train", "test_ood"):
        plan = Plan("prostate", split)
        rng = np.random.default_rng(1)
        sizes = []
        for _ in range(30):
            plan.reset(rng)
            sizes.append(np.sqrt(plan.phantom.tumour.sum() / np.pi))
        radii[split] = np.array(sizes)
    lo, hi = radii["train"].min(), radii["train"].max()
    assert ((radii["test_ood"] < lo) | (radii["test_ood"] > hi)).mean() > 0.8


def test_splits__an_unknown_split_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown split 'test'"):
        Plan("prostate", "test")


def test_plan_view__reads_and_evaluates_but_cannot_change_the_plan() -> None:
    from policies.radiotherapy.base import PlanView

    plan = Plan("head_neck")
    plan.reset(np.random.default_rng(0))
    plan.step(ADD)
    view = PlanView(plan)
    before = plan.score
    _, score = view.evaluate(np.array([0, 9, 18, 27]), np.full(4, 6))
    assert 0 <= score <= 1
    assert plan.score == before and view.score == before and view.n_beams == 1
    view.angles[0] = 5  # a copy
    assert plan.angles[0] == 0
    for name in ("step", "restore", "reset", "cache", "_evaluate"):
        with pytest.raises(AttributeError):
            getattr(view, name)
    with pytest.raises(AttributeError, match="read-only"):
        view.score = 1.0


def test_grader__hands_policies_a_plan_view() -> None:
    from grading.radiotherapy import run_episode
    from policies.radiotherapy.base import BaseRTPolicy, PlanView

    seen = []

    class Spy(BaseRTPolicy):
        def act(self, observation, action_mask):  # type: ignore[no-untyped-def]
            seen.append(self.plan)
            return ADD if action_mask[ADD] else int(np.flatnonzero(action_mask)[-1])

    run_episode(Spy(), TASKS["prostate"], 0)
    assert seen and all(isinstance(p, PlanView) for p in seen)


def test_llm_parser__is_the_packages_and_refuses_ambiguous_replies() -> None:
    from policies.radiotherapy.llm import parse_action

    mask = np.zeros(10, bool)
    mask[[0, 3, 5]] = True
    assert parse_action("3", mask) == (3, None)
    assert parse_action("either 3 or 5", mask) == (None, "ambiguous_reply")
    assert parse_action("4", mask) == (None, "illegal_action_4")
    assert parse_action("no idea", mask) == (None, "no_action_number")


def test_registrations__bad_ones_are_value_errors() -> None:
    import policies.radiotherapy as rt
    from grading.radiotherapy import as_agent
    from hospital_marl.radiotherapy.core.tasks import register_task

    with pytest.raises(ValueError, match="factory must be callable"):
        rt.register("mine", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already registered"):
        rt.register("planner", rt.PlannerRTPolicy)
    with pytest.raises(ValueError, match="non-empty string"):
        rt.register("", rt.PlannerRTPolicy)
    with pytest.raises(ValueError, match="register_task takes a Task"):
        register_task("prostate")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="agent must be"):
        as_agent(3)
