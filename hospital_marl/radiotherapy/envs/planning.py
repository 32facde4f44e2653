"""The Gymnasium view of the planning core."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from numba import njit

from hospital_marl.action_index import INVALID, action_index_or_invalid
from hospital_marl.radiotherapy.core.dose import MAX_MARGIN, N_ANGLES
from hospital_marl.radiotherapy.core.metrics import D98_GOAL, DVH_BINS, PASS_THRESHOLD, hot_term
from hospital_marl.radiotherapy.core.plan import MAX_BEAMS, MAX_WEIGHT, N_ACTIONS, Plan
from hospital_marl.radiotherapy.core.tasks import MAX_OARS, Task
from hospital_marl.radiotherapy.envs.render import render_ansi, render_rgb_array

RENDER_MODES = ("rgb_array", "ansi")

OBSERVATION_KEYS: dict[str, tuple[tuple[int, ...], str]] = {
    "tumour_dvh": ((DVH_BINS,), "fraction of the tumour receiving ≥ (i+1)/50 × 2 Rx"),
    "oar_dvh": (
        (MAX_OARS, DVH_BINS),
        "per OAR slot: fraction receiving ≥ (i+1)/50 × 2 × its reference dose (its first constraint's); "
        "0 if absent",
    ),
    "oar_present": ((MAX_OARS,), "1 for the slots holding one of the task's OARs"),
    "oar_status": (
        (MAX_OARS, 4),
        "per slot: [priority / 3, worst constraint value / (2 × its limit), max dose / 2 Rx, 1 if any of "
        "its constraints fails], clipped",
    ),
    "tumour_status": (
        (6,),
        "[1 − V95 (coverage shortfall), 1 − D98/0.95 (if < 1), hot-spot term (the worse of the tumour's D2 "
        "over 1.07 Rx and the body's near-max outside it over 1.10 Rx; 1 at 1.15), "
        "V107, Paddick CI, D2 / 2 Rx]",
    ),
    "beams": (
        (MAX_BEAMS, 5),
        "per beam slot: [angle / 360, weight, present, active, aperture margin / 5 voxels]",
    ),
    "anatomy": (
        (MAX_OARS, 3),
        "per OAR slot, seen from the isocentre: the gantry angle θ that points at its centroid as "
        "[(1 + cos θ)/2, (1 + sin θ)/2], and its distance / 32 voxels (what a planner reads on the CT)",
    ),
    "step_fraction": ((1,), "steps taken / step limit"),
}
"""THE observation layout: key -> (shape, meaning). Every value is float32 in [0, 1]."""


_LAYOUT: list[tuple[str, int, int, tuple[int, ...]]] = []  # key, start, stop, shape in one vector
for _key, (_shape, _) in OBSERVATION_KEYS.items():
    _start = _LAYOUT[-1][2] if _LAYOUT else 0
    _LAYOUT.append((_key, _start, _start + int(np.prod(_shape)), _shape))
OBSERVATION_SIZE = _LAYOUT[-1][2]
"""Floats in one observation: its arrays are views of one float32 vector, in :data:`OBSERVATION_KEYS`
order (so the tumour DVH and the OAR DVHs are one (8, 50) block, written in one go)."""


_ANGLE_FRACTIONS = np.arange(N_ANGLES, dtype=np.float32) / np.float32(N_ANGLES)
"""A beam's observed angle (angle / 360) by grid index, as float32 arithmetic gives it."""
_WEIGHT_FRACTIONS = np.arange(MAX_WEIGHT + 1, dtype=np.float32) / np.float32(MAX_WEIGHT)
"""A beam's observed weight by tenths (the weight itself, 0.1–1.0)."""
_MARGIN_FRACTIONS = np.arange(MAX_MARGIN + 1, dtype=np.float32) / np.float32(MAX_MARGIN)
"""A beam's observed aperture margin by voxels (margin / 5)."""


@njit(cache=True, nogil=True)
def _write_doses_and_beams(
    status: np.ndarray,
    beams: np.ndarray,
    oar_doses: np.ndarray,
    scale: np.ndarray,
    angles: np.ndarray,
    weights: np.ndarray,
    margins: np.ndarray,
    n_beams: int,
    active: int,
) -> None:
    """``oar_status`` columns 1–2 (each OAR's mean and max dose from ``oar_doses``, (2, n_oars)
    float64, as float32 × ``scale``, at most 1) and the beam rows (:data:`OBSERVATION_KEYS`) in
    one compiled call, with NumPy's float32 arithmetic (a dozen small NumPy writes cost more)."""
    for j in range(oar_doses.shape[1]):
        status[j, 1] = min(np.float32(oar_doses[0, j]) * scale[j, 0], np.float32(1.0))
        status[j, 2] = min(np.float32(oar_doses[1, j]) * scale[j, 1], np.float32(1.0))
    for i in range(n_beams):
        beams[i, 0] = _ANGLE_FRACTIONS[angles[i]]
        beams[i, 1] = _WEIGHT_FRACTIONS[weights[i]]
        beams[i, 2] = 1.0
        beams[i, 4] = _MARGIN_FRACTIONS[margins[i]]
    if n_beams:
        beams[active, 3] = 1.0


