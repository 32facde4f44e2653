"""``train benchmarl --warm-start team_heuristic``: the demonstrations are training days (never the
grader's), cloning makes BenchMARL's own actors play the rules, and a tiny warm-started run saves,
loads and grades on the team track like any other run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("benchmarl", reason="benchmarl not installed: pip install 'hospital-marl[marl]'")

import hospital_marl
from grading import grade
from grading.common import episode_seed
from hospital_marl.core.actions import ROLES
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS
from policies import load
from policies.benchmarl import load_benchmarl_policy
from policies.marl import OBS_CLIP, STATE_SCALES
from tests.marl.test_stats import marl_stats
from training.benchmarl.env import split_rows
from training.benchmarl.train import HELDOUT_SEED, VALIDATION_SEED, Args, train
from training.benchmarl.warmstart import clone_into, collect_demonstrations, collect_planner_demonstrations

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("marl")]

GRADER_EPISODES = 500
"""Grader episode indices checked per scenario and base seed (far more than any table grades)."""


def _args(**kw: object) -> Args:
    base = dict(algorithm="mappo", all_scenarios=True, n_envs=5, steps_per_batch=40, minibatch_size=100,
                epochs=1, hidden=(64, 64), seed=4, progress=False)  # fmt: skip
    return Args(**{**base, **kw})  # type: ignore[arg-type]


def _grader_days() -> set[int]:
    """Every validation and held-out day's seed the grader can play (see GRADER_EPISODES)."""
    return {
        episode_seed(base, s, i)
        for base in (VALIDATION_SEED, HELDOUT_SEED)
        for s in BUILTIN_SCENARIOS
        for i in range(GRADER_EPISODES)
    }


@pytest.fixture(scope="module")
def demos():
    return collect_demonstrations(_args(), days=40)


def test_demonstrations_are_training_days_never_grader_days(demos) -> None:
    args = _args()
    grader = _grader_days()
    assert demos.days >= args.n_envs and len(demos.day_seeds) > demos.days  # the cut-off days listed too
    assert not grader & set(demos.day_seeds)
    # the listed seeds are the days played: each env's first day is the scalar env's day of its seed
    scenarios = [
        s for s, n in zip(BUILTIN_SCENARIOS, split_rows(args.n_envs, BUILTIN_SCENARIOS)) for _ in range(n)
    ]
    firsts = iter(demos.day_seeds)
    for row, scenario in enumerate(scenarios):
        seed = next(firsts)
        while seed != args.seed + row:  # the row's later days, then the next row's first
            seed = next(firsts)
        env = hospital_marl.parallel_env(scenario=scenario)
        env.reset(seed=seed)
        expected = np.clip(env.state() / STATE_SCALES, 0.0, OBS_CLIP).astype(
            np.float32
        )  # as the critic reads it
        np.testing.assert_array_equal(demos.state[row].numpy(), expected)


def test_demonstrations_follow_the_rules_and_the_masks(demos) -> None:
    assert len(demos) > 0
    for role in ROLES:
        mask, action = demos.masks[role], demos.actions[role]
        assert mask.gather(1, action.unsqueeze(1)).all()  # the rules only choose allowed actions
        assert (action != 0).any()  # and do act (not a no-op-only demonstration)
        assert demos.returns[role].shape == (len(demos),)


