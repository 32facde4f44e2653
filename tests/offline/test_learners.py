"""Offline learners' specs (issue #46, item 4: what the field does on near-expert data) and the
learned policy's view of the state: the layout it was trained on, presence blocks included."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("minari")

import hospital_marl
from hospital_marl.envs.observations import BLOCKS
from training.offline import datasets as ds
from training.offline.behaviours import state_vector
from training.offline.learners import OfflinePolicy, parse_method, top_episodes


def test_method_specs_fill_defaults_and_name_options() -> None:
    assert parse_method("cql:alpha=0.1") == ("cql", {"alpha": 0.1})
    assert parse_method("bcq") == ("bcq", {"tau": 0.3})  # Tianshou's unlikely_action_threshold
    assert parse_method("bc:top=0.25") == ("bc", {"top": 0.25})
    assert parse_method("crr") == ("crr", {"beta": 1.0})


@pytest.mark.parametrize("spec", ["iql", "cql:tau=1", "bc:top=0", "bc:top=2", "cql:alpha=-1", "bcq:tau=a"])
def test_bad_method_is_a_clear_error(spec: str) -> None:
    with pytest.raises(ValueError, match="method"):
        parse_method(spec)


def test_top_episodes_keeps_the_best_returns_whole() -> None:
    # four episodes of 2, 1, 3 and 2 steps with returns 3, 10, -5, 7
    episode = np.array([0, 0, 1, 2, 2, 2, 3, 3])
    rewards = np.array([1.0, 2.0, 10.0, -1.0, -2.0, -2.0, 3.0, 4.0])
    n = len(rewards)
    tr = ds.Transitions(
        states=np.arange(n, dtype=np.float32)[:, None], next_states=np.zeros((n, 1), np.float32),
        actions=np.arange(n), rewards=rewards, dones=np.isin(np.arange(n), [1, 2, 5, 7]),
        masks=np.ones((n, 39), bool), next_masks=np.ones((n, 39), bool), behaviour_prob=np.full(n, 0.5),
        episode=episode, t=np.array([0, 1, 0, 0, 1, 2, 0, 1]), keys=["x"],
    )  # fmt: skip
    half = top_episodes(tr, 0.5)  # episodes 1 (10) and 3 (7), in their order
    assert half.actions.tolist() == [2, 6, 7]
    assert half.rewards.tolist() == [10.0, 3.0, 4.0]
    assert half.dones.tolist() == [True, False, True]
    assert top_episodes(tr, 0.01).actions.tolist() == [2]  # at least one episode
    assert top_episodes(tr, 1.0).actions.tolist() == list(range(n))


def test_learned_policy_sees_the_presence_blocks_it_was_trained_on() -> None:
    """On the ``train`` split the datasets' states end with the presence blocks: a learner trained
    on them must be shown them when it plays, not the bare global state."""
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario="train")
    obs, info = env.reset(seed=3)
    env.close()
    keys = [b.key for b in BLOCKS] + [k for k in obs if k not in {b.key for b in BLOCKS}]
    assert len(keys) > len(BLOCKS), "the train split's observation has presence blocks"
    seen = []

    def scores(states: np.ndarray) -> np.ndarray:
        seen.append(states)
        return np.zeros((len(states), 39))

    OfflinePolicy(scores, "probe", keys).act(obs, info["action_mask"])
    extra = np.concatenate([np.asarray(obs[k], np.float32).ravel() for k in keys[len(BLOCKS) :]])
    np.testing.assert_array_equal(seen[0][0], np.concatenate([state_vector(obs), extra]))
    OfflinePolicy(scores, "bare").act(obs, info["action_mask"])  # a surge-style learner: blocks only
    assert seen[1].shape == (1, state_vector(obs).size)
