"""The trainers' flags, defaults, help and recorded commands are what they were before their
``Args`` shared a base (tests/training/args_surface.json, recorded from the code before the change)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.args_surface import args_classes, surface

RECORDED = json.loads((Path(__file__).with_name("args_surface.json")).read_text())


@pytest.fixture(scope="module")
def current() -> dict:
    return json.loads(json.dumps(surface()))  # tuples -> lists, as recorded


@pytest.mark.parametrize("trainer", sorted(RECORDED))
def test_args__every_trainer_keeps_its_flags_defaults_and_help(trainer: str, current: dict) -> None:
    assert current[trainer]["fields"] == RECORDED[trainer]["fields"]
    assert current[trainer]["parser"] == RECORDED[trainer]["parser"]


@pytest.mark.parametrize("trainer", ["ppo", "marl", "rllib", "benchmarl"])
def test_args__recorded_command_and_metadata_unchanged(trainer: str, current: dict) -> None:
    assert current[trainer]["command_line"] == RECORDED[trainer]["command_line"]
    assert current[trainer]["as_json"] == RECORDED[trainer]["as_json"]


def test_args__surface_covers_every_trainer() -> None:
    assert set(RECORDED) == set(args_classes())
