"""MaskablePPO: the trainer end to end through the CLI, the training envs, the torch path of the checkpoints.

What plays without torch (the ONNX checkpoints) is tested in test_learned.py, which needs no
``train`` extra.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import policies
from grading import grade
from grading.common import beats
from hospital_marl import BUILTIN_SCENARIOS, Hospital
from hospital_marl.core.actions import ACTION_TABLE, ROLE_KIND_INDEX, ROLES, Kind
from hospital_marl.envs.composed import HospitalEDEnv
from policies.learned import (
    FEATURE_CLIP,
    FEATURE_SIZE,
    SHIPPED,
    FeatureEncoder,
    feature_slices,
    load_path,
    load_shipped,
)
from policies.pruning import prune_dominated
from training.ppo import Args, make_env, make_vec_env


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hospital_marl", *argv], cwd=cwd, capture_output=True, text=True, timeout=300
    )


# ------------------------------------------------------------------ the trainer
def test_train_ppo_cli__tiny_run_saves_reloads_and_plays_only_valid_actions(tmp_path: Path) -> None:
    run = tmp_path / "run"
    tiny = "--timesteps 2048 --n-envs 4 --n-steps 256 --n-epochs 2 --eval-freq 1024 --eval-episodes 1"
    tiny += " --no-progress"
    done = _cli("train", "ppo", "--scenario", "night_shift", *tiny.split(), "--save", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["run_dir"] == str(run)
    for name in ("model.zip", "model.json", "best_model.zip", "best_model.json", "curve.csv", "curve.json"):
        assert (run / name).exists(), name
    curve = json.loads((run / "curve.json").read_text())
    assert [row["timesteps"] for row in curve][:2] == [1024, 2048]

    policy = load_path(run)  # the run directory: best_model.zip
    assert policy.tracks == ("flat",)
    report = grade(policy, episodes=1, seed=0, scenarios=["surge"])
    assert report["invalid_action_rate"] == 0.0
    assert report["scenarios"]["surge"]["counts"]["invalid_actions"] == 0

    shipped = tmp_path / "shipped" / "tiny.zip"
    exported = _cli("train", "export", str(run), str(shipped), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert shipped.stat().st_size < (run / "best_model.zip").stat().st_size  # no optimizer state
    meta = json.loads(shipped.with_suffix(".json").read_text())
    assert meta["command"].startswith("hospital-marl train ppo --scenario night_shift --timesteps 2048")
    assert meta["run"]["timesteps"] >= 2048 and len(meta["curve"]) == len(curve)
    for backend in ("torch", "onnx"):  # the exported .zip and the .onnx beside it play the same days
        again = grade(load_path(shipped, backend=backend), episodes=1, seed=0, scenarios=["surge"])
        assert again["scenario_scores"] == report["scenario_scores"], backend

    plotted = _cli("plot", "curve", str(run), cwd=tmp_path)
    assert plotted.returncode == 0, plotted.stderr
    assert (run / "curve.png").read_bytes()[:4] == b"\x89PNG"


def test_train_ppo_cli__team_track_trains_the_multidiscrete_team_env(tmp_path: Path) -> None:
    run = tmp_path / "team"
    tiny = "--timesteps 512 --n-envs 2 --n-steps 256 --n-epochs 1 --eval-freq 0 --eval-episodes 1"
    tiny += " --scenario surge --no-progress"
    done = _cli("train", "ppo", "--track", "team", *tiny.split(), "--save", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    policy = load_path(run / "model.zip")
    assert policy.tracks == ("team",)
    report = grade(policy, episodes=1, seed=0, scenarios=["mass_casualty"], track="team")
    assert report["scenarios"]["mass_casualty"]["counts"]["invalid_actions"] == 0


def test_train_ppo_cli__score_reward_and_margin_selection(tmp_path: Path) -> None:
    """--reward score trains on the graded composite; --select margin ships the evaluation whose
    worst scenario is furthest ahead of the heuristic on the same evaluation days."""
    run = tmp_path / "score"
    tiny = "--timesteps 1536 --n-envs 3 --n-steps 128 --n-epochs 1 --eval-freq 512 --eval-episodes 1"
    tiny += " --all-scenarios --reward score --reward-scale 0.3 --early-discharge-points 0.5"
    tiny += " --select margin --no-progress"
    done = _cli("train", "ppo", *tiny.split(), "--save", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    curve = json.loads((run / "curve.json").read_text())
    reference = grade("heuristic", episodes=1, seed=1000)["scenario_scores"]
    for row in curve:
        margins = [row[f"score_{name}"] - reference[name] for name in BUILTIN_SCENARIOS]
        assert row["worst_margin"] == pytest.approx(min(margins), abs=1e-3)
        # the Monitor sits on top of ScoreReward: a training episode's return is its score - 90
        assert row["train_episode_reward"] is None or -90 <= row["train_episode_reward"] <= 10
    best = json.loads((run / "best_model.json").read_text())
    assert best["eval"]["worst_margin"] == max(row["worst_margin"] for row in curve)
    assert best["args"]["reward"] == "score" and best["args"]["early_discharge_points"] == 0.5
    assert grade(load_path(run), episodes=1, seed=0, scenarios=["surge"])["invalid_action_rate"] == 0.0


def test_train_ppo_cli__prune_trains_and_acts_on_the_pruned_mask(tmp_path: Path) -> None:
    """--prune: the model is trained on the pruned mask, records it, and plays only pruned-in actions."""
    run = tmp_path / "pruned"
    tiny = "--timesteps 1024 --n-envs 2 --n-steps 256 --n-epochs 1 --eval-freq 0 --eval-episodes 1"
    tiny += " --scenario night_shift --prune --no-progress"
    done = _cli("train", "ppo", *tiny.split(), "--save", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    meta = json.loads((run / "model.json").read_text())
    assert meta["prune"] is True and "--prune" in meta["command"]
    policy = load_path(run / "model.zip")
    assert policy.prune and policy.metadata["name"] == "ppo_flat_pruned"
    assert policy.name == str(run / "model.zip")  # loaded by path: named by its path
    env = HospitalEDEnv(scenario="surge")
    obs, info = env.reset(seed=2)
    policy.reset(seed=2, hospital=env.hospital)
    terminated = truncated = False
    while not (terminated or truncated):
        action = policy.act(obs, info["action_mask"])
        assert prune_dominated(obs, info["action_mask"])[action]
        obs, _, terminated, truncated, info = env.step(action)
    assert env.hospital.counters.invalid_actions == 0


@pytest.mark.parametrize("flags", [{"track": "team"}, {"mask": False}])
def test_args__prune_needs_the_masked_flat_track(flags: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="prune"):
        Args(prune=True, **flags)


def test_train_ppo_cli__rejects_an_unknown_scenario(tmp_path: Path) -> None:
    done = _cli(
        "train", "ppo", "--scenario", "monday", "--no-progress", "--save", str(tmp_path / "x"), cwd=tmp_path
    )
    assert done.returncode == 2
    assert "monday" in done.stderr and "normal_day" in done.stderr
    assert not (tmp_path / "x").exists()  # nothing was started


def test_args__command_line_names_the_seed_and_the_non_default_flags() -> None:
    args = Args(track="team", all_scenarios=True, timesteps=5000, mask=False, net_arch=(32, 32))
    assert args.command_line() == (
        "hospital-marl train ppo --track team --all-scenarios --timesteps 5000 --seed 0 --no-mask "
        "--net-arch 32 32"
    )


# ------------------------------------------------------------------ training envs
def test_early_discharge_cost__charges_its_points_per_early_discharge_on_top_of_the_score() -> None:
    from hospital_marl.core.actions import FLAT_OF
    from hospital_marl.envs.wrappers import ScoreReward
    from training.ppo import EarlyDischargeCost

    early = {FLAT_OF[(Kind.EARLY_DISCHARGE, k)] for k in range(5)}
    plain = ScoreReward(HospitalEDEnv(scenario="surge"))
    charged = EarlyDischargeCost(ScoreReward(HospitalEDEnv(scenario="surge")), points=0.5)
    _, info = plain.reset(seed=4)
    charged.reset(seed=4)
    n_early = 0
    for tick in range(60):
        valid = np.flatnonzero(info["action_mask"])
        chosen = [a for a in valid if a in early] if tick % 3 == 0 else []
        action = int(chosen[0] if chosen else valid[-1])
        _, r_plain, *_, info = plain.step(action)
        _, r_charged, *_ = charged.step(action)
        before = n_early
        n_early = charged.unwrapped.hospital.counters.early_discharges
        assert r_charged == pytest.approx(r_plain - 0.5 * (n_early - before), abs=1e-12)
    assert n_early > 0  # the charge was exercised


def test_training_env__with_prune_masks_exactly_the_pruned_actions() -> None:
    from stable_baselines3.common.env_checker import check_env

    from hospital_marl.envs.observations import ObservationBuilder

    env = make_env(Args(scenario="surge", prune=True))
    check_env(env, warn=True)
    env.reset(seed=5)
    h = env.unwrapped.hospital
    pruned_some = False
    for _ in range(100):
        valid = np.array(h.flat_mask())
        mask = env.get_wrapper_attr("action_masks")()
        assert mask.tolist() == prune_dominated(ObservationBuilder(h).composed(), valid).tolist()
        pruned_some |= bool((valid & ~mask).any())
        *_, terminated, truncated, _ = env.step(int(np.flatnonzero(mask)[-1]))
        if terminated or truncated:
            break
    assert pruned_some


@pytest.mark.parametrize("track", ["flat", "team"])
def test_training_env__passes_sb3_check_env_and_vectorises_with_masks(track: str) -> None:
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.env_checker import check_env

    args = Args(track=track, all_scenarios=True, n_envs=3)
    for rank in range(args.n_envs):
        check_env(make_env(args, rank), warn=True)
    vec = make_vec_env(args)
    obs = vec.reset()
    assert obs.shape == (3, FEATURE_SIZE) and obs.dtype == np.float32
    masks = get_action_masks(vec)
    assert masks.shape == (3, 39 if track == "flat" else 41) and masks.dtype == bool
    scenarios = [env.unwrapped.scenario.name for env in vec.envs]
    assert scenarios == list(BUILTIN_SCENARIOS[:3])  # each env starts at its own place in the mix


def test_feature_encoder__is_fixed_scale_bounded_and_lists_early_discharge_candidates_in_action_order() -> (
    None
):
    env = HospitalEDEnv(scenario="surge")
    obs, info = env.reset(seed=3)
    encoder = FeatureEncoder()
    slices = feature_slices()
    rng = np.random.default_rng(0)
    for _ in range(60):
        vector = encoder(obs)
        assert vector.shape == (FEATURE_SIZE,) and vector.dtype == np.float32
        assert vector.min() >= 0.0 and vector.max() <= FEATURE_CLIP
        h: Hospital = env.hospital
        board = h.board()
        sl, shape = slices["bottom"]
        bottom_severity = vector[sl].reshape(shape)[:, 0] * 5
        for k in range(5):  # early-discharge index k addresses board[n - 1 - k]
            expected = h.severity[board[len(board) - 1 - k]] if k < len(board) else 0
            assert bottom_severity[k] == pytest.approx(expected)
        obs, _, _, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))


def test_entity_network__orders_logits_like_the_action_tables() -> None:
    from policies.ppo_net import HEAD_OUTPUTS, KIND_HEAD, EntityActorCritic

    flat = EntityActorCritic(team=False, context_dim=8, head_dim=4, critic_arch=[8])
    team = EntityActorCritic(team=True, context_dim=8, head_dim=4, critic_arch=[8])
    assert flat.latent_dim_pi == len(ACTION_TABLE) and team.latent_dim_pi == 21 + 16 + 4
    assert len(set(flat.order.tolist())) == len(ACTION_TABLE)
    offsets = flat._candidate_offsets()
    for spec in ACTION_TABLE[1:]:
        name, col = KIND_HEAD[spec.kind]
        assert flat.order[spec.flat] == offsets[(name, col)] + spec.index
    noops = [
        i for i, (kind, _) in enumerate(k for r in ROLES for k in ROLE_KIND_INDEX[r]) if kind is Kind.NOOP
    ]
    assert team.order[noops].tolist() == [0, 1, 2]
    assert set(HEAD_OUTPUTS) == {name for name, _ in KIND_HEAD.values()}


# ------------------------------------------------------------------ shipped checkpoints
SCENARIO_SEEDS = [(scenario, seed) for scenario in BUILTIN_SCENARIOS for seed in (0, 1)]


@pytest.mark.parametrize("name", sorted(n for n in SHIPPED if n != "team_ppo"))
def test_shipped_flat_checkpoint__onnx_acts_exactly_like_the_torch_model(name: str) -> None:
    """The torch-free .onnx and the .zip pick the same action on every observation of 10 days
    (2 per scenario) driven by a masked-random player, so the states are varied, not the model's own."""
    onnx, torch = load_shipped(name, backend="onnx"), load_shipped(name, backend="torch")
    driver = policies.load("masked_random")
    n = 0
    for scenario, seed in SCENARIO_SEEDS:
        env = HospitalEDEnv(scenario=scenario)
        obs, info = env.reset(seed=seed)
        driver.reset(seed=seed)
        for policy in (onnx, torch):
            policy.reset(seed=seed, hospital=env.hospital)
        done = False
        while not done:
            mask = info["action_mask"]
            assert onnx.act(obs, mask) == torch.act(obs, mask)
            assert np.allclose(onnx.logits(onnx.encoder(obs)), torch.logits(torch.encoder(obs)), atol=1e-4)
            n += 1
            obs, _, terminated, truncated, info = env.step(driver.act(obs, mask))
            done = terminated or truncated
    assert n > 50 * len(SCENARIO_SEEDS)  # hundreds of states compared


