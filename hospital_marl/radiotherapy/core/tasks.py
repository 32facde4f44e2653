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
from functools import cached_property
from typing import NamedTuple

import numpy as np

from hospital_marl.radiotherapy.core.phantoms import (
    Anatomy,
    Interval,
    PhantomGenerator,
    head_neck_phantom,
    pediatric_brain_phantom,
    prostate_phantom,
)

SPLITS = ("train", "validation", "test_id", "test_ood")
"""Patient splits: training draws, validation (model selection: the band between the training
ranges and the out-of-distribution ones), in-distribution test (the training ranges, held-out
seeds) and out-of-distribution test (outside every training range)."""
N_BUCKETS = 8
"""Digest buckets a patient falls in (:func:`~hospital_marl.radiotherapy.core.phantoms.split_bucket`)."""
SPLIT_BUCKETS: dict[str, tuple[int, ...]] = {
    "train": (0, 1, 2, 3, 4),
    "validation": (5,),
    "test_id": (6,),
    "test_ood": (7,),
}
"""The digest buckets each split keeps (disjoint: no patient is in two splits). Training owns five
of the eight because it draws a patient at every env reset, so its rejections cost throughput
(~1.6 draws per patient instead of 4); the held-out splits are drawn once per graded episode."""
MAX_OARS = 7
"""OAR slots in the observation: every OAR of every built-in task is seen."""
PRIORITIES = {1: "critical", 2: "important", 3: "moderate"}


CONSTRAINT_METRICS: dict[str, str] = {
    "near_max": "D2% (ICRU 83 near-maximum dose) at most the limit: serial organs",
    "mean": "mean dose at most the limit: parallel organs",
    "volume": "V_x (the fraction of the organ receiving at least x Gy) at most `volume`: parallel organs",
}
"""THE constraint types (a structure's type is data, like its limit)."""
METRIC_CODES = {name: code for code, name in enumerate(CONSTRAINT_METRICS)}


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Constraint:
    """One clinical dose-volume point, in Gy at the task's fractionation, with its source.

    ``Constraint("near_max", 50)``: D2% ≤ 50 Gy; ``Constraint("mean", 26)``: mean ≤ 26 Gy;
    ``Constraint("volume", 70, volume=0.20)``: V70Gy ≤ 20 %.
    """

    metric: str
    dose_gy: float
    volume: float | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if self.metric not in CONSTRAINT_METRICS:
            raise ValueError(
                f"Constraint.metric must be one of {list(CONSTRAINT_METRICS)}, got {self.metric!r}"
            )
        if not _number(self.dose_gy) or not 0 < self.dose_gy < 1e3:
            raise ValueError(f"Constraint.dose_gy must be a positive number of Gy, got {self.dose_gy!r}")
        if self.metric == "volume":
            if not _number(self.volume) or not 0 < self.volume < 1:  # type: ignore[operator]
                raise ValueError(f"a volume constraint needs volume in (0, 1), got {self.volume!r}")
        elif self.volume is not None:
            raise ValueError(f"only a volume constraint takes volume, got {self.volume!r} for {self.metric}")

    def describe(self) -> str:
        """``D2% ≤ 50 Gy``, ``mean ≤ 26 Gy``, ``V70Gy ≤ 20 %``."""
        if self.metric == "volume":
            return f"V{self.dose_gy:g}Gy ≤ {100 * self.volume:g} %"  # type: ignore[operator]
        return f"{'D2%' if self.metric == 'near_max' else 'mean'} ≤ {self.dose_gy:g} Gy"


