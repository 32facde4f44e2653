"""A team learner played on the protocol it was trained on (:mod:`hospital_marl.envs.protocol`).

The grader's team track is the AEC protocol: roles take turns, each reading the state the earlier
roles left. A learner trained that way (``protocol: "aec"`` in its run) plays it as it is. A learner
trained on the simultaneous protocol (the parallel env; every run that records no protocol) never
saw a mid-tick state: :class:`SimultaneousTeamPolicy` plays it exactly as it was trained. At a
tick's first turn it reads every role's observation and mask of the start-of-tick state from the
bound simulator handle (``reset(hospital=...)``, read-only: what the parallel env showed) and asks
the learner for the three actions; each role then plays its planned action, or the no-op if an
earlier role made it impossible (the parallel env's *conflict*: a no-op, no penalty). The tick's
trajectory is then the parallel env's, bit for bit (tests/policies/test_protocol.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hospital_marl.core.hospital import Hospital
from hospital_marl.envs.observations import PRESENCE_SIZE, ROLE_INDEX, ObservationBuilder
from hospital_marl.envs.protocol import AEC, SIMULTANEOUS, TURN_ORDER, UNRECORDED, check_protocol
from policies.base import BasePolicy


class SimultaneousTeamPolicy(BasePolicy):
    """A team policy trained on the simultaneous protocol, played on the graded AEC track as it was
    trained (module docstring). ``conflicts`` counts this episode's planned actions an earlier role
    made impossible (played as the no-op)."""

    tracks: tuple[str, ...] = ("team",)

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self.metadata: dict[str, Any] = getattr(inner, "metadata", {})
        self.protocol = SIMULTANEOUS
        self._builder: ObservationBuilder | None = None
        self._key: tuple[int, int] | None = None
        self._planned: dict[str, int] = {}
        self.conflicts = 0

    def reset(self, seed: int | None = None, hospital: Hospital | Any = None) -> None:
        super().reset(seed=seed, hospital=hospital)
        self.inner.reset(seed=seed, hospital=hospital)
        self._builder = ObservationBuilder(hospital) if hospital is not None else None
        self._key, self._planned, self.conflicts = None, {}, 0

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        h = self.hospital
        if h is None or self._builder is None:
            raise RuntimeError(
                f"{self.name} was trained on the simultaneous protocol and reads the start-of-tick "
                "state: call reset(seed, hospital=env.hospital) (the grader does)"
            )
        key = (id(h), h.tick_count)
        if key != self._key:
            if role != TURN_ORDER[0]:
                raise RuntimeError(f"a tick starts with {TURN_ORDER[0]}'s turn, not {role}'s")
            self._key = key
            self._planned = self._plan(np.asarray(observation))
        planned = self._planned[role]
        if np.asarray(action_mask, bool)[planned]:
            return planned
        self.conflicts += 1
        return 0

    def _plan(self, first: np.ndarray) -> dict[str, int]:
        """Every role's action on the start-of-tick state (the first role's observation is it)."""
        assert self._builder is not None and self.hospital is not None
        vector = self._builder.vector()
        presence = first[len(ROLE_INDEX[TURN_ORDER[0]]) :]  # the "masked" layout's presence blocks
        if len(presence) not in (0, PRESENCE_SIZE):
            raise ValueError(f"unexpected {TURN_ORDER[0]} observation of length {len(first)}")
        planned = {}
        for role in TURN_ORDER:
            observation = np.concatenate([vector[ROLE_INDEX[role]], presence])
            mask = np.asarray(self.hospital.role_mask_array(role))
            planned[role] = int(self.inner.act_role(role, observation, mask))
        return planned

    def act(self, observation: Any, action_mask: np.ndarray) -> int:
        raise NotImplementedError(f"{self.name} plays the team track (grade with track='team')")


def as_trained(policy: Any, protocol: str | None) -> Any:
    """``policy`` as the grader's AEC team track should play it, given the protocol it was trained
    on (None: unrecorded, i.e. :data:`~hospital_marl.envs.protocol.UNRECORDED`)."""
    protocol = check_protocol(protocol or UNRECORDED)
    if protocol == AEC:
        policy.protocol = AEC
        return policy
    return SimultaneousTeamPolicy(policy)


__all__ = ["SimultaneousTeamPolicy", "as_trained"]
