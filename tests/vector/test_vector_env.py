"""The natively batched envs (SPEC §10) against the scalar envs they batch.

Env i of a vector env reset with seed s must be the scalar env reset with seed
s + i, bit for bit, across autoresets (later episodes follow the scalar env's own
reset() seed sequence).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import hospital_marl
from hospital_marl import ROLE_ACTION_COUNTS, ROLES, RewardTable
from hospital_marl.envs.aec import HospitalAECEnv
from hospital_marl.envs.composed import HospitalEDEnv, HospitalEDTeamEnv
from hospital_marl.envs.parallel import HospitalParallelEnv
from hospital_marl.envs.vector import HospitalEDTeamVectorEnv, HospitalEDVectorEnv, HospitalMARLVectorEnv

B = 3
SEED = 40
TICKS = 30  # short shifts (max_cycles): several autoresets per test


def pick(mask: np.ndarray, rng: np.random.Generator, p_invalid: float = 0.1) -> int:
    """Masked-random, sometimes any action (invalid ones must be counted like the scalar env's)."""
    if rng.random() < p_invalid:
        return int(rng.integers(len(mask)))
    return int(rng.choice(np.flatnonzero(mask)))


def test_make_vec__builds_the_native_batched_envs_with_declared_autoreset() -> None:
    venv = gym.make_vec(hospital_marl.COMPOSED_ENV_ID, num_envs=B, scenario="surge")
    team = gym.make_vec(hospital_marl.TEAM_ENV_ID, num_envs=B)
    assert isinstance(venv, HospitalEDVectorEnv) and isinstance(team, HospitalEDTeamVectorEnv)
    for env in (venv, team):
        assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP  # Gymnasium's default
        assert env.num_envs == B
        obs, _info = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        assert env.single_observation_space == gym.make(hospital_marl.COMPOSED_ENV_ID).observation_space
    assert venv.action_masks().shape == (B, 39) and team.action_masks().shape == (B, 41)
    assert venv.scenario.name == "surge"


@pytest.mark.parametrize("scenario", ["mass_casualty", "ventilator_crisis"])
def test_composed_vector__env_i_is_the_scalar_env_seeded_s_plus_i(scenario: str) -> None:
    kwargs = {"scenario": scenario, "max_cycles": TICKS, "rewards": RewardTable(death=-9.0)}
    venv = gym.make_vec(hospital_marl.COMPOSED_ENV_ID, num_envs=B, autoreset_mode="same_step", **kwargs)
    scalars = [HospitalEDEnv(**kwargs) for _ in range(B)]
    obs, info = venv.reset(seed=SEED)
    single = [env.reset(seed=SEED + i) for i, env in enumerate(scalars)]
    rngs = [np.random.default_rng(i) for i in range(B)]
    finished = 0
    for _ in range(3 * TICKS + 5):
        for i in range(B):
            for key, value in single[i][0].items():
                np.testing.assert_array_equal(obs[key][i], value, err_msg=key)
            np.testing.assert_array_equal(venv.action_masks()[i], scalars[i].action_masks())
        actions = np.array([pick(scalars[i].action_masks(), rngs[i]) for i in range(B)])
        obs, rewards, terminated, truncated, info = venv.step(actions)
        for i, env in enumerate(scalars):
            s_obs, s_reward, s_term, s_trunc, s_info = env.step(int(actions[i]))
            assert (rewards[i], terminated[i], truncated[i]) == (s_reward, s_term, s_trunc)
            assert info["outcome"][i] == s_info["outcome"]
            if s_term or s_trunc:
                finished += 1
                assert info["_final_obs"][i] and info["_final_info"][i]
                for key, value in s_obs.items():
                    np.testing.assert_array_equal(info["final_obs"][i][key], value)
                final = info["final_info"]
                assert {k: final["metrics"][k][i] for k in s_info["metrics"]} == s_info["metrics"]
                assert final["score"][i] == s_info["score"]
                assert final["counters"]["invalid_actions"][i] == s_info["counters"]["invalid_actions"]
                single[i] = env.reset()  # the scalar env's next seed: what the vector env used
            else:
                single[i] = (s_obs, s_info)
                assert "final_obs" not in info or not info["_final_obs"][i]
    assert finished >= 2 * B


def test_team_vector__env_i_is_the_scalar_team_env_seeded_s_plus_i() -> None:
    venv = gym.make_vec(
        hospital_marl.TEAM_ENV_ID, num_envs=B, scenario="surge", max_cycles=TICKS, autoreset_mode="same_step"
    )
    scalars = [HospitalEDTeamEnv(scenario="surge", max_cycles=TICKS) for _ in range(B)]
    obs, _ = venv.reset(seed=SEED)
    single = [env.reset(seed=SEED + i)[0] for i, env in enumerate(scalars)]
    rng = np.random.default_rng(5)
    sizes = [ROLE_ACTION_COUNTS[r] for r in ROLES]
    for _ in range(2 * TICKS + 3):
        masks = venv.action_masks()
        actions = np.zeros((B, 3), np.int64)
        for i in range(B):
            np.testing.assert_array_equal(masks[i], scalars[i].action_masks())
            np.testing.assert_array_equal(obs["waiting_queue"][i], single[i]["waiting_queue"])
            parts = np.split(masks[i], np.cumsum(sizes)[:-1])
            actions[i] = [pick(part, rng, 0.05) for part in parts]
        obs, rewards, terminated, truncated, info = venv.step(actions)
        for i, env in enumerate(scalars):
            s_obs, s_reward, s_term, s_trunc, s_info = env.step(actions[i])
            assert (rewards[i], terminated[i], truncated[i]) == (s_reward, s_term, s_trunc)
            assert list(info["outcomes"][i]) == list(s_info["outcomes"])
            single[i] = env.reset()[0] if s_term or s_trunc else s_obs


@pytest.mark.parametrize("reward_mode", ["team", "role"])
def test_marl_vector__env_i_is_the_parallel_env_seeded_s_plus_i(reward_mode: str) -> None:
    venv = HospitalMARLVectorEnv(B, "mass_casualty", reward_mode=reward_mode, max_cycles=TICKS)
    scalars = [HospitalParallelEnv(scenario="mass_casualty", reward_mode=reward_mode, max_cycles=TICKS)
               for _ in range(B)]  # fmt: skip
    obs, _ = venv.reset(seed=SEED)
    single = [env.reset(seed=SEED + i)[0] for i, env in enumerate(scalars)]
    rng = np.random.default_rng(6)
    for _ in range(2 * TICKS + 3):
        for i in range(B):
            for role in ROLES:
                np.testing.assert_array_equal(obs[role]["observation"][i], single[i][role]["observation"])
                np.testing.assert_array_equal(obs[role]["action_mask"][i], single[i][role]["action_mask"])
            np.testing.assert_array_equal(venv.state()[i], scalars[i].state())
        actions = {
            role: np.array([pick(obs[role]["action_mask"][i], rng) for i in range(B)]) for role in ROLES
        }
        obs, rewards, terminations, truncations, _info = venv.step(actions)
        for i, env in enumerate(scalars):
            s_obs, s_rewards, s_term, s_trunc, _ = env.step({role: int(actions[role][i]) for role in ROLES})
            for role in ROLES:
                assert rewards[role][i] == s_rewards[role]
                assert (terminations[role][i], truncations[role][i]) == (s_term[role], s_trunc[role])
            single[i] = env.reset()[0] if s_term[ROLES[0]] or s_trunc[ROLES[0]] else s_obs


@pytest.mark.parametrize("reward_mode", ["team", "role"])
def test_marl_vector_turns__env_i_is_the_aec_env_seeded_s_plus_i(reward_mode: str) -> None:
    """The graded team protocol, batched: each role observes what the earlier roles left and its
    action is carried out at once (an impossible one costs -1), exactly as the AEC env."""
    venv = HospitalMARLVectorEnv(B, "mass_casualty", reward_mode=reward_mode, max_cycles=TICKS)
    scalars = [HospitalAECEnv(scenario="mass_casualty", reward_mode=reward_mode, max_cycles=TICKS)
               for _ in range(B)]  # fmt: skip
    venv.reset(seed=SEED)
    for i, env in enumerate(scalars):
        env.reset(seed=SEED + i)
    rng = np.random.default_rng(7)
    invalid_before = 0
    for _ in range(2 * TICKS + 3):
        for role in ROLES:
            obs = venv.observations()
            actions = []
            for i, env in enumerate(scalars):
                assert env.agent_selection == role
                s_obs = env.observe(role)
                np.testing.assert_array_equal(obs[role]["observation"][i], s_obs["observation"])
                np.testing.assert_array_equal(obs[role]["action_mask"][i], s_obs["action_mask"])
                actions.append(pick(obs[role]["action_mask"][i], rng))
            venv.turn(role, np.array(actions))
            for env, action in zip(scalars, actions):
                env.step(action)
        _obs, rewards, terminations, truncations, info = venv.end_tick()
        for i, env in enumerate(scalars):
            for role in ROLES:
                assert rewards[role][i] == env.rewards[role]
                assert (terminations[role][i], truncations[role][i]) == (
                    env.terminations[role],
                    env.truncations[role],
                )
            if env.terminations[ROLES[0]] or env.truncations[ROLES[0]]:
                env.reset()
        invalid_before += int(info["invalid_actions"].sum())
    assert invalid_before > 0  # the masked-random picks did play impossible actions


def test_marl_vector_turns__out_of_order_and_mixed_protocols_are_refused() -> None:
    venv = HospitalMARLVectorEnv(2, "normal_day")
    venv.reset(seed=1)
    with pytest.raises(ValueError, match="triage's turn"):
        venv.turn(ROLES[1], np.zeros(2, np.int64))
    with pytest.raises(RuntimeError, match="after all three turns"):
        venv.end_tick()
    venv.turn(ROLES[0], np.zeros(2, np.int64))
    with pytest.raises(RuntimeError, match="under way in turns"):
        venv.step({role: np.zeros(2, np.int64) for role in ROLES})


def test_vector_reset__a_list_of_seeds_seeds_each_env_and_bad_input_is_refused() -> None:
    venv = HospitalEDVectorEnv(2, "night_shift")
    obs, _ = venv.reset(seed=[7, 3])
    again, _ = HospitalEDVectorEnv(2, "night_shift").reset(seed=6)  # envs seeded 6 and 7
    np.testing.assert_array_equal(obs["waiting_queue"][0], again["waiting_queue"][1])
    with pytest.raises(ValueError, match="one seed per env"):
        venv.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="shape"):
        venv.step(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="num_envs"):
        HospitalEDVectorEnv(0)
    with pytest.raises(RuntimeError, match="reset"):
        HospitalEDVectorEnv(2).step(np.zeros(2, np.int64))


