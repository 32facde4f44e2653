"""SuperSuit's PettingZoo-to-SB3 tutorial chain on the parallel env, then masked PPO (sb3-contrib).

The chain is the one PettingZoo's SB3 tutorials use: ``pad_observations_v0``,
``pad_action_space_v0``, ``agent_indicator_v0``, ``pettingzoo_env_to_vec_env_v1``,
``concat_vec_envs_v1``. In ``observation_format="padded_flat"`` every role's mask sits at the
same slice, which :class:`VecMaskFromObservation` hands to MaskablePPO.
"""

from __future__ import annotations

import numpy as np
import supersuit as ss
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback

import hospital_marl
from hospital_marl import ROLE_ACTION_COUNTS, ROLES
from hospital_marl.envs.infos import INVALID
from hospital_marl.envs.sb3 import VecMaskFromObservation

N_ACTIONS = max(ROLE_ACTION_COUNTS.values())


def tutorial_chain(n_copies: int = 2):
    env = hospital_marl.parallel_env(scenario="normal_day", observation_format="padded_flat")
    mask = env.mask_slice(ROLES[0])
    env = ss.pad_observations_v0(env)
    env = ss.pad_action_space_v0(env)
    env = ss.agent_indicator_v0(env, type_only=False)
    venv = ss.pettingzoo_env_to_vec_env_v1(env)
    venv = ss.concat_vec_envs_v1(venv, n_copies, num_cpus=0, base_class="stable_baselines3")
    # SuperSuit 3.11's SB3 wrapper cannot be seeded through SB3 (its ConcatVecEnv has no seed()):
    # seed the days by resetting the ConcatVecEnv itself; SB3's own reset() then continues from it.
    venv.venv.reset(seed=0)
    torch.manual_seed(0)
    return venv, mask


class CountOutcomes(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.outcomes: list[int] = []

    def _on_step(self) -> bool:
        self.outcomes.extend(int(info["outcome"]) for info in self.locals["infos"])
        return True


def test_padded_flat__every_role_has_the_same_spaces_and_mask_slice() -> None:
    env = hospital_marl.parallel_env(observation_format="padded_flat")
    first = env.observation_space(ROLES[0])
    assert all(env.observation_space(r) == first for r in ROLES)  # bounds included
    assert {env.action_space(r).n for r in ROLES} == {N_ACTIONS}
    assert {(env.mask_slice(r).start, env.mask_slice(r).stop) for r in ROLES} == {
        (first.shape[0] - N_ACTIONS, first.shape[0])
    }
    obs, _ = env.reset(seed=3)
    plain, _ = hospital_marl.parallel_env().reset(seed=3)
    for role in ROLES:
        mask = obs[role][env.mask_slice(role)]
        n = ROLE_ACTION_COUNTS[role]
        np.testing.assert_array_equal(mask[:n], plain[role]["action_mask"])  # the role's own mask
        assert not mask[n:].any()  # the padding actions are masked out


def test_supersuit_chain__feeds_maskable_ppo_with_zero_invalid_actions() -> None:
    venv, mask = tutorial_chain()
    assert venv.num_envs == 2 * len(ROLES)  # one vector slot per role per copy
    wrapped = VecMaskFromObservation(venv, mask)
    model = MaskablePPO(
        "MlpPolicy", wrapped, n_steps=64, batch_size=64, n_epochs=1, policy_kwargs={"net_arch": [16]}
    )
    counter = CountOutcomes()
    model.learn(total_timesteps=384, callback=counter)
    assert len(counter.outcomes) >= 384
    assert INVALID not in counter.outcomes  # the masks reached the policy
    wrapped.close()


def test_supersuit_chain__without_the_mask_ppo_plays_invalid_actions() -> None:
    """The control: the same chain and budget, plain PPO (no masks), does play invalid actions,
    so the zero above is the masks' doing."""
    from stable_baselines3 import PPO

    venv, _ = tutorial_chain()
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, policy_kwargs={"net_arch": [16]})
    counter = CountOutcomes()
    model.learn(total_timesteps=384, callback=counter)
    assert counter.outcomes.count(INVALID) > 0
    venv.close()
