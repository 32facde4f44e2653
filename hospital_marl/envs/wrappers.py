"""Gymnasium wrappers for training on the composed and team envs.

:class:`ScoreReward` pays out the graded composite score tick by tick,
for learners that should optimise what the benchmark grades rather than the
env's dense reward; :class:`VectorScoreReward` does the same for the batched
envs (:mod:`hospital_marl.envs.vector`). Both pay :func:`score_step`, the rule written
once over arrays. The env's own reward stays the default everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import VectorEnv, VectorWrapper

from hospital_marl.core.hospital import Hospital
from hospital_marl.core.kernel import CRITICAL_SEVERITY
from hospital_marl.core.metrics import (
    SCORE_WEIGHTS,
    WAIT_SCALE,
    EpisodeCounters,
    composite_score,
    episode_metrics,
)

EMPTY_SHIFT_SCORE = composite_score(episode_metrics(EpisodeCounters()))
"""The composite of a shift with no patients and no actions (90): the zero of :class:`ScoreReward`."""


def score_step(
    now: Any,
    prev: Any,
    arrivals: Any,
    critical: Any,
    ticks: Any,
    weights: Mapping[str, float] = SCORE_WEIGHTS,
) -> Any:
    """What one step changes in the composite score (:class:`ScoreReward`'s rule), elementwise.

    ``now`` / ``prev``: the counters after / before the step, as attributes (an
    :class:`EpisodeCounters`, or a namespace of ``(B,)`` arrays); ``arrivals`` and
    ``critical``: the day's arrivals and critical arrivals (at least 1); ``ticks``: the
    episode's length. Scalars in, a scalar out; arrays in, an array out.
    """
    actions = np.maximum(1, now.actions - prev.actions)  # 1 on the flat track, 3 on the team track
    w = weights
    return (
        -w["survival_rate"] * (now.deaths - prev.deaths) / arrivals
        - w["critical_patient_survival"]
        * (now.critical_deaths - prev.critical_deaths)
        / np.maximum(critical, now.critical_total)
        - w["avg_wait_time"] * (now.wait_ticks - prev.wait_ticks) / (WAIT_SCALE * arrivals)
        + w["resource_utilization"] * (now.occupancy_sum - prev.occupancy_sum) / ticks
        - w["invalid_action_rate"] * (now.invalid_actions - prev.invalid_actions) / (ticks * actions)
    )


def _hospital(env: gym.Env) -> Hospital:
    """The department under ``env``'s wrappers; a clear error when it is not one of this package's."""
    hospital = getattr(env.unwrapped, "hospital", None)
    if not isinstance(hospital, Hospital):
        raise TypeError(f"{type(env.unwrapped).__name__} has no hospital: wrap a hospital_marl env")
    return hospital


def _checked_weights(weights: Mapping[str, float]) -> dict[str, float]:
    if set(weights) != set(SCORE_WEIGHTS):
        raise ValueError(f"weights must name exactly {sorted(SCORE_WEIGHTS)}, got {sorted(weights)}")
    return dict(weights)


class ScoreReward(gym.Wrapper):
    """Replaces the reward with the grader's composite score, paid out as it accrues.

    Why: the env's dense reward and the score weigh things differently. The
    ICU-busy bonus is worth up to +10 a shift in every scenario, while what a
    death costs in score points grows as arrivals get fewer: on ``night_shift``
    (the fewest arrivals) a critical death costs many times what keeping mild
    patients in the ICU earns, so a learner on the dense reward learns to fill
    the ICU and then has no bed for the next critical arrival.

    Each step pays what it changes in the composite, using the episode's final
    denominators where they are already known: a death ``-40 / arrivals`` (the
    day's arrivals are drawn at reset), a critical death ``-20 / critical
    patients`` (the day's critical arrivals, or the count so far if higher),
    each waiting patient-tick ``-1 / arrivals``, occupied beds ``+10 * occupancy
    / ticks``, an invalid action ``-10 / actions``. The episode's last step adds
    what those estimates missed (the wait cap, patients who became critical
    later, an early end), so an episode's undiscounted return is exactly its
    graded score minus :data:`EMPTY_SHIFT_SCORE`.

    ``weights`` re-weights the composite's five terms (default: the grader's), e.g. to
    train without the utilisation term; the return identity holds for the re-weighted score.
    Works on any env whose ``unwrapped`` has the simulator as ``.hospital``
    (:class:`~hospital_marl.envs.composed.HospitalEDEnv`, ``HospitalEDTeamEnv``).
    """

    def __init__(self, env: gym.Env, weights: Mapping[str, float] = SCORE_WEIGHTS) -> None:
        super().__init__(env)
        self.weights = _checked_weights(weights)
        self.empty_shift_score = composite_score(episode_metrics(EpisodeCounters()), self.weights)
        self._prev = EpisodeCounters()
        self._arrivals = self._critical = self._ticks = 1
        self._paid = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        hospital = _hospital(self.env)
        self._ticks = hospital.max_ticks
        self._arrivals = max(1, hospital.day.n_patients)
        self._critical = max(1, sum(severity >= CRITICAL_SEVERITY for severity in hospital.day.severity))
        self._prev = hospital.counters.copy()
        self._paid = 0.0
        return obs, info

    def step(self, action: Any):
        obs, _, terminated, truncated, info = self.env.step(action)
        now = _hospital(self.env).counters
        reward = float(score_step(now, self._prev, self._arrivals, self._critical, self._ticks, self.weights))
        self._paid += reward
        if terminated or truncated:
            reward += (
                composite_score(episode_metrics(now), self.weights) - self.empty_shift_score - self._paid
            )
        self._prev = now.copy()
        return obs, reward, terminated, truncated, info


class VectorScoreReward(VectorWrapper):
    """:class:`ScoreReward` for B envs at once: a batched env of :mod:`hospital_marl.envs.vector`.

    Each env's reward is :func:`score_step` (the same rule, vectorised over the batch) and
    its episode's last step adds what the estimates missed, so env ``i``'s undiscounted
    return over an episode is its graded score minus the empty shift's, and its rewards
    equal the scalar wrapper's on the scalar env with the same seed and actions. A finished
    episode's counters come from ``infos["final_info"]`` (same-step autoreset) or the ending
    step's ``infos`` (next-step, ``gym.make_vec``'s; the step after, which restarts the env,
    pays 0), and the next day's start from the env. On
    :class:`~hospital_marl.envs.vector.HospitalMARLVectorEnv` every role gets the team's
    score reward (the score is the team's).
    """

    def __init__(self, env: VectorEnv, weights: Mapping[str, float] = SCORE_WEIGHTS) -> None:
        super().__init__(env)
        self.weights = _checked_weights(weights)
        self.empty_shift_score = composite_score(episode_metrics(EpisodeCounters()), self.weights)
        self._prev: dict[str, np.ndarray] = {}
        self._paid = np.zeros(env.num_envs)

    def _counters(self) -> dict[str, np.ndarray]:
        return self.env.unwrapped.episode_counters()

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        # gymnasium annotates VectorEnv.reset's seed as int | None, yet its own VectorWrapper.reset and
        # SyncVectorEnv pass and take a list of seeds (one per env) as this does
        out = self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]
        self._prev = self._counters()
        self._paid = np.zeros(self.num_envs)
        return out

    def step(self, actions: Any):
        return self._scored(self.env.step(actions))

    def turn(self, role: str, actions: Any) -> np.ndarray:
        """A role's AEC turn (:meth:`HospitalMARLVectorEnv.turn
        <hospital_marl.envs.vector.HospitalMARLVectorEnv.turn>`): no reward until the tick."""
        turn = getattr(self.env, "turn", None)  # the batched multi-agent env's AEC turns only
        if turn is None:
            raise AttributeError(f"{type(self.env).__name__} has no AEC turns (HospitalMARLVectorEnv has)")
        return turn(role, actions)

    def end_tick(self):
        """The tick after the turns, its reward the score's change as :meth:`step`'s."""
        return self._scored(self.env.end_tick())

    def _scored(self, out: tuple) -> tuple:
        obs, rewards, terminated, truncated, infos = out
        ended = _ended(terminated) | _ended(truncated)
        started = self._counters()  # a finished row: its next day's start
        now = dict(started)
        if ended.any():  # same-step: in final_info; next-step: the ending step's own infos
            final = infos.get("final_info", infos)["counters"]
            for name in self._prev:
                if name in final:
                    now[name] = np.where(ended, final[name], started[name])
        prev = self._prev
        reward = score_step(
            SimpleNamespace(**now),
            SimpleNamespace(**prev),
            np.maximum(1, prev["day_patients"]),
            np.maximum(1, prev["day_critical"]),
            prev["max_ticks"],
            self.weights,
        ).astype(np.float64)
        self._paid += reward
        for e in np.flatnonzero(ended).tolist():
            counters = EpisodeCounters(
                **{k: type(v)(now[k][e]) for k, v in EpisodeCounters().as_dict().items() if k in now}
            )
            reward[e] += (
                composite_score(episode_metrics(counters), self.weights)
                - self.empty_shift_score
                - self._paid[e]
            )
            self._paid[e] = 0.0
        self._prev = started
        if isinstance(rewards, dict):
            return obs, {agent: reward.copy() for agent in rewards}, terminated, truncated, infos
        return obs, reward, terminated, truncated, infos


def _ended(flags: Any) -> np.ndarray:
    """``(B,)`` bool from a batched env's terminations (an array, or one array per agent)."""
    if isinstance(flags, dict):
        return np.logical_or.reduce([np.asarray(f, bool) for f in flags.values()])
    return np.asarray(flags, bool)