def test_shipped_team_checkpoint__onnx_acts_exactly_like_the_torch_model() -> None:
    """team_ppo's joint action from the team env's observation and mask, on 10 masked-random days."""
    from hospital_marl.envs.composed import HospitalEDTeamEnv

    onnx, torch = load_shipped("team_ppo", backend="onnx"), load_shipped("team_ppo", backend="torch")
    rng = np.random.default_rng(0)
    for scenario, seed in SCENARIO_SEEDS:
        env = HospitalEDTeamEnv(scenario=scenario)
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            mask = env.action_masks()
            assert onnx.team_action(obs, mask).tolist() == torch.team_action(obs, mask).tolist()
            action = [rng.choice(np.flatnonzero(m)) for m in np.split(mask, [21, 37])]
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated


@pytest.fixture(scope="module")
def flat_references() -> dict[str, dict]:
    return {name: grade(name, episodes=3, seed=0) for name in ("heuristic", "planner")}


@pytest.mark.parametrize("name", ["ppo", "ppo_pruned"])
def test_shipped_flat_ppo__beats_the_heuristic_on_every_scenario(name: str, flat_references: dict) -> None:
    """A fixed-seed check of the shipped artefacts (3 episodes; the README's table uses 10).

    "Beats" as in SPEC §7 (:func:`grading.common.beats`): strictly ahead, or within 1 point
    where the planner's headroom over the heuristic on the same days is below 2 points. On these
    three days that is night_shift, normal_day and ventilator_crisis (planner - heuristic
    -0.1, +0.9, +0.4); surge and mass_casualty (about +4) must be strictly ahead. The overall
    score must be strictly ahead too.
    """
    policy = policies.load(name)
    assert policy.tracks == ("flat",) and policy.prune == (name == "ppo_pruned")
    learned = grade(policy, episodes=3, seed=0)
    reference = flat_references["heuristic"]["scenario_scores"]
    planner = flat_references["planner"]["scenario_scores"]
    assert learned["invalid_action_rate"] == 0.0
    for scenario, score in learned["scenario_scores"].items():
        assert beats(score - reference[scenario], planner[scenario] - reference[scenario]), scenario
    assert learned["overall_score"] > flat_references["heuristic"]["overall_score"]


def test_shipped_team_ppo__beats_the_team_heuristic_overall() -> None:
    policy = policies.load("team_ppo")
    assert policy.tracks == ("team",)
    learned = grade(policy, episodes=3, seed=0, track="team")
    assert learned["invalid_action_rate"] == 0.0
    assert (
        learned["overall_score"] > grade("team_heuristic", episodes=3, seed=0, track="team")["overall_score"]
    )


def test_team_ppo__beats_flat_ppo_overall() -> None:
    team = grade("team_ppo", episodes=3, seed=0, track="team")
    flat = grade("ppo", episodes=3, seed=0, track="flat")
    assert team["overall_score"] > flat["overall_score"]