@dataclass(frozen=True)
class OAR:
    """An organ at risk: a priority and its clinical constraints (all must hold for it to pass)."""

    name: str
    priority: int  # 1 = critical (breaking it fails the plan), 2 = important, 3 = moderate
    constraints: tuple[Constraint, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"OAR.name must be a non-empty string, got {self.name!r}")
        if self.priority not in PRIORITIES or isinstance(self.priority, bool):
            raise ValueError(
                f"OAR {self.name}: priority must be one of {sorted(PRIORITIES)}, got {self.priority!r}"
            )
        if isinstance(self.constraints, Constraint):
            object.__setattr__(self, "constraints", (self.constraints,))
        object.__setattr__(
            self, "constraints", tuple(self.constraints) if _iterable(self.constraints) else ()
        )
        if not self.constraints or not all(isinstance(c, Constraint) for c in self.constraints):
            raise ValueError(f"OAR {self.name}: constraints must be one or more Constraint objects")

    @property
    def critical(self) -> bool:
        return self.priority == 1

    @property
    def reference_gy(self) -> float:
        """The first constraint's dose: the OAR's DVH in the observation spans 0–2 × this."""
        return self.constraints[0].dose_gy


def _iterable(value: object) -> bool:
    return isinstance(value, (tuple, list))


class ConstraintTable(NamedTuple):
    """A task's constraints as arrays (× Rx), one row per constraint, OAR by OAR: what the kernels read."""

    oar: np.ndarray  # (n,) int64 the OAR's index
    metric: np.ndarray  # (n,) int64 :data:`METRIC_CODES`
    level: np.ndarray  # (n,) float64 the dose, × Rx (near-max / mean limit, or x of V_x)
    limit: np.ndarray  # (n,) float64 what the value may reach: ``level`` or the V_x volume
    reference: np.ndarray  # (n_oars,) float64 each OAR's reference dose × Rx (DVH span / 2)


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
    anatomy: Mapping[str, Anatomy] | None = field(default=None, compare=False)
    """Split name -> the anatomy distribution its patients come from (:data:`SPLITS`); None: a
    user generator of one argument (``rng -> Phantom``), the same patients in every split."""

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
        for o in self.oars:
            for c in o.constraints:
                if not 0 < c.dose_gy / self.rx_gy <= 2:
                    raise ValueError(
                        f"Task {self.name}: {o.name} {c.describe()} lies outside (0, 2] × Rx "
                        f"({self.rx_gy} Gy)"
                    )
        if self.anatomy is not None:
            missing = set(SPLITS) - set(self.anatomy)
            if missing or not all(isinstance(a, Anatomy) for a in self.anatomy.values()):
                raise ValueError(f"Task {self.name}: anatomy needs an Anatomy for each of {SPLITS}")
        fx = self.fractions
        if not isinstance(fx, int) or isinstance(fx, bool) or not 1 <= fx <= 100:
            raise ValueError(f"Task {self.name}: fractions must be an int in [1, 100], got {fx!r}")

    def anatomy_for(self, split: str) -> Anatomy | None:
        """The anatomy distribution of ``split`` (None for a one-argument user generator)."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLITS)}")
        return None if self.anatomy is None else self.anatomy[split]

    @cached_property
    def constraint_table(self) -> ConstraintTable:
        """The constraints as arrays × Rx (computed once per task)."""
        rows = [(j, c) for j, o in enumerate(self.oars) for c in o.constraints]
        level = np.array([c.dose_gy / self.rx_gy for _, c in rows])
        limit = np.array([c.volume if c.metric == "volume" else c.dose_gy / self.rx_gy for _, c in rows])
        table = ConstraintTable(
            np.array([j for j, _ in rows], np.int64),
            np.array([METRIC_CODES[c.metric] for _, c in rows], np.int64),
            level,
            limit.astype(np.float64),
            np.array([o.reference_gy / self.rx_gy for o in self.oars]),
        )
        for a in table:
            a.setflags(write=False)
        return table

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
        raise ValueError(f"register_task takes a Task, got {type(task).__name__}")
    if task.name in TASKS and not overwrite:
        raise ValueError(f"task {task.name!r} is already registered (pass overwrite=True to replace it)")
    TASKS[task.name] = task
    return task


def _splits(
    body: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]],
    tumour: tuple[Interval, Interval, Interval],
    offset: tuple[Interval, Interval, Interval],
    layout: tuple[Interval, Interval, Interval],
) -> dict[str, Anatomy]:
    """The four splits from nested ranges: each field's (training, band, outer) interval; validation
    draws from the band just outside the training interval (both sides), test_ood from beyond it."""

    def around(inner: Interval, outer: Interval) -> tuple[Interval, ...]:
        return tuple(iv for iv in ((outer[0], inner[0]), (inner[1], outer[1])) if iv[1] > iv[0]) or (inner,)

    (b_train, b_val, b_ood), fields = body, (tumour, offset, layout)
    train = Anatomy(b_train, *((f[0],) for f in fields))
    val = Anatomy(b_val, *(around(f[0], f[1]) for f in fields))
    ood = Anatomy(b_ood, *(around(f[1], f[2]) for f in fields))
    return {"train": train, "validation": val, "test_id": train, "test_ood": ood}


ANATOMY = {
    # body radius; tumour radius; centre offset from the middle; rectum / bladder gap to the tumour
    "prostate": _splits(
        ((27.0, 28.0), (26.0, 29.0), (24.0, 30.0)),
        ((5.5, 7.0), (5.0, 7.5), (4.0, 8.5)),
        ((0.0, 3.0), (0.0, 4.0), (0.0, 6.0)),
        ((1.5, 3.0), (1.0, 3.5), (0.3, 4.5)),
    ),
    # body scale; tumour scale; tumour centre off the midline; parotids off the midline
    "head_neck": _splits(
        ((0.95, 1.0), (0.92, 1.03), (0.86, 1.06)),
        ((0.9, 1.1), (0.8, 1.2), (0.65, 1.35)),
        ((6.0, 8.0), (5.0, 9.0), (3.5, 11.0)),
        ((18.0, 20.0), (17.0, 21.0), (15.0, 22.0)),
    ),
    # body radius; tumour radius; (unused); gap between tumour and brainstem
    "pediatric_brain": _splits(
        ((28.0, 29.0), (27.0, 30.0), (25.0, 26.0)),
        ((3.6, 4.6), (3.3, 5.0), (3.2, 6.0)),
        ((0.0, 1.0), (0.0, 1.0), (0.0, 1.0)),
        ((2.5, 4.5), (2.0, 5.0), (0.8, 6.0)),
    ),
}
"""The built-in tasks' anatomy per split (docs/radiotherapy.md states them)."""

