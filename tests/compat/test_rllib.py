"""RLlib's ``PettingZooEnv`` and ``ParallelPettingZooEnv`` with the default PPO module.

In ``observation_format="flat"`` each role observes one ``Box``, which RLlib's default encoder
takes as it is (it has none for the Dict). RLlib's default module does not apply masks: a masked
run needs ``ActionMaskingTorchRLModule`` and its ``{"observations", "action_mask"}`` keys (see
docs/use-with.md). Ray starts in a subprocess, as in ``tests/policies/test_rllib.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hospital_marl import ROLES
from tests.policies.test_rllib import _ray_subprocess

pytestmark = [pytest.mark.rllib, pytest.mark.xdist_group("rllib")]

ROOT = Path(__file__).resolve().parents[2]


def test_rllib_wrappers__train_ppo_with_the_default_encoder() -> None:
    proc = _ray_subprocess([sys.executable, "-m", "tests.compat.rllib_run"], ROOT)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [row["wrapper"] for row in rows] == ["ParallelPettingZooEnv", "PettingZooEnv"]
    for row in rows:
        assert row["env_steps"] >= 300
        assert set(row["modules"]) == set(ROLES)
        assert all(name == "DefaultPPOTorchRLModule" for name in row["modules"].values()), row
        assert set(ROLES) <= set(row["learned"])  # every role's module was updated
