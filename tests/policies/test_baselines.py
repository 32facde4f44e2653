"""Baseline policies: masks respected, the protocol satisfied, loading by name."""

from __future__ import annotations

import numpy as np
import pytest

import policies
from grading import run_flat_episode, run_team_episode
from hospital_marl import BUILTIN_SCENARIOS, get_scenario
from hospital_marl.core.actions import FLAT_OF, Kind
from hospital_marl.envs.composed import HospitalEDEnv
from policies import GreedyPolicy, HeuristicPolicy, Policy


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
@pytest.mark.parametrize("name", ["masked_random", "greedy", "fifo_severity", "heuristic"])
def test_masked_policies__never_choose_an_invalid_flat_action(name: str, scenario: str) -> None:
    for seed in range(2):
        result = run_flat_episode(policies.load(name), get_scenario(scenario), seed)
        assert result.counts["invalid_actions"] == 0
        assert result.counts["actions"] == result.counts["ticks"]


@pytest.mark.parametrize("scenario", BUILTIN_SCENARIOS)
@pytest.mark.parametrize("name", ["masked_random", "team_heuristic"])
def test_masked_policies__never_choose_an_invalid_role_action(name: str, scenario: str) -> None:
    result = run_team_episode(policies.load(name), get_scenario(scenario), 0)
    assert result.counts["invalid_actions"] == 0
    assert result.counts["actions"] == 3 * result.counts["ticks"]


def test_random__ignores_the_mask_like_the_original() -> None:
    result = run_flat_episode(policies.load("random"), get_scenario("normal_day"), 0)
    assert result.counts["invalid_actions"] > 0


@pytest.mark.parametrize(
    "name", ["random", "masked_random", "greedy", "fifo_severity", "heuristic", "team_heuristic"]
)
def test_every_baseline__satisfies_the_policy_protocol(name: str) -> None:
    policy = policies.load(name)
    assert isinstance(policy, Policy)
    assert policy.name == name
    assert set(policy.tracks) <= {"flat", "team"}


def test_load__unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"valid names: .*heuristic.*masked_random"):
        policies.load("no_such_policy")


def test_register__refuses_what_load_could_not_use_and_silent_overwrites(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(policies, "_REGISTRY", dict(policies._REGISTRY))  # leave the real one alone
    with pytest.raises(ValueError, match="non-empty string"):
        policies.register("", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="without ':'"):
        policies.register("a:b", 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="factory must be callable"):
        policies.register("mine", 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="factory must be callable"):
        policies.register("heuristic", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already registered"):
        policies.register("heuristic", GreedyPolicy)
    assert isinstance(policies.load("heuristic"), HeuristicPolicy)
    policies.register("mine", GreedyPolicy)
    assert isinstance(policies.load("mine"), GreedyPolicy)
    policies.register("heuristic", GreedyPolicy, overwrite=True)
    assert isinstance(policies.load("heuristic"), GreedyPolicy)


def test_masked_random__is_reproducible_from_its_seed() -> None:
    env = HospitalEDEnv(scenario="surge")
    obs, info = next((o, i) for o, i in (env.reset(seed=s) for s in range(100)) if i["action_mask"].sum() > 1)
    a, b = policies.load("masked_random"), policies.load("masked_random")
    a.reset(seed=5)
    b.reset(seed=5)
    picks_a = [a.act(obs, info["action_mask"]) for _ in range(20)]
    picks_b = [b.act(obs, info["action_mask"]) for _ in range(20)]
    assert picks_a == picks_b
    assert len(set(picks_a)) > 1


def _state_with(scenario: str, seed: int, condition) -> tuple[HospitalEDEnv, dict, dict]:
    """Play the heuristic until ``condition(env)`` holds; return that state."""
    env = HospitalEDEnv(scenario=scenario)
    obs, info = env.reset(seed=seed)
    policy = HeuristicPolicy()
    policy.reset(seed=seed)
    while not condition(env):
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info["action_mask"]))
        assert not (terminated or truncated), "condition never reached"
    return env, obs, info


def test_heuristic__sends_a_critical_patient_to_an_icu_bed_when_one_is_free() -> None:
    def critical_waiting_and_icu_free(env: HospitalEDEnv) -> bool:
        h = env.hospital
        return -1 in h.icu and any(h.severity[p] >= 4 for p in h.queue[:10])

    env, obs, info = _state_with("surge", 0, critical_waiting_and_icu_free)
    action = HeuristicPolicy().act(obs, info["action_mask"])
    h = env.hospital
    most_severe = max(
        range(min(10, len(h.queue))), key=lambda i: (h.severity[h.queue[i]], h.wait[h.queue[i]], -i)
    )
    if not any(h.vent_of[p] == -1 and h.needs_ventilator(p) for p in h.icu if p != -1):
        assert action == FLAT_OF[(Kind.ADMIT_ICU, most_severe)]


@pytest.mark.parametrize("scenario", ["night_shift", "ventilator_crisis"])
def test_heuristic__never_puts_a_ventilator_on_a_patient_who_does_not_need_it(scenario: str) -> None:
    ventilate = {FLAT_OF[(Kind.VENTILATE, v)] for v in range(3)}
    for seed in range(3):
        env = HospitalEDEnv(scenario=scenario)
        obs, info = env.reset(seed=seed)
        policy = HeuristicPolicy()
        done = False
        while not done:
            action = policy.act(obs, info["action_mask"])
            if action in ventilate:
                target = env.hospital.ventilator_target()
                assert env.hospital.needs_ventilator(target)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated


def test_heuristic__never_early_discharges_without_pressure() -> None:
    early = {FLAT_OF[(Kind.EARLY_DISCHARGE, k)] for k in range(5)}
    env = HospitalEDEnv(scenario="night_shift")
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        policy = HeuristicPolicy()
        done = False
        while not done:
            action = policy.act(obs, info["action_mask"])
            if action in early:
                assert -1 not in env.hospital.general  # only when the general ward is full
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        assert env.hospital.counters.early_discharges == 0


def test_team_heuristic__role_actions_match_the_flat_rules_of_each_role() -> None:
    from hospital_marl.envs.aec import HospitalAECEnv
    from policies.heuristic import ROLE_RULES

    env = HospitalAECEnv(scenario="surge")
    env.reset(seed=1)
    policy = policies.load("team_heuristic")
    for agent in env.agent_iter(60):
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        role_action = policy.act_role(agent, obs["observation"], obs["action_mask"])
        blocks = {k: np.asarray(v) for k, v in env._builder.composed().items()}
        flat, _ = ROLE_RULES[agent](blocks, np.array(env.hospital.flat_mask()))
        assert hospital_role_flat(agent, role_action) == flat
        env.step(role_action)


def hospital_role_flat(role: str, role_action: int) -> int:
    from hospital_marl import role_to_flat

    return role_to_flat(role, role_action)
