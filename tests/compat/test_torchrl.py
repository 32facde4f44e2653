"""TorchRL's ``PettingZooWrapper(use_mask=True)``: ``check_env_specs`` and masked rollouts.

Runs on two TorchRL lines: 0.11 (the ``[dev]`` env; BenchMARL caps torchrl < 0.12) and 0.14 (a venv of
its own in ``.ci/run``: the package, torchrl 0.14 and pytest only), with each version's defaults, so
every claim docs/use-with.md makes about TorchRL holds on both.

The info spec is built from the first reset's infos and every step's infos are written into it as
tensors, so the keys must be the same numeric ones from ``reset()`` on.
"""

from __future__ import annotations

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.envs.libs.pettingzoo import PettingZooWrapper
from torchrl.envs.utils import MarlGroupMapType, check_env_specs
from torchrl.modules import MaskedCategorical, ProbabilisticActor

import hospital_marl
from hospital_marl import ROLES
from hospital_marl.envs.infos import INFO_KEYS, INVALID

STEPS = 300


def wrapped(parallel: bool, **kwargs) -> PettingZooWrapper:
    make = hospital_marl.parallel_env if parallel else hospital_marl.env
    return PettingZooWrapper(
        make(scenario="normal_day", **kwargs),
        group_map={role: [role] for role in ROLES},  # the roles' spaces differ: a group each
        use_mask=True,
        categorical_actions=True,
        return_state=True,
        seed=0,
    )


def assert_no_invalid_action(rollout, groups) -> None:
    for group in groups:
        info = rollout["next", group, "info"]
        assert set(info.keys()) == set(INFO_KEYS)
        assert not (info["outcome"] == INVALID).any()


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "aec"])
def test_pettingzoo_wrapper__passes_check_env_specs_and_rolls_out_masked(parallel: bool) -> None:
    env = wrapped(parallel)
    check_env_specs(env, seed=0)
    rollout = env.rollout(STEPS, break_when_any_done=False)  # TorchRL's masked random actions
    assert rollout.batch_size[0] == STEPS
    if parallel:  # the AEC wrapper writes a role's info only on its turn
        assert_no_invalid_action(rollout, ROLES)


def test_padded_format__one_group_for_all_roles_and_a_masked_actor() -> None:
    """In the padded format the roles stack into one TorchRL group; a tiny masked
    categorical actor (TorchRL's ``MaskedCategorical``) acts on it and never picks a masked action."""
    torch.manual_seed(0)
    env = PettingZooWrapper(
        hospital_marl.parallel_env(scenario="normal_day", observation_format="padded"),
        group_map=MarlGroupMapType.ALL_IN_ONE_GROUP,  # identical spaces stack into one group
        use_mask=True,
        categorical_actions=True,
        seed=0,
    )
    (group,) = env.group_map
    check_env_specs(env, seed=0)
    observation = (group, "observation", "observation")  # the mask moved to (group, "action_mask")
    n_obs = env.observation_spec[observation].shape[-1]
    n_act = env.full_action_spec[group, "action"].space.n
    net = TensorDictModule(
        nn.Sequential(nn.Linear(n_obs, 16), nn.Tanh(), nn.Linear(16, n_act)),
        in_keys=[observation],
        out_keys=[(group, "logits")],
    )
    actor = ProbabilisticActor(
        net,
        in_keys={"logits": (group, "logits"), "mask": (group, "action_mask")},
        out_keys=[(group, "action")],
        distribution_class=MaskedCategorical,
        return_log_prob=True,
        log_prob_key=(group, "log_prob"),
    )
    rollout = env.rollout(STEPS, policy=actor, break_when_any_done=False)
    assert_no_invalid_action(rollout, [group])
    # one policy-gradient step on what was collected: the actor trains through the wrapper
    optimiser = torch.optim.Adam(actor.parameters(), lr=1e-3)
    loss = -(rollout[group, "log_prob"] * rollout["next", group, "reward"].squeeze(-1)).mean()
    loss.backward()
    optimiser.step()
    assert all(p.grad is not None for p in actor.parameters())


def test_gym_env__action_mask_transform_with_no_glue() -> None:
    """What TorchRL's docs have a user type for a masked Gym env: ``GymEnv`` + ``ActionMask()``. The
    ``dict_action_mask`` format puts the mask where the transform reads it (the observation)."""
    from torchrl.envs import GymEnv, TransformedEnv
    from torchrl.envs.transforms import ActionMask

    env = TransformedEnv(
        GymEnv(hospital_marl.COMPOSED_ENV_ID, observation_format="dict_action_mask"), ActionMask()
    )
    check_env_specs(env, seed=0)
    rollout = env.rollout(STEPS, break_when_any_done=False)  # random actions, through the mask
    chosen = rollout["action"]
    chosen = chosen.argmax(-1) if chosen.ndim == 2 else chosen  # one-hot or categorical spec
    assert rollout["action_mask"].gather(-1, chosen.long().unsqueeze(-1)).all()
    assert rollout["next", "done"].any()  # past an episode's end: the reset's mask is used too


def test_parallel_wrapper__defaults__one_group_per_role_random_actions_masked() -> None:
    """What a user types first: ``PettingZooWrapper(env)``, every option TorchRL's default. TorchRL
    groups only agent names ending in ``_<int>``: ``bed_manager`` stays a group of its own
    (docs/use-with.md once said it became ``bed``). The ``"action_mask"`` in PettingZoo's observation
    is found without ``use_mask`` and moved to ``(group, "action_mask")``: random actions honour it."""
    env = PettingZooWrapper(hospital_marl.parallel_env(scenario="normal_day"))
    assert env.group_map == {role: [role] for role in ROLES}
    check_env_specs(env, seed=0)
    rollout = env.rollout(STEPS, break_when_any_done=False)
    assert rollout.batch_size[0] == STEPS
    for role in ROLES:
        assert (role, "action_mask") in rollout.keys(True)
    assert_no_invalid_action(rollout, ROLES)
