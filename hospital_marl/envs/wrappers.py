"""Gymnasium wrappers for training on the composed and team envs.

:class:`ScoreReward` pays out the graded composite score (SPEC §7) tick by tick,
for learners that should optimise what the benchmark grades rather than the
env's dense reward (SPEC §4). The env's own reward stays the default everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from hospital_marl.core.metrics import (
    SCORE_WEIGHTS,
    WAIT_SCALE,
    EpisodeCounters,
    composite_score,
    episode_metrics,
)

EMPTY_SHIFT_SCORE = composite_score(episode_metrics(EpisodeCounters()))
"""The composite of a shift with no patients and no actions (90): the zero of :class:`ScoreReward`."""


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
        if set(weights) != set(SCORE_WEIGHTS):
            raise ValueError(f"weights must name exactly {sorted(SCORE_WEIGHTS)}, got {sorted(weights)}")
        self.weights = dict(weights)
        self.empty_shift_score = composite_score(episode_metrics(EpisodeCounters()), self.weights)
        self._prev = EpisodeCounters()
        self._arrivals = self._critical = self._ticks = 1
        self._paid = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        hospital = self.env.unwrapped.hospital
        self._ticks = hospital.max_ticks
        self._arrivals = max(1, hospital.day.n_patients)
        self._critical = max(1, sum(severity >= 4 for severity in hospital.day.severity))
        self._prev = hospital.counters.copy()
        self._paid = 0.0
        return obs, info

    def step(self, action: Any):
        obs, _, terminated, truncated, info = self.env.step(action)
        now, prev = self.env.unwrapped.hospital.counters, self._prev
        actions = max(1, now.actions - prev.actions)  # 1 on the flat track, 3 on the team track
        w, arrivals, ticks = self.weights, self._arrivals, self._ticks
        reward = (
            -w["survival_rate"] * (now.deaths - prev.deaths) / arrivals
            - w["critical_patient_survival"]
            * (now.critical_deaths - prev.critical_deaths)
            / max(self._critical, now.critical_total)
            - w["avg_wait_time"] * (now.wait_ticks - prev.wait_ticks) / (WAIT_SCALE * arrivals)
            + w["resource_utilization"] * (now.occupancy_sum - prev.occupancy_sum) / ticks
            - w["invalid_action_rate"] * (now.invalid_actions - prev.invalid_actions) / (ticks * actions)
        )
        self._paid += reward
        if terminated or truncated:
            reward += composite_score(episode_metrics(now), w) - self.empty_shift_score - self._paid
        self._prev = now.copy()
        return obs, reward, terminated, truncated, info
