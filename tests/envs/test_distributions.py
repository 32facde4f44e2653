"""Procedural hospitals (issue #28): a ScenarioDistribution draws one scenario per episode from
the episode's seed, the same in every view, and the vector env's env i is the scalar env seeded
s + i (SPEC §2's contract, kept when the scenario itself is drawn)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import hospital_marl
from hospital_marl import Hospital
from hospital_marl.core.generator import generate_day
from hospital_marl.core.scenarios import (
    DISTRIBUTIONS,
    SCENARIOS,
    SPLITS,
    Scenario,
    ScenarioDistribution,
    get_scenario,
    register_distribution,
    register_scenario,
    resolve_scenario,
)
from hospital_marl.core.types import DISCHARGED
from hospital_marl.envs.observations import ROLE_INDEX
from hospital_marl.envs.vector import HospitalEDVectorEnv, HospitalMARLVectorEnv
from tests.helpers import (
    assert_same_trajectory,
    flat_action_script,
    record_aec,
    record_composed,
    record_parallel,
    record_team,
)

WIDE = ScenarioDistribution(
    "wide_test_distribution",
    general_beds=(4, 32),  # above the 20 board rows an observation shows
    icu_beds=(1, 5),
    ventilators=(1, 3),
    burst_probability=0.5,
    shock_probability=0.5,
    ventilator_shock=(1, 2),
    outage_probability=0.5,  # ventilators out for part of the day: presence changes by tick
    outage_ventilators=(1, 2),
)


def test_sample__is_a_function_of_the_seed_only() -> None:
    again = ScenarioDistribution(**{f: getattr(WIDE, f) for f in WIDE.__dataclass_fields__})
    for seed in range(50):
        assert WIDE.sample(seed) == WIDE.sample(seed) == again.sample(seed)
    assert len({WIDE.sample(seed) for seed in range(50)}) == 50


def test_sample__covers_the_ranges_and_respects_them() -> None:
    draws = [WIDE.sample(seed) for seed in range(3000)]
    beds = {s.general_beds for s in draws}
    assert beds == set(range(4, 33)), "every size in the range is drawn, none outside"
    assert {s.icu_beds for s in draws} == set(range(1, 6))
    bursts = np.mean([s.burst is not None for s in draws])
    assert abs(bursts - 0.5) < 4 * np.sqrt(0.25 / len(draws))
    for s in draws:
        assert 0.035 * s.general_beds - 1e-9 <= s.arrival_rate <= 0.05 * s.general_beds + 1e-9
        assert 0.1 <= s.amplitude <= 0.4 and 25.0 <= s.peak <= 50.0
        assert s.ventilators >= 1


def test_sample__blends_stay_inside_the_corners() -> None:
    a, b = (0.5, 0.5, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.5, 0.5)
    dist = ScenarioDistribution("blend_test", severity_mixes=(a, b))
    for seed in range(200):
        mix = dist.sample(seed).severity_mix
        assert mix[2] == 0.0 and abs(sum(mix) - 1) < 1e-9
        assert abs(mix[0] - mix[1]) < 1e-9 and abs(mix[3] - mix[4]) < 1e-9


def test_shock__takes_ventilators_out_but_never_the_last() -> None:
    dist = ScenarioDistribution(
        "shock_test", ventilators=(3, 3), shock_probability=1.0, ventilator_shock=(2, 5)
    )
    assert {dist.sample(seed).ventilators for seed in range(200)} == {1}
    calm = dist.with_overrides(name="calm_test", shock_probability=0.0)
    assert {calm.sample(seed).ventilators for seed in range(50)} == {3}


def test_day__is_the_scenarios_day_for_the_same_seed() -> None:
    """The scenario has its own stream: the day drawn under a distribution is the day of the
    drawn scenario with that seed (common random numbers across distributions)."""
    for seed in (3, 4, 5):
        a = Hospital(WIDE)
        a.reset(seed)
        b = Hospital(WIDE.sample(seed))
        b.reset(seed)
        assert a.scenario == b.scenario
        assert a.day == b.day


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"general_beds": (0, 10)}, "general_beds"),
        ({"general_beds": (12, 33)}, "general_beds"),
        ({"icu_beds": (4, 3)}, "low <= high"),
        ({"ventilators": (1, 4)}, "ventilators"),
        ({"arrival_per_bed": (-0.1, 0.1)}, "arrival_per_bed"),
        ({"amplitude": (0.5, 1.5)}, "amplitude"),
        ({"severity_mixes": ((0.5, 0.5),)}, "severity_mixes"),
        ({"condition_mixes": ((0.2, 0.2, 0.2, 0.2, 0.3),)}, "sum to 1"),
        ({"burst_probability": 1.5}, "burst_probability"),
        ({"burst_conditions": (6,)}, "burst_conditions"),
        ({"general_beds": 12}, "pair"),
        ({"name": ""}, "name"),
    ],
)
def test_validation__refuses_bad_fields(changes: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        WIDE.with_overrides(**changes)


def test_registry__one_namespace() -> None:
    assert set(SPLITS) <= set(DISTRIBUTIONS)
    assert resolve_scenario("train") is DISTRIBUTIONS["train"]
    assert isinstance(resolve_scenario("normal_day"), Scenario)
    with pytest.raises(ValueError, match="already registered"):
        register_distribution(ScenarioDistribution("normal_day"))
    with pytest.raises(ValueError, match="distribution"):
        register_scenario(Scenario(name="train"))
    with pytest.raises(ValueError, match="unknown"):
        get_scenario("train")  # a distribution is not a Scenario
    assert "train" not in SCENARIOS


def test_splits__validation_draws_differ_from_train_and_test_leaves_its_ranges() -> None:
    train, validation, test = (DISTRIBUTIONS[n] for n in SPLITS)
    assert train.sample(1) != validation.sample(1)
    draws = [test.sample(seed) for seed in range(500)]
    outside = [
        s
        for s in draws
        if not train.general_beds[0] <= s.general_beds <= train.general_beds[1]
        or not train.peak[0] <= s.peak <= train.peak[1]
    ]
    assert len(outside) == len(draws), "every test draw has a peak outside train's"
    assert any(s.general_beds < train.general_beds[0] for s in draws)
    assert any(s.general_beds > train.general_beds[1] for s in draws)


def test_make__draws_a_new_scenario_each_episode() -> None:
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario="train")
    seen = []
    for seed in (0, 1, 2, 0):
        _, info = env.reset(seed=seed)
        seen.append(env.unwrapped.hospital.scenario)
        assert info["scenario"] == f"train:{seed}"
    assert seen[0] == seen[3] == DISTRIBUTIONS["train"].sample(0)
    assert len(set(seen)) == 3
    env.reset()  # seedless: the next seed of the env's sequence, a scenario drawn from it
    assert env.unwrapped.hospital.scenario == DISTRIBUTIONS["train"].sample(env.unwrapped.hospital.seed)


def test_options__switch_between_a_scenario_and_a_distribution() -> None:
    env = gym.make(hospital_marl.COMPOSED_ENV_ID)
    env.reset(seed=5, options={"scenario": "test"})
    assert env.unwrapped.hospital.scenario == DISTRIBUTIONS["test"].sample(5)
    env.reset(seed=5, options={"scenario": "surge"})
    assert env.unwrapped.hospital.scenario == SCENARIOS["surge"]


RECORDERS = {"aec": record_aec, "team": record_team, "parallel": record_parallel}


@pytest.mark.parametrize("view", RECORDERS)
@pytest.mark.parametrize("scenario", ["train", "test", WIDE], ids=["train", "test", "user"])
def test_views__agree_on_a_distribution(view: str, scenario) -> None:
    seed = 23
    actions = flat_action_script(scenario, seed, p_unmasked=0.2)
    fixed = {"observation_layout": "fixed"}  # the harness compares the shared 106-float state
    assert_same_trajectory(
        record_composed(scenario, seed, actions, **fixed), RECORDERS[view](scenario, seed, actions, **fixed)
    )


def _presence_of(s: Scenario) -> dict[str, np.ndarray]:
    return {
        "general_present": (np.arange(20) < s.general_beds).astype(np.float32),
        "icu_present": (np.arange(5) < s.icu_beds).astype(np.float32),
        "ventilator_present": (np.arange(3) < s.ventilators).astype(np.float32),
        "general_beds": np.array([s.general_beds], np.float32),
    }


def test_layout__defaults_masked_for_distributions_and_fixed_for_scenarios() -> None:
    named = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario="normal_day")
    assert "general_present" not in named.observation_space.spaces
    assert named.unwrapped.observation_layout == "fixed"
    opted = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario="normal_day", observation_layout="masked")
    obs, _ = opted.reset(seed=1)
    assert obs["general_present"].sum() == 20 and obs["icu_present"].sum() == 5
    with pytest.raises(ValueError, match="observation_layout"):
        gym.make(hospital_marl.COMPOSED_ENV_ID, observation_layout="padded")


def test_layout__presence_follows_each_episodes_hospital_in_every_view() -> None:
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=WIDE)
    aec = hospital_marl.env(scenario=WIDE)
    par = hospital_marl.parallel_env(scenario=WIDE)
    for seed in range(6):
        obs, _ = env.reset(seed=seed)
        assert env.observation_space.contains(obs)
        expected = _presence_of(WIDE.sample(seed))
        for key, value in expected.items():
            np.testing.assert_array_equal(obs[key], value)
        tail = np.concatenate(list(expected.values()))
        n = len(tail)
        aec.reset(seed=seed)
        pobs, _ = par.reset(seed=seed)
        np.testing.assert_array_equal(aec.state()[-n:], tail)
        for role in hospital_marl.ROLES:
            o = aec.observe(role)
            assert aec.observation_space(role).contains(o)
            np.testing.assert_array_equal(o["observation"][-n:], tail)
            np.testing.assert_array_equal(o["observation"][:-n], aec.state()[:-n][ROLE_INDEX[role]])
            np.testing.assert_array_equal(pobs[role]["observation"], o["observation"])


def test_layout__masks_never_offer_a_slot_the_hospital_lacks() -> None:
    """Padding is exact: admitting to, discharging from or ventilating with a slot the episode's
    hospital does not have is never valid, whatever the state."""
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=WIDE)
    rng = np.random.default_rng(1)
    for seed in range(8):
        obs, info = env.reset(seed=seed)
        s = env.unwrapped.hospital.scenario
        done = False
        while not done:
            mask = info["action_mask"]
            assert not mask[34 + s.icu_beds : 39].any(), "ICU discharge of a missing bed"
            assert not mask[21 + s.ventilators : 24].any(), "a missing ventilator"
            occupied = int((obs["bed_occupancy"] > 0).sum())
            assert occupied <= s.general_beds and (obs["icu_occupancy"][s.icu_beds :] == 0).all()
            assert (obs["ventilator_status"][s.ventilators :] == 0).all()
            obs, _, te, tr, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
            done = te or tr


def _masked_random(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.array([rng.choice(np.flatnonzero(m)) for m in masks])


@pytest.mark.parametrize("scenario", ["test", WIDE], ids=["test", "user"])
def test_vector__env_i_is_the_scalar_env_seeded_s_plus_i(scenario) -> None:
    """Through two episodes each (the second seedless, drawn at autoreset), observations,
    rewards, ends and each env's drawn scenario match the scalar envs step for step."""
    n, seed = 3, 40
    venv = HospitalEDVectorEnv(n, scenario=scenario)
    obs, _ = venv.reset(seed=seed)
    scalars = [gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=scenario) for _ in range(n)]
    for i, env in enumerate(scalars):
        o, _ = env.reset(seed=seed + i)
        assert all(np.array_equal(o[k], obs[k][i]) for k in o)
        assert set(o) == set(obs) and "general_present" in o
        assert venv._batch.row_scenario(i) == env.unwrapped.hospital.scenario
    rng = np.random.default_rng(0)
    episodes_ended = 0
    for _ in range(230):
        actions = _masked_random(venv.action_masks(), rng)
        obs, rewards, term, trunc, _ = venv.step(actions)
        for i, env in enumerate(scalars):
            o, r, te, tr, _ = env.step(int(actions[i]))
            assert (r, te, tr) == (rewards[i], term[i], trunc[i])
            if te or tr:
                o, _ = env.reset()
                episodes_ended += 1
            assert all(np.array_equal(o[k], obs[k][i]) for k in o)
            assert venv._batch.row_scenario(i) == env.unwrapped.hospital.scenario
    assert episodes_ended >= n * 2