def observation_views(vector: np.ndarray) -> dict[str, np.ndarray]:
    """The Dict observation as views of one (:data:`OBSERVATION_SIZE`,) float32 vector."""
    return {
        key: vector[start:stop] if len(shape) == 1 else vector[start:stop].reshape(shape)
        for key, start, stop, shape in _LAYOUT
    }


OBSERVATION_FORMATS = ("dict", "dict_1d", "flat")
"""``observation_format``: ``"dict"`` (:data:`OBSERVATION_KEYS`' shapes), ``"dict_1d"`` (the same
keys, every block 1-D, row by row: the shapes SB3's ``check_env`` expects, no warning), ``"flat"``
(one float32 vector of :data:`OBSERVATION_SIZE`, the blocks in :data:`OBSERVATION_KEYS`' order)."""


def observation_space(observation_format: str = "dict") -> spaces.Dict | spaces.Box:
    if observation_format not in OBSERVATION_FORMATS:
        raise ValueError(
            f"observation_format must be one of {OBSERVATION_FORMATS}, got {observation_format!r}"
        )
    if observation_format == "flat":
        return spaces.Box(0.0, 1.0, (OBSERVATION_SIZE,), np.float32)
    one_d = observation_format == "dict_1d"
    return spaces.Dict(
        {
            k: spaces.Box(0.0, 1.0, (int(np.prod(shape)),) if one_d else shape, np.float32)
            for k, (shape, _) in OBSERVATION_KEYS.items()
        }
    )


def anatomy(plan: Plan) -> np.ndarray:
    """(7, 3) float32: where each OAR lies from the isocentre (:data:`OBSERVATION_KEYS` ``anatomy``)."""
    out = np.zeros((MAX_OARS, 3), np.float32)
    if plan.phantom is None:
        raise RuntimeError("a plan's anatomy exists after reset()")
    offset = plan.oar_centroids() - np.array(plan.phantom.isocentre)  # (n_oars, 2): rows, columns
    distance = np.hypot(offset[:, 0], offset[:, 1])
    # a beam at gantry θ comes from (−cos θ, sin θ) in (row, column): aim that at the OAR
    n = distance.size
    away = distance > 0  # an OAR centred on the isocentre points at 0°
    cos_t = np.divide(-offset[:, 0], distance, out=np.ones(n), where=away)
    sin_t = np.divide(offset[:, 1], distance, out=np.zeros(n), where=away)
    out[:n, 0] = (1 + cos_t) / 2
    out[:n, 1] = (1 + sin_t) / 2
    out[:n, 2] = np.minimum(1.0, distance / 32)
    return out


