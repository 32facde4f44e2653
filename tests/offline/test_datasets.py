"""Minari datasets of the hospital (issue #46, item 1): the batched behaviours are the package's
rules, the logged probabilities are the behaviour's, a dataset replays in the env it recovers, and a
dataset made for something else, or damaged, is refused."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

minari = pytest.importorskip("minari")

from hospital_marl.core.actions import ROLE_FLAT, ROLES  # noqa: E402
from policies.baselines import FifoSeverityPolicy, GreedyPolicy  # noqa: E402
from policies.heuristic import HeuristicPolicy, team_heuristic_action  # noqa: E402
from training.offline import datasets as ds  # noqa: E402
from training.offline.behaviours import (  # noqa: E402
    BehaviourPolicy,
    flat_rule_actions,
    parse_behaviour,
    state_vector,
    team_rule_actions,
)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    return tmp_path


def _states(n_steps: int = 60, num_envs: int = 16, scenario: str = "surge"):
    """(obs dicts, states, flat masks) along masked-random play: busy wards, varied masks."""
    env = gym.make_vec("hospital_marl/HospitalED-v0", num_envs=num_envs, scenario=scenario)
    obs, info = env.reset(seed=11)
    rng = np.random.default_rng(0)
    uniform = parse_behaviour("masked_random")
    out = []
    for _ in range(n_steps):
        out.append((obs, state_vector(obs), info["action_mask"]))
        actions, _ = uniform.sample(out[-1][1], out[-1][2], rng)
        obs, _, _, _, info = env.step(actions)
    env.close()
    return out


def test_batched_rules_are_the_package_policies() -> None:
    policies = {
        "greedy": GreedyPolicy(),
        "fifo_severity": FifoSeverityPolicy(),
        "heuristic": HeuristicPolicy(),
    }
    checked = 0
    for obs, states, masks in _states()[::3]:
        for rule, policy in policies.items():
            batched = flat_rule_actions(rule, states, masks)
            for e in range(len(states)):
                assert batched[e] == policy.act({k: v[e] for k, v in obs.items()}, masks[e]), rule
                checked += 1
    assert checked > 500


def test_team_rule_is_each_roles_rule_on_its_own_view() -> None:
    from hospital_marl.envs.observations import ROLE_INDEX

    for _, states, masks in _states(30)[::5]:
        team = team_rule_actions(states, masks)
        for e in range(len(states)):
            for r, role in enumerate(ROLES):
                role_mask = masks[e][list(ROLE_FLAT[role])]
                flat = team_heuristic_action(role, states[e][ROLE_INDEX[role]], role_mask)
                assert team[e, r] == ROLE_FLAT[role].index(flat)


def test_logged_probability_is_the_mixture() -> None:
    _, states, masks = _states(20)[-1]
    eps = 0.3
    b = parse_behaviour(f"heuristic:eps={eps}")
    rule = flat_rule_actions("heuristic", states, masks)
    probs = b.probabilities(states, masks)
    valid = masks.sum(axis=1)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    np.testing.assert_allclose(probs[np.arange(len(rule)), rule], 1 - eps + eps / valid)
    assert (probs[~masks] == 0).all()  # masked_random never puts weight on an invalid action
    actions, p = b.sample(states, masks, np.random.default_rng(1))
    np.testing.assert_allclose(p, probs[np.arange(len(actions)), actions])
    mix = parse_behaviour("mix:greedy=1,random=3")
    assert mix.components == (("greedy", 0.25), ("random", 0.75))
    np.testing.assert_allclose(mix.probabilities(states, masks).min(), 0.75 / 39)


@pytest.mark.parametrize(
    "spec", ["nonsense", "heuristic:eps=2", "mix:heuristic=1,planner=1", "heuristic:x=1"]
)
def test_bad_behaviour_is_a_clear_error(spec: str) -> None:
    with pytest.raises(ValueError, match="behaviour"):
        parse_behaviour(spec)


def test_dataset_replays_in_the_recovered_env(store: Path) -> None:
    b = parse_behaviour("fifo_severity:eps=0.2")
    _, rec = ds.create(b, "surge", episodes=6, seed=500, graded_score=12.5, command="pytest", num_envs=3)
    name = "hospital_marl/surge-flat-fifo_severity_eps20-v0"
    loaded = minari.load_dataset(name)
    assert loaded.total_episodes == 6 and loaded.total_steps == rec.steps
    meta = loaded.storage.metadata["hospital_marl"]
    assert meta["behaviour"] == "fifo_severity:eps=0.2" and meta["graded_score"] == 12.5
    assert meta["command"] == "pytest" and meta["scenario"] == "surge"
    assert meta["observation_format"] == "dict_1d" and meta["package_version"]
    env = loaded.recover_environment()
    assert env.observation_space == loaded.observation_space and env.action_space == gym.spaces.Discrete(39)
    replayed = 0
    for ep in loaded.iterate_episodes():
        seed = loaded.storage.get_episode_metadata([ep.id]).__next__().get("seed")
        if seed is None:
            continue
        obs, info = env.reset(seed=seed)
        for t, action in enumerate(ep.actions):
            for key, value in obs.items():
                np.testing.assert_array_equal(ep.observations[key][t], value)
            np.testing.assert_array_equal(ep.infos["action_mask"][t], info["action_mask"])
            assert info["action_mask"][action]  # eps-noise and the rule pick valid actions
            obs, reward, terminated, truncated, info = env.step(int(action))
            assert reward == ep.rewards[t]
            assert (terminated, truncated) == (ep.terminations[t], ep.truncations[t])
        replayed += 1
    assert replayed == 3  # the first round of each env starts from a known seed


def test_team_dataset_logs_joint_probabilities(store: Path) -> None:
    b = parse_behaviour("masked_random", "team")
    ds.create(b, "normal_day", episodes=2, seed=5, num_envs=2)
    loaded = ds.load("hospital_marl/normal_day-team-masked_random-v0")
    ep = next(loaded.iterate_episodes())
    masks = ep.infos["action_mask"]
    assert ep.actions.shape[1] == 3 and masks.shape[1] == 41
    sizes = np.cumsum([0, *(len(ROLE_FLAT[r]) for r in ROLES)])
    expected = np.prod([1.0 / masks[:-1, a:z].sum(axis=1) for a, z in itertools.pairwise(sizes)], axis=0)
    np.testing.assert_allclose(ep.infos["behaviour_prob"][:-1], expected)
    assert np.isnan(ep.infos["behaviour_prob"][-1])


def _rewrite_meta(store: Path, name: str, **changes: object) -> None:
    path = store / name / "data" / "metadata.json"
    meta = json.loads(path.read_text())
    meta["hospital_marl"].update(changes)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize(
    ("change", "load_kwargs", "named"),
    [
        ({"package_version": "0.0.1"}, {}, "package_version '0.0.1'"),
        ({}, {"scenario": "normal_day"}, "scenario 'surge'"),
        ({"observation_format": "dict"}, {}, "observation_format 'dict'"),
    ],
)
def test_mismatch_is_refused_in_one_line(store: Path, change: dict, load_kwargs: dict, named: str) -> None:
    ds.create(parse_behaviour("greedy"), "surge", episodes=1, seed=1, num_envs=1)
    name = "hospital_marl/surge-flat-greedy-v0"
    _rewrite_meta(store, name, **change)
    with pytest.raises(ds.DatasetMismatchError, match=named) as err:
        ds.load(name, **load_kwargs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_corrupted_file_is_an_error(store: Path, damage: str) -> None:
    ds.create(parse_behaviour("greedy"), "surge", episodes=2, seed=1, num_envs=2)
    name = "hospital_marl/surge-flat-greedy-v0"
    path = store / name / "data" / "main_data.hdf5"
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    with pytest.raises(ds.DatasetCorruptError):
        ds.load(name)


def test_behaviour_policy_plays_the_behaviour() -> None:
    policy = BehaviourPolicy(parse_behaviour("heuristic"))
    obs, _, masks = _states(5, num_envs=2)[-1]
    one = {k: v[0] for k, v in obs.items()}
    assert policy.act(one, masks[0]) == HeuristicPolicy().act(one, masks[0])


def test_cli_creates_lists_and_refuses(store: Path, capsys: pytest.CaptureFixture) -> None:
    from hospital_marl_cli import main

    args = ["datasets", "create", "--dir", str(store), "--behaviour", "greedy", "--scenario", "night_shift"]
    args += ["--episodes", "2", "--num-envs", "2", "--grade-episodes", "1", "--json"]
    assert main(["-q", *args]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made[0]["id"] == "hospital_marl/night_shift-flat-greedy-v0" and made[0]["episodes"] == 2
    assert isinstance(made[0]["graded_score"], float)
    assert main(["-q", *args]) == 2  # exists: refused, nothing replaced
    assert "exists" in capsys.readouterr().err
    assert main(["datasets", "list", "--dir", str(store)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [row["id"] for row in listed] == ["hospital_marl/night_shift-flat-greedy-v0"]
    bad = ["datasets", "create", "--dir", str(store), "--behaviour", "bogus", "--grade-episodes", "0"]
    assert main(bad) == 2
    assert "unknown behaviour" in capsys.readouterr().err
