"""What the PettingZoo and vector envs put in ``infos``: the same numeric keys from
``reset()`` and every ``step()`` / ``last()``, so libraries that build an info spec from the
first reset (TorchRL) or store infos in numeric buffers (Tianshou) take them as they are.

==================  =====================================================================
key                 meaning
==================  =====================================================================
``tick``            ticks elapsed in the episode
``invalid_actions`` invalid actions so far this episode (each cost -1)
``conflicts``       conflicts so far (valid when chosen, made impossible by an earlier role)
``outcome``         what became of this role's last action, a code of :data:`OUTCOME_NAMES`
==================  =====================================================================

Before a role has acted (``reset()``), its ``outcome`` is :data:`NOOP` (nothing was done).
"""

from __future__ import annotations

from typing import Any

from hospital_marl.core.hospital import OUTCOMES, Outcome

OUTCOME_NAMES: tuple[str, ...] = tuple(outcome.value for outcome in OUTCOMES)
"""``OUTCOME_NAMES[info["outcome"]]``: ``("done", "noop", "invalid", "conflict")`` (the kernel's codes)."""
OUTCOME_CODES: dict[str, int] = {name: code for code, name in enumerate(OUTCOME_NAMES)}
"""The code of each outcome name (the inverse of :data:`OUTCOME_NAMES`)."""
DONE, NOOP, INVALID, CONFLICT = (OUTCOME_CODES[o.value] for o in OUTCOMES)
INFO_KEYS: tuple[str, ...] = ("tick", "invalid_actions", "conflicts", "outcome")
"""The keys of every role's info in the AEC and parallel envs (and of the vector envs' infos)."""

_CODE_OF: dict[Any, int] = {**{o: c for c, o in enumerate(OUTCOMES)}, **OUTCOME_CODES}


def outcome_code(outcome: Outcome | str | int) -> int:
    """The integer code of an outcome (an :class:`Outcome`, its name, or a code)."""
    if isinstance(outcome, int) and not isinstance(outcome, bool) and 0 <= outcome < len(OUTCOMES):
        return int(outcome)
    try:
        return _CODE_OF[outcome]
    except (KeyError, TypeError):
        raise ValueError(f"not an outcome: {outcome!r} (one of {OUTCOME_NAMES})") from None


assert (DONE, NOOP, INVALID, CONFLICT) == (0, 1, 2, 3)
