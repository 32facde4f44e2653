"""``train benchmarl --warm-start team_planner --dagger-rounds N``: DAgger's days are fresh training
days (never the grader's), the planner's labels are a function of the state and the day and never
change the episode the student plays, the data set grows by each round's states, and a tiny DAgger
warm start trains, saves and gets its own table row."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("benchmarl", reason="benchmarl not installed: pip install 'hospital-marl[marl]'")

from grading import grade
from hospital_marl.core.actions import ROLES
from hospital_marl.envs.aec import HospitalAECEnv
from hospital_marl.envs.observations import ROLE_INDEX
from policies import load
from policies.base import policy_seed
from tests.marl.test_stats import marl_stats
from tests.marl.test_warmstart import _args, _grader_days, _tiny_planner
from training.benchmarl.env import encode_state, split_rows
from training.benchmarl.train import Args, train
from training.benchmarl.warmstart import (
    aggregate,
    collect_planner_demonstrations,
    dagger,
    days_per_row,
    label,
    training_day_seeds,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("marl")]


def _last_allowed(role: str, features: np.ndarray, mask: np.ndarray) -> int:
    """A deterministic student unlike the planner: the highest-numbered allowed action."""
    return int(np.flatnonzero(mask)[-1])


def _row_scenarios(args: Args) -> list[str]:
    return [s for s, n in zip(args.scenarios, split_rows(args.n_envs, args.scenarios)) for _ in range(n)]


@pytest.fixture(scope="module")
def rounds():
    """Round 0 (the planner's 5 days) and a DAgger round (the student's next 5 days)."""
    args = _args()
    first = collect_planner_demonstrations(args, days=5, planner=_tiny_planner())
    later = collect_planner_demonstrations(
        args, days=5, planner=_tiny_planner(), student=_last_allowed, beta=0.0, skip=days_per_row(5, 5)
    )
    return first, later


def test_dagger_days_are_the_rows_next_training_days_never_grader_days(rounds) -> None:
    args = _args()
    first, later = rounds
    both = training_day_seeds(args.seed, [2] * args.n_envs)  # each row's first two days, row by row
    assert first.day_seeds == both[0::2] and later.day_seeds == both[1::2]
    assert not set(first.day_seeds) & set(later.day_seeds)
    assert not _grader_days() & set(later.day_seeds)


def test_the_student_plays_and_the_planner_labels(rounds) -> None:
    _, later = rounds
    assert later.student_actions is not None
    for role in ROLES:
        mask, label_, played = later.masks[role], later.actions[role], later.student_actions[role]
        assert mask.gather(1, label_.unsqueeze(1)).all() and mask.gather(1, played.unsqueeze(1)).all()
    # the student is not the planner: on some turns the label is another action than the one played
    assert any((later.actions[r] != later.student_actions[r]).any() for r in ROLES)


def test_labelling_does_not_change_the_episode(rounds) -> None:
    """The student alone (no planner anywhere) on the same days visits exactly the states recorded
    while the planner labelled every turn, and takes the same actions."""
    args = _args()
    _, later = rounds
    states, played = [], {role: [] for role in ROLES}
    for scenario, day in zip(_row_scenarios(args), later.day_seeds):
        env = HospitalAECEnv(scenario=scenario)
        env.reset(seed=day)
        done = False
        while not done:
            for role in ROLES:
                encoded = encode_state(env.state())
                if role == ROLES[0]:
                    states.append(encoded)
                action = _last_allowed(role, encoded[ROLE_INDEX[role]], env.observe(role)["action_mask"])
                played[role].append(action)
                env.step(action)
            done = any(env.terminations.values()) or any(env.truncations.values())
    np.testing.assert_array_equal(np.stack(states), later.state.numpy())
    for role in ROLES:
        assert played[role] == later.student_actions[role].tolist()


def test_a_label_is_a_function_of_the_state_and_the_day(rounds) -> None:
    """Mid-day, a planner that never played this day (its generator untouched by the turns before)
    labels the reconstructed state as the recorded label: the earlier turns' planning leaves no trace."""
    args = _args()
    _, later = rounds
    day, scenario, tick = later.day_seeds[0], _row_scenarios(args)[0], 37
    env = HospitalAECEnv(scenario=scenario)
    env.reset(seed=day)
    for t in range(tick):
        for role in ROLES:
            env.step(int(later.student_actions[role][t]))
    planner = _tiny_planner()
    for role in ROLES:
        planner.reset(seed=policy_seed(day), hospital=env.hospital)
        before = env.state().copy()
        assert label(planner, env, role, day, tick) == int(later.actions[role][tick])
        assert label(planner, env, role, day, tick) == int(later.actions[role][tick])  # again: the same
        np.testing.assert_array_equal(env.state(), before)  # labelling left the episode as it was
        env.step(int(later.student_actions[role][tick]))


