"""The radiotherapy planning env served by OpenEnv (SPEC-RT §7): a second environment, chosen at start.

    python -m server.radiotherapy --port 8001 [--task head_neck]
    uvicorn server.radiotherapy:app --port 8001        # task from $HOSPITAL_RT_TASK (default prostate)

This is openenv-core's ``create_app`` as it comes (``/reset``, ``/step``, ``/state``,
``/schema``, ``/health``, ``/metadata`` and one isolated session per WebSocket at ``/ws``)
over :class:`RTEnvironment`, a thin view of
:class:`hospital_marl.radiotherapy.RadiotherapyPlanningEnv`: the same seed and actions
give the in-process trajectory. It lives beside the ED server (``server.app``) rather than
inside it: the ED app's stateful HTTP sessions and limits are not (yet) shared with it.
A reset may name the task (``{"seed": 0, "task": "head_neck"}``).
"""

from __future__ import annotations

import argparse
import os
import uuid
from typing import Any

import numpy as np
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import ConfigDict, Field, StrictInt

from hospital_marl.radiotherapy import RadiotherapyPlanningEnv
from hospital_marl.radiotherapy.core.plan import N_ACTIONS
from hospital_marl.radiotherapy.core.tasks import TASKS, get_task

TASK_VARIABLE = "HOSPITAL_RT_TASK"


class RTAction(Action):
    """One of the 8 planning actions (SPEC-RT §3): ``{"action": n}``."""

    model_config = ConfigDict(extra="forbid")

    action: StrictInt = Field(
        ge=0, lt=N_ACTIONS, description="0 add, 1/2 turn ±10°, 3/4 weight ±0.1, 5 remove, 6 next, 7 lock"
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


class RTState(State):
    """The session's episode."""

    task: str
    seed: int | None = None
    started: bool = False
    score: float = 0.0
    beams: list[tuple[int, float]] = Field(default_factory=list, description="(angle in degrees, weight)")


class RTEnvironment(Environment[RTAction, RTObservation, RTState]):
    """One planning episode at a time, for one client session."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, task: str | None = None) -> None:
        super().__init__()
        self.default_task = get_task(task or os.environ.get(TASK_VARIABLE) or "prostate").name
        self.env = RadiotherapyPlanningEnv(self.default_task)
        self._state = RTState(task=self.default_task)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> RTObservation:
        task = kwargs.pop("task", None) or self.default_task
        if kwargs:
            raise ValueError(f"unknown reset parameters: {sorted(kwargs)}")
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; valid names: {', '.join(TASKS)}")
        if task != self.env.task.name:
            self.env = RadiotherapyPlanningEnv(task)
        obs, info = self.env.reset(seed=seed)
        self._state = RTState(task=task, seed=seed, started=True, episode_id=episode_id or str(uuid.uuid4()))
        return self._observation(obs, info, None, False)

    def step(self, action: RTAction, timeout_s: float | None = None, **kwargs: Any) -> RTObservation:
        if not self._state.started:
            raise RuntimeError("step before reset: reset first")
        if self.env.plan.done:
            raise RuntimeError("the episode is over: reset first")
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
            description="Place, turn and weight up to seven beams and lock the plan (SPEC-RT).",
            version="0.1.0",
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


def make_app(task: str | None = None) -> Any:
    """The FastAPI app serving :class:`RTEnvironment` (one per WebSocket session)."""
    return create_app(lambda: RTEnvironment(task), RTAction, RTObservation, env_name="radiotherapy_planning")


app = make_app()


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(
        prog="python -m server.radiotherapy", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--task", choices=tuple(TASKS), default=None, help="the default task of a reset")
    args = parser.parse_args(argv)
    uvicorn.run(make_app(args.task), host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
