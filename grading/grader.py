"""The reproducible grader: rollouts -> a JSON-able report.

Every policy is graded on the same days: episode ``i`` of scenario ``s`` is
seeded from ``(seed, s, i)``, and a seed defines the day's patients
independently of the actions, so differences between policies are paired.

``overall_score`` is the mean of the scenario scores; a scenario's score is the
mean over its episodes of the composite (0-100) of each episode's metrics, with
the standard error of that mean. The report's five top-level metrics are the
means over scenarios of each scenario's episode means.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from grading.common import episode_seed, policy_seed
from grading.common import mean as _mean
from grading.common import stderr as _stderr
from hospital_marl.core.metrics import METRIC_NAMES, SCORE_WEIGHTS, WAIT_SCALE, composite_score
from hospital_marl.core.scenarios import Scenario, get_scenario, scenario_names
from hospital_marl.envs.aec import HospitalAECEnv
from hospital_marl.envs.composed import HospitalEDEnv
from policies import as_policy, load
from policies.base import TRACKS, Policy

COUNT_KEYS: tuple[str, ...] = (
    "arrivals",
    "deaths",
    "critical_total",
    "critical_deaths",
    "discharges",
    "critical_saved",
    "early_discharges",
    "bounce_backs",
    "deteriorations",
    "invalid_actions",
    "conflicts",
    "actions",
    "admissions",
    "ticks",
)
"""The counts behind the rates, summed over a scenario's episodes."""

SCORE_FORMULA = (
    f"overall = {SCORE_WEIGHTS['survival_rate']:g}*survival_rate "
    f"+ {SCORE_WEIGHTS['critical_patient_survival']:g}*critical_patient_survival "
    f"+ {SCORE_WEIGHTS['avg_wait_time']:g}*(1 - min(avg_wait_time/{WAIT_SCALE:g}, 1)) "
    f"+ {SCORE_WEIGHTS['resource_utilization']:g}*resource_utilization "
    f"+ {SCORE_WEIGHTS['invalid_action_rate']:g}*(1 - invalid_action_rate)"
)


@dataclass(frozen=True)
class EpisodeResult:
    seed: int
    score: float
    metrics: dict[str, float]
    counts: dict[str, float]
    reward: float


def _result(env_hospital: Any, seed: int) -> EpisodeResult:
    metrics = env_hospital.metrics()
    counts = env_hospital.counters.as_dict()
    return EpisodeResult(seed, composite_score(metrics), metrics, counts, counts["cumulative_reward"])


def run_flat_episode(policy: Policy, scenario: Scenario, seed: int) -> EpisodeResult:
    """One episode on the flat track: one Discrete(39) action per tick through the composed env."""
    env = HospitalEDEnv(scenario=scenario)
    obs, info = env.reset(seed=seed)
    policy.reset(seed=policy_seed(seed), hospital=env.hospital)
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info["action_mask"]))
        done = terminated or truncated
    return _result(env.hospital, seed)


def run_team_episode(policy: Policy, scenario: Scenario, seed: int) -> EpisodeResult:
    """One episode on the team track: one action per role per tick through the AEC env."""
    env = HospitalAECEnv(scenario=scenario)
    env.reset(seed=seed)
    policy.reset(seed=policy_seed(seed), hospital=env.hospital)
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            action = None
        else:
            action = policy.act_role(agent, obs["observation"], obs["action_mask"])
        env.step(action)
    return _result(env.hospital, seed)


RUNNERS: dict[str, Callable[[Policy, Scenario, int], EpisodeResult]] = {
    "flat": run_flat_episode,
    "team": run_team_episode,
}


def summarize_scenario(results: Sequence[EpisodeResult]) -> dict[str, Any]:
    scores = [r.score for r in results]
    return {
        "score": _mean(scores),
        "score_stderr": _stderr(scores),
        "metrics": {m: _mean([r.metrics[m] for r in results]) for m in METRIC_NAMES},
        "counts": {k: sum(r.counts[k] for r in results) for k in COUNT_KEYS},
        "mean_episode_reward": _mean([r.reward for r in results]),
        "episode_scores": scores,
        "episode_seeds": [r.seed for r in results],
    }


def grade(
    policy: Any,
    episodes: int = 10,
    seed: int = 0,
    scenarios: Iterable[str | Scenario] | None = None,
    track: str = "flat",
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """Grade a policy over every scenario (default: the five built-ins).

    Args:
        policy: what you have (:mod:`policies.adapters`): a :class:`~policies.Policy`; an object
            with ``act(observation, action_mask)``; a callable ``f(observation, action_mask) -> int``;
            an SB3 / sb3-contrib model (masks passed as ``action_masks``); on the team track an
            object with ``act_role`` or a mapping role -> any of those; or a name, path or
            ``"module:attribute"`` for :func:`policies.load`.
        episodes: episodes per scenario (10 by default; at half that, paired noise between two
            policies grew markedly on the noisier scenarios when it was measured).
        seed: base seed; episode seeds derive from it, the scenario name and the index.
        scenarios: names or Scenario objects.
        track: ``"flat"`` (one Discrete(39) action per tick) or ``"team"`` (one action per role per tick).
        progress: called as ``progress(scenario_name, episode_index)`` after each episode.

    Returns:
        The report: ``overall_score``, the five metrics, ``scenario_scores``, per-scenario
        breakdowns (``scenarios``) with counts and standard errors, ``track``, ``episodes``, ``seed``.
    """
    if track not in TRACKS:
        raise ValueError(f"track must be one of {TRACKS}, got {track!r}")
    policy = as_policy(load(policy) if isinstance(policy, str) else policy, track)
    if track not in policy.tracks:
        raise ValueError(f"policy {policy.name!r} plays {policy.tracks}, not the {track!r} track")
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        raise ValueError(f"episodes must be a positive int, got {episodes!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    resolved = [get_scenario(s) for s in (scenarios if scenarios is not None else scenario_names())]
    if not resolved:
        raise ValueError("scenarios must not be empty")
    run = RUNNERS[track]
    per_scenario: dict[str, dict[str, Any]] = {}
    for scenario in resolved:
        results = []
        for i in range(episodes):
            results.append(run(policy, scenario, episode_seed(seed, scenario.name, i)))
            if progress is not None:
                progress(scenario.name, i)
        per_scenario[scenario.name] = summarize_scenario(results)
    report: dict[str, Any] = {
        "agent": policy.name,
        "track": track,
        "episodes": episodes,
        "seed": seed,
        "overall_score": _mean([s["score"] for s in per_scenario.values()]),
    }
    for m in METRIC_NAMES:
        report[m] = _mean([s["metrics"][m] for s in per_scenario.values()])
    report["scenario_scores"] = {name: s["score"] for name, s in per_scenario.items()}
    report["scenarios"] = per_scenario
    report["score_formula"] = SCORE_FORMULA
    return report
