"""What counts as an action index, for both environments' cores (one rule).

Ints and integer NumPy scalars or single-element integer arrays in ``[0, n)`` are actions;
anything else (out of range, a float, a bool, a string, ``None``) is an *invalid action*: the
cores count it and carry nothing out, as for a masked-out one (SPEC §3, SPEC-RT §3: an invalid
action is never an error). Kept outside both cores so neither imports the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

INVALID = -1
"""The index the cores carry out for anything that is not an action: nothing, counted."""


def as_action_index(action: Any, n: int) -> int:
    """``action`` as an index in ``[0, n)`` (raises ``IndexError`` / ``TypeError`` otherwise)."""
    if type(action) is int and 0 <= action < n:  # the common cases, first
        return action
    if isinstance(action, np.integer):  # never a bool: np.bool_ is not an np.integer
        index = int(action)
        if not 0 <= index < n:
            raise IndexError(index)
        return index
    if isinstance(action, (bool, np.bool_)):
        raise TypeError("bool is not an action")
    if isinstance(action, np.ndarray):
        if action.shape not in ((), (1,)) or not np.issubdtype(action.dtype, np.integer):
            raise TypeError("action array must be a single integer")
        action = action.reshape(()).item()
    if not isinstance(action, (int, np.integer)):
        raise TypeError(f"action must be an int, got {type(action).__name__}")
    index = int(action)
    if not 0 <= index < n:
        raise IndexError(index)
    return index


def action_index_or_invalid(action: Any, n: int) -> int:
    """:func:`as_action_index`, or :data:`INVALID` for anything that is not an action."""
    try:
        return as_action_index(action, n)
    except (TypeError, ValueError, IndexError):
        return INVALID
