"""The wire types of the OpenEnv server: pydantic Action, Observation and State.

Every bound here is derived from the package's own tables (the 39-action
table, the role action counts, the observation blocks, the scenario
registry), never written twice.

Strictness: action and seed fields are JSON integers (:func:`json_int`):
``"2"``, ``2.5`` and ``true`` are rejected (HTTP 422 / WebSocket
``VALIDATION_ERROR``), never coerced. ``2.0`` is the integer 2, as in JSON
itself and in JSON Schema's ``"type": "integer"`` (the OpenAPI document says
integer, and a client in JavaScript cannot even tell the two apart). An
integer outside the action space (``-1``, ``39``) is rejected the same way:
the wire contract is the ``Discrete(39)`` space, and a value outside it is a
malformed request, not an agent's choice. An action
*inside* the space that the mask marks invalid is carried out exactly as
in-process: it does nothing, costs -1 and is counted.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from openenv.core.env_server.types import Action, Observation, State
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from hospital_marl.core.actions import N_FLAT_ACTIONS, ROLE_ACTION_COUNTS, ROLES
from hospital_marl.core.scenarios import SCENARIOS
from hospital_marl.envs.observations import BLOCK_BY_KEY, BLOCKS, COMPOSED_KEYS

MAX_SEED = 2**63 - 1
"""Largest seed accepted: the grader draws episode seeds below it (``grading.common.episode_seed``),
so every graded day can be replayed over the wire. Seeds above 2**53 need a client whose JSON
keeps integers exact (Python's does; JavaScript's ``Number`` does not)."""

Track = Literal["flat", "team"]


def _json_integer(value: Any) -> Any:
    """A JSON number with no fractional part is an integer (``2.0`` is 2); nothing else converts."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def json_int(ge: int, le: int) -> Any:
    """An integer in ``ge..le`` as JSON and JSON Schema define one: ``2`` or ``2.0``; never
    ``"2"``, ``2.5``, ``true``. (The bounds stay ``minimum``/``maximum`` in the schema.)"""
    return Annotated[StrictInt, Field(ge=ge, le=le), BeforeValidator(_json_integer)]


def _role_field(role: str, what: str) -> Any:
    high = ROLE_ACTION_COUNTS[role] - 1
    return Field(
        default=None,
        description=f"Team track: the {role} role's action, 0..{high} (0 = no-op). {what}",
    )


# ------------------------------------------------------------------- action
_FlatAction = json_int(0, N_FLAT_ACTIONS - 1)
_TriageAction = json_int(0, ROLE_ACTION_COUNTS["triage"] - 1)
_BedManagerAction = json_int(0, ROLE_ACTION_COUNTS["bed_manager"] - 1)
_VentilatorAction = json_int(0, ROLE_ACTION_COUNTS["ventilator_officer"] - 1)
_Seed = json_int(0, MAX_SEED)


def _given(key: str) -> dict[str, Any]:
    """JSON Schema: ``key`` is present and not null."""
    return {"required": [key], "properties": {key: {"type": "integer"}}}


_ONE_FORM: dict[str, Any] = {
    "oneOf": [
        {"title": "flat track", **_given("action"), "not": {"anyOf": [_given(r) for r in ROLES]}},
        {"title": "team track", "anyOf": [_given(r) for r in ROLES], "not": _given("action")},
    ]
}
"""The one-action-form rule in the schema: exactly one of the flat and the team form."""


