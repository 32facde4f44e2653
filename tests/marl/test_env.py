"""The TorchRL envs of the ED: specs (SPEC §1 roles and action counts), masks, parity, determinism.

The batched ``HospitalTorchEnv`` and TorchRL's ``PettingZooWrapper`` over the parallel env must
agree step for step (same seed, same actions => same observations, rewards and ends), and a
policy that samples only what the masks allow must never be counted an invalid action.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torchrl", reason="torchrl not installed: pip install 'hospital-marl[marl]'")

import torch
from torchrl.envs.utils import check_env_specs

from hospital_marl.core.scenarios import BUILTIN_SCENARIOS
from training.benchmarl.env import HospitalTorchEnv, pettingzoo_env
from training.common import reward_table

pytestmark = pytest.mark.xdist_group("marl")

SPEC_ACTIONS = {"triage": 21, "bed_manager": 16, "ventilator_officer": 4}
"""SPEC.md §1: each role's Discrete action space."""
EPISODE_TICKS = 100


def masked_random(td: torch.Tensor, generator: torch.Generator) -> None:
    """Write into ``td`` one action per role drawn uniformly among the actions its mask allows."""
    for role in SPEC_ACTIONS:
        mask = td.get((role, "action_mask")).float()  # (B, 1, n)
        flat = mask.reshape(-1, mask.shape[-1])
        action = torch.multinomial(flat, 1, generator=generator).reshape(mask.shape[:-1])
        td.set((role, "action"), action)


def test_batched_env_specs_pass_torchrl_check() -> None:
    env = HospitalTorchEnv(num_envs=5, scenarios=BUILTIN_SCENARIOS, seed=0)
    check_env_specs(env)
    assert env.rows == [1, 1, 1, 1, 1]
    assert env.group_map == {role: [role] for role in SPEC_ACTIONS}
    for role, n in SPEC_ACTIONS.items():
        assert env.full_action_spec[(role, "action")].space.n == n
        assert env.full_observation_spec[(role, "action_mask")].shape == (5, 1, n)
    assert env.full_observation_spec["state"].shape[-1] == 106  # the global state: every block once


def test_pettingzoo_wrapper_path_passes_torchrl_check() -> None:
    env = pettingzoo_env("surge", seed=3)
    check_env_specs(env)
    td = env.rollout(5)
    assert set(env.group_map) == set(SPEC_ACTIONS)
    # the string outcome reached TorchRL as the kernel's code (0 done, 1 no-op, 2 invalid, 3 conflict)
    assert set(td["next", "triage", "info", "outcome"].unique().tolist()) <= {0.0, 1.0, 2.0, 3.0}


def test_masked_random_rollout_never_takes_an_invalid_action() -> None:
    env = HospitalTorchEnv(num_envs=5, scenarios=BUILTIN_SCENARIOS, seed=11)
    gen = torch.Generator().manual_seed(0)
    td = env.reset()
    for _ in range(2 * EPISODE_TICKS):
        masked_random(td, gen)
        out = env.step(td)
        td = (
            env.step_mdp(out)
            if not out["next", "done"].any()
            else env.reset(env.step_mdp(out).set("_reset", out["next", "done"].clone()))
        )
    assert len(env.finished) == 10  # two days per env
    assert {d["scenario"] for d in env.finished} == set(BUILTIN_SCENARIOS)
    assert all(d["invalid_actions"] == 0 for d in env.finished)
    assert sum(d["actions"] for d in env.finished) > 0


def test_unmasked_random_actions_are_counted_invalid() -> None:
    """The audit above can fail: ignoring the masks is seen by the env's own counters."""
    env = HospitalTorchEnv(num_envs=2, scenarios="normal_day", seed=5)
    env.rollout(EPISODE_TICKS, break_when_any_done=False)  # uniform over the whole action space
    assert len(env.finished) == 2
    assert sum(d["invalid_actions"] for d in env.finished) > 0


def test_batched_and_pettingzoo_paths_agree_step_for_step() -> None:
    seed = 42
    batched = HospitalTorchEnv(num_envs=1, scenarios="night_shift", seed=seed, encode=False, reward_scale=1.0)
    wrapped = pettingzoo_env("night_shift", seed=seed)
    # TorchRL's wrapper plays the day of reset(seed=42) while building its specs; its first
    # rollout day is the next of that seed sequence. The batched env reaches the same day by
    # finishing its first one (its autoreset follows the scalar env's seed sequence).
    a = batched.rollout(EPISODE_TICKS, break_when_any_done=False)[..., -1]
    assert bool(a["next", "done"])
    a = batched.reset(batched.step_mdp(a).set("_reset", a["next", "done"].clone()))
    b = wrapped.reset()
    rng = np.random.default_rng(0)
    for tick in range(EPISODE_TICKS):
        for role in SPEC_ACTIONS:
            obs_a = a[role, "observation"][0, 0]
            obs_b = b[role, "observation", "observation"][0]
            torch.testing.assert_close(obs_a, obs_b, rtol=0, atol=0, msg=f"{role} obs at tick {tick}")
            mask = a[role, "action_mask"][0, 0]
            assert torch.equal(mask, b[role, "action_mask"][0]), f"{role} mask at tick {tick}"
            choice = int(rng.choice(np.flatnonzero(mask.numpy())))
            a.set((role, "action"), torch.tensor([[choice]]))
            b.set((role, "action"), torch.tensor([choice]))
        a, b = batched.step(a), wrapped.step(b)
        for role in SPEC_ACTIONS:
            reward_b = float(b["next", role, "reward"])
            assert float(a["next", role, "reward"]) == pytest.approx(reward_b, abs=1e-5)
        done_a, done_b = bool(a["next", "done"]), bool(b["next", "done"])
        assert done_a == done_b
        if done_a:
            for role in SPEC_ACTIONS:  # the finished day's last observation, not the next day's first
                torch.testing.assert_close(
                    a["next", role, "observation"][0, 0], b["next", role, "observation", "observation"][0]
                )
            break
        a, b = batched.step_mdp(a), wrapped.step_mdp(b)
    assert done_a and tick == EPISODE_TICKS - 1


