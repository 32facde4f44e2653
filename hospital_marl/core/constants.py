"""The clinical constants of SPEC §2, each written once (as Jumanji keeps an env's in one module).

Every rule that reads a threshold or a condition id reads it from here: the compiled kernel
(numba freezes these at compile time; :mod:`hospital_marl.core.jitcache` empties its cache
when this file changes), the observation writers, the reference policies and the learners'
feature encoder. Plain ints and tuples, no imports: the bottom of the core's layers.
"""

from __future__ import annotations

N_SEVERITIES = 5
"""Severity runs 1..N_SEVERITIES (5 = resuscitation; 0 = an empty slot)."""
MAX_SEVERITY = N_SEVERITIES
"""The only severity that can die (SPEC §2), and the one that always needs a ventilator."""
CRITICAL_SEVERITY = 4
"""SPEC §2: a patient is critical from the first tick their severity reaches this. Below it a
general bed is adequate care, early discharge is allowed, and a treated ICU patient can step
down."""

MAX_GENERAL_BEDS = 32
"""The most general beds a department can have: the state's widest resource row. SPEC §3's
action table addresses general beds through the sorted board (its top five and bottom five),
so the table does not limit them; the board observation shows 20 positions (SPEC §5's shape)."""
BOARD_OBS_ROWS = 20
"""The board positions an observation shows. Above that many occupied beds it shows the
``BOARD_OBS_ROWS - 5`` most severe and the 5 least severe (every board position an action
addresses, and the rules' mildest patient), like the queue shows its first ten."""

CONDITIONS: tuple[str, ...] = ("cardiac", "respiratory", "trauma", "infection", "neuro")
"""Condition names; condition id = index + 1 (0 = empty slot)."""


def condition_id(name: str) -> int:
    """A condition's id by its name in :data:`CONDITIONS` (never by a bare number)."""
    if name not in CONDITIONS:
        raise ValueError(f"unknown condition {name!r}; conditions: {', '.join(CONDITIONS)}")
    return CONDITIONS.index(name) + 1


RESPIRATORY = condition_id("respiratory")
"""SPEC §2: a respiratory patient needs a ventilator while critical (any patient at severity 5)."""
