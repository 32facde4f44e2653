"""Radiotherapy treatment planning (SPEC-RT): the package's second environment.

``gymnasium.make("hospital_marl/RadiotherapyPlanning-v0", task="head_neck")``, or one id
per built-in task (:func:`task_env_id`: ``hospital_marl/RadiotherapyProstate-v0``, ...).

Layers: ``core/`` (numpy, numba for the per-step kernels: tasks, phantoms, dose, metrics, the
plan) ← ``envs/`` (the Gymnasium env, rendering). Policies live in ``policies/radiotherapy/`` and the
grader in ``grading/radiotherapy.py``, as for the emergency department.
"""

from __future__ import annotations

import gymnasium

from hospital_marl.radiotherapy.core import (
    ACTION_NAMES,
    ACTIONS,
    BUILTIN_TASKS,
    OAR,
    PASS_THRESHOLD,
    TASKS,
    Plan,
    Task,
    get_task,
    register_task,
)
from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv

RT_ENV_ID = "hospital_marl/RadiotherapyPlanning-v0"
ENTRY_POINT = "hospital_marl.radiotherapy.envs.planning:RadiotherapyPlanningEnv"


def task_env_id(task: str) -> str:
    """The per-task id: ``head_neck`` -> ``hospital_marl/RadiotherapyHeadNeck-v0``."""
    return "hospital_marl/Radiotherapy" + "".join(part.capitalize() for part in task.split("_")) + "-v0"


def register_envs() -> None:
    """Register the generic id (``task=`` kwarg) and one id per built-in task (idempotent)."""
    ids: dict[str, dict[str, str]] = {RT_ENV_ID: {}} | {
        task_env_id(name): {"task": name} for name in BUILTIN_TASKS
    }
    for env_id, kwargs in ids.items():
        if env_id not in gymnasium.registry:
            # No max_episode_steps: the env truncates itself at the task's step limit.
            gymnasium.register(id=env_id, entry_point=ENTRY_POINT, kwargs=kwargs)


__all__ = [
    "ACTIONS",
    "ACTION_NAMES",
    "BUILTIN_TASKS",
    "OAR",
    "PASS_THRESHOLD",
    "RT_ENV_ID",
    "TASKS",
    "Plan",
    "RadiotherapyPlanningEnv",
    "Task",
    "get_task",
    "register_envs",
    "register_task",
    "task_env_id",
]
