"""RLlib's own wrappers and default PPO module on the ED (run by ``test_rllib.py`` in a subprocess,
so Ray never starts inside pytest): prints one JSON line per wrapper."""

from __future__ import annotations

import json

import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv
from ray.tune.registry import register_env

import hospital_marl
from hospital_marl import ROLES

STEPS = 300

MAKERS = {
    # the flat Box format: RLlib's default encoder (an MLP) takes it as it is
    "ParallelPettingZooEnv": lambda _: ParallelPettingZooEnv(
        hospital_marl.parallel_env(observation_format="flat")
    ),
    "PettingZooEnv": lambda _: PettingZooEnv(hospital_marl.env(observation_format="flat")),
}


def main() -> None:
    torch.set_num_threads(1)
    for name, make in MAKERS.items():
        register_env(name, make)
        config = (
            PPOConfig()
            .environment(name)
            .env_runners(num_env_runners=0, rollout_fragment_length=100)
            .learners(num_learners=0)
            .training(train_batch_size=STEPS, minibatch_size=100, num_epochs=1)
            .multi_agent(policies=set(ROLES), policy_mapping_fn=lambda agent_id, *args, **kwargs: agent_id)
            .rl_module(model_config={"fcnet_hiddens": [16]})
            .debugging(seed=0)
        )
        algo = config.build_algo()
        result = algo.train()
        modules = {role: type(algo.get_module(role)).__name__ for role in ROLES}
        print(
            json.dumps(
                {
                    "wrapper": name,
                    "env_steps": result["env_runners"]["num_env_steps_sampled_lifetime"],
                    "modules": modules,
                    "learned": sorted(result["learners"]),
                }
            )
        )
        algo.stop()


if __name__ == "__main__":
    main()
