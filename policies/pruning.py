"""Dominated-action pruning: a policy-design option for learned flat policies (``--prune``).

The env's mask (SPEC §5) says what is *valid*. Some valid actions are never worth a
tick: they spend a scarce resource while it is not scarce. This module names them, so
a learner can be trained and act on the valid actions minus these (MaskablePPO with
``hospital-marl train ppo --prune``). It is domain knowledge handed to the learner, the
same rules the heuristic and the planner follow; a model trained with it is labelled
so wherever it is reported, and never changes the env's own mask.

Pruned (only ever on top of the env's mask; the no-op is never pruned):

- a ventilator while no ICU patient needs one and lacks it: it would go to a patient who
  does not need it and stay wasted for 3 ticks (SPEC §2's "panic ventilator use");
- an ICU admission or transfer of a non-critical patient (severity < 4) while a general
  bed is free: the general bed is adequate care for them, and the ICU bed is blocked;
- a general-bed admission of a critical patient while an ICU bed is free: the ICU bed is
  adequate care for them, the general bed is not;
- an early discharge while a general bed is free: nobody needs the bed, and the patient
  may bounce back sicker;
- stepping down an ICU patient who is not ready while an ICU bed is free: nobody needs
  the bed, and the patient's care is cut short.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hospital_marl.core.actions import ACTION_TABLE, Kind
from hospital_marl.core.constants import CRITICAL_SEVERITY as CRITICAL


def _flat(kind: Kind) -> np.ndarray:
    """The kind's flat actions in index order (queue slot, board position, ICU bed, ventilator)."""
    return np.array([spec.flat for spec in ACTION_TABLE if spec.kind == kind])


_ADMIT_GENERAL, _ADMIT_ICU = _flat(Kind.ADMIT_GENERAL), _flat(Kind.ADMIT_ICU)
_TRANSFER, _EARLY = _flat(Kind.TRANSFER_ICU), _flat(Kind.EARLY_DISCHARGE)
_STEP_DOWN, _VENTILATE = _flat(Kind.DISCHARGE_ICU), _flat(Kind.VENTILATE)


def prune_dominated(observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> np.ndarray:
    """The env's flat mask minus the dominated actions above (a new bool array of 39)."""
    mask = np.array(action_mask, dtype=bool)
    free_general, free_icu = observation["capacity"][0] > 0, observation["capacity"][1] > 0
    if not (observation["icu_needs_vent"] * (1 - observation["icu_on_vent"])).any():
        mask[_VENTILATE] = False
    if free_general:
        mask[_ADMIT_ICU[observation["waiting_queue"][:, 0] < CRITICAL]] = False
        mask[_TRANSFER[observation["bed_occupancy"][: len(_TRANSFER)] < CRITICAL]] = False
        mask[_EARLY] = False
    if free_icu:
        mask[_ADMIT_GENERAL[observation["waiting_queue"][:, 0] >= CRITICAL]] = False
        mask[_STEP_DOWN[np.asarray(observation["icu_ready"]) == 0]] = False
    return mask