class HospitalAction(Action):
    """One decision per tick, in exactly one of two forms.

    Flat track (the original's interface): ``{"action": n}`` with ``n`` in
    0..38, the composed env's ``Discrete(39)`` table.

    Team track: ``{"triage": a, "bed_manager": b, "ventilator_officer": c}``,
    one action per role from the same observation, carried out in role order
    like :class:`hospital_marl.HospitalEDTeamEnv` (an action made impossible
    by an earlier role's is a free, counted *conflict*). A role left out
    no-ops. An episode is played on one track: its first step fixes it.

    Giving both forms, or neither, is a validation error.
    """

    model_config = ConfigDict(json_schema_extra=_ONE_FORM)

    action: _FlatAction | None = Field(
        default=None,
        description=f"Flat track: one of the {N_FLAT_ACTIONS} composed actions, 0..{N_FLAT_ACTIONS - 1} "
        "(0 = no-op). See hospital_marl.ACTION_TABLE.",
    )
    triage: _TriageAction | None = _role_field("triage", "1-10 general bed, 11-20 ICU bed for queue slot i.")
    bed_manager: _BedManagerAction | None = _role_field(
        "bed_manager", "1-5 transfer, 6-10 early discharge, 11-15 ICU discharge."
    )
    ventilator_officer: _VentilatorAction | None = _role_field("ventilator_officer", "1-3 ventilator v.")

    @model_validator(mode="after")
    def _exactly_one_form(self) -> HospitalAction:
        # PydanticCustomError (not ValueError): its error carries no exception
        # object, so the error list serialises as JSON on every transport.
        has_team = any(getattr(self, role) is not None for role in ROLES)
        if self.action is None and not has_team:
            raise PydanticCustomError(
                "missing_action",
                "missing action: give the flat `action` (0..{high}) or a team action "
                "(`triage`, `bed_manager`, `ventilator_officer`)",
                {"high": N_FLAT_ACTIONS - 1},
            )
        if self.action is not None and has_team:
            raise PydanticCustomError(
                "ambiguous_action",
                "give either the flat `action` or the team action (`triage`, `bed_manager`, "
                "`ventilator_officer`), not both",
            )
        return self

    @property
    def track(self) -> Track:
        return "flat" if self.action is not None else "team"

    def joint(self) -> dict[str, int]:
        """The team action as one action per role (a role left out no-ops)."""
        return {role: getattr(self, role) or 0 for role in ROLES}


# -------------------------------------------------------------- observation
WIRE_EXCLUDE = frozenset({"reward", "done", "metadata"})
"""The fields OpenEnv's ``serialize_observation`` moves out of (or drops from) the observation."""


class HospitalObservation(Observation):
    """What the server returns after ``reset`` and ``step``.

    The composed env's observation blocks (:data:`hospital_marl.envs.observations.BLOCKS`)
    as JSON lists (raw float values, shapes as in-process; ``waiting_queue`` is
    10 rows of ``[severity, condition_id, waiting_time]``), the 39-action
    validity mask, and the step's outcome. ``reward`` is ``None`` after reset.
    ``done`` is ``terminated or truncated``. ``metrics`` holds the five graded
    metrics once the episode is done; ``info`` holds the tick, the scenario,
    the action's outcome (``info["outcome"]`` flat, ``info["outcomes"]`` per
    role on the team track) and, once done, ``counters`` and ``score``.
    OpenEnv never sends ``metadata`` over the wire: nothing lives there.
    """

    bed_occupancy: list[float] = Field(description=BLOCK_BY_KEY["bed_occupancy"].doc)
    icu_occupancy: list[float] = Field(description=BLOCK_BY_KEY["icu_occupancy"].doc)
    ventilator_status: list[float] = Field(description=BLOCK_BY_KEY["ventilator_status"].doc)
    waiting_queue: list[list[float]] = Field(description=BLOCK_BY_KEY["waiting_queue"].doc)
    time_step: list[float] = Field(description=BLOCK_BY_KEY["time_step"].doc)
    stats: list[float] = Field(description=BLOCK_BY_KEY["stats"].doc)
    board_remaining: list[float] = Field(description=BLOCK_BY_KEY["board_remaining"].doc)
    icu_remaining: list[float] = Field(description=BLOCK_BY_KEY["icu_remaining"].doc)
    icu_needs_vent: list[float] = Field(description=BLOCK_BY_KEY["icu_needs_vent"].doc)
    icu_on_vent: list[float] = Field(description=BLOCK_BY_KEY["icu_on_vent"].doc)
    icu_ready: list[float] = Field(description=BLOCK_BY_KEY["icu_ready"].doc)
    capacity: list[float] = Field(description=BLOCK_BY_KEY["capacity"].doc)

    action_mask: list[bool] = Field(
        description=f"validity of the {N_FLAT_ACTIONS} flat actions (True = the simulator would carry it out)"
    )
    terminated: bool = Field(default=False, description="deaths reached the scenario's max_deaths")
    truncated: bool = Field(default=False, description="the shift ended")
    metrics: dict[str, float] | None = Field(
        default=None, description="the five graded metrics (docs: Grading), once the episode is done"
    )
    info: dict[str, Any] = Field(
        default_factory=dict, description="tick, scenario, outcome(s); at the end counters and score"
    )

    @model_validator(mode="after")
    def _check_shapes(self) -> HospitalObservation:
        for block in BLOCKS:
            shape = np.shape(getattr(self, block.key))
            if shape != block.shape:
                raise PydanticCustomError(
                    "block_shape",
                    "observation block {key} must have shape {expected}, got {actual}",
                    {"key": block.key, "expected": str(block.shape), "actual": str(shape)},
                )
        if len(self.action_mask) != N_FLAT_ACTIONS:
            raise PydanticCustomError(
                "mask_length",
                "action_mask must have {n} entries, got {got}",
                {"n": N_FLAT_ACTIONS, "got": len(self.action_mask)},
            )
        return self

    _plain: bool = PrivateAttr(default=False)

    @classmethod
    def from_simulator(cls, values: dict[str, Any]) -> HospitalObservation:
        """An observation of simulator values, with no validation (the server's per-step path).

        ``values`` holds every field, in field order, as plain JSON values (lists of floats
        and bools, dicts of numbers and strings): the tests check this against validation.
        What pydantic's ``model_construct`` does, without its per-field default handling
        (a fifth of a step's server cost). The result is marked plain, so :meth:`model_dump`
        as OpenEnv's ``serialize_observation`` calls it returns these values as they are.
        """
        obs = object.__new__(cls)
        object.__setattr__(obs, "__dict__", values)
        object.__setattr__(obs, "__pydantic_fields_set__", set(values))
        object.__setattr__(obs, "__pydantic_extra__", None)
        object.__setattr__(obs, "__pydantic_private__", {"_plain": True})
        return obs

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """pydantic's ``model_dump``; OpenEnv's wire call (``exclude`` = reward, done, metadata,
        nothing else) on a plain observation returns its values as they are: the same dict,
        without a third of the server's per-step cost (``tests/server/test_models.py`` checks
        they agree every tick)."""
        if self._plain and kwargs.keys() == {"exclude"} and kwargs["exclude"] == WIRE_EXCLUDE:
            return {k: v for k, v in self.__dict__.items() if k not in WIRE_EXCLUDE}
        return super().model_dump(**kwargs)

    def __eq__(self, other: object) -> bool:
        """Equal field values (how it was built, and so serialised, does not matter)."""
        if not isinstance(other, HospitalObservation):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, like every pydantic model

    def observation_arrays(self) -> dict[str, np.ndarray]:
        """The composed env's Dict observation (float32 arrays of the in-process shapes)."""
        return {key: np.asarray(getattr(self, key), dtype=np.float32) for key in COMPOSED_KEYS}

    def action_mask_array(self) -> np.ndarray:
        """The mask as a bool array, as ``env.action_masks()`` returns it in-process."""
        return np.asarray(self.action_mask, dtype=bool)


