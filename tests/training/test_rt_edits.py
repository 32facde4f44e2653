"""The edit ranker's training data and fit (training/rt_edits.py; issue 25 item 6)."""

from __future__ import annotations

import numpy as np
import pytest

from grading.radiotherapy import split_seed
from hospital_marl.radiotherapy.core.plan import NARROW
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv
from policies.radiotherapy.options import DEFAULT, OptionSelectorPolicy
from training.rt_edits import Statistics, label


def _ridge(x: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The standardised ridge by least squares on the augmented system [Zc; sqrt(lam n) I] w = [yc; 0]."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = (x - mean) / scale
    zc, yc = z - z.mean(axis=0), y - y.mean()
    a = np.vstack([zc, np.sqrt(lam * len(x)) * np.eye(x.shape[1])])
    b = np.concatenate([yc, np.zeros(x.shape[1])])
    w = np.linalg.lstsq(a, b, rcond=None)[0]
    return mean, scale, w, float(y.mean())


def test_the_fit_is_the_standardised_ridge_whatever_the_blocks() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5000, 6)) * [1, 2, 3, 0.5, 1, 0] + [0, 1, 0, 0, 5, 2]  # one constant feature
    y = (x[:, 0] - 0.5 * x[:, 1] + rng.normal(size=5000) > 0).astype(float)
    one, first, second = Statistics(), Statistics(), Statistics()
    for i in range(len(x)):  # more rows than a block: several flushes
        one.add((1, 2), NARROW, x[i], y[i])
        (first if i < 1234 else second).add((1, 2), NARROW, x[i], y[i])
    first.merge(second)
    for stats in (one, first):
        mean, scale, w, c = stats.fit(0.3).models[((1, 2), NARROW)]
        m2, s2, w2, c2 = _ridge(x, y, 0.3)
        np.testing.assert_allclose(mean, m2, atol=1e-12)
        np.testing.assert_allclose(scale, s2, rtol=1e-9)
        np.testing.assert_allclose(w, w2, rtol=1e-7, atol=1e-10)
        assert c == pytest.approx(c2, abs=1e-12)
    # a ridge per site; no labels at all saves and loads too
    assert Statistics.from_arrays(Statistics().arrays()).sums == {}
    assert Statistics.from_arrays(one.arrays()).fit({(1, 2): 0.3}).models.keys() == {((1, 2), NARROW)}


def test_labelling_does_not_change_the_episode() -> None:
    """'base' mode simulates every candidate edit and restores the plan: the episode played is the
    selector's own on that training patient, to the last action, and the labels are counted."""
    selector = OptionSelectorPolicy((DEFAULT,))
    task = "head_neck"
    seed = split_seed(0, task, "train/edits/0", 0)
    stats = Statistics()
    scores = label(selector, task, [seed], "base", stats)
    env = RadiotherapyPlanningEnv(task, split="train")
    observation, info = env.reset(seed=seed)
    plain = OptionSelectorPolicy((DEFAULT,))
    plain.reset()
    done = False
    while not done:
        observation, _, terminated, truncated, info = env.step(plain.act(observation, info["action_mask"]))
        done = terminated or truncated
    assert scores == [info["score"]]
    stats.flush()
    assert sum(s[0] for s in stats.sums.values()) > 0
    assert all(0 <= s[4] <= s[0] for s in stats.sums.values())  # labels are 0/1
    with pytest.raises(ValueError):
        label(selector, task, [seed], "ranked", stats)
    with pytest.raises(ValueError):
        label(selector, task, [seed], "sideways", stats)
