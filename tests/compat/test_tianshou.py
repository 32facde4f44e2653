"""Tianshou's ``PettingZooEnv`` on the AEC env in ``observation_format="padded"``: one masked DQN
per role (``MultiAgentOffPolicyAlgorithm``), a few hundred collected steps and updates.

Tianshou needs every agent to share one observation and action space (the padded format), stores
each step's info in its replay buffer (the same numeric keys from reset on: no NaNs), and masks
both the greedy and the exploring action with ``obs["action_mask"]``.
"""

from __future__ import annotations

import numpy as np
import torch
from tianshou.algorithm import DQN, MultiAgentOffPolicyAlgorithm
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Collector, CollectStats, ReplayBuffer
from tianshou.env import DummyVectorEnv
from tianshou.env.pettingzoo_env import PettingZooEnv
from tianshou.trainer import OffPolicyTrainerParams
from tianshou.utils.net.common import Net

import hospital_marl
from hospital_marl import ROLES
from hospital_marl.envs.infos import INFO_KEYS, INVALID


def make_env() -> PettingZooEnv:
    return PettingZooEnv(hospital_marl.env(scenario="normal_day", observation_format="padded"))


def dqn(env: PettingZooEnv) -> DQN:
    observation_space = env.observation_space["observation"]
    net = Net(state_shape=observation_space.shape, action_shape=int(env.action_space.n), hidden_sizes=[16])
    policy = DiscreteQLearningPolicy(model=net, action_space=env.action_space, eps_training=0.3)
    return DQN(policy=policy, optim=AdamOptimizerFactory(lr=1e-3), gamma=0.9, target_update_freq=50)


def test_pettingzoo_env__takes_the_padded_env_and_its_infos_are_numeric() -> None:
    env = make_env()
    assert env.agents == list(ROLES)
    obs, info = env.reset(seed=0)
    assert set(info) >= set(INFO_KEYS)
    padded_mask = env.env.unwrapped.action_mask(ROLES[0])
    assert obs["mask"] == [bool(m) for m in padded_mask] and len(obs["mask"]) == env.action_space.n
    for _ in range(3 * len(ROLES)):
        action = int(np.flatnonzero(obs["mask"])[0])
        obs, _, _, _, info = env.step(action)
        assert set(info) >= set(INFO_KEYS) and all(np.isscalar(info[k]) for k in INFO_KEYS)


def test_masked_dqn_per_role__trains_a_few_hundred_steps_with_zero_invalid_actions() -> None:
    torch.manual_seed(0)
    env = make_env()
    algorithm = MultiAgentOffPolicyAlgorithm(algorithms=[dqn(env) for _ in ROLES], env=env)
    train_envs = DummyVectorEnv([make_env])
    train_envs.seed(0)
    buffer = ReplayBuffer(2000)  # one env: the plain buffer (the vector one JIT-compiles a manager)
    collector = Collector[CollectStats](algorithm, train_envs, buffer, exploration_noise=True)
    collector.reset()
    collector.collect(n_step=64)
    algorithm.run_training(
        OffPolicyTrainerParams(
            training_collector=collector,
            test_collector=None,
            max_epochs=1,
            epoch_num_steps=300,
            collection_step_num_env_steps=20,
            batch_size=32,
            update_step_num_gradient_steps_per_sample=0.1,
            test_in_training=False,
            show_progress=False,
            verbose=False,
        )
    )
    stored = buffer[: len(buffer)]
    assert len(buffer) >= 300
    outcomes = np.asarray(stored.info["outcome"])
    assert not np.isnan(outcomes.astype(float)).any()
    assert INVALID not in outcomes  # the masks reached both the greedy and the exploring action
    assert (np.asarray(stored.info["invalid_actions"]) == 0).all()
