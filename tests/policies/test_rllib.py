"""Ray RLlib (the ``rllib`` extra): masked PPO per role, the masked-action audit, loading and grading.

Skipped only when ray is not installed. The end-to-end tests share one training
run (two PPO iterations, no remote env runners, a tiny batch and tiny nets) in a
subprocess, so Ray never starts inside the pytest process; the xdist group keeps
them on one worker, away from other tests' cores.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from policies.marl import DEFAULT_ENCODING, MarlTeamPolicy, encode_role

pytest.importorskip("ray", reason="ray[rllib] not installed: pip install 'hospital-marl[rllib]'")

pytestmark = [pytest.mark.rllib, pytest.mark.xdist_group("rllib")]

SCENARIO = "normal_day"
TINY = [
    "--num-env-runners", "0",
    "--train-batch-size", "200",
    "--minibatch-size", "100",
    "--num-epochs", "1",
    "--hidden", "16", "16",
    "--scenario", SCENARIO,
    "--seed", "0",
    "--no-progress",
]  # fmt: skip
"""200 role turns per iteration: the first 100-tick shift (300 turns) ends in iteration 2."""
TRAIN_FLAGS = ["--iterations", "2", "--eval-episodes", "1", *TINY]
"""Two iterations, graded (by the CLI's real grader) once, after the last (--eval-interval 5)."""


def _train_command() -> list[str]:
    return [sys.executable, "-m", "hospital_marl", "train", "rllib"]


def _ray_subprocess(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run ``command`` (which starts a local Ray instance) outside the pytest process."""
    env = dict(os.environ)
    # Ray 2.60 turns token auth on for a new local instance and would otherwise write
    # a fresh token to ~/.ray/auth_token; a per-run token keeps the test out of $HOME.
    env["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"training failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny local RLlib training run through the CLI (graded by the real grader); its run directory."""
    work = tmp_path_factory.mktemp("rllib")
    run_dir = work / "run"
    _ray_subprocess([*_train_command(), *TRAIN_FLAGS, "--save", str(run_dir)], work)
    return run_dir


# ------------------------------------------------------------ end to end
def test_train_rllib__two_iterations_take_no_masked_action(trained_run: Path) -> None:
    meta = json.loads((trained_run / "rllib.json").read_text())
    curve = json.loads((trained_run / "curve.json").read_text())
    audit = meta["audit"]
    assert audit["masked_actions_taken"] == 0, audit
    assert audit["env_invalid_actions"] == 0, audit
    assert audit["audited_actions"] >= 300, f"the audit checked too few actions to mean anything: {audit}"
    assert audit["episodes"] >= 1, "no shift finished: the env's own invalid-action count was not audited"
    assert [row["iteration"] for row in curve] == [1, 2]
    assert all(row["masked_actions_taken"] == 0 for row in curve)
    assert curve[-1]["env_steps"] >= 400
    assert curve[-1]["team_return_mean"] is not None
    assert meta["track"] == "team" and meta["roles"] == list(ROLES)


def test_train_rllib_cli__plays_the_modules_it_graded_on_validation_days(trained_run: Path) -> None:
    """The CLI hands the trainer the real grader: the run's best grading is the validation-day
    (seed 1000) grade of the modules the run directory plays."""
    from grading import grade
    from policies.rllib import load_rllib_policy

    meta = json.loads((trained_run / "rllib.json").read_text())
    curve = json.loads((trained_run / "curve.json").read_text())
    assert meta["validation"] == {"seed": 1000, "episodes_per_scenario": 1}
    assert "eval_score" not in curve[0] and "eval_score" in curve[1]  # --eval-interval 5: after the last only
    assert meta["best"]["iteration"] == meta["final_eval"]["iteration"] == 2
    assert meta["modules"] == {role: f"best/{role}" for role in ROLES}
    report = grade(load_rllib_policy(trained_run), episodes=1, seed=1000, scenarios=[SCENARIO], track="team")
    assert round(report["overall_score"], 3) == meta["best"]["eval_score"] == curve[1]["eval_score"]


STUB_RUN = """
import json, sys
import numpy as np
from hospital_marl.core.actions import ROLES
from policies.rllib.policy import ModuleLogits
from training.rllib.train import Args, train

scores = iter(json.loads(sys.argv[2]))
calls = []


def evaluate(policy, *, episodes, seed, scenarios, track):
    probe = {
        role: ModuleLogits(module)(np.full(module.observation_space["observation"].shape, 0.5)).tolist()
        for role, module in policy.modules.items()
    }
    call = {"episodes": episodes, "seed": seed, "scenarios": list(scenarios), "track": track}
    calls.append({**call, "logits": probe})
    score = next(scores)
    per_scenario = {s: {"score_stderr": 0.0} for s in scenarios}
    return {"overall_score": score, "scenario_scores": dict.fromkeys(scenarios, score),
            "scenarios": per_scenario, "invalid_action_rate": 0.0}


flags = dict(eval_interval=1, eval_episodes=2, eval_seed=1000, train_batch_size=200,
             minibatch_size=100, num_epochs=1, hidden=(16, 16), scenario="normal_day", progress=False)
iterations = int(sys.argv[3])
if sys.argv[4:] == ["--resume"]:
    run = train(Args(resume=sys.argv[1], iterations=iterations, progress=False), evaluate)
else:
    run = train(Args(save=sys.argv[1], iterations=iterations, **flags), evaluate)
(run / "calls.json").write_text(json.dumps(calls))
"""
"""A run graded by a scripted evaluator (argv: run directory, the scores as JSON, iterations[, --resume])."""


def test_train_rllib__keeps_the_best_validation_grading_as_what_the_run_plays(tmp_path: Path) -> None:
    """Scripted validation scores 50, 70, 60 (iterations 1-3): the run directory plays the modules
    graded at iteration 2; the algorithm checkpoint holds the last iteration's (graded 60)."""
    from policies.rllib import load_rllib_policy
    from policies.rllib.policy import ModuleLogits

    run = tmp_path / "run"
    _ray_subprocess([sys.executable, "-c", STUB_RUN, str(run), "[50.0, 70.0, 60.0]", "3"], tmp_path)
    calls = json.loads((run / "calls.json").read_text())
    assert [{k: c[k] for k in ("episodes", "seed", "scenarios", "track")} for c in calls] == [
        {"episodes": 2, "seed": 1000, "scenarios": [SCENARIO], "track": "team"}
    ] * 3

    def probe(policy) -> dict[str, list[float]]:
        return {
            role: ModuleLogits(m)(np.full(m.observation_space["observation"].shape, 0.5)).tolist()
            for role, m in policy.modules.items()
        }

    best, final = probe(load_rllib_policy(run)), probe(load_rllib_policy(run / "checkpoint"))
    assert best == calls[1]["logits"] and final == calls[2]["logits"]
    assert best != final  # the two gradings saw different weights: the check can tell them apart
    curve = json.loads((run / "curve.json").read_text())
    assert [row["eval_score"] for row in curve] == [50.0, 70.0, 60.0]
    meta = json.loads((run / "rllib.json").read_text())
    assert (meta["best"]["iteration"], meta["final_eval"]["iteration"], meta["iterations"]) == (2, 3, 3)


def test_train_rllib_resume__continues_the_curve_and_keeps_the_best_of_the_whole_run(tmp_path: Path) -> None:
    """2 iterations graded 50, 70; resumed to 4, graded 60, 65: the curve has 4 rows whose
    iteration and env-step counts carry on (200 role turns per iteration), the run still plays the
    iteration-2 modules (the best of the whole run), and rllib.json records the resuming command."""
    from policies.rllib import load_rllib_policy
    from policies.rllib.policy import ModuleLogits

    run = tmp_path / "run"
    _ray_subprocess([sys.executable, "-c", STUB_RUN, str(run), "[50.0, 70.0]", "2"], tmp_path)
    first = json.loads((run / "rllib.json").read_text())
    best_before = json.loads((run / "calls.json").read_text())[1]["logits"]
    _ray_subprocess([sys.executable, "-c", STUB_RUN, str(run), "[60.0, 65.0]", "4", "--resume"], tmp_path)

    curve = json.loads((run / "curve.json").read_text())
    assert [r["iteration"] for r in curve] == [1, 2, 3, 4]
    assert [r["env_steps"] for r in curve] == [200, 400, 600, 800]
    assert [r["eval_score"] for r in curve] == [50.0, 70.0, 60.0, 65.0]
    assert [r["time_s"] for r in curve] == sorted(r["time_s"] for r in curve)  # wall time adds up
    meta = json.loads((run / "rllib.json").read_text())
    assert (meta["iterations"], meta["env_steps"], meta["args"]["iterations"]) == (4, 800, 4)
    assert (meta["best"]["iteration"], meta["final_eval"]["iteration"]) == (2, 4)
    assert meta["command"] == first["command"]
    assert [r["from_iteration"] for r in meta["resumed"]] == [2]
    assert (
        f"--resume {run}" in meta["resumed"][0]["command"]
        and "--iterations 4" in meta["resumed"][0]["command"]
    )
    assert meta["wall_time_s"] > first["wall_time_s"] and meta["cpu_time_s"] > first["cpu_time_s"]
    assert meta["audit"]["audited_actions"] > first["audit"]["audited_actions"]
    resumed_calls = json.loads((run / "calls.json").read_text())
    assert len(resumed_calls) == 2

    def probe(policy) -> list[float]:
        return {
            role: ModuleLogits(m)(np.full(m.observation_space["observation"].shape, 0.5)).tolist()
            for role, m in policy.modules.items()
        }

    assert probe(load_rllib_policy(run)) == best_before  # best/ untouched: 70 still the best
    assert probe(load_rllib_policy(run / "checkpoint")) == resumed_calls[1]["logits"]
    assert resumed_calls[1]["logits"] != best_before  # training went on from the checkpoint


def test_train_rllib_resume__keeps_the_runs_arguments_and_refuses_conflicting_ones(tmp_path: Path) -> None:
    """``--resume`` takes the run's recorded arguments; a flag that differs from both its default
    and the run's value, a target the run has already reached, another --save or a directory with
    no checkpoint are refused with one line naming the problem (before Ray starts)."""
    from training.rllib.train import Args, resume_args

    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    (run / "checkpoint" / "rllib_checkpoint.json").write_text("{}")
    recorded = Args(iterations=2, lr=0.001, all_scenarios=True, hidden=(16, 16), save="elsewhere")
    meta = {"args": recorded.as_json(), "final_eval": {"iteration": 2}, "command": recorded.command_line()}
    (run / "rllib.json").write_text(json.dumps(meta))

    resumed = resume_args(Args(resume=str(run), iterations=4, progress=False))
    assert (resumed.lr, resumed.all_scenarios, resumed.hidden) == (0.001, True, (16, 16))
    assert (resumed.iterations, resumed.progress) == (4, False)
    assert resumed.save == resumed.resume == str(run)
    assert resume_args(resumed) == resumed  # idempotent: the CLI and train() both call it
    same = Args(resume=str(run), iterations=4, lr=0.001)  # the run's own value is no conflict
    assert resume_args(same).lr == 0.001
    with pytest.raises(ValueError, match=r"--seed 3 \(the run's: 0\), --lr 0.01 \(the run's: 0.001\)"):
        resume_args(Args(resume=str(run), iterations=4, lr=0.01, seed=3))
    with pytest.raises(ValueError, match="the run is at iteration 2; --iterations is the total to reach"):
        resume_args(Args(resume=str(run), iterations=2))
    with pytest.raises(ValueError, match="drop --save"):
        resume_args(Args(resume=str(run), iterations=4, save=str(tmp_path / "other")))
    with pytest.raises(ValueError, match="not a `train rllib` run with an algorithm checkpoint"):
        resume_args(Args(resume=str(tmp_path / "nothing"), iterations=4))

    cli = subprocess.run(
        [*_train_command(), "--resume", str(run), "--iterations", "4", "--lr", "0.01"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 2
    assert cli.stderr.strip().splitlines() == [
        f"hospital-marl: error: --resume {run} keeps the run's arguments; these flags conflict with them: "
        "--lr 0.01 (the run's: 0.001) (drop them, or start a new run)"
    ]


def test_load_rllib_policy__restores_every_role_without_a_ray_cluster(trained_run: Path) -> None:
    import ray

    from policies.rllib import is_rllib_run, load_rllib_policy
    from policies.rllib.module import MaskedRoleModule

    assert is_rllib_run(trained_run)
    policy = load_rllib_policy(trained_run)
    assert not ray.is_initialized()
    assert policy.name == "rllib" and policy.tracks == ("team",)
    assert set(policy.modules) == set(ROLES)
    assert all(isinstance(m, MaskedRoleModule) for m in policy.modules.values())
    # The algorithm checkpoint itself (and the MultiRLModule directory) load too.
    assert set(load_rllib_policy(trained_run / "checkpoint").modules) == set(ROLES)
    # A new run trains on the encoding every per-role trainer shares, and says so in its checkpoint.
    assert isinstance(policy, MarlTeamPolicy)
    assert {m.encoding for m in policy.modules.values()} == {DEFAULT_ENCODING}
    assert json.loads((trained_run / "rllib.json").read_text())["encoding"] == DEFAULT_ENCODING


def test_train_export__ships_the_best_and_the_final_modules_without_optimizer_state(
    trained_run: Path, tmp_path: Path
) -> None:
    from policies.rllib import load_rllib_policy

    shipped = tmp_path / "shipped"
    done = subprocess.run(
        [sys.executable, "-m", "hospital_marl", "train", "export", str(trained_run), str(shipped)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert set(load_rllib_policy(shipped).modules) == set(ROLES)  # the best grading's
    assert set(load_rllib_policy(shipped / "checkpoint").modules) == set(ROLES)  # the last iteration's
    assert not (shipped / "checkpoint" / "learner_group" / "learner" / "state.pkl").exists()
    assert {p.name for p in (shipped / "checkpoint" / "learner_group").iterdir()} == {"learner"}


def _day_of_role_observations(n_ticks: int = 40):
    """(role, raw observation, mask) of every turn of the first ``n_ticks`` of a heuristic-played day."""
    import hospital_marl
    from policies.heuristic import HeuristicPolicy

    env, rule = hospital_marl.env(scenario="surge"), HeuristicPolicy()
    env.reset(seed=3)
    for _ in range(3 * n_ticks):
        role = env.agent_selection
        obs, *_ = env.last()
        yield role, obs["observation"], obs["action_mask"]
        env.step(rule.act_role(role, obs["observation"], obs["action_mask"]))


@pytest.fixture(scope="module")
def legacy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory as ``train rllib`` wrote it before validation grading and recorded
    encodings (the RLlib run committed until session 6): ``rllib.json`` without ``best`` /
    ``encoding``, ``modules`` in the algorithm checkpoint, modules without ``model_config["encoding"]``."""
    import torch

    from policies.rllib import module_dir
    from policies.rllib.module import MaskedRoleModule
    from training.rllib.env import make_rllib_env

    run = tmp_path_factory.mktemp("legacy")
    env = make_rllib_env({"scenarios": [SCENARIO]})
    torch.manual_seed(0)
    for role in ROLES:
        module = MaskedRoleModule(
            observation_space=env.get_observation_space(role),
            action_space=env.get_action_space(role),
            model_config={"hidden": [16]},
        )
        with torch.no_grad():
            module.pi[-1].weight.mul_(100.0)  # spread the logits: the argmax must not hinge on rounding
        module.save_to_path(str(module_dir(run / "checkpoint", role)))
    modules = {role: module_dir(Path("checkpoint"), role).as_posix() for role in ROLES}
    meta = {"format": "hospital_marl.rllib/1", "name": "rllib", "track": "team", "roles": list(ROLES)}
    (run / "rllib.json").write_text(json.dumps({**meta, "checkpoint": "checkpoint", "modules": modules}))
    return run


def test_legacy_run__plays_its_actor_on_the_log1p_encoding_it_was_trained_on(legacy_run: Path) -> None:
    """Modules saved without ``model_config["encoding"]`` were trained on log1p of the raw vector
    (the module applied it itself then): the shared per-role path must play exactly that actor."""
    import torch

    from policies.rllib import load_rllib_policy

    policy = load_rllib_policy(legacy_run)
    assert {m.encoding for m in policy.modules.values()} == {"log1p"}
    policy.reset(seed=0)
    for role, obs, mask in _day_of_role_observations():
        with torch.no_grad():
            logits = policy.modules[role].pi(torch.log1p(torch.as_tensor(obs).clamp(min=0)).reshape(1, -1))[0]
        expected = int(torch.argmax(torch.where(torch.as_tensor(mask).bool(), logits, -torch.inf)))
        assert policy.act_role(role, obs, mask) == expected


def test_rllib_team_policy__unknown_encoding_is_refused_by_name(legacy_run: Path) -> None:
    from policies.rllib import load_rllib_policy
    from policies.rllib.policy import RLlibTeamPolicy

    modules = load_rllib_policy(legacy_run).modules
    modules["triage"].model_config = {**dict(modules["triage"].model_config or {}), "encoding": "zscore"}
    with pytest.raises(ValueError, match="zscore"):
        RLlibTeamPolicy(modules)


def test_grade_team_track__trained_rllib_policy_takes_no_invalid_action(trained_run: Path) -> None:
    from grading import grade
    from policies.rllib import load_rllib_policy

    report = grade(load_rllib_policy(trained_run), episodes=1, scenarios=[SCENARIO], track="team")
    assert report["track"] == "team"
    assert report["invalid_action_rate"] == 0.0
    counts = report["scenarios"][SCENARIO]["counts"]
    assert counts["invalid_actions"] == 0 and counts["actions"] > 0
    assert 0.0 <= report["overall_score"] <= 100.0


# ------------------------------------------------------------- the parts
@pytest.fixture(scope="module")
def rllib_env():
    from training.rllib.env import make_rllib_env

    return make_rllib_env({"scenarios": [SCENARIO]})


def test_rllib_env__passes_rllib_checks_with_the_role_spaces(rllib_env) -> None:
    from ray.rllib.env.multi_agent_env import MultiAgentEnv
    from ray.rllib.utils.pre_checks.env import check_multiagent_environments

    assert isinstance(rllib_env, MultiAgentEnv)
    check_multiagent_environments(rllib_env)
    for role in ROLES:
        space = rllib_env.get_observation_space(role)
        assert set(space.spaces) == {"observation", "action_mask"}
        assert space["action_mask"].shape == (ROLE_ACTION_COUNTS[role],)
        assert rllib_env.get_action_space(role).n == ROLE_ACTION_COUNTS[role]


def test_rllib_env__modules_see_the_shared_per_role_encoding(rllib_env) -> None:
    """What the training env hands a module is encode_role of the AEC env's raw vector."""
    import hospital_marl

    obs, _ = rllib_env.reset(seed=5)
    raw = hospital_marl.env(scenario=SCENARIO)
    raw.reset(seed=5)
    role = raw.agent_selection
    assert list(obs) == [role]
    raw_obs = raw.observe(role)
    np.testing.assert_array_equal(obs[role]["observation"], encode_role(role, raw_obs["observation"]))
    np.testing.assert_array_equal(obs[role]["action_mask"], raw_obs["action_mask"])
    assert rllib_env.get_observation_space(role).contains(obs[role])


def test_rllib_env__all_scenarios_cycle_per_episode() -> None:
    from training.rllib.env import make_rllib_env

    env = make_rllib_env({"scenarios": ["surge", "night_shift"]})
    seen = set()
    for seed in range(2):
        env.reset(seed=seed)
        seen.add(env.hospital.scenario.name)
    assert seen == {"surge", "night_shift"}


def test_masked_role_module__masked_actions_have_zero_probability(rllib_env) -> None:
    import torch
    from ray.rllib.core.columns import Columns

    from policies.rllib.module import MASKED_LOGIT, MaskedRoleModule

    role = "triage"
    module = MaskedRoleModule(
        observation_space=rllib_env.get_observation_space(role),
        action_space=rllib_env.get_action_space(role),
        model_config={"hidden": [8]},
    )
    n = ROLE_ACTION_COUNTS[role]
    rng = np.random.default_rng(0)
    mask = (rng.random((32, n)) < 0.3).astype(np.int8)
    mask[:, 0] = 1  # the no-op is always valid
    obs_dim = rllib_env.get_observation_space(role)["observation"].shape[0]
    batch = {
        Columns.OBS: {
            "observation": torch.as_tensor(rng.random((32, obs_dim)) * 50, dtype=torch.float32),
            "action_mask": torch.as_tensor(mask),
        }
    }
    logits = module.forward_exploration(batch)[Columns.ACTION_DIST_INPUTS]
    assert torch.all(logits[torch.as_tensor(mask == 0)] == MASKED_LOGIT)
    probs = torch.softmax(logits, dim=-1).numpy()
    assert np.all(probs[mask == 0] == 0.0)
    assert np.allclose(probs.sum(-1), 1.0)
    values = module.compute_values(batch)
    assert values.shape == (32,) and torch.isfinite(values).all()


def test_count_masked_actions__flags_an_action_its_mask_ruled_out() -> None:
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    from training.rllib.callbacks import count_masked_actions

    mask = np.array([1, 0, 1], np.int8)
    observations = [{"observation": np.zeros(2, np.float32), "action_mask": mask} for _ in range(4)]
    episode = SingleAgentEpisode(
        observations=observations, actions=[0, 1, 2], rewards=[0.0] * 3, len_lookback_buffer=0
    )
    assert count_masked_actions(episode) == (1, 3)
    episode.to_numpy()
    assert count_masked_actions(episode) == (1, 3)
