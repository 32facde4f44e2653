"""Planning tasks: frozen data in one registry (SPEC-RT §1), like the ED's scenarios.

A task names its organs at risk (priority and mean-dose limit each), its step
limit and the phantom generator that draws a patient per episode. Users define
their own by building a :class:`Task` (validated on construction) and
optionally registering it with :func:`register_task`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from hospital_marl.radiotherapy.core.phantoms import (
    PhantomGenerator,
    head_neck_phantom,
    pediatric_brain_phantom,
    prostate_phantom,
)

MAX_OARS = 7
"""OAR slots in the observation: every OAR of every built-in task is seen."""
PRIORITIES = {1: "critical", 2: "important", 3: "moderate"}


@dataclass(frozen=True)
class OAR:
    """An organ at risk: its constraint is a mean dose at most ``limit`` × Rx."""

    name: str
    priority: int  # 1 = critical (breaking it fails the plan), 2 = important, 3 = moderate
    limit: float  # mean-dose limit, × Rx

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"OAR.name must be a non-empty string, got {self.name!r}")
        if self.priority not in PRIORITIES or isinstance(self.priority, bool):
            raise ValueError(
                f"OAR {self.name}: priority must be one of {sorted(PRIORITIES)}, got {self.priority!r}"
            )
        ok = (
            isinstance(self.limit, (int, float))
            and not isinstance(self.limit, bool)
            and math.isfinite(self.limit)
        )
        if not ok or not 0 < self.limit <= 2:
            raise ValueError(f"OAR {self.name}: limit must be in (0, 2] × Rx, got {self.limit!r}")

    @property
    def critical(self) -> bool:
        return self.priority == 1


@dataclass(frozen=True)
class Task:
    """One planning task: the OARs, the step limit and how patients are drawn."""

    name: str
    oars: tuple[OAR, ...]
    max_steps: int
    generator: PhantomGenerator = field(compare=False)
    difficulty: str = ""
    description: str = ""
    envelopes: frozenset[str] = frozenset()
    """OARs that may contain other OARs (the whole brain contains the brainstem)."""
    dose_scale: float | None = None
    """k: central-axis dose per unit beam weight, × Rx; None = calibrate on first use
    (:mod:`hospital_marl.radiotherapy.core.calibration`)."""
    rx_gy: float = 60.0
    """The prescription: total dose to the target, Gy (doses inside the env are × this)."""
    fractions: int = 30
    """Fractions the prescription is delivered in (the constraints assume this schedule)."""
    voxel_mm: float = 3.0
    """Voxel edge, mm (the slice is 64 × 64 voxels)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "oars", tuple(self.oars))
        object.__setattr__(self, "envelopes", frozenset(self.envelopes))
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Task.name must be a non-empty string, got {self.name!r}")
        if not 1 <= len(self.oars) <= MAX_OARS or not all(isinstance(o, OAR) for o in self.oars):
            raise ValueError(f"Task {self.name}: oars must be 1–{MAX_OARS} OAR objects, got {self.oars!r}")
        names = self.oar_names
        if len(set(names)) != len(names):
            raise ValueError(f"Task {self.name}: OAR names must be unique, got {names}")
        if not set(self.envelopes) <= set(names):
            raise ValueError(
                f"Task {self.name}: envelopes {sorted(self.envelopes)} must be OAR names {names}"
            )
        if (
            not isinstance(self.max_steps, int)
            or isinstance(self.max_steps, bool)
            or not 2 <= self.max_steps <= 10_000
        ):
            raise ValueError(
                f"Task {self.name}: max_steps must be an int in [2, 10000], got {self.max_steps!r}"
            )
        if not callable(self.generator):
            raise ValueError(
                f"Task {self.name}: generator must be callable (rng -> Phantom), got {self.generator!r}"
            )
        k = self.dose_scale
        if k is not None and (
            not isinstance(k, (int, float)) or isinstance(k, bool) or not math.isfinite(k) or k <= 0
        ):
            raise ValueError(f"Task {self.name}: dose_scale must be a positive number or None, got {k!r}")
        for label, value in (("rx_gy", self.rx_gy), ("voxel_mm", self.voxel_mm)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < 1e3:
                raise ValueError(f"Task {self.name}: {label} must be a positive number, got {value!r}")
        fx = self.fractions
        if not isinstance(fx, int) or isinstance(fx, bool) or not 1 <= fx <= 100:
            raise ValueError(f"Task {self.name}: fractions must be an int in [1, 100], got {fx!r}")

    @property
    def dose_per_fraction_gy(self) -> float:
        return self.rx_gy / self.fractions

    def gy(self, relative: float) -> float:
        """A dose × Rx in Gy."""
        return relative * self.rx_gy

    @property
    def oar_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.oars)

    def with_overrides(self, **changes: object) -> Task:
        """A validated copy with some fields changed (e.g. ``max_steps=30``)."""
        return replace(self, **changes)  # type: ignore[arg-type]


