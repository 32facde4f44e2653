"""The team track's turn order, defined once (docs: Grading, "The team protocol").

Every tick the three roles act in :data:`TURN_ORDER` (triage, then bed manager, then ventilator
officer), then the tick runs. Two protocols play that order:

- :data:`AEC` -- the graded one (SPEC §7: team policies are graded through the AEC env). Each role
  observes the state the earlier roles of the tick left (the *mid-tick* state), its action is
  carried out at once, and an impossible action is invalid (-1, counted). The AEC env
  (:class:`~hospital_marl.envs.aec.HospitalAECEnv`) and the batched turns of
  :meth:`~hospital_marl.envs.vector.HospitalMARLVectorEnv.turn` play it.
- :data:`SIMULTANEOUS` -- the parallel env's: every role observes the start-of-tick state, the three
  actions are resolved in :data:`TURN_ORDER`, and an action an earlier role made impossible is a
  *conflict* (a no-op, no penalty, counted). :meth:`HospitalMARLVectorEnv.step
  <hospital_marl.envs.vector.HospitalMARLVectorEnv.step>` and the parallel env play it.

A team learner records the protocol it was trained on (``"protocol"`` in its run metadata), and
the grader's team track plays it on that protocol (:mod:`policies.protocol`): an AEC-trained
learner reads its AEC observations; a learner trained simultaneously reads the start-of-tick state
for all three roles and turns a conflict into the no-op, exactly as it was trained. A run that
records no protocol was trained before this module existed, on the simultaneous one.
"""

from __future__ import annotations

from hospital_marl.core.actions import ROLES

TURN_ORDER: tuple[str, ...] = tuple(ROLES)
"""The order the roles act in within a tick, on every team interface."""
AEC = "aec"
SIMULTANEOUS = "simultaneous"
PROTOCOLS: tuple[str, ...] = (AEC, SIMULTANEOUS)
GRADED = AEC
"""The protocol of the grader's team track itself (a learner trained otherwise is adapted to it)."""
UNRECORDED = SIMULTANEOUS
"""The protocol of a team run that records none (every team trainer before this module)."""


def check_protocol(protocol: str) -> str:
    """``protocol`` if it is one of :data:`PROTOCOLS`, else a clear error."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"team protocol must be one of {PROTOCOLS}, got {protocol!r}")
    return protocol


__all__ = ["AEC", "GRADED", "PROTOCOLS", "SIMULTANEOUS", "TURN_ORDER", "UNRECORDED", "check_protocol"]
