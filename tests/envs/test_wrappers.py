"""ScoreReward: the graded composite, paid out per step (SPEC §7's formula, not the env's reward)."""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from hospital_marl import BUILTIN_SCENARIOS, ROLE_ACTION_COUNTS, ROLES
from hospital_marl.envs.composed import HospitalEDEnv, HospitalEDTeamEnv
from hospital_marl.envs.wrappers import EMPTY_SHIFT_SCORE, ScoreReward
from tests.helpers import masked_random_flat


def _team_action(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One masked-random action per role from its segment of the team env's mask."""
    bounds = np.cumsum([0, *(ROLE_ACTION_COUNTS[role] for role in ROLES)])
    return np.array([masked_random_flat(mask[a:b], rng, 0.1) for a, b in itertools.pairwise(bounds)])


def _play(env: gym.Env, seed: int) -> tuple[list[float], list[dict], dict]:
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    rewards, counters, done = [], [env.unwrapped.hospital.counters.copy()], False
    while not done:
        mask = info["action_mask"]
        if isinstance(env.action_space, gym.spaces.Discrete):
            action = masked_random_flat(mask, rng, 0.1)  # some invalid actions too
        else:
            action = _team_action(mask, rng)
        _, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        counters.append(env.unwrapped.hospital.counters.copy())
        done = terminated or truncated
    return rewards, counters, info


@pytest.mark.parametrize("env_cls", [HospitalEDEnv, HospitalEDTeamEnv])
@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_undiscounted_return_is_the_graded_score_minus_an_empty_shift(env_cls, scenario):
    env = ScoreReward(env_cls(scenario=scenario))
    for seed in (0, 1):
        rewards, _, info = _play(env, seed)
        assert EMPTY_SHIFT_SCORE == 90.0
        assert sum(rewards) + EMPTY_SHIFT_SCORE == pytest.approx(info["score"], abs=1e-9)


def test_each_step_pays_what_it_changes_in_the_composite():
    """Every step but the last pays the SPEC §7 weights with the day's denominators."""
    env = ScoreReward(HospitalEDEnv(scenario="surge"))
    rewards, counters, _ = _play(env, 3)
    day = env.unwrapped.hospital.day
    arrivals = day.n_patients
    critical_floor = sum(s >= 4 for s in day.severity)
    assert counters[-1].deaths > 0 and counters[-1].invalid_actions > 0  # the formula is exercised
    for reward, prev, now in zip(rewards[:-1], counters, counters[1:]):
        expected = (
            -40 * (now.deaths - prev.deaths) / arrivals
            - 20 * (now.critical_deaths - prev.critical_deaths) / max(critical_floor, now.critical_total)
            - (now.wait_ticks - prev.wait_ticks) / arrivals
            + 10 * (now.occupancy_sum - prev.occupancy_sum) / 100
            - 10 * (now.invalid_actions - prev.invalid_actions) / 100
        )
        assert reward == pytest.approx(expected, abs=1e-12)


def test_wrapped_env_passes_sb3_check_env():
    sb3_check_env(ScoreReward(HospitalEDEnv()), warn=False)


def test_reweighted_score__keeps_the_return_identity_and_rejects_unknown_terms():
    from hospital_marl.core.metrics import SCORE_WEIGHTS, composite_score

    weights = {**SCORE_WEIGHTS, "resource_utilization": 0.0}
    env = ScoreReward(HospitalEDEnv(scenario="night_shift"), weights)
    assert env.empty_shift_score == 90.0  # an empty shift has no utilisation to lose
    rewards, _, info = _play(env, 0)
    assert sum(rewards) + 90.0 == pytest.approx(composite_score(info["metrics"], weights), abs=1e-9)
    assert info["metrics"]["resource_utilization"] > 0  # the term really was dropped
    with pytest.raises(ValueError, match="weights must name exactly"):
        ScoreReward(HospitalEDEnv(), {"survival_rate": 1.0})


# --------------------------------------------------------------- the batched form
def _play_batched(scenario: str, seed: int, steps: int, weights=None) -> tuple[np.ndarray, list[dict], list]:
    """``steps`` masked-random joint steps of 3 batched MARL envs under VectorScoreReward:
    the rewards ``(steps, B)``, each finished episode (env, step, score), and the actions played."""
    from hospital_marl.envs.vector import HospitalMARLVectorEnv
    from hospital_marl.envs.wrappers import VectorScoreReward

    env = VectorScoreReward(
        HospitalMARLVectorEnv(3, scenario=scenario), **({"weights": weights} if weights else {})
    )
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rewards, finished, played = [], [], []
    for t in range(steps):
        actions = {
            role: np.array([masked_random_flat(m, rng, 0.1) for m in obs[role]["action_mask"]])
            for role in ROLES
        }
        played.append(actions)
        obs, reward, terminated, truncated, infos = env.step(actions)
        assert all(np.array_equal(reward[role], reward[ROLES[0]]) for role in ROLES)  # the team's score
        rewards.append(reward[ROLES[0]])
        ended = terminated[ROLES[0]] | truncated[ROLES[0]]
        for e in np.flatnonzero(ended).tolist():
            metrics = {k: v[e] for k, v in infos["final_info"]["metrics"].items() if not k.startswith("_")}
            finished.append(
                {"env": e, "step": t, "score": infos["final_info"]["score"][e], "metrics": metrics}
            )
    return np.array(rewards), finished, played


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
def test_batched_return_of_every_episode_is_its_graded_score_minus_an_empty_shift(scenario):
    from hospital_marl.core.scenarios import get_scenario

    length = get_scenario(scenario).episode_length
    rewards, finished, _ = _play_batched(scenario, 5, 2 * length + 3)  # two days or more, autoreset between
    assert len(finished) >= 6  # a day may also end early (SPEC: everyone gone)
    for end in finished:
        before = [f["step"] for f in finished if f["env"] == end["env"] and f["step"] < end["step"]]
        start = max(before) + 1 if before else 0
        paid = rewards[start : end["step"] + 1, end["env"]].sum()
        assert paid + EMPTY_SHIFT_SCORE == pytest.approx(end["score"], abs=1e-9)


def test_batched_rewards_are_the_scalar_wrappers_for_the_same_seed_and_actions():
    """Env i of the batch seeded s is the scalar team env reset with seed s + i (SPEC §10): the
    batched reward of every step, across the autoreset, is ScoreReward's on that scalar env."""
    scenario, seed = "night_shift", 7
    length = HospitalEDTeamEnv(scenario=scenario).unwrapped.hospital.max_ticks
    rewards, finished, played = _play_batched(scenario, seed, length + 20)
    assert finished and any(r != 0 for r in rewards[:, 0])
    for e in range(3):
        scalar = ScoreReward(HospitalEDTeamEnv(scenario=scenario))
        scalar.reset(seed=seed + e)
        expected = []
        for actions in played:
            _, reward, terminated, truncated, _ = scalar.step(np.array([actions[role][e] for role in ROLES]))
            expected.append(reward)
            if terminated or truncated:
                scalar.reset()  # the scalar env's next seed, as the vector env's autoreset
        assert rewards[:, e].tolist() == expected  # bit for bit: one rule, same arithmetic


def test_batched_reweighted_score_keeps_the_return_identity():
    from hospital_marl.core.metrics import SCORE_WEIGHTS, composite_score

    weights = {**SCORE_WEIGHTS, "resource_utilization": 0.0}
    rewards, finished, _ = _play_batched("night_shift", 2, 101, weights)
    firsts = [next(f for f in finished if f["env"] == e) for e in range(3)]  # each env's first day
    for end in firsts:
        expected = composite_score(end["metrics"], weights) - 90.0
        assert rewards[: end["step"] + 1, end["env"]].sum() == pytest.approx(expected, abs=1e-9)
