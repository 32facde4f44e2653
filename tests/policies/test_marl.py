"""Per-role learners (training/marl/, loaded by policies/marl.py): both trainers end to end,
the mask-aware VecEnv, RoleEnv."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from hospital_marl.core.actions import ROLE_ACTION_COUNTS, ROLES
from policies.heuristic import HeuristicPolicy
from policies.marl import MAX_ACTIONS, encode_shared, is_marl_run, load_marl_policy
from training.marl import RoleEnv, make_masked_parallel_vec_env

TINY = [
    "--timesteps",
    "512",
    "--n-envs",
    "2",
    "--n-steps",
    "64",
    "--batch-size",
    "64",
    "--eval-episodes",
    "1",
]


@pytest.mark.parametrize("method", ["ibr", "shared"])
def test_trainer_end_to_end_takes_no_invalid_actions(tmp_path, method):
    from grading import grade

    run_dir = tmp_path / method
    extra = ["--rounds", "1"] if method == "ibr" else []
    cmd = [sys.executable, "-m", "hospital_marl", "train", "marl", "--method", method, *TINY, *extra]
    cmd += ["--scenario", "surge", "--save", str(run_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["method"] == method and summary["timesteps"] >= 512
    assert is_marl_run(run_dir)
    meta = json.loads((run_dir / "model.json").read_text())
    assert meta["format"] == "hospital_marl.marl/1" and meta["wall_time_s"] > 0
    assert json.loads((run_dir / "curve.json").read_text())
    policy = load_marl_policy(run_dir)
    assert policy.tracks == ("team",)
    report = grade(policy, episodes=1, seed=0, scenarios=["surge"], track="team")
    assert report["invalid_action_rate"] == 0.0
    assert report["scenarios"]["surge"]["metrics"]["invalid_action_rate"] == 0.0

    # the run ships its best periodic evaluation, and loading it reproduces that evaluation
    curve = json.loads((run_dir / "curve.json").read_text())
    best = meta["best"]
    assert best["eval"]["eval_score"] == max(row["eval_score"] for row in curve)
    assert all((run_dir / file).exists() for file in best["models"].values())
    args = meta["args"]
    again = grade(
        load_marl_policy(run_dir),
        episodes=args["eval_episodes"],
        seed=args["eval_seed"],
        scenarios=[args["scenario"]],
        track="team",
    )
    assert round(again["overall_score"], 3) == best["eval"]["eval_score"]
    final = grade(
        load_marl_policy(run_dir, final=True),
        episodes=args["eval_episodes"],
        seed=args["eval_seed"],
        scenarios=[args["scenario"]],
        track="team",
    )
    assert round(final["overall_score"], 3) == curve[-1]["eval_score"]


def test_masked_vec_env_masks_match_parallel_env():
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

    vec = make_masked_parallel_vec_env(2, ("surge", "mass_casualty"), seed=3)
    assert is_masking_supported(vec)
    obs = vec.reset()
    assert obs.shape == (6, vec.observation_space.shape[0]) and vec.action_space.n == MAX_ACTIONS
    rng = np.random.default_rng(0)
    for _ in range(120):  # past the first episode end (100 ticks at most): covers the auto-reset
        masks = get_action_masks(vec)
        assert masks.shape == (6, MAX_ACTIONS) and masks.dtype == bool
        for i, env in enumerate(vec.envs):
            flat = env.hospital.flat_mask()
            for k, role in enumerate(ROLES):
                slot = masks[3 * i + k]
                n = ROLE_ACTION_COUNTS[role]
                np.testing.assert_array_equal(slot[:n], np.asarray(env.hospital.role_mask(role, flat), bool))
                assert not slot[n:].any(), "padded actions must always be masked"
                np.testing.assert_array_equal(obs[3 * i + k], encode_shared(role, env._builder.role(role)))
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, rewards, dones, infos = vec.step(actions)
        assert rewards.shape == (6,)
        for i in range(2):
            assert len(set(rewards[3 * i : 3 * i + 3])) == 1  # the team reward, every slot
            if dones[3 * i]:
                assert "terminal_observation" in infos[3 * i] and "episode" in infos[3 * i]
    assert sum(env.hospital.counters.invalid_actions for env in vec.envs) == 0


def test_role_env_with_heuristic_others_matches_aec_turns():
    heur = HeuristicPolicy()
    others = {r: (lambda obs, mask, r=r: heur.act_role(r, obs, mask)) for r in ROLES if r != "bed_manager"}
    env = RoleEnv("bed_manager", others, ("surge",))
    obs, _ = env.reset(seed=5)
    assert env.aec.agent_selection == "bed_manager" and obs.shape == env.observation_space.shape
    steps, done = 0, False
    while not done:
        mask = env.action_masks()
        assert mask.shape == (ROLE_ACTION_COUNTS["bed_manager"],) and mask[0]
        obs, _reward, term, trunc, info = env.step(0)
        done = term or trunc
        steps += 1
    assert "episode" in info and steps == info["episode"]["l"]
    assert env.aec.hospital.counters.invalid_actions == 0
