"""Recycled observation buffers: a Dict observation as views of one float32 vector, reused
once nobody holds it (the composed ED env and the radiotherapy env both step faster than
they could build a dozen fresh views per step)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

Views = Callable[[np.ndarray], dict[str, np.ndarray]]
"""The Dict observation as views of a vector (a module-level function, so buffers pickle)."""


class RecycledBuffers:
    """Where an env writes its next observation, and the Dict of views of it that the step
    returns, without rebuilding the views every step.

    Observations behave as fresh: a buffer is written again only when nothing outside this
    object refers to it or to any of its views (CPython reference counts, checked on every
    reuse), e.g. the usual loop that drops the observation from two steps ago. An observation
    someone keeps (in a list, a frame stack, a replay buffer, a tensor made from it) is never
    overwritten: its buffer is retired and a new one made. Each call returns a new dict.
    A reused vector holds the observation before last: write every value.
    """

    __slots__ = ("_next", "_size", "_slots", "_views")

    def __init__(self, size: int, views: Views, slots: int = 2) -> None:
        self._size, self._views = size, views
        self._slots = [self._new() for _ in range(slots)]  # two: the loop holds the last one
        self._next = 0

    @staticmethod
    def _references(slot: list[Any]) -> int:
        return sys.getrefcount(slot[0]) + sum(map(sys.getrefcount, slot[2]))

    def _new(self) -> list[Any]:
        vector = np.empty(self._size, np.float32)
        views = self._views(vector)
        slot: list[Any] = [vector, views, tuple(views.values())]
        del vector, views  # the baseline counts only the slot's own references
        slot.append(self._references(slot))
        return slot

    def __deepcopy__(self, memo: dict[int, Any]) -> RecycledBuffers:
        factory, args = self.__reduce__()  # new buffers: copied views would not be views of the copy
        return factory(*args)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return RecycledBuffers, (self._size, self._views, len(self._slots))

    def take(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """A vector to write the next observation into, and the Dict of views of it."""
        i = self._next
        self._next = (i + 1) % len(self._slots)
        slot = self._slots[i]
        if self._references(slot) != slot[3]:  # still referenced from outside: leave it to them
            self._slots[i] = slot = self._new()
        return slot[0], slot[1].copy()
