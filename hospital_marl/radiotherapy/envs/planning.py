"""The Gymnasium view of the planning core."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from numba import njit

from hospital_marl.radiotherapy.core.dose import N_ANGLES
from hospital_marl.radiotherapy.core.metrics import DVH_BINS, OVERDOSE_SPAN, OVERDOSE_START, PASS_THRESHOLD
from hospital_marl.radiotherapy.core.plan import MAX_BEAMS, MAX_WEIGHT, N_ACTIONS, Plan
from hospital_marl.radiotherapy.core.tasks import MAX_OARS, Task
from hospital_marl.radiotherapy.envs.render import render_ansi, render_rgb_array

RENDER_MODES = ("rgb_array", "ansi")

OBSERVATION_KEYS: dict[str, tuple[tuple[int, ...], str]] = {
    "tumour_dvh": ((DVH_BINS,), "fraction of the tumour receiving ≥ (i+1)/50 × 2 Rx"),
    "oar_dvh": (
        (MAX_OARS, DVH_BINS),
        "per OAR slot: fraction receiving ≥ (i+1)/50 × 2 × its limit; 0 if absent",
    ),
    "oar_present": ((MAX_OARS,), "1 for the slots holding one of the task's OARs"),
    "oar_status": (
        (MAX_OARS, 4),
        "per slot: [priority / 3, mean / (2 × limit), max / (4 × limit), 1 if the constraint fails], clipped",
    ),
    "tumour_status": ((4,), "[1 − V95 (coverage shortfall), 1 − D95 (if < 1), overdose term, V107]"),
    "beams": ((MAX_BEAMS, 4), "per beam slot: [angle / 360, weight, present, active]"),
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


@njit(cache=True, nogil=True)
def _write_doses_and_beams(
    status: np.ndarray,
    beams: np.ndarray,
    oar_doses: np.ndarray,
    scale: np.ndarray,
    angles: np.ndarray,
    weights: np.ndarray,
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
    if n_beams:
        beams[active, 3] = 1.0


def observation_views(vector: np.ndarray) -> dict[str, np.ndarray]:
    """The Dict observation as views of one (:data:`OBSERVATION_SIZE`,) float32 vector."""
    return {
        key: vector[start:stop] if len(shape) == 1 else vector[start:stop].reshape(shape)
        for key, start, stop, shape in _LAYOUT
    }


def observation_space() -> spaces.Dict:
    return spaces.Dict(
        {k: spaces.Box(0.0, 1.0, shape, np.float32) for k, (shape, _) in OBSERVATION_KEYS.items()}
    )


def anatomy(plan: Plan) -> np.ndarray:
    """(7, 3) float32: where each OAR lies from the isocentre (:data:`OBSERVATION_KEYS` ``anatomy``)."""
    out = np.zeros((MAX_OARS, 3), np.float32)
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
        plan so that the tumour gets its prescription (D95 ≈ 1.0 Rx) while the
        organs at risk stay under their mean-dose limits.

    Action Space:
        ``Discrete(8)`` (:data:`~hospital_marl.radiotherapy.core.plan.ACTIONS`): add a
        beam, turn ±10°, weight ±0.1, remove, select the next beam, lock.
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
            :class:`Task`, or a mapping of overrides; render_mode: ``rgb_array`` or ``ansi``.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(self, task: str | Task | None = None, render_mode: str | None = None) -> None:
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be one of {RENDER_MODES} or None, got {render_mode!r}")
        self.render_mode = render_mode
        self.plan = Plan(task)
        self.action_space = spaces.Discrete(N_ACTIONS)
        self.observation_space = observation_space()
        self._last_action: int | None = None
        self._priority = np.zeros(MAX_OARS, np.float32)
        self._present = np.zeros(MAX_OARS, np.float32)
        self._limit = np.ones(MAX_OARS)
        n = len(self.plan.task.oars)
        self._priority[:n] = [o.priority / 3 for o in self.plan.task.oars]
        self._present[:n] = 1.0
        self._limit[:n] = [o.limit for o in self.plan.task.oars]
        # mean / (2 × limit) and max / (4 × limit): 1 = twice (four times) the limit
        self._status_scale = (1.0 / (np.array([[2.0, 4.0]]) * self._limit[:n, None])).astype(np.float32)

    @property
    def task(self) -> Task:
        return self.plan.task

    def action_masks(self) -> np.ndarray:
        """(8,) bool: the valid actions (sb3-contrib's MaskablePPO calls this)."""
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
        if type(action) is not int:  # NumPy integers, 0-d arrays, bools, anything else: the full check
            if isinstance(action, np.ndarray) and action.shape == ():
                action = action.item()
            if not self.action_space.contains(action) or isinstance(action, bool):
                raise ValueError(f"action must be an int in [0, {N_ACTIONS}), got {action!r}")
        elif not 0 <= action < N_ACTIONS:
            raise ValueError(f"action must be an int in [0, {N_ACTIONS}), got {action!r}")
        reward, _ = self.plan.step(int(action))
        self._last_action = int(action)
        return self._observation(), reward, self.plan.locked, self.plan.truncated, self._info()

    def render(self) -> np.ndarray | str | None:
        if self.render_mode is None:
            gym.logger.warn("render() without a render_mode: pass render_mode='rgb_array' or 'ansi'")
            return None
        if self.render_mode == "ansi":
            return render_ansi(self.plan, self._last_action)
        return render_rgb_array(self.plan)

    # -------------------------------------------------------------- views
    def _observation(self) -> dict[str, np.ndarray]:
        plan, m = self.plan, self.plan.metrics
        n_oars = len(m.oar_mean)
        # a fresh vector, from the episode's constants (absent OAR slots and beams are 0): copying
        # 489 floats and making 8 views costs less than checking who still holds a recycled one
        vector = self._episode.copy()
        obs = observation_views(vector)
        plan.dvhs(out=vector[: (1 + n_oars) * DVH_BINS].reshape(1 + n_oars, DVH_BINS))  # in [0, 1]
        status = obs["oar_status"]
        status[:n_oars, 3] = [not p for p in m.oar_pass]
        _write_doses_and_beams(
            status,
            obs["beams"],
            np.array((m.oar_mean, m.oar_max)),
            self._status_scale,
            plan.angles,
            plan.weights,
            plan.n_beams,
            plan.active,
        )
        overdose = min(1.0, max(0.0, (m.d95 - OVERDOSE_START) / OVERDOSE_SPAN))
        obs["tumour_status"][:] = (1.0 - m.v95, max(0.0, 1.0 - m.d95), overdose, m.v107)
        obs["step_fraction"][0] = min(1.0, plan.steps / plan.task.max_steps)
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
        return {
            "action_mask": plan.action_mask(),
            "score": plan.score,
            "passed": plan.score >= PASS_THRESHOLD,
            "metrics": plan.metrics.as_dict(plan.task.oars),
            "invalid_actions": plan.invalid_actions,
            "steps": plan.steps,
            "task": plan.task.name,
        }
