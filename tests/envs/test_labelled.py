"""The labelled board: the compact frame inside it unchanged, and the last action in the table's words."""

from __future__ import annotations

import numpy as np
import pytest

from hospital_marl.core.actions import ACTION_GROUPS
from hospital_marl.envs.composed import HospitalEDEnv
from hospital_marl.envs.labelled import describe_action, render_labelled
from hospital_marl.envs.render import FRAME_SHAPE, render_rgb_array


def _played(ticks: int = 30) -> tuple[HospitalEDEnv, int]:
    env = HospitalEDEnv(scenario="mass_casualty")
    _, info = env.reset(seed=3)
    action = 0
    for _ in range(ticks):
        action = int(np.flatnonzero(info["action_mask"])[-1])
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    return env, action


@pytest.mark.parametrize("scale", [1, 2])
def test_labelled__contains_the_rgb_array_frame_pixel_for_pixel(scale: int) -> None:
    env, action = _played()
    frame = render_rgb_array(env.hospital)
    image = render_labelled(env.hospital, action, scale=scale)
    big = np.repeat(np.repeat(frame, scale, axis=0), scale, axis=1)
    h, w = FRAME_SHAPE[0] * scale, FRAME_SHAPE[1] * scale
    # Search the scaled frame in the image: it is pasted whole, not redrawn.
    found = [
        (y, x)
        for y in range(image.shape[0] - h + 1)
        for x in range(0, image.shape[1] - w + 1, scale)
        if np.array_equal(image[y, x : x + w], big[0]) and np.array_equal(image[y : y + h, x : x + w], big)
    ]
    assert len(found) == 1
    assert image.dtype == np.uint8 and image.shape[2] == 3
    assert image.shape[0] > h and image.shape[1] > w  # room for the labels and the legend


def test_labelled__does_not_change_the_compact_frame() -> None:
    env, action = _played()
    before = render_rgb_array(env.hospital)
    render_labelled(env.hospital, action)
    assert np.array_equal(render_rgb_array(env.hospital), before)


def test_describe_action__reads_the_action_table() -> None:
    assert describe_action(None) == "none yet"
    assert describe_action(0) == "no-op"
    first_admit = ACTION_GROUPS[0].label.format(i=0)
    assert describe_action(1) == f"triage: {first_admit}"
    team = describe_action({"triage": 1, "bed_manager": 0, "ventilator_officer": 1})
    expected = f"triage: {first_admit}; bed_manager: no-op; ventilator_officer: put ventilator [0]"
    assert team.startswith(expected)
    with pytest.raises(ValueError, match="flat action"):
        describe_action(39)


def test_labelled__rejects_a_bad_scale() -> None:
    env, _ = _played(1)
    with pytest.raises(ValueError, match="scale"):
        render_labelled(env.hospital, scale=0)