def test_same_seed_same_actions_same_trajectory_and_seed_matters() -> None:
    def run(seed: int) -> torch.Tensor:
        env = HospitalTorchEnv(num_envs=3, scenarios="mass_casualty", seed=seed)
        gen = torch.Generator().manual_seed(1)
        td, rewards = env.reset(), []
        for _ in range(30):
            masked_random(td, gen)
            td = env.step(td)
            rewards.append(td["next", "triage", "reward"].clone())
            td = env.step_mdp(td)
        return torch.stack(rewards)

    assert torch.equal(run(7), run(7))
    assert not torch.equal(run(7), run(8))


def test_a_reward_table_that_pays_only_deaths_pays_minus_one_per_death() -> None:
    """``rewards=`` (``train benchmarl --reward-overrides``) reaches the batched env's dense
    reward: with every term zeroed but ``death=-1``, a day's return is minus its deaths."""
    zero = ("discharge", "critical_discharge", "critical_unattended_per_tick", "waiting_per_tick",
            "invalid_action", "early_discharge_per_severity", "icu_busy_bonus", "survival_bonus")  # fmt: skip
    table = reward_table(",".join(f"{k}=0" for k in zero) + ",death=-1")
    env = HospitalTorchEnv(num_envs=1, scenarios="surge", seed=3, rewards=table)
    gen = torch.Generator().manual_seed(2)
    td, day_return = env.reset(), 0.0
    while not env.finished:
        masked_random(td, gen)
        out = env.step(td)
        day_return += out["next", "bed_manager", "reward"].item()
        td = env.step_mdp(out)
    (day,) = env.finished
    assert day["deaths"] > 0
    assert day_return == -day["deaths"]
    with pytest.raises(ValueError, match="not a RewardTable field"):
        reward_table("death_penalty=-1")


def test_score_reward_day_return_is_the_graded_score_minus_an_empty_shift() -> None:
    """``reward="score"`` (``train benchmarl --reward score``): every role gets the team's score
    change, and each finished day's return (reward_scale 1) is its graded composite minus 90,
    across the autoreset and in both scenarios of a mixed batch."""
    env = HospitalTorchEnv(num_envs=2, scenarios=("night_shift", "mass_casualty"), seed=4, reward="score")
    gen = torch.Generator().manual_seed(1)
    td, running, days = env.reset(), np.zeros(2), []
    for _ in range(2 * EPISODE_TICKS + 5):
        masked_random(td, gen)
        out = env.step(td)
        rewards = [out["next", role, "reward"].reshape(-1).double().numpy() for role in SPEC_ACTIONS]
        assert all(np.array_equal(r, rewards[0]) for r in rewards)  # the team's score, every role
        running += rewards[0]
        for e in np.flatnonzero(out["next", "done"].reshape(-1).numpy()).tolist():
            days.append((e, running[e]))
            running[e] = 0.0
        td = env.step_mdp(out)
    assert len(days) == len(env.finished) >= 4
    for (e, paid), day in zip(days, env.finished):
        assert day["scenario"] == env.scenarios[e]
        assert paid + 90.0 == pytest.approx(day["score"], abs=1e-3)  # float32 rewards
    with pytest.raises(ValueError, match="reward_mode"):
        HospitalTorchEnv(num_envs=1, reward="score", reward_mode="role")
    with pytest.raises(ValueError, match="reward must be"):
        HospitalTorchEnv(num_envs=1, reward="points")


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="at least the number of scenarios"):
        HospitalTorchEnv(num_envs=2, scenarios=BUILTIN_SCENARIOS)
    with pytest.raises(ValueError):
        HospitalTorchEnv(num_envs=2, scenarios="no_such_day")
    env = HospitalTorchEnv(num_envs=2, scenarios="surge", seed=0)
    td = env.reset()
    masked_random(td, torch.Generator().manual_seed(0))
    td = env.step_mdp(env.step(td))
    with pytest.raises(RuntimeError, match="resets only finished days"):
        env.reset(td.set("_reset", torch.tensor([[True], [False]])))