_missing = sorted(set(COMPOSED_KEYS) - set(HospitalObservation.model_fields))
if _missing:  # a block was added to the observation table but not to the wire model
    raise ImportError(f"HospitalObservation lacks observation blocks {_missing}: add them as fields")


# -------------------------------------------------------------------- state
class HospitalState(State):
    """The session's episode, as ``GET /state`` and the WebSocket ``state`` message return it."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    started: bool = Field(default=False, description="reset() has been called in this session")
    scenario: str = Field(description="the episode's scenario (or the session default before reset)")
    seed: int | None = Field(default=None, description="the seed that defines this episode's day")
    track: Track | None = Field(default=None, description="flat or team, fixed by the episode's first step")
    tick: int = Field(default=0, ge=0, description="ticks elapsed")
    max_ticks: int = Field(ge=1, description="ticks in a full episode (the shift)")
    queue_length: int = Field(
        default=0, ge=0, description="patients waiting (all of them, not only the first 10)"
    )
    census: dict[str, int] = Field(
        default_factory=dict, description="where every arrived patient is: waiting, general, icu, ..."
    )
    counters: dict[str, int | float] = Field(
        default_factory=dict, description="the counts behind the metrics: arrivals, deaths, discharges, ..."
    )
    cumulative_reward: float = Field(default=0.0, description="sum of this episode's team rewards")
    metrics: dict[str, float] = Field(default_factory=dict, description="the five graded metrics so far")
    score: float | None = Field(default=None, description="the 0-100 composite score, once done")
    done: bool = False
    terminated: bool = False
    truncated: bool = False


# ------------------------------------------------------------ reset request
class ResetParams(BaseModel):
    """Parameters of ``reset`` (HTTP body, WebSocket ``reset`` data, client keyword arguments)."""

    model_config = ConfigDict(extra="forbid")

    seed: _Seed | None = Field(
        default=None,
        description="defines the day (arrivals, case mix); omit for a fresh one. Same seed and "
        "actions give the same trajectory as the in-process env.",
    )
    episode_id: Annotated[StrictStr, Field(max_length=255)] | None = Field(
        default=None, description="your label for the episode (default: a fresh UUID)"
    )
    scenario: StrictStr | None = Field(
        default=None,
        description="a registered scenario name; default: the server's (HOSPITAL_SCENARIO)",
        examples=list(SCENARIOS)[:1],
        json_schema_extra=lambda schema: schema.update(enum=[*SCENARIOS, None]),
    )

    @field_validator("scenario")
    @classmethod
    def _known_scenario(cls, name: str | None) -> str | None:
        if name is not None and name not in SCENARIOS:
            raise PydanticCustomError(
                "unknown_scenario",
                "unknown scenario '{name}'; valid names: {valid}",
                {"name": name, "valid": ", ".join(SCENARIOS)},
            )
        return name


# ---------------------------------------------------- HTTP request/response
SESSION_ID_DOC = (
    "HTTP session returned by POST /reset (also sent as the X-Session-Id header and the "
    "hospital_session cookie)"
)
SESSION_ID_REQUEST_DOC = (
    SESSION_ID_DOC + ". Optional here only because the header or the cookie may carry it instead: "
    "one of the three is required, and with none the answer is 400 NO_SESSION"
)
"""A request's session id: the schema cannot say "one of body, header, cookie", so the text does."""