def test_vector_threads__a_distribution_steps_as_serial_and_as_the_scalar_envs() -> None:
    """Every env of a distribution in one batch loop, split over threads (3 threads over 7
    envs: uneven ranges): through three days each (the later ones drawn at autoreset, each
    with its own hospital), threads=2 and 3 equal serial bit for bit, and every env equals the
    scalar env seeded s + i (observations with presence blocks, rewards, ends, final scores)."""
    n, seed = 7, 12
    venvs = [HospitalEDVectorEnv(n, scenario=WIDE, threads=k) for k in (None, 2, 3)]
    scalars = [gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=WIDE) for _ in range(n)]
    firsts = [venv.reset(seed=seed)[0] for venv in venvs]
    for i, env in enumerate(scalars):
        o, _ = env.reset(seed=seed + i)
        assert all(np.array_equal(o[k], first[k][i]) for first in firsts for k in o)
    rng = np.random.default_rng(3)
    days = np.ones(n, np.int64)
    scores: list[float] = []
    for _ in range(240):
        actions = _masked_random(venvs[0].action_masks(), rng)
        results = [venv.step(actions) for venv in venvs]
        serial, *threaded = results
        for other, venv in zip(threaded, venvs[1:]):
            for got, want in zip(other[:4], serial[:4]):
                if isinstance(want, dict):
                    assert all(np.array_equal(got[k], want[k]) for k in want)
                else:
                    np.testing.assert_array_equal(got, want)
            for mine, theirs in zip(venvs[0]._batch.state, venv._batch.state):
                np.testing.assert_array_equal(mine, theirs)
        obs, rewards, term, trunc, info = serial
        for i, env in enumerate(scalars):
            o, r, te, tr, _ = env.step(int(actions[i]))
            assert (r, te, tr) == (rewards[i], term[i], trunc[i])
            if te or tr:
                final = info["final_obs"][i]
                assert all(np.array_equal(o[k], final[k]) for k in o), "the ended day's last observation"
                score = env.unwrapped.hospital.score()
                assert info["final_info"]["score"][i] == score
                scores.append(score)
                o, _ = env.reset()
                days[i] += 1
            assert all(np.array_equal(o[k], obs[k][i]) for k in o)
            assert venvs[0]._batch.row_scenario(i) == env.unwrapped.hospital.scenario
    assert (days >= 3).all(), "every env ran at least three days (two autoresets)"
    assert len({round(s, 6) for s in scores}) > 1
    drawn = {venvs[0]._batch.row_scenario(i).general_beds for i in range(n)}
    assert len(drawn) > 1, "the envs' hospitals differ: rows with different parameters in one call"
    for venv in venvs:
        venv.close()