class RadiotherapyPlanningEnv(gym.Env):
    """Plan external-beam radiotherapy on a 2-D slice.

    Description:
        Each episode draws a patient (a phantom of the task) from the reset seed.
        The agent adds up to seven beams, turns and weights them and locks the
        plan so that the tumour gets its prescription (the ICRU 50/62 window at ICRU 83's
        points: D98 ≥ 95 %, D2 ≤ 107 % of Rx, conformal) while the organs at risk meet their
        clinical dose-volume constraints.

    Action Space:
        ``Discrete(10)`` (:data:`~hospital_marl.radiotherapy.core.plan.ACTIONS`): add a
        beam, turn ±10°, weight ±0.1, remove, select the next beam, lock, widen / narrow
        the active beam's aperture (margin ±1 voxel around the tumour's projection).
        :meth:`action_masks` (also ``info["action_mask"]``) is exact; an invalid
        action does nothing, costs a step and is counted (``info["invalid_actions"]``).

    Observation Space:
        ``Dict`` of float32 boxes in [0, 1] (:data:`OBSERVATION_KEYS`).

    Rewards:
        The change in the plan's score (potential-based): an episode's return is
        its final score, in [0, 1]; locking early or late is neutral.

    Starting State:
        An empty plan on a phantom drawn from the task's generator.

    Episode End:
        Terminated when the plan is locked; truncated at the task's step limit,
        where the plan is graded as it stands (as if locked).

    Arguments:
        task: a task name (``prostate``, ``head_neck``, ``pediatric_brain``), a
            :class:`Task`, or a mapping of overrides; render_mode: ``rgb_array`` or ``ansi``;
            split: whose anatomy the patients are drawn from (``train``, ``validation``,
            ``test_id``, ``test_ood``: :data:`~hospital_marl.radiotherapy.core.tasks.SPLITS`);
            observation_format: ``"dict"`` (default), ``"dict_1d"`` or ``"flat"``
            (:data:`OBSERVATION_FORMATS`).
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(
        self,
        task: str | Task | None = None,
        render_mode: str | None = None,
        split: str = "train",
        observation_format: str = "dict",
    ) -> None:
        self.observation_space = observation_space(observation_format)
        self.observation_format = observation_format
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be one of {RENDER_MODES} or None, got {render_mode!r}")
        self.render_mode = render_mode
        self.plan = Plan(task, split)
        self.action_space = spaces.Discrete(N_ACTIONS)
        self._last_action: int | None = None
        self._priority = np.zeros(MAX_OARS, np.float32)
        self._present = np.zeros(MAX_OARS, np.float32)
        task = self.plan.task
        n = len(task.oars)
        self._priority[:n] = [o.priority / 3 for o in task.oars]
        self._present[:n] = 1.0
        table = task.constraint_table
        self._inverse_limit = 1.0 / table.limit  # a constraint's value over its limit
        self._constraint_oar = table.oar
        # worst ratio / 2 and max / 2 Rx: 1 = twice the limit, twice Rx
        self._status_scale = np.full((n, 2), 0.5, np.float32)

    @property
    def task(self) -> Task:
        return self.plan.task

    def action_masks(self) -> np.ndarray:
        """(10,) bool: the valid actions (sb3-contrib's MaskablePPO calls this)."""
        return self.plan.action_mask()

    # ----------------------------------------------------------------- api
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.plan.reset(self.np_random)
        self._last_action = None
        self._episode = self._episode_constants()
        return self._observation(), self._info()

    def step(self, action: int):
        if self.plan.phantom is None:
            raise RuntimeError("step before reset")
        if self.plan.done:
            raise RuntimeError("the episode is over: call reset()")
        if type(action) is not int or not 0 <= action < N_ACTIONS:
            action = action_index_or_invalid(action, N_ACTIONS)  # not an action: counted as invalid
        reward, _ = self.plan.step(action)
        self._last_action = None if action == INVALID else action
        return self._observation(), reward, self.plan.locked, self.plan.truncated, self._info()

    # gymnasium types Env.render with a TypeVar bound to nothing (RenderFrame), which no concrete
    # return type can override; these are the frames render_mode gives.
    def render(self) -> np.ndarray | str | None:  # type: ignore[override]
        if self.render_mode is None:
            gym.logger.warn("render() without a render_mode: pass render_mode='rgb_array' or 'ansi'")
            return None
        if self.render_mode == "ansi":
            return render_ansi(self.plan, self._last_action)
        return render_rgb_array(self.plan)

    # -------------------------------------------------------------- views
    def _observation(self) -> dict[str, np.ndarray] | np.ndarray:
        plan, m = self.plan, self.plan.metrics
        if m is None:
            raise RuntimeError("observe after reset()")
        n_oars = len(m.oar_mean)
        # a fresh vector, from the episode's constants (absent OAR slots and beams are 0): copying
        # 489 floats and making 8 views costs less than checking who still holds a recycled one
        vector = self._episode.copy()
        obs = observation_views(vector)
        plan.dvhs(out=vector[: (1 + n_oars) * DVH_BINS].reshape(1 + n_oars, DVH_BINS))  # in [0, 1]
        status = obs["oar_status"]
        status[:n_oars, 3] = [not p for p in m.oar_pass]
        worst = np.zeros(n_oars)
        np.maximum.at(worst, self._constraint_oar, np.multiply(m.constraint_values, self._inverse_limit))
        _write_doses_and_beams(
            status,
            obs["beams"],
            np.array((worst, np.asarray(m.oar_max))),
            self._status_scale,
            plan.angles,
            plan.weights,
            plan.margins,
            plan.n_beams,
            plan.active,
        )
        hot = hot_term(m.d2, m.body_near_max)
        short = max(0.0, 1.0 - m.d98 / D98_GOAL)
        obs["tumour_status"][:] = (1.0 - m.v95, short, hot, m.v107, m.ci, min(1.0, m.d2 / 2))
        obs["step_fraction"][0] = min(1.0, plan.steps / plan.task.max_steps)
        if self.observation_format == "flat":
            return vector
        if self.observation_format == "dict_1d":
            return {key: value.reshape(-1) for key, value in obs.items()}
        return obs

    def _episode_constants(self) -> np.ndarray:
        """The observation's values fixed for the episode (OAR slots, priorities, anatomy), else 0."""
        vector = np.zeros(OBSERVATION_SIZE, np.float32)
        obs = observation_views(vector)
        obs["oar_present"][:] = self._present
        obs["oar_status"][:, 0] = self._priority
        obs["anatomy"][:] = anatomy(self.plan)
        return vector

    def _info(self) -> dict[str, Any]:
        plan = self.plan
        if plan.metrics is None:
            raise RuntimeError("info after reset()")
        return {
            "action_mask": plan.action_mask(),
            "score": plan.score,
            "passed": plan.score >= PASS_THRESHOLD,
            "metrics": plan.metrics.as_dict(plan.task),
            "invalid_actions": plan.invalid_actions,
            "steps": plan.steps,
            "task": plan.task.name,
        }