TASKS: dict[str, Task] = {}
"""The registry: name -> Task. Built-ins first, in difficulty order."""


def register_task(task: Task, *, overwrite: bool = False) -> Task:
    """Make a task selectable by name (``gym.make(..., task=name)``, the grader)."""
    if not isinstance(task, Task):
        raise TypeError(f"register_task takes a Task, got {type(task).__name__}")
    if task.name in TASKS and not overwrite:
        raise ValueError(f"task {task.name!r} is already registered (pass overwrite=True to replace it)")
    TASKS[task.name] = task
    return task


for _task in (
    Task(
        "prostate",
        (OAR("rectum", 1, 0.40), OAR("bladder", 2, 0.50)),
        max_steps=50,
        generator=prostate_phantom,
        difficulty="easy",
        description="prostate between bladder (anterior) and rectum (posterior)",
        dose_scale=0.5756,
        # conventional fractionation (RTOG 0415 / the QUANTEC rectum and bladder data are for it);
        # a 6 mm voxel makes the 56-voxel pelvis 34 cm wide
        rx_gy=78.0,
        fractions=39,
        voxel_mm=6.0,
    ),
    Task(
        "head_neck",
        (
            OAR("spinal_cord", 1, 0.45),
            OAR("brainstem", 1, 0.45),
            OAR("parotid_r", 2, 0.26),
            OAR("parotid_l", 2, 0.26),
            OAR("mandible", 3, 0.60),
            OAR("larynx", 2, 0.40),
            OAR("oesophagus", 2, 0.34),
        ),
        max_steps=60,
        generator=head_neck_phantom,
        difficulty="medium",
        description="an oropharyngeal target among seven OARs",
        dose_scale=0.5974,
        rx_gy=70.0,  # RTOG 0522 / NRG HN: 70 Gy in 35 fractions to the gross disease
        fractions=35,
        voxel_mm=3.0,
    ),
    Task(
        "pediatric_brain",
        (
            OAR("brainstem", 1, 0.30),
            OAR("optic_chiasm", 1, 0.25),
            OAR("cochlea_r", 2, 0.20),
            OAR("cochlea_l", 2, 0.20),
            OAR("brain", 3, 0.60),
        ),
        max_steps=70,
        generator=pediatric_brain_phantom,
        difficulty="hard",
        description="a small tumour beside the brainstem of a child",
        envelopes=frozenset({"brain"}),
        dose_scale=0.4449,
        rx_gy=54.0,  # COG (e.g. ACNS0221 / ACNS0831): 54 Gy in 30 fractions (1.8 Gy each)
        fractions=30,
        voxel_mm=3.0,
    ),
):
    register_task(_task)

BUILTIN_TASKS: tuple[str, ...] = tuple(TASKS)
DEFAULT_TASK = "prostate"


def get_task(task: str | Task | Mapping[str, object] | None = None) -> Task:
    """A task by name, a Task itself, or a mapping of overrides on the default (``{"max_steps": 30}``)."""
    if task is None:
        return TASKS[DEFAULT_TASK]
    if isinstance(task, Task):
        return task
    if isinstance(task, Mapping):
        base = TASKS[str(task.get("name", DEFAULT_TASK))]
        return base.with_overrides(**{k: v for k, v in task.items() if k != "name"})
    if isinstance(task, str):
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; valid names: {', '.join(TASKS)}")
        return TASKS[task]
    raise TypeError(f"task must be a name, a Task or a mapping, got {type(task).__name__}")
