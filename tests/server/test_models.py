"""The wire models: strict typing, bounds from the package's tables, JSON round trips."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("openenv.core", reason="the server tests need the `server` extra")

from pydantic import ValidationError

from hospital_marl.core.actions import N_FLAT_ACTIONS, ROLE_ACTION_COUNTS, ROLES
from hospital_marl.envs.composed import HospitalEDEnv
from hospital_marl.envs.observations import BLOCKS, COMPOSED_KEYS
from server.environment import HospitalEnvironment, as_action
from server.models import HospitalAction, HospitalObservation, HospitalState, ResetParams

pytestmark = pytest.mark.server


def error_types(exc: pytest.ExceptionInfo[ValidationError]) -> set[str]:
    return {e["type"] for e in exc.value.errors()}


@pytest.mark.parametrize(
    "payload",
    [
        {"action": 0},
        {"action": N_FLAT_ACTIONS - 1},
        {"triage": 20},
        {"triage": 1, "bed_manager": 15, "ventilator_officer": 3},
    ],
)
def test_action__round_trips_through_json(payload: dict) -> None:
    action = HospitalAction.model_validate(payload)
    again = HospitalAction.model_validate_json(action.model_dump_json())
    assert again == action
    assert action.model_dump(exclude_none=True, exclude={"metadata"}) == payload


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ({"action": "2"}, "int_type"),
        ({"action": 2.5}, "int_type"),
        ({"action": True}, "int_type"),
        ({"action": [1]}, "int_type"),
        ({"action": -1}, "greater_than_equal"),
        ({"action": N_FLAT_ACTIONS}, "less_than_equal"),
        ({"triage": ROLE_ACTION_COUNTS["triage"]}, "less_than_equal"),
        ({"ventilator_officer": False}, "int_type"),
        ({}, "missing_action"),
        ({"action": None}, "missing_action"),
        ({"action": 1, "triage": 1}, "ambiguous_action"),
        ({"action": 1, "colour": "red"}, "extra_forbidden"),
    ],
)
def test_action__rejects_without_coercion(payload: dict, error: str) -> None:
    with pytest.raises(ValidationError) as exc:
        HospitalAction.model_validate(payload)
    assert error in error_types(exc)
    json.dumps(exc.value.errors(include_url=False))  # every error is JSON (WebSocket error replies)


@pytest.mark.parametrize("number", [2.0, 2])
def test_action__a_json_number_without_fraction_is_an_integer(number: float) -> None:
    # JSON (and JSON Schema's "integer", which the OpenAPI document declares) makes 2.0 the
    # integer 2: a server stricter than its own schema rejects requests the schema admits.
    assert HospitalAction.model_validate({"action": number}).action == 2
    assert HospitalAction.model_validate_json(f'{{"triage": {number}}}').triage == 2
    assert ResetParams.model_validate({"seed": float(number)}).seed == 2


def test_action__json_schema_bounds_come_from_the_action_table() -> None:
    props = HospitalAction.model_json_schema()["properties"]
    flat = props["action"]["anyOf"][0]
    assert (flat["type"], flat["minimum"], flat["maximum"]) == ("integer", 0, N_FLAT_ACTIONS - 1)
    for role in ROLES:
        bounds = props[role]["anyOf"][0]
        assert (bounds["minimum"], bounds["maximum"]) == (0, ROLE_ACTION_COUNTS[role] - 1)


def test_action__team_form_fills_missing_roles_with_noop() -> None:
    action = HospitalAction(bed_manager=4)
    assert action.track == "team"
    assert action.joint() == {"triage": 0, "bed_manager": 4, "ventilator_officer": 0}
    assert HospitalAction(action=7).track == "flat"


def test_as_action__accepts_ints_and_numpy_integers_but_not_bools() -> None:
    assert as_action(3).action == 3
    assert as_action(np.int64(3)).action == 3
    assert as_action(np.array([3])).action == 3
    assert as_action({"triage": 2}).triage == 2
    with pytest.raises(TypeError):
        as_action(True)
    with pytest.raises(TypeError):
        as_action(np.array([1.0]))


def test_observation__has_every_composed_block_and_round_trips() -> None:
    env = HospitalEnvironment(scenario="surge")
    obs = env.reset(seed=4)
    for _ in range(30):
        obs = env.step(int(np.flatnonzero(obs.action_mask)[-1]))
    assert set(COMPOSED_KEYS) <= set(HospitalObservation.model_fields)
    wire = obs.model_dump(mode="json")
    again = HospitalObservation.model_validate(wire)  # validation checks every shape
    assert again == obs
    arrays = again.observation_arrays()
    reference = HospitalEDEnv(scenario="surge").observation_space
    for block in BLOCKS:
        assert arrays[block.key].shape == block.shape
        assert arrays[block.key].dtype == np.float32
    assert reference.contains(arrays)
    assert again.action_mask_array().dtype == bool


def test_observation__server_built_ones_are_what_validation_gives() -> None:
    """The server's observations skip validation (model_construct): every step's must equal a
    validation of the same values, field order included."""
    env = HospitalEnvironment(scenario="mass_casualty")
    obs = env.reset(seed=2)
    while not obs.done:
        obs = env.step(int(np.flatnonzero(obs.action_mask)[-1]))
        assert list(obs.__dict__) == list(HospitalObservation.model_fields)
        validated = HospitalObservation.model_validate(obs.model_dump())
        assert validated == obs and validated.model_dump_json() == obs.model_dump_json()
    assert obs.metrics is not None and "score" in obs.info


def test_observation__rejects_a_wrong_block_shape() -> None:
    wire = HospitalEnvironment().reset(seed=0).model_dump(mode="json")
    wire["waiting_queue"] = wire["waiting_queue"][:9]
    with pytest.raises(ValidationError) as exc:
        HospitalObservation.model_validate(wire)
    assert "block_shape" in error_types(exc)


def test_state__round_trips_before_and_during_an_episode() -> None:
    env = HospitalEnvironment()
    before = env.state
    assert not before.started and before.seed is None
    assert HospitalState.model_validate_json(before.model_dump_json()) == before
    env.reset(seed=9, scenario="night_shift", episode_id="ep-9")
    env.step(0)
    during = env.state
    assert (during.seed, during.scenario, during.episode_id, during.step_count, during.tick) == (
        9,
        "night_shift",
        "ep-9",
        1,
        1,
    )
    assert HospitalState.model_validate_json(during.model_dump_json()) == during


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ({"seed": -1}, "greater_than_equal"),
        ({"seed": "1"}, "int_type"),
        ({"seed": 1.5}, "int_type"),
        ({"seed": True}, "int_type"),
        ({"seed": 2**63}, "less_than_equal"),  # past the largest seed the grader draws
        ({"scenario": "no_such_day"}, "unknown_scenario"),
        ({"scenario": 3}, "string_type"),
        ({"sed": 1}, "extra_forbidden"),
    ],
)
def test_reset_params__reject_bad_values(payload: dict, error: str) -> None:
    with pytest.raises(ValidationError) as exc:
        ResetParams.model_validate(payload)
    assert error in error_types(exc)


@pytest.mark.parametrize("scenario", ["surge", "night_shift"])
def test_observation__wire_form_is_pydantics_own_dump(scenario: str) -> None:
    """The remembered wire form (the server's fast path) equals pydantic's model_dump, every tick."""
    import random

    from openenv.core.env_server.serialization import serialize_observation
    from pydantic import BaseModel

    from server.environment import HospitalEnvironment

    env, rng = HospitalEnvironment(scenario=scenario), random.Random(5)
    obs = env.reset(seed=5)
    while True:
        wire = serialize_observation(obs)
        assert wire["observation"] == BaseModel.model_dump(obs, exclude={"reward", "done", "metadata"})
        assert (wire["reward"], wire["done"]) == (obs.reward, obs.done)
        assert json.loads(json.dumps(wire)) == wire  # plain JSON values
        if obs.done:
            assert wire["observation"]["metrics"] and "score" in wire["observation"]["info"]
            break
        mask = obs.action_mask
        obs = env.step({"action": rng.choice([i for i, ok in enumerate(mask) if ok])})
    # Any other dump goes through pydantic as usual.
    assert "reward" in obs.model_dump() and obs.model_dump(exclude={"info"}).keys() >= {"metrics"}