def test_dagger_aggregates_every_round_and_refits(tmp_path: Path) -> None:
    from benchmarl.experiment import Experiment

    from training.benchmarl.task import ALL, make_task
    from training.benchmarl.train import algorithm_config, experiment_config, model_config

    args = _args(save=str(tmp_path / "run"), warm_start="team_planner", warm_start_days=5,
                 warm_start_epochs=1, dagger_rounds=2, dagger_days=5)  # fmt: skip
    experiment = Experiment(
        task=make_task(ALL, "team", args.reward_scale), algorithm_config=algorithm_config(args),
        model_config=model_config(args), critic_model_config=model_config(args), seed=args.seed,
        config=experiment_config(args, tmp_path),
    )  # fmt: skip
    report = dagger(experiment, args, planner=_tiny_planner())
    assert [r["round"] for r in report.rounds] == [0, 1, 2]
    assert [r["beta"] for r in report.rounds] == [1.0, 0.0, 0.0]
    assert all(r["days"] == 5 and r["states"] > 0 for r in report.rounds)
    assert report.days == 15 and report.states == sum(r["states"] for r in report.rounds)
    assert "student_agreement" not in report.rounds[0]
    for r in report.rounds[1:]:
        assert set(r["student_agreement"]) == set(ROLES)
        assert all(0.0 <= v <= 1.0 for v in r["student_agreement"].values())


def test_aggregate_keeps_every_round_in_order(rounds) -> None:
    first, later = rounds
    both = aggregate([first, later])
    assert len(both) == len(first) + len(later) and both.days == 10
    assert both.day_seeds == first.day_seeds + later.day_seeds
    for role in ROLES:
        np.testing.assert_array_equal(both.actions[role][len(first) :].numpy(), later.actions[role].numpy())
        np.testing.assert_array_equal(both.returns[role][: len(first)].numpy(), first.returns[role].numpy())


def test_dagger_warm_started_run_records_its_rounds_and_gets_its_row(tmp_path: Path) -> None:
    args = _args(frames=200, eval_interval=200, eval_episodes=1, save=str(tmp_path / "dagger"),
                 warm_start="team_planner", warm_start_days=5, warm_start_epochs=1, dagger_rounds=1,
                 dagger_days=5)  # fmt: skip
    run_dir = train(args, evaluate=grade)
    meta = json.loads((run_dir / "benchmarl.json").read_text())
    warm = meta["warm_start"]
    assert warm["from"] == "team_planner" and warm["days"] == 10
    assert [r["round"] for r in warm["dagger"]] == [0, 1]
    assert "--dagger-rounds 1" in meta["command"]
    assert marl_stats().row_name(meta) == "mappo_dagger_warm"
    assert load(str(run_dir)).tracks == ("team",)


def test_bad_dagger_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="needs --warm-start team_planner"):
        Args(warm_start="team_heuristic", dagger_rounds=1)
    with pytest.raises(ValueError, match="dagger_beta"):
        Args(warm_start="team_planner", dagger_rounds=1, dagger_beta=1.5)
    with pytest.raises(ValueError, match="dagger_days"):
        Args(warm_start="team_planner", dagger_rounds=1, dagger_days=0)