def test_vector_step__non_integer_actions_are_invalid_not_errors() -> None:
    venv = HospitalEDVectorEnv(2, "surge")
    venv.reset(seed=1)
    _, _rewards, *_, info = venv.step(np.array([0.5, 1.5]))
    assert list(info["outcome"]) == [2, 2]  # invalid: -1 each, counted
    _, _, _, _, info = venv.step(np.array([-1, 39]))
    assert list(info["outcome"]) == [2, 2]


def test_composed_vector__many_short_episodes_and_a_seedless_reset_follow_the_scalar_seed_sequence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More episodes per env than the kernel has next days drawn ahead (it restarts ended envs
    itself, then runs out and draws more), then a seedless reset() mid-run: every day is the
    one the scalar env's reset() would start (Gymnasium's seed sequence), bit for bit. The
    batch starts with room for its first days only, so some later day the kernel cannot fit
    is left to Python, which grows the state and starts that same day."""
    import hospital_marl.envs.vector as vector_module

    monkeypatch.setattr(vector_module, "patient_capacity", lambda scenario: 1)
    shift = 2
    venv = HospitalEDVectorEnv(2, "surge", max_cycles=shift)
    scalars = [HospitalEDEnv(scenario="surge", max_cycles=shift) for _ in range(2)]
    obs, _ = venv.reset(seed=SEED)
    first_room = venv._batch.state.pat.shape[1]
    single = [env.reset(seed=SEED + i)[0] for i, env in enumerate(scalars)]
    episodes = 0
    for step in range(shift * (vector_module.KEYS_AHEAD + 4)):
        if step == shift * vector_module.KEYS_AHEAD // 2 + 1:  # mid-episode: every env starts its next day
            obs, _ = venv.reset()
            single = [env.reset()[0] for env in scalars]
        for i in range(2):
            for key, value in single[i].items():
                np.testing.assert_array_equal(obs[key][i], value, err_msg=key)
        obs, rewards, terminated, truncated, info = venv.step(np.zeros(2, np.int64))
        for i, env in enumerate(scalars):
            s_obs, s_reward, s_term, s_trunc, s_info = env.step(0)
            assert (rewards[i], terminated[i], truncated[i]) == (s_reward, s_term, s_trunc)
            single[i] = s_obs
            if s_term or s_trunc:
                episodes += 1
                np.testing.assert_array_equal(info["final_obs"][i]["waiting_queue"], s_obs["waiting_queue"])
                assert info["final_info"]["score"][i] == s_info["score"]
                single[i] = env.reset()[0]
    assert episodes >= 2 * (vector_module.KEYS_AHEAD + 2)
    assert venv._batch.state.pat.shape[1] > first_room, "no later day outgrew the first ones"
