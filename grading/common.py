"""What every grader shares: episode seeds, the agent's own seeds, means and standard errors.

The ED grader (:mod:`grading.grader`) and the radiotherapy grader
(:mod:`grading.radiotherapy`) both seed episode *i* of a scenario or task from
(base seed, name, i) and the agent's randomness from the episode seed, and both
report a mean with its standard error. SPEC §7's "beats" (:func:`beats`) is written here once.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np

from policies.base import policy_seed  # noqa: F401  (the grader's rule; defined with the policy protocol)


def episode_seed(base_seed: int, scenario: str, episode: int) -> int:
    """The seed of one graded episode: a pure function of (base seed, scenario name, index)."""
    seq = np.random.SeedSequence([base_seed, zlib.crc32(scenario.encode()), episode])
    return int(seq.generate_state(1, np.uint64)[0] >> np.uint64(1))


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def stderr(values: Sequence[float]) -> float:
    """Standard error of the mean (sample standard deviation / √n); 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    m = mean(values)
    var = math.fsum((v - m) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(var / len(values))


def check_count(name: str, value: object, low: int) -> None:
    """A clear error for a bad episode count or seed (an int >= low, not a bool)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        kind = "a positive int" if low == 1 else "a non-negative int"
        raise ValueError(f"{name} must be {kind}, got {value!r}")


NO_HEADROOM = 2.0
"""SPEC §7: a scenario where planner − heuristic is below this many points leaves no headroom."""
WITHIN = 1.0
"""SPEC §7: where a scenario leaves no headroom, "beats" means "is within this many points of"."""


def beats(margin: float, headroom: float | None) -> bool:
    """SPEC §7's "beats" for a paired margin (learner − reference): ahead, or within
    :data:`WITHIN` points where the planner's headroom over the heuristic is below
    :data:`NO_HEADROOM` (``headroom=None``: not measured, so strictly ahead)."""
    if headroom is not None and headroom < NO_HEADROOM:
        return margin >= -WITHIN
    return margin > 0
