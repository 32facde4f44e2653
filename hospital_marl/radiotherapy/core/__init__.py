"""The pure radiotherapy-planning core: tasks, phantoms, dose, metrics, the plan (numpy; the
per-step arithmetic compiled by numba in ``kernels``)."""

from hospital_marl.radiotherapy.core.metrics import PASS_THRESHOLD, PlanMetrics, plan_score
from hospital_marl.radiotherapy.core.phantoms import Phantom
from hospital_marl.radiotherapy.core.plan import ACTION_NAMES, ACTIONS, MAX_BEAMS, N_ACTIONS, Plan
from hospital_marl.radiotherapy.core.tasks import BUILTIN_TASKS, OAR, TASKS, Task, get_task, register_task

__all__ = [
    "ACTIONS",
    "ACTION_NAMES",
    "BUILTIN_TASKS",
    "MAX_BEAMS",
    "N_ACTIONS",
    "OAR",
    "PASS_THRESHOLD",
    "TASKS",
    "Phantom",
    "Plan",
    "PlanMetrics",
    "Task",
    "get_task",
    "plan_score",
    "register_task",
]