QUANTEC = "QUANTEC 2010 (Int J Radiat Oncol Biol Phys 76(3) Suppl)"
RTOG_H0225 = (
    "RTOG H-0225 (nasopharynx IMRT) plan-scoring criteria, OAR table: "
    "'Brainstem, optic nerves, chiasm 54 Gy or 1% < 60 Gy; Spinal Cord 45 Gy or 1 cc of Vol. < 50.0 Gy; "
    "Mandible T-M Joint 70 Gy or 1cc < 75.0 Gy'"
)
C = Constraint
PAROTID = (
    f"{QUANTEC}: Deasy et al., salivary glands, S58-S63: 'severe xerostomia ... is usually avoided if at "
    "least one parotid gland is spared to a mean dose of less than ~20 Gy or if both glands are spared to "
    "less than ~25 Gy'; the single-gland figure, applied to each gland (stricter: one constraint per organ)"
)
LARYNX = (
    f"{QUANTEC}: Rancati et al., larynx and pharynx, S64-S69 (mean < 44 Gy); Cancer Radiother 2016;"
    "20:452-8 (head and neck IMRT constraints): 'mean dose to the supra-glottic larynx under 40 to 45 Gy'"
)
PHARYNX = (
    "Cancer Radiother 2016;20:452-8 (head and neck IMRT constraints, pharyngeal constrictor muscles and "
    "larynx): 'keeping the mean dose to the pharyngeal constrictor muscles under 50 to 55 Gy'; at this "
    "level the structure behind the oropharynx is the pharyngeal wall (no head and neck source read "
    "gives a cervical-oesophagus figure; the 34 Gy of the second version was a lung one)"
)
COCHLEA = (
    "Hua et al., IJROBP 2008;72(3):892-9 (children, conformal RT): 'The incidence of hearing loss was "
    "low for a cochlear mean dose of 30 Gy or less and increased at greater than 40-45 Gy'"
)

