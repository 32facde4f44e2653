"""The radiotherapy planning env as an OpenEnv ``Environment``, for THE server.

    hospital-marl serve --env radiotherapy [--task head_neck] [--web]
    HOSPITAL_ENV=radiotherapy uvicorn server.app:app       # task from $HOSPITAL_RT_TASK

:class:`RTEnvironment` is a thin view of
:class:`hospital_marl.radiotherapy.RadiotherapyPlanningEnv`: the same seed and actions give
the in-process trajectory. :func:`server.app.build_app` serves it with every guard and
session limit the ED gets (``/ws``, ``/mcp``, stateful HTTP, ``/sessions``, the web view):
this module only declares the wire models. A reset may name the task
(``{"seed": 0, "task": "head_neck"}``).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import numpy as np
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import BaseModel, ConfigDict, Field, StrictStr, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

import hospital_marl
from hospital_marl.radiotherapy import RadiotherapyPlanningEnv
from hospital_marl.radiotherapy.core.plan import ACTIONS, N_ACTIONS
from hospital_marl.radiotherapy.core.tasks import TASKS, get_task
from server.environment import EpisodeEndedError, EpisodeNotStartedError
from server.models import MAX_SEED, HospitalStepRequest, json_int
from server.settings import DEFAULT_RT_TASK

ACTION_DESCRIPTION = ", ".join(f"{a.id} {a.name}" for a in ACTIONS)
"""The action field's description, from THE action table (written once: it said 8 when there were 10)."""


class RTAction(Action):
    """One planning action of SPEC-RT's table (§3, apertures §8): ``{"action": n}``."""

    model_config = ConfigDict(extra="forbid")

    action: json_int(0, N_ACTIONS - 1) = Field(  # type: ignore[valid-type]
        description=ACTION_DESCRIPTION
    )


class RTObservation(Observation):
    """The env's Dict observation as JSON lists, the action mask, the score and the plan metrics."""

    model_config = ConfigDict(extra="forbid")

    task: str
    observation: dict[str, list[Any]] = Field(
        description="each key of the gym Dict observation, as nested lists"
    )
    action_mask: list[bool]
    score: float = Field(ge=0.0, le=1.0)
    metrics: dict[str, Any]
    invalid_actions: int = Field(ge=0)
    steps: int = Field(ge=0)


_PAIR = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
"""A beam's ``[angle, weight]`` as JSON Schema without ``prefixItems``: the tuple's own schema is
valid OpenAPI 3.1, but schemathesis rewrites it into a form its validator rejects (a "Schema
Error" on every ``GET /state`` response); the pair's types are said in the description."""


class RTState(State):
    """The session's episode."""

    task: str
    seed: int | None = None
    started: bool = False
    score: float = 0.0
    beams: list[Annotated[tuple[int, float], WithJsonSchema(_PAIR)]] = Field(
        default_factory=list, description="[angle in whole degrees, weight] per beam"
    )


class RTResetParams(BaseModel):
    """Parameters of an RT ``reset`` (HTTP body, WebSocket ``reset`` data, client keyword arguments)."""

    model_config = ConfigDict(extra="forbid")

    seed: json_int(0, MAX_SEED) | None = Field(  # type: ignore[valid-type]
        default=None, description="defines the patient (phantom); same seed and actions, same plan"
    )
    episode_id: Annotated[StrictStr, Field(max_length=255)] | None = Field(
        default=None, description="your label for the episode (default: a fresh UUID)"
    )
    task: StrictStr | None = Field(
        default=None,
        description="a registered RT task; default: the server's (--task / HOSPITAL_RT_TASK)",
        json_schema_extra=lambda schema: schema.update(enum=[*TASKS, None]),
    )

    @field_validator("task")
    @classmethod
    def _known_task(cls, name: str | None) -> str | None:
        if name is not None and name not in TASKS:
            raise PydanticCustomError(
                "unknown_task",
                "unknown task '{name}'; valid names: {valid}",
                {"name": name, "valid": ", ".join(TASKS)},
            )
        return name


class RTResetRequest(RTResetParams):
    """``POST /reset`` body: reset parameters, and optionally a session to reuse."""

    session_id: StrictStr | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="reset this existing HTTP session instead of opening a new one (an unknown id opens one)",
    )


class RTStepRequest(HospitalStepRequest):
    """``POST /step`` body: the RT action and the HTTP session it continues (the ED's other fields)."""

    action: RTAction  # type: ignore[assignment]


class RTEnvironment(Environment[RTAction, RTObservation, RTState]):
    """One planning episode at a time, for one client session."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, task: str | None = None) -> None:
        super().__init__()
        self.default_task = get_task(task or DEFAULT_RT_TASK).name
        self.env = RadiotherapyPlanningEnv(self.default_task)
        self._state = RTState(task=self.default_task)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> RTObservation:
        """Start a plan. Unknown keyword arguments or tasks are rejected (pydantic ``ValidationError``)."""
        params = RTResetParams.model_validate({"seed": seed, "episode_id": episode_id, **kwargs})
        task = params.task or self.default_task
        if task != self.env.task.name:
            self.env = RadiotherapyPlanningEnv(task)
        obs, info = self.env.reset(seed=params.seed)
        self._state = RTState(
            task=task, seed=params.seed, started=True, episode_id=params.episode_id or str(uuid.uuid4())
        )
        return self._observation(obs, info, None, False)

    def step(
        self, action: RTAction | dict[str, Any] | int, timeout_s: float | None = None, **kwargs: Any
    ) -> RTObservation:
        """One planning action; an illegal one changes nothing and is counted, as in process."""
        if not isinstance(action, RTAction):
            action = RTAction.model_validate(action if isinstance(action, dict) else {"action": action})
        if not self._state.started:
            raise EpisodeNotStartedError("no plan in this session yet: reset first")
        if self.env.plan.done:
            raise EpisodeEndedError("the plan is locked (the episode has ended); reset to start another")
        obs, reward, terminated, truncated, info = self.env.step(int(action.action))
        self._state.step_count += 1
        return self._observation(obs, info, reward, terminated or truncated)

    @property
    def state(self) -> RTState:
        self._state.score = self.env.plan.score
        self._state.beams = self.env.plan.beams()
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="hospital_marl radiotherapy planning",
            description="Place, turn and weight up to seven beams and lock the plan.",
            version=hospital_marl.__version__,
        )

    def _observation(
        self, obs: dict[str, np.ndarray], info: dict[str, Any], reward: float | None, done: bool
    ):
        return RTObservation(
            task=info["task"],
            observation={k: v.tolist() for k, v in obs.items()},
            action_mask=info["action_mask"].tolist(),
            score=info["score"],
            metrics=info["metrics"],
            invalid_actions=info["invalid_actions"],
            steps=info["steps"],
            reward=reward,
            done=done,
        )
