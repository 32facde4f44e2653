"""SPEC-RT §9: the patient splits are what they say.

- the realised distribution of each split covers its stated ranges (every body size, both ends of
  every interval), measured on the phantoms the env draws;
- a patient that cannot be drawn is an error naming its parameters, never a silent redraw of
  other parameters;
- no patient is voxel-identical across splits (digests over many seeds);
- the head and neck out-of-distribution split really draws its small and large bodies.
"""

from __future__ import annotations

import functools
from collections import defaultdict

import numpy as np
import pytest

from hospital_marl.radiotherapy.core.phantoms import (
    Anatomy,
    disc,
    draw_phantom,
    make_phantom,
    phantom_digest,
)
from hospital_marl.radiotherapy.core.plan import Plan
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, N_BUCKETS, SPLIT_BUCKETS, SPLITS, TASKS

DRAWS = 150


def _patients(task: str, split: str, n: int = DRAWS) -> tuple:
    """The first ``n`` patients the env draws for seeds ``[i, 7]`` (drawn once per module: the
    tests below share them)."""
    return _drawn(task, split, max(n, UNIQUE_DRAWS))[:n]


UNIQUE_DRAWS = 200


@functools.cache
def _drawn(task: str, split: str, n: int) -> tuple:
    plan = Plan(task, split=split)
    out = []
    for seed in range(n):
        plan.reset(np.random.default_rng([seed, 7]))
        out.append(plan.phantom)
    return tuple(out)


@pytest.mark.parametrize("task", BUILTIN_TASKS)
@pytest.mark.parametrize("split", SPLITS)
def test_each_split_realises_its_stated_ranges(task: str, split: str) -> None:
    anatomy = TASKS[task].anatomy_for(split)
    patients = _patients(task, split)
    params = np.array([p.parameters for p in patients])
    assert set(params[:, 0].tolist()) == set(anatomy.body)  # every stated body size is drawn
    for column, intervals in ((1, anatomy.tumour), (2, anatomy.offset), (3, anatomy.layout)):
        values = params[:, column]
        inside = np.zeros(values.size, bool)
        for lo, hi in intervals:
            inside |= (values >= lo) & (values <= hi)
            if hi - lo > 1e-9 and len(intervals) * 10 <= DRAWS:  # both ends of each interval are reached
                tenth = (hi - lo) / 5
                assert ((values >= lo) & (values <= lo + tenth)).any(), (column, lo, hi)
                assert ((values >= hi - tenth) & (values <= hi)).any(), (column, lo, hi)
        assert inside.all(), (column, values[~inside][:5], intervals)
    # the body mask is the stated body: one body area per body size
    areas = defaultdict(set)
    for p in patients:
        areas[p.parameters[0]].add(int(p.body.sum()))
    assert all(len(a) == 1 for a in areas.values()) and len({min(a) for a in areas.values()}) == len(areas)


def test_head_and_neck_ood_draws_its_small_and_large_bodies() -> None:
    """The second version's 0.86 body never gave a valid patient (every OOD patient had body 1.06)."""
    ood = _patients("head_neck", "test_ood", 60)
    train = _patients("head_neck", "train", 60)
    ood_bodies = {p.parameters[0] for p in ood}
    assert ood_bodies == set(TASKS["head_neck"].anatomy_for("test_ood").body) == {0.86, 1.06}
    small = [int(p.body.sum()) for p in ood if p.parameters[0] == 0.86]
    assert max(small) < min(int(p.body.sum()) for p in train)  # smaller than every training neck


def test_a_patient_that_cannot_be_drawn_is_an_error_naming_its_parameters() -> None:
    def generator(rng: np.random.Generator, anatomy: Anatomy):
        body, radius, _offset, _layout = anatomy.draw(rng)
        return make_phantom(disc((31.5, 31.5), body), disc((31.5, 31.5), radius), [disc((31.5, 31.5), 3)])

    anatomy = Anatomy((20.0,), ((6.0, 6.5),), ((0.0, 1.0),), ((0.0, 1.0),))
    with pytest.raises(ValueError, match=r"no valid phantom .*\(body, tumour, offset, layout\).*overlaps"):
        draw_phantom(generator, np.random.default_rng(0), ("organ",), anatomy=anatomy)


def test_no_patient_is_voxel_identical_across_splits() -> None:
    """Digests of many patients of every split of every task: no digest in two splits (the
    second version had one paediatric brain test patient per grader seed equal to a training one)."""
    for task in BUILTIN_TASKS:
        seen: dict[bytes, str] = {}
        for split in SPLITS:
            for p in _patients(task, split, UNIQUE_DRAWS):
                digest = phantom_digest(p)
                assert seen.setdefault(digest, split) == split, (task, split, seen[digest])


def test_split_buckets_are_disjoint_and_training_owns_most() -> None:
    """Disjoint digest buckets are what keeps splits apart; training draws at every env reset,
    so it owns the majority (its rejection rate is the reset's cost)."""
    owned = [set(SPLIT_BUCKETS[s]) for s in SPLITS]
    assert set(SPLIT_BUCKETS) == set(SPLITS)
    assert sum(map(len, owned)) == len(set().union(*owned)) and set().union(*owned) <= set(range(N_BUCKETS))
    assert 2 * len(SPLIT_BUCKETS["train"]) > N_BUCKETS