for _task in (
    Task(
        "prostate",
        (
            OAR(
                "rectum",
                1,
                (
                    C("volume", 50, volume=0.50, source=f"{QUANTEC}: Michalski et al., rectum, S123-S129"),
                    C("volume", 70, volume=0.20, source=f"{QUANTEC}: Michalski et al., rectum, S123-S129"),
                ),
            ),
            OAR(
                "bladder",
                2,
                (
                    C("volume", 65, volume=0.50, source=f"{QUANTEC}: Viswanathan et al., bladder, S116-S122"),
                    C("volume", 70, volume=0.35, source=f"{QUANTEC}: Viswanathan et al., bladder, S116-S122"),
                ),
            ),
        ),
        max_steps=50,
        generator=prostate_phantom,
        anatomy=ANATOMY["prostate"],
        difficulty="easy",
        description="prostate between bladder (anterior) and rectum (posterior)",
        dose_scale=0.3600,
        # conventional fractionation, 1.8 Gy a fraction: RTOG 0126's high-dose arm (its plan-scoring
        # page: "98 % of PTV2 ... at or above 79.2 Gy"); the QUANTEC rectum and bladder data are for
        # conventional fractionation. A 6 mm voxel makes the 56-voxel pelvis 34 cm wide
        rx_gy=79.2,
        fractions=44,
        voxel_mm=6.0,
    ),
    Task(
        "head_neck",
        (
            OAR(
                "spinal_cord",
                1,
                (C("near_max", 45, source=f"{RTOG_H0225}: spinal cord 45 Gy"),),
            ),
            OAR(
                "brainstem",
                1,
                (C("near_max", 54, source=f"{RTOG_H0225}: brainstem 54 Gy"),),
            ),
            OAR("parotid_r", 2, (C("mean", 20, source=PAROTID),)),
            OAR("parotid_l", 2, (C("mean", 20, source=PAROTID),)),
            OAR("mandible", 3, (C("near_max", 70, source=f"{RTOG_H0225}: mandible 70 Gy"),)),
            OAR("larynx", 2, (C("mean", 44, source=LARYNX),)),
            OAR("oesophagus", 2, (C("mean", 50, source=PHARYNX),)),
        ),
        max_steps=60,
        generator=head_neck_phantom,
        anatomy=ANATOMY["head_neck"],
        difficulty="medium",
        description="an oropharyngeal target among seven OARs",
        dose_scale=0.3592,
        rx_gy=70.0,  # 70 Gy in 35 fractions to the gross disease (RTOG H-0225's PTV70)
        fractions=35,
        voxel_mm=3.0,
    ),
    Task(
        "pediatric_brain",
        (
            OAR(
                "brainstem",
                1,
                (
                    C(
                        "near_max",
                        54,
                        source="COG / NCI workshop on brainstem injury in children "
                        "(Haas-Kogan et al., IJROBP 2018): Dmax ≤ 54 Gy",
                    ),
                ),
            ),
            OAR(
                "optic_chiasm",
                1,
                (
                    C(
                        "near_max",
                        54,
                        source=f"COG practice; {QUANTEC}: Mayo et al., optic chiasm, S28-S35 (< 55 Gy)",
                    ),
                ),
            ),
            OAR(
                "cochlea_r",
                2,
                (C("mean", 30, source=COCHLEA),),
            ),
            OAR(
                "cochlea_l",
                2,
                (C("mean", 30, source=COCHLEA),),
            ),
            OAR(
                "brain",
                3,
                (
                    C(
                        "near_max",
                        60,
                        source=f"{QUANTEC}: Lawrence et al., brain, S20-S27 (necrosis, Dmax < 60 Gy)",
                    ),
                ),
            ),
        ),
        max_steps=70,
        generator=pediatric_brain_phantom,
        anatomy=ANATOMY["pediatric_brain"],
        difficulty="hard",
        description="a small tumour beside the brainstem of a child",
        envelopes=frozenset({"brain"}),
        dose_scale=0.3611,
        rx_gy=54.0,  # 54 Gy in 30 fractions of 1.8 Gy: a common paediatric CNS schedule (no protocol cited)
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