def test_vector__a_distribution_with_a_user_day_generator_is_the_scalar_env() -> None:
    """A user's day generator (Python, so every day starts from Python) under a distribution:
    each env's drawn hospital is written into its row of the parameter table before its day;
    through autoresets env i equals the scalar env seeded s + i."""

    def wrapped(scenario: Scenario, rng: np.random.Generator):
        return generate_day(scenario, rng)  # the built-in model, run as a user's generator

    n, seed = 3, 5
    venv = HospitalEDVectorEnv(n, scenario=WIDE, day_generator=wrapped, max_cycles=30, threads=2)
    scalars = [gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=WIDE, day_generator=wrapped, max_cycles=30)
               for _ in range(n)]  # fmt: skip
    obs, _ = venv.reset(seed=seed)
    singles = [env.reset(seed=seed + i)[0] for i, env in enumerate(scalars)]
    rng = np.random.default_rng(1)
    ended = 0
    for _ in range(75):
        for i in range(n):
            assert all(np.array_equal(singles[i][k], obs[k][i]) for k in obs)
            assert venv._batch.row_scenario(i) == scalars[i].unwrapped.hospital.scenario
        actions = _masked_random(venv.action_masks(), rng)
        obs, rewards, term, trunc, _ = venv.step(actions)
        for i, env in enumerate(scalars):
            singles[i], r, te, tr, _ = env.step(int(actions[i]))
            assert (r, te, tr) == (rewards[i], term[i], trunc[i])
            if te or tr:
                singles[i], _ = env.reset()
                ended += 1
    assert ended >= 2 * n
    venv.close()


