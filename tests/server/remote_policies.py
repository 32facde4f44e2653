"""Policies the web view's agent processes load in tests (``"tests.server.remote_policies:Name"``).

They run in a spawned process (:mod:`server.agents`): what they report travels through files
named by environment variables, which the spawned process inherits from the test.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from policies.base import BasePolicy
from policies.planner import PlannerPolicy

PID_FILE = "HOSPITAL_TEST_AGENT_PID_FILE"
"""Where :class:`WhereAmI` appends the id of the process each decision is made in."""
GATE_DIR = "HOSPITAL_TEST_AGENT_GATE_DIR"
"""Where :class:`GatedPlanner` writes ``started`` and waits for ``open``."""


class WhereAmI(BasePolicy):
    """Plays the no-op, writing down the process it decided in."""

    name = "where_am_i"

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        with open(os.environ[PID_FILE], "a") as out:
            out.write(f"{os.getpid()}\n")
        return 0


class GatedPlanner(PlannerPolicy):
    """The planner, whose first decision of a shift waits until the test opens the gate."""

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        gate = Path(os.environ[GATE_DIR])
        (gate / "started").touch()
        deadline = time.monotonic() + 120
        while not (gate / "open").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return super().act(observation, action_mask)
