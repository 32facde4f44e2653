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


def test_shared_hyperparameters__each_is_defined_once_and_used_by_several_trainers() -> None:
    """A field declared with ``shared(name)`` takes the catalogue's help unless it narrows it with a
    docstring of its own; every catalogue entry is used by at least two trainers (else it is not shared)."""
    from dataclasses import fields

    from training.args import SHARED_KEY, Hyperparameters, field_docs, option_docs

    catalogue = field_docs(Hyperparameters)
    users: dict[str, set[str]] = {name: set() for name in catalogue}
    for trainer, cls in args_classes().items():
        own, docs = field_docs(cls), option_docs(cls)
        for f in fields(cls):
            if SHARED_KEY in f.metadata:
                users[f.metadata[SHARED_KEY]].add(trainer)
                assert docs[f.name] == own.get(f.name, catalogue[f.metadata[SHARED_KEY]])
    assert {name: sorted(t) for name, t in users.items() if len(t) < 2} == {}


def test_shared__an_unknown_name_is_refused() -> None:
    from training.args import shared

    with pytest.raises(KeyError, match="learning_rat"):
        shared("learning_rat")
