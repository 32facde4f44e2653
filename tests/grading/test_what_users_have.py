"""grade() takes what users have: Policies, act() objects, callables, SB3 models, role mappings."""

from __future__ import annotations

import numpy as np
import pytest

from grading import grade
from hospital_marl.core.actions import ROLES
from policies import HeuristicPolicy, TeamHeuristicPolicy

DAYS = {"episodes": 2, "seed": 0, "scenarios": ["surge", "night_shift"]}


def last_valid(observation: object, action_mask: np.ndarray) -> int:
    return int(np.flatnonzero(action_mask)[-1])


def _scores(report: dict) -> dict:
    return {
        "scenario_scores": report["scenario_scores"],
        "counts": [s["counts"] for s in report["scenarios"].values()],
    }


@pytest.fixture(scope="module")
def heuristic_report() -> dict:
    return grade("heuristic", **DAYS)


@pytest.fixture(scope="module")
def team_heuristic_report() -> dict:
    return grade("team_heuristic", track="team", **DAYS)


def test_plain_callable__plays_the_days_a_policy_would(heuristic_report: dict) -> None:
    """The heuristic's act, handed over as a bare function, meets the same days with the same result."""
    report = grade(HeuristicPolicy().act, **DAYS)
    assert _scores(report) == _scores(heuristic_report)
    assert report["agent"] == "HeuristicPolicy.act"


def test_plain_callable__a_function_of_observation_and_mask() -> None:
    report = grade(last_valid, **DAYS)
    assert report["agent"] == "last_valid" and report["invalid_action_rate"] == 0.0


class Seeded:
    """A user's object with act, reset(seed) and a name: random among the valid actions."""

    name = "my_seeded"

    def __init__(self) -> None:
        self.seeds: list[int] = []
        self.rng = np.random.default_rng()

    def reset(self, seed: int | None = None) -> None:
        self.seeds.append(seed)
        self.rng = np.random.default_rng(seed)

    def act(self, observation: object, action_mask: np.ndarray) -> int:
        return int(self.rng.choice(np.flatnonzero(action_mask)))


def test_object_with_act_reset_and_name__is_reset_with_a_seed_per_episode_and_reproducible() -> None:
    first, second = Seeded(), Seeded()
    a, b = grade(first, **DAYS), grade(second, **DAYS)
    assert a["agent"] == "my_seeded" and _scores(a) == _scores(b)
    assert len(first.seeds) == 4 and len(set(first.seeds)) == 4 and first.seeds == second.seeds


def test_object_with_only_act__is_named_by_its_class() -> None:
    class LastValid:
        def act(self, observation: object, action_mask: np.ndarray) -> int:
            return last_valid(observation, action_mask)

    report = grade(LastValid(), **DAYS)
    assert report["agent"] == "LastValid" and report["invalid_action_rate"] == 0.0


def test_maskable_ppo_model__gets_the_masks_as_action_masks() -> None:
    """An untrained MaskablePPO picks among valid actions only if the grader passes the mask."""
    sb3_contrib = pytest.importorskip("sb3_contrib")
    from hospital_marl.envs.composed import HospitalEDEnv

    model = sb3_contrib.MaskablePPO("MultiInputPolicy", HospitalEDEnv(), seed=0, device="cpu")
    report = grade(model, episodes=1, seed=0, scenarios=["surge"])
    assert report["agent"] == "MaskablePPO"
    assert report["invalid_action_rate"] == 0.0 and report["scenarios"]["surge"]["counts"]["actions"] >= 50


def test_plain_sb3_model__plays_unmasked_as_it_was_trained() -> None:
    sb3 = pytest.importorskip("stable_baselines3")
    from hospital_marl.envs.composed import HospitalEDEnv

    model = sb3.PPO("MultiInputPolicy", HospitalEDEnv(), seed=0, device="cpu")
    report = grade(model, episodes=1, seed=0, scenarios=["surge"])
    assert report["agent"] == "PPO" and report["invalid_action_rate"] > 0.0


def test_team_object_with_act_role__plays_the_team_track(team_heuristic_report: dict) -> None:
    class MyTeam:
        def __init__(self) -> None:
            self.rules = TeamHeuristicPolicy()

        def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
            return self.rules.act_role(role, observation, action_mask)

    report = grade(MyTeam(), track="team", **DAYS)
    assert report["agent"] == "MyTeam" and _scores(report) == _scores(team_heuristic_report)


def test_team_mapping__role_to_callable(team_heuristic_report: dict) -> None:
    rules = TeamHeuristicPolicy()
    roles = {role: (lambda obs, mask, role=role: rules.act_role(role, obs, mask)) for role in ROLES}
    report = grade(roles, track="team", **DAYS)
    assert _scores(report) == _scores(team_heuristic_report)


def test_team_mapping__missing_a_role_names_it() -> None:
    with pytest.raises(TypeError, match="ventilator_officer"):
        grade({"triage": last_valid, "bed_manager": last_valid}, track="team", **DAYS)


@pytest.mark.parametrize(
    ("thing", "track", "expected"),
    [
        (42, "flat", "an object with act(observation, action_mask)"),
        (["not", "a", "policy"], "flat", "a callable f(observation, action_mask) -> int"),
        (last_valid, "team", "an object with act_role(role, observation, action_mask)"),
    ],
)
def test_anything_else__is_a_type_error_naming_what_was_expected(
    thing: object, track: str, expected: str
) -> None:
    with pytest.raises(TypeError, match=r"cannot grade a \w+ on the \w+ track: expected") as info:
        grade(thing, track=track, **DAYS)
    assert expected in str(info.value)
