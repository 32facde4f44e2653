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


def test_docs_rename_for_rllibs_masking_module__gives_its_keys() -> None:
    """docs/use-with.md's wrapper: RLlib's ActionMaskingTorchRLModule wants ``observations``."""
    from gymnasium import spaces
    from pettingzoo.utils import BaseWrapper
    from ray.rllib.env.wrappers.pettingzoo_env import PettingZooEnv

    import hospital_marl

    class RLlibMaskKeys(BaseWrapper):
        def observation_space(self, agent):
            space = self.env.observation_space(agent)
            return spaces.Dict({"observations": space["observation"], "action_mask": space["action_mask"]})

        def observe(self, agent):
            obs = self.env.observe(agent)
            return {"observations": obs["observation"], "action_mask": obs["action_mask"]}

    env = PettingZooEnv(RLlibMaskKeys(hospital_marl.env()))
    obs, _ = env.reset(seed=0)
    for _ in range(3 * len(ROLES)):
        ((agent, o),) = obs.items()
        assert set(o) == {"observations", "action_mask"} and env.observation_space[agent].contains(o)
        obs, *_ = env.step({agent: 0})