def test_marl_vector__takes_a_distribution() -> None:
    venv = HospitalMARLVectorEnv(2, scenario="validation")
    obs, _ = venv.reset(seed=7)
    par = hospital_marl.parallel_env(scenario="validation")
    pobs, _ = par.reset(seed=8)
    for role in hospital_marl.ROLES:
        assert np.array_equal(obs[role]["observation"][1], pobs[role]["observation"])
        assert np.array_equal(obs[role]["action_mask"][1], pobs[role]["action_mask"])
        assert venv.single_observation_spaces[role]["observation"].contains(obs[role]["observation"][1])
    np.testing.assert_array_equal(venv.state()[1], par.state())


def test_marl_vector_threads__a_distribution_steps_as_the_parallel_envs() -> None:
    """The joint batch loop (three role actions per env) over a distribution, on two threads:
    env i equals the parallel env seeded s + i through autoresets (rewards by role, ends,
    observations, masks and the global state of each env's own drawn hospital)."""
    n, seed, ticks = 5, 21, 25  # short shifts: several days each
    venv = HospitalMARLVectorEnv(n, scenario=WIDE, reward_mode="role", max_cycles=ticks, threads=2)
    scalars = [
        hospital_marl.parallel_env(scenario=WIDE, reward_mode="role", max_cycles=ticks) for _ in range(n)
    ]
    obs, _ = venv.reset(seed=seed)
    single = [env.reset(seed=seed + i)[0] for i, env in enumerate(scalars)]
    rng = np.random.default_rng(8)
    days = np.ones(n, np.int64)
    for _ in range(3 * ticks + 2):
        for i, env in enumerate(scalars):
            for role in hospital_marl.ROLES:
                np.testing.assert_array_equal(obs[role]["observation"][i], single[i][role]["observation"])
                np.testing.assert_array_equal(obs[role]["action_mask"][i], single[i][role]["action_mask"])
            np.testing.assert_array_equal(venv.state()[i], env.state())
        actions = {
            role: _masked_random(obs[role]["action_mask"].astype(bool), rng) for role in hospital_marl.ROLES
        }
        obs, rewards, terminations, truncations, _ = venv.step(actions)
        for i, env in enumerate(scalars):
            s_obs, s_rewards, s_term, s_trunc, _ = env.step(
                {r: int(actions[r][i]) for r in hospital_marl.ROLES}
            )
            for role in hospital_marl.ROLES:
                assert rewards[role][i] == s_rewards[role]
                assert (terminations[role][i], truncations[role][i]) == (s_term[role], s_trunc[role])
            if any(s_term.values()) or any(s_trunc.values()):
                single[i] = env.reset()[0]
                days[i] += 1
            else:
                single[i] = s_obs
    assert (days >= 4).all()
    assert len({venv._batch.row_scenario(i).general_beds for i in range(n)}) > 1
    venv.close()


