"""The shipped checkpoints as users meet them after `pip install -e .`: ONNX, no torch needed."""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest

import policies
from policies.learned import CHECKPOINT_DIR, INSTALL_HINT, SHIPPED


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """`import torch` / `import sb3_contrib` raise ImportError, as without the `train` extra."""
    for name in ("torch", "sb3_contrib", "stable_baselines3"):
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_checkpoint__is_small_documented_and_exported(name: str) -> None:
    path = CHECKPOINT_DIR / SHIPPED[name]
    assert path.stat().st_size < 1_000_000 and path.with_suffix(".onnx").stat().st_size < 1_000_000
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["command"].startswith("hospital-marl train ppo")
    assert meta["command"] in (CHECKPOINT_DIR / "README.md").read_text()


def test_shipped_ppo_pruned__was_trained_within_the_100k_step_budget() -> None:
    """The recorded run behind ``ppo_pruned``: 100k steps, pruned in training and at play."""
    meta = json.loads((CHECKPOINT_DIR / SHIPPED["ppo_pruned"]).with_suffix(".json").read_text())
    assert meta["prune"] is True and meta["run"]["timesteps"] <= 100_000
    assert "--prune" in meta["command"] and "--timesteps 100000" in meta["command"]


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_load_shipped__plays_without_torch_and_never_an_invalid_action(no_torch: None, name: str) -> None:
    from grading import grade

    policy = policies.load(name)
    track = policy.tracks[0]
    report = grade(policy, episodes=1, seed=0, scenarios=["surge"], track=track)
    assert report["agent"] == name
    if policy.masked:
        assert report["invalid_action_rate"] == 0.0


def test_load_torch_backend__without_torch_fails_naming_the_extra(no_torch: None) -> None:
    assert {"ppo", "team_ppo"} <= set(policies.names())
    with pytest.raises(ImportError, match=re.escape(INSTALL_HINT)):
        policies.load("ppo:backend=torch")


def test_team_ppo__needs_the_bound_simulator_to_act() -> None:
    policy = policies.load("team_ppo")
    policy.reset(seed=0, hospital=None)
    with pytest.raises(RuntimeError, match="simulator"):
        policy.act_role("triage", np.zeros(3, np.float32), np.ones(21, bool))