def test_cloned_actors_play_the_rules_on_most_demonstration_states(demos, tmp_path: Path) -> None:
    """The rules are a deterministic function of each role's observation, so cloning must reach a
    large majority: at least 80 %, and at least half of the errors of the best constant guess
    (the role's most frequent action) removed. Masked actions are never the clone's choice."""
    from benchmarl.experiment import Experiment

    from training.benchmarl.task import ALL, make_task
    from training.benchmarl.train import algorithm_config, experiment_config, model_config
    from training.benchmarl.warmstart import actor_logits, masked_logits

    args = _args(save=str(tmp_path / "run"))
    experiment = Experiment(
        task=make_task(ALL, "team", args.reward_scale), algorithm_config=algorithm_config(args),
        model_config=model_config(args), critic_model_config=model_config(args), seed=args.seed,
        config=experiment_config(args, tmp_path),
    )  # fmt: skip
    report = clone_into(experiment, demos, epochs=30, minibatch=64)
    for role in ROLES:
        majority = np.bincount(demos.actions[role].numpy()).max() / len(demos)
        assert report.agreement[role] >= max(0.8, majority + 0.5 * (1 - majority)), role
        logits = masked_logits(actor_logits(experiment, role, demos.observations[role]), demos.masks[role])
        assert demos.masks[role].gather(1, logits.argmax(-1, keepdim=True)).all()
        assert report.critic_rmse[role] < report.return_std[role]  # the critic learned some of the returns


def test_warm_started_run_saves_loads_and_grades(tmp_path: Path) -> None:
    calls: list[dict] = []

    def evaluate(policy, **kwargs):
        calls.append(kwargs)
        return grade(policy, **kwargs)

    args = _args(frames=400, eval_interval=200, eval_episodes=1, save=str(tmp_path / "warm"),
                 warm_start="team_heuristic", warm_start_days=10, warm_start_epochs=2)  # fmt: skip
    run_dir = train(args, evaluate=evaluate)
    meta = json.loads((run_dir / "benchmarl.json").read_text())
    assert [row["frames"] for row in json.loads((run_dir / "curve.json").read_text())] == [0, 200, 400]
    assert all(c["seed"] == VALIDATION_SEED for c in calls)
    assert meta["warm_start"]["from"] == "team_heuristic" and meta["warm_start"]["days"] >= 5
    assert set(meta["actors"]) == {"best", "final", "clone"}
    assert meta["audit"] == {"masked_actions_taken": 0, "audited_actions": 1200}
    assert "--warm-start team_heuristic" in meta["command"]
    policy = load(str(run_dir))
    assert policy.tracks == ("team",)
    report = grade(policy, episodes=1, seed=HELDOUT_SEED, scenarios=["mass_casualty"], track="team")
    assert report["invalid_action_rate"] == 0.0
    # published beside the other runs: its own table row, the clone kept and graded as one more row
    stats = marl_stats()
    assert stats.row_name(meta) == "mappo_warm" and "mappo_clone" in stats.ORDER
    (out,) = stats.publish(run_dir.parent, dest=tmp_path / "published", only=(run_dir.name,))
    assert set(json.loads((out / "benchmarl.json").read_text())["actors"]) == {"best", "clone"}
    days = dict(episodes=1, seed=HELDOUT_SEED, scenarios=["surge"], track="team")
    clone, published = (load_benchmarl_policy(d, which="clone") for d in (run_dir, out))
    assert (
        grade(published, **days)["scenarios"]["surge"]["episode_scores"]
        == (grade(clone, **days)["scenarios"]["surge"]["episode_scores"])
    )


def test_bad_warm_start_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="warm_start must be"):
        Args(warm_start="planner")
    with pytest.raises(ValueError, match="mappo or ippo"):
        Args(algorithm="qmix", warm_start="team_heuristic")
    with pytest.raises(ValueError, match="warm_start_days"):
        Args(warm_start="team_heuristic", warm_start_days=0)
    with pytest.raises(ValueError, match="--reward env"):
        Args(warm_start="team_planner", reward="score")


# ------------------------------------------------------------- team_planner
def _tiny_planner():
    from policies.planner import TeamPlannerPolicy

    return TeamPlannerPolicy(rollouts=2, first=1, horizon=2)  # a small budget: these tests check plumbing


@pytest.fixture(scope="module")
def planner_demos():
    return collect_planner_demonstrations(_args(), days=7, planner=_tiny_planner())