def test_service_profile__validated_and_mapped_to_ticks() -> None:
    s = Scenario(name="staffed", service_profile=(0.5, 1.0))
    speeds = s.service_speeds()
    assert speeds[:50] == [0.5] * 50 and speeds[50:] == [1.0] * 50
    assert Scenario(name="full").service_speeds() == [1.0] * 100
    for bad in ((0.0,), (1.5,), (0.5, -1.0)):
        with pytest.raises(ValueError, match="service_profile"):
            Scenario(name="bad", service_profile=bad)


def _treatment_ticks(scenario: Scenario, seed: int) -> int:
    """Ticks until the first admitted patient goes home (admit the queue head, then wait)."""
    h = Hospital(scenario)
    h.reset(seed)
    while not h.queue:
        h.tick()
    pid = h.queue[0]
    h.act_flat(1)  # admit waiting patient [0] to a general bed
    ticks = 0
    while h.location[pid] != DISCHARGED and not h.done:
        h.tick()
        ticks += 1
    assert h.location[pid] == DISCHARGED
    return ticks


def test_service_speed__slows_treatment_by_its_inverse() -> None:
    """At service speed q a general-bed treatment of r ticks takes about r / q ticks."""
    calm = Scenario(name="calm", arrival_rate=0.3, severity_mix=(1.0, 0.0, 0.0, 0.0, 0.0))
    slow = calm.with_overrides(name="calm_slow", service_profile=(0.5,))
    full = [_treatment_ticks(calm, seed) for seed in range(40)]
    half = [_treatment_ticks(slow, seed) for seed in range(40)]
    ratio = np.mean(half) / np.mean(full)
    assert 1.6 < ratio < 2.4, ratio


def test_night_service__drawn_inside_its_range() -> None:
    train, test = DISTRIBUTIONS["train"], DISTRIBUTIONS["test"]
    for seed in range(100):
        for dist, (lo, hi) in ((train, (0.75, 1.0)), (test, (0.5, 0.75))):
            s = dist.sample(seed)
            night = min(s.service_speeds())
            assert lo <= night <= hi
            assert s.service_speeds()[50] == 1.0  # noon: day staffing