class HospitalResetRequest(ResetParams):
    """``POST /reset`` body: reset parameters, and optionally a session to reuse."""

    session_id: StrictStr | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="reset this existing HTTP session instead of opening a new one (an unknown id opens one)",
    )


class HospitalStepRequest(BaseModel):
    """``POST /step`` body: the action and the HTTP session it continues."""

    model_config = ConfigDict(extra="forbid")

    action: HospitalAction
    session_id: StrictStr | None = Field(
        default=None, min_length=1, max_length=255, description=SESSION_ID_REQUEST_DOC
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="accepted for OpenEnv compatibility; unused",
    )
    request_id: StrictStr | None = Field(
        default=None, max_length=255, description="accepted for OpenEnv compatibility; echoed nowhere"
    )


class HospitalStepResponse(BaseModel):
    """``POST /reset`` and ``POST /step`` response: OpenEnv's shape plus the session id."""

    model_config = ConfigDict(extra="forbid")

    observation: dict[str, Any] = Field(description="HospitalObservation fields except reward and done")
    reward: float | None = Field(default=None, description="the tick's team reward (None after reset)")
    done: bool = Field(default=False, description="terminated or truncated")
    session_id: str = Field(description=SESSION_ID_DOC)


class SessionLimits(BaseModel):
    active: int = Field(description="sessions open now")
    max: int = Field(description="the capacity: one more is refused")
    idle_timeout_s: float = Field(description="a session idle this long ends")


class PoolLimits(SessionLimits):
    """OpenEnv's pool, shared by ``/ws``, ``/mcp`` WebSockets and HTTP MCP sessions."""

    ws: int = Field(description="open /ws connections")
    mcp_websocket: int = Field(description="open /mcp WebSocket connections")
    mcp_http: int = Field(description="MCP sessions opened over HTTP (openenv/session/create)")


class PerClientLimits(BaseModel):
    max: int | None = Field(description="sessions one client (IP) may hold over every source; null: no cap")
    clients: int = Field(description="clients holding at least one session")


class SessionsResponse(BaseModel):
    """``GET /sessions``: how full the server is, every session source (never lists ids)."""

    http: SessionLimits
    websocket: PoolLimits
    web: SessionLimits | None = Field(description="web-view tabs (null: the web view is off)")
    mcp: SessionLimits | None = Field(
        default=None,
        description="standard MCP sessions (streamable HTTP at /mcp; null: an env with no MCP tools)",
    )
    per_client: PerClientLimits


class ErrorDetail(BaseModel):
    """What went wrong, for a program (``code``) and a person (``message``)."""

    code: str
    message: str


class ErrorResponse(BaseModel):
    """The body of this server's own 4xx answers (FastAPI's 422s keep FastAPI's list form)."""

    detail: ErrorDetail


__all__ = [
    "MAX_SEED",
    "ErrorDetail",
    "ErrorResponse",
    "HospitalAction",
    "HospitalObservation",
    "HospitalResetRequest",
    "HospitalState",
    "HospitalStepRequest",
    "HospitalStepResponse",
    "ResetParams",
    "SessionsResponse",
    "Track",
    "json_int",
]
