"""Off-policy estimators and offline learners (issue #46, items 2-3), on hand-made data and tiny datasets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("minari")

from training.offline import datasets as ds
from training.offline.behaviours import parse_behaviour
from training.offline.ope import FQE, doubly_robust, ope_metrics, pdis, wpdis


def _hand_made() -> ds.Transitions:
    """Two episodes, three and two steps, 2 actions that matter (others padding)."""
    n = 5
    z = np.zeros((n, 1), np.float32)
    every = np.ones((n, 39), bool)
    return ds.Transitions(
        states=z, next_states=z, actions=np.array([0, 1, 0, 1, 1]), rewards=np.arange(1.0, 6.0),
        dones=np.array([0, 0, 1, 0, 1], bool), masks=every, next_masks=every, behaviour_prob=np.full(n, 0.5),
        episode=np.array([0, 0, 0, 1, 1]), t=np.array([0, 1, 2, 0, 1]), keys=["x"],
    )  # fmt: skip


def _target(p0: float):
    def probs(states: np.ndarray, masks: np.ndarray) -> np.ndarray:
        out = np.zeros((len(states), 39))
        out[:, 0], out[:, 1] = p0, 1 - p0
        return out

    return probs


def test_importance_sampling_by_hand() -> None:
    tr = _hand_made()
    # target: action 0 w.p. 0.8, action 1 w.p. 0.2; behaviour 0.5 each -> ratios 1.6 (a=0), 0.4 (a=1)
    # episode 0: 1.6*1 + 1.6*0.4*2 + 1.6*0.4*1.6*3 = 1.6 + 1.28 + 3.072; episode 1: 0.4*4 + 0.16*5
    by_hand = ((1.6 + 1.28 + 3.072) + (1.6 + 0.8)) / 2
    assert pdis(tr, _target(0.8)) == pytest.approx(by_hand)
    # weighted: per step, sum(w r) / sum(w): t0 (1.6+1.6)/(2.0), t1 (1.28+0.8)/(0.64+0.16), t2 3.072/1.024
    by_hand_w = (1.6 * 1 + 0.4 * 4) / 2.0 + (1.28 + 0.8) / 0.8 + 3.072 / (1.024 + 0.16)
    assert wpdis(tr, _target(0.8)) == pytest.approx(by_hand_w)
    # on-policy (target = behaviour): both are the mean logged return
    assert pdis(tr, _target(0.5)) == pytest.approx(7.5)
    assert wpdis(tr, _target(0.5)) == pytest.approx(7.5)


def test_doubly_robust_with_an_exact_model_of_a_deterministic_world() -> None:
    tr = _hand_made()
    q = np.zeros((5, 39))  # a model that knows the reward of each logged step and nothing after it
    q[np.arange(5), tr.actions] = tr.rewards
    model = FQE(q=q, v0=np.zeros(2), v=(q * _target(0.5)(tr.states, tr.masks)).sum(1))
    # on-policy with ratios 1, DR = sum_t [r_t - Q(s_t,a_t) + V(s_t)] = sum_t V(s_t)
    assert doubly_robust(tr, _target(0.5), model) == pytest.approx(model.v.sum() / 2)


def test_ope_metrics_by_hand() -> None:
    truth = {"a": 10.0, "b": 5.0, "c": 0.0}
    reversed_ranks = ope_metrics({"a": 0.0, "b": 5.0, "c": 10.0}, truth)
    assert reversed_ranks["spearman"] == pytest.approx(-1.0)
    assert reversed_ranks["regret_at_1"] == pytest.approx(10.0)
    assert reversed_ranks["abs_error"] == pytest.approx(20.0 / 3)
    assert ope_metrics(dict(truth), truth) == {
        "abs_error": 0.0,
        "spearman": pytest.approx(1.0),
        "regret_at_1": 0.0,
    }


def test_on_policy_estimates_on_a_recorded_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    b = parse_behaviour("heuristic:eps=0.5")
    ds.create(b, "surge", episodes=4, seed=3, num_envs=4)
    tr = ds.transitions(ds.load("hospital_marl/surge-flat-heuristic_eps50-v0"))
    logged = np.bincount(tr.episode, tr.rewards).mean()
    assert pdis(tr, b.probabilities) == pytest.approx(logged)
    assert wpdis(tr, b.probabilities) == pytest.approx(logged)


def test_learned_policy_respects_the_mask() -> None:
    from training.offline.learners import OfflinePolicy, masked_argmax

    rng = np.random.default_rng(0)
    masks = rng.random((50, 39)) < 0.2
    masks[:, 0] = True
    scores = rng.normal(size=(50, 39))
    scores[:, 5] = 1e9  # the network's favourite, valid only where the mask says so
    chosen = masked_argmax(scores, masks)
    assert masks[np.arange(50), chosen].all()
    assert (chosen[masks[:, 5]] == 5).all()
    policy = OfflinePolicy(lambda states: np.tile(scores[:1], (len(states), 1)), "adversarial")
    from tests.offline.test_datasets import _states

    obs, _, flat_masks = _states(3, num_envs=4)[-1]
    for e in range(4):
        assert flat_masks[e][policy.act({k: v[e] for k, v in obs.items()}, flat_masks[e])]


def test_tianshou_learners_train_on_a_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tianshou")
    from training.offline.learners import METHODS, train

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    ds.create(parse_behaviour("heuristic"), "surge", episodes=3, seed=3, num_envs=3)
    tr = ds.transitions(ds.load("hospital_marl/surge-flat-heuristic-v0"))
    for method in (*METHODS, "bc:top=0.5", "bcq:tau=0.05", "cql:alpha=0.1"):
        scores = train(method, tr, steps=30, batch_size=64)
        out = scores(tr.states[:7])
        assert out.shape == (7, 39) and np.isfinite(out[out > -1e8]).all()
