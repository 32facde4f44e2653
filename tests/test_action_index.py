"""One rule for what an action index is, in both environments (hospital_marl.action_index).

SPEC §3 and SPEC-RT §3: an invalid action is never an error; it does nothing and is counted.
Anything that is not an index in range is such an action, in the ED and in radiotherapy alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hospital_marl import HospitalEDEnv
from hospital_marl.action_index import INVALID, action_index_or_invalid, as_action_index
from hospital_marl.envs.infos import OUTCOME_NAMES
from hospital_marl.radiotherapy import RadiotherapyPlanningEnv

ACTIONS = [(0, 0), (3, 3), (np.int64(2), 2), (np.uint8(1), 1), (np.array(4), 4), (np.array([5], np.int16), 5)]
NOT_ACTIONS = [
    -1, 10, 10**6, 2**70, 1.5, 2.0, float("nan"), "1", None, True, False, np.bool_(True),
    np.float64(1.0), np.array(1.0), np.array([1, 2]), np.array([[1]]), [1], (1,), {"action": 1},
]  # fmt: skip


@pytest.mark.parametrize(("action", "index"), ACTIONS)
def test_actions__are_their_index(action: Any, index: int) -> None:
    assert as_action_index(action, 10) == index
    assert action_index_or_invalid(action, 10) == index


@pytest.mark.parametrize("action", NOT_ACTIONS, ids=repr)
def test_anything_else__is_the_invalid_action(action: Any) -> None:
    with pytest.raises((TypeError, IndexError)):
        as_action_index(action, 10)
    assert action_index_or_invalid(action, 10) == INVALID


@pytest.mark.parametrize("action", NOT_ACTIONS, ids=repr)
def test_both_environments__count_it_and_go_on(action: Any) -> None:
    """The same input is an invalid action in both envs: a step, counted, nothing carried out."""
    ed = HospitalEDEnv(scenario="normal_day")
    ed.reset(seed=0)
    _, reward, _, _, info = ed.step(action)
    assert (
        OUTCOME_NAMES[info["outcome"]] == "invalid" and reward < 0
    )  # the ED's invalid-action cost (SPEC §4)
    assert ed.hospital.metrics()["invalid_action_rate"] == 1.0
    rt = RadiotherapyPlanningEnv("prostate")
    rt.reset(seed=0)
    _, reward, _, _, info = rt.step(action)
    assert (reward, info["invalid_actions"], info["steps"], rt.plan.n_beams) == (0.0, 1, 1, 0)