def test_planner_demonstrations_are_training_days_never_grader_days(planner_demos) -> None:
    args = _args()
    grader = _grader_days()
    assert planner_demos.days == 7 and len(planner_demos.day_seeds) == 7
    assert not grader & set(planner_demos.day_seeds)
    # rows 0 and 1 play two days (7 over 5 rows), from the training seed stream: seed + row first
    assert planner_demos.day_seeds[0] == args.seed and planner_demos.day_seeds[2] == args.seed + 1
    assert planner_demos.day_seeds[4:] == [args.seed + 2, args.seed + 3, args.seed + 4]


def test_planner_demonstrations_are_what_the_training_env_feeds(planner_demos) -> None:
    """Where the AEC turn and the batched env coincide (the triage's turn is the tick's start),
    the encoded observation, mask and critic state equal :class:`HospitalTorchEnv`'s tensors for the
    same day; the other roles' observations are the AEC env's at their own turn, encoded the same way."""
    from training.benchmarl.env import HospitalTorchEnv

    args = _args()
    td = HospitalTorchEnv(num_envs=args.n_envs, scenarios=args.scenarios, seed=args.seed).reset()
    # the first tick of each row's first day: rows 0, 1 played two days each
    starts = [0, 2, 4, 5, 6]
    # the triage's view ends with the clock (SPEC: ticks elapsed), 0 at a day's first tick only
    day_start = np.flatnonzero(planner_demos.observations["triage"][:, -1].numpy() == 0)
    assert len(day_start) == 7 and day_start[0] == 0
    for row, k in enumerate(starts):
        i = day_start[k]
        np.testing.assert_array_equal(planner_demos.state[i].numpy(), td.get("state")[row].numpy())
        np.testing.assert_array_equal(
            planner_demos.observations["triage"][i].numpy(), td.get(("triage", "observation"))[row, 0].numpy()
        )
        np.testing.assert_array_equal(
            planner_demos.masks["triage"][i].numpy(), td.get(("triage", "action_mask"))[row, 0].numpy()
        )
    for role in ROLES:
        obs = planner_demos.observations[role].numpy()
        assert obs.dtype == np.float32 and obs.min() >= 0.0 and obs.max() <= OBS_CLIP
        mask, action = planner_demos.masks[role], planner_demos.actions[role]
        assert mask.gather(1, action.unsqueeze(1)).all()  # the planner only chooses allowed actions
        assert planner_demos.returns[role].shape == (len(planner_demos),)


def test_planner_demonstrations_replay_as_the_grader_plays(planner_demos) -> None:
    """The recorded actions, replayed on the AEC env of the same day, are the planner's graded
    episode: the same planner through :func:`grading.grader.run_team_episode` takes them too."""
    from grading.grader import run_team_episode
    from hospital_marl.core.scenarios import get_scenario

    taken: list[int] = []

    class Recording:
        tracks = ("team",)

        def __init__(self) -> None:
            self.inner = _tiny_planner()

        def reset(self, seed=None, hospital=None) -> None:
            self.inner.reset(seed=seed, hospital=hospital)

        def act_role(self, role, observation, mask):
            action = self.inner.act_role(role, observation, mask)
            taken.append(int(action))
            return action

    run_team_episode(Recording(), get_scenario(BUILTIN_SCENARIOS[0]), planner_demos.day_seeds[0])
    first_day = [int(planner_demos.actions[role][t]) for t in range(len(taken) // 3) for role in ROLES]
    assert taken == first_day


def test_planner_warm_started_run_records_its_source(tmp_path: Path) -> None:
    args = _args(frames=200, eval_interval=200, eval_episodes=1, save=str(tmp_path / "plan"),
                 warm_start="team_planner", warm_start_days=5, warm_start_epochs=1)  # fmt: skip
    run_dir = train(args, evaluate=grade)
    meta = json.loads((run_dir / "benchmarl.json").read_text())
    assert meta["warm_start"]["from"] == "team_planner" and meta["warm_start"]["days"] == 5
    assert "--warm-start team_planner" in meta["command"]
    assert marl_stats().row_name(meta) == "mappo_plan_warm"
    assert load(str(run_dir)).tracks == ("team",)
