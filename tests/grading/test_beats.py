"""SPEC §7's "beats": ahead; or, where the planner finds no headroom over the heuristic
(planner − heuristic < 2 points), within 1 point. Cases written from the spec's sentence."""

from __future__ import annotations

import pytest

from grading.common import beats


@pytest.mark.parametrize(
    ("margin", "headroom", "expected"),
    [
        (0.1, 12.5, True),  # ahead where there is headroom
        (0.0, 12.5, False),  # level is not ahead
        (-0.1, 12.5, False),
        (-0.3, 0.0, True),  # night_shift-like: no headroom, within 1 point
        (-1.0, 1.9, True),  # "within 1 point" includes exactly 1
        (-1.01, 1.9, False),
        (-0.5, 2.0, False),  # 2 points of headroom is headroom: strictly ahead again
        (0.4, 0.8, True),
        (-0.2, None, False),  # headroom not measured: no slack
        (0.2, None, True),
    ],
)
def test_beats_follows_spec_7(margin: float, headroom: float | None, expected: bool) -> None:
    assert beats(margin, headroom) is expected
