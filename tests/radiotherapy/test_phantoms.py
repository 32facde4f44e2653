"""SPEC-RT §1: every drawn phantom is valid; tasks are validated frozen data in a registry."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.radiotherapy.core.phantoms import (
    MIN_TUMOUR_VOXELS,
    disc,
    draw_phantom,
    make_phantom,
    phantom_problems,
)
from hospital_marl.radiotherapy.core.tasks import (
    BUILTIN_TASKS,
    OAR,
    TASKS,
    Constraint,
    Task,
    get_task,
    register_task,
)
from tests.radiotherapy.conftest import CENTRE


@pytest.mark.parametrize("split", ["train", "validation", "test_ood"])
@pytest.mark.parametrize("task_name", BUILTIN_TASKS)
def test_phantoms__valid_over_many_seeds(task_name: str, split: str) -> None:
    task = TASKS[task_name]
    for seed in range(60):
        ph = draw_phantom(
            task.generator,
            np.random.default_rng(seed),
            task.oar_names,
            task.envelopes,
            task.anatomy_for(split),
        )
        assert ph.tumour.sum() >= MIN_TUMOUR_VOXELS
        assert not (ph.tumour & ~ph.body).any()
        rows, cols = np.nonzero(ph.tumour)
        assert ph.isocentre == pytest.approx((rows.mean(), cols.mean()))
        assert ph.tumour[round(ph.isocentre[0]), round(ph.isocentre[1])], "isocentre inside the tumour"
        assert len(ph.oars) == len(task.oars)
        others = [m for name, m in zip(task.oar_names, ph.oars) if name not in task.envelopes]
        for name, mask in zip(task.oar_names, ph.oars):
            assert mask.any(), f"{task_name} seed {seed}: {name} is empty"
            assert not (mask & ~ph.body).any(), f"{task_name} seed {seed}: {name} outside the body"
            assert not (mask & ph.tumour).any(), f"{task_name} seed {seed}: {name} overlaps the tumour"
        assert sum(m.astype(int) for m in others).max() <= 1, f"{task_name} seed {seed}: OARs overlap"


@pytest.mark.parametrize("split", ["train", "test_ood"])
def test_pediatric_brain__isocentre_never_inside_the_brainstem(split: str) -> None:
    task = TASKS["pediatric_brain"]
    stem = task.oar_names.index("brainstem")
    for seed in range(150):
        ph = draw_phantom(
            task.generator,
            np.random.default_rng(seed),
            task.oar_names,
            task.envelopes,
            task.anatomy_for(split),
        )
        assert not ph.oars[stem][round(ph.isocentre[0]), round(ph.isocentre[1])]


def test_phantom_problems__names_each_fault() -> None:
    body = disc(CENTRE, 20)
    tumour = disc(CENTRE, 5)
    empty = np.zeros_like(body)
    outside = disc((2.0, 2.0), 2)
    overlapping = disc((CENTRE[0] + 4, CENTRE[1]), 3)
    problems = phantom_problems(make_phantom(body, tumour, [empty, outside, overlapping]), ("e", "o", "x"))
    assert any("e is empty" in p for p in problems)
    assert any("o extends outside" in p for p in problems)
    assert any("x overlaps the tumour" in p for p in problems)
    small = phantom_problems(
        make_phantom(body, disc(CENTRE, 2), [disc((CENTRE[0] + 9, CENTRE[1]), 2)]), ("a",)
    )
    assert any("tumour has" in p for p in small)


def test_phantom_problems__names_overlapping_oars_but_lets_an_envelope_contain_them() -> None:
    body, tumour = disc(CENTRE, 25), disc(CENTRE, 4)
    a = disc((CENTRE[0] + 10, CENTRE[1]), 3)
    b = disc((CENTRE[0] + 12, CENTRE[1]), 3)  # shares voxels with a
    c = disc((CENTRE[0] - 10, CENTRE[1]), 3)  # apart from both
    brain = disc(CENTRE, 20) & ~tumour  # holds a, b and c
    names, envelopes = ("a", "b", "c", "brain"), frozenset({"brain"})
    assert phantom_problems(make_phantom(body, tumour, [a, b, c, brain]), names, envelopes) == [
        "OARs a and b overlap"
    ]
    assert phantom_problems(make_phantom(body, tumour, [a, c, c, brain]), names, envelopes) == [
        "OARs b and c overlap"  # the second and third masks are the same disc
    ]
    assert phantom_problems(make_phantom(body, tumour, [a, c, brain]), ("a", "c", "brain"), envelopes) == []
    assert phantom_problems(make_phantom(body, tumour, [a, c, brain]), ("a", "c", "brain")) == [
        "OARs a and brain overlap",
        "OARs c and brain overlap",
    ]


def test_task__validates_with_the_bad_value_in_the_message() -> None:
    gen = TASKS["prostate"].generator
    mean20 = (Constraint("mean", 20.0),)
    with pytest.raises(ValueError, match="priority"):
        OAR("x", 4, mean20)
    with pytest.raises(ValueError, match="dose_gy"):
        Constraint("mean", -1.0)
    with pytest.raises(ValueError, match="metric"):
        Constraint("median", 20.0)
    with pytest.raises(ValueError, match="volume"):
        Constraint("volume", 20.0)  # V20Gy ≤ what?
    with pytest.raises(ValueError, match="constraints"):
        OAR("x", 1, ())
    with pytest.raises(ValueError, match="unique"):
        Task("t", (OAR("a", 1, mean20), OAR("a", 2, mean20)), 30, gen)
    with pytest.raises(ValueError, match="max_steps"):
        Task("t", (OAR("a", 1, mean20),), 1, gen)
    with pytest.raises(ValueError, match="outside"):
        Task("t", (OAR("a", 1, (Constraint("near_max", 150.0),)),), 30, gen, rx_gy=60.0)
    with pytest.raises(ValueError, match="register_task takes a Task"):
        register_task("prostate")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        get_task("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_task(TASKS["prostate"])


def test_task__overrides_keep_the_rest() -> None:
    short = get_task({"name": "head_neck", "max_steps": 30})
    assert short.max_steps == 30 and short.oars == TASKS["head_neck"].oars


def test_user_task__runs_through_gym_make_and_is_calibrated_on_first_use() -> None:
    import gymnasium as gym

    import hospital_marl  # noqa: F401
    from hospital_marl.radiotherapy import RT_ENV_ID

    prostate = TASKS["prostate"]
    strict = Task(
        "strict_prostate",
        (OAR("rectum", 1, (Constraint("mean", 23.0),)), OAR("bladder", 1, (Constraint("mean", 31.0),))),
        max_steps=40,
        generator=prostate.generator,
        anatomy=prostate.anatomy,
        description="both OARs critical, tighter limits",
        rx_gy=78.0,
    )
    env = gym.make(RT_ENV_ID, task=strict)
    _, info = env.reset(seed=0)
    assert env.unwrapped.task is strict and info["task"] == "strict_prostate"
    # the same patients as the prostate task: the calibration lands on the same k
    assert env.unwrapped.plan.dose_scale == pytest.approx(prostate.dose_scale, rel=2e-3)
