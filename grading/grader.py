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

import math
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from grading.common import episode_seed, policy_seed
from grading.common import mean as _mean
from grading.common import stderr as _stderr
from grading.isolated import FAULTS, INVALID, TIME_LIMIT, FaultBudget, IsolatedPolicy, as_action, in_range
from grading.sandbox import Limits
from hospital_marl.core.actions import ROLES
from hospital_marl.core.hospital import Seal
from hospital_marl.core.metrics import METRIC_NAMES, SCORE_WEIGHTS, WAIT_SCALE, composite_score
from hospital_marl.core.scenarios import Scenario, ScenarioDistribution, resolve_scenario, scenario_names
from hospital_marl.envs.aec import HospitalAECEnv
from hospital_marl.envs.composed import HospitalEDEnv
from policies import as_policy, load
from policies.base import TRACKS, Policy, PolicyUnavailableError

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

FAULT_LIMIT = 0.5
"""More than this share of a policy's decisions faulted (raised, returned no action, timed out):
the report says ``failed`` at its top, and ``evaluate`` / ``compare`` exit with status 1. A fault
is played as the no-op, so such a score measures the no-op, not the policy."""

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


class SealedPolicy(FaultBudget):
    """A policy run in the grader's process behind the sealed view (docs: Sealed evaluation): its ``reset``
    gets a :class:`~hospital_marl.core.hospital.Seal`'s handle, never the episode's simulator,
    and the handle's present is brought up to date before every decision.

    A decision that raises or is not an action of the mask's range is a counted fault
    (``errors``, ``garbage``), played as an invalid action (the no-op), with the isolated
    mode's per-episode budget (:data:`~grading.isolated.MAX_FAULTS`): a bad policy gets a clear
    outcome in the report, never a crashed grader, and the same score either way.

    In one process a policy can still walk back to the grader (its caller's frames, ``gc``
    referrers, the modules it shares): grade code you do not trust with ``isolate=True``."""

    def __init__(self, policy: Policy) -> None:
        super().__init__()
        # A plain object run directly by the episode runners may lack the protocol's labels.
        self.policy = policy
        self.name = getattr(policy, "name", type(policy).__name__)
        self.tracks = getattr(policy, "tracks", ("flat", "team"))
        self._seal: Seal | None = None

    def start(self, seed: int, seal: Seal) -> None:
        self._seal = seal
        self._new_episode()
        self.policy.reset(seed=seed, hospital=seal.handle)

    def _sealed(self) -> Seal:
        if self._seal is None:
            raise RuntimeError("start() an episode before asking for an action")
        return self._seal

    def act(self, observation: Any, action_mask: Any) -> int:
        if self._skip():
            return INVALID
        self._sealed().refresh()
        return self._checked(action_mask, self.policy.act, observation, action_mask)

    def act_role(self, role: str, observation: Any, action_mask: Any) -> int:
        if self._skip():
            return INVALID
        self._sealed().refresh()
        return self._checked(action_mask, self.policy.act_role, role, observation, action_mask)

    def _checked(self, action_mask: Any, decide: Callable[..., Any], *args: Any) -> int:
        try:
            value = decide(*args)
        except PolicyUnavailableError:
            raise  # it cannot play at all: not a decision to count
        except Exception as error:  # the policy's own bug: counted, the episode goes on
            return self._fault("errors", f"{type(error).__name__}: {error}")
        action = as_action(value)
        if action is None:
            return self._fault("garbage", repr(value)[:200])
        if not in_range(action, action_mask):
            return self._fault("garbage", f"not an action of the mask's range: {action}"[:200])
        return action

    def _fault(self, key: str, detail: str) -> int:
        self._count(key, detail)
        return INVALID


def sealed(policy: Any) -> Any:
    """``policy`` as the runners drive it: an isolated one as it is, anything else sealed."""
    return policy if callable(getattr(policy, "start", None)) else SealedPolicy(policy)


Request = tuple
"""What an episode asks of its policy: ``("start", seed, seal)``, ``("act", observation, mask)``
or ``("act_role", role, observation, mask)``; the episode's generator is sent the answer."""


def flat_episode(
    scenario: Scenario | ScenarioDistribution, seed: int
) -> Generator[Request, Any, EpisodeResult]:
    """One episode on the flat track, as a generator of what it asks of its policy (one
    Discrete(39) action per tick through the composed env): :func:`play` drives one, the
    isolated grader many in lockstep."""
    env = HospitalEDEnv(scenario=scenario)
    obs, info = env.reset(seed=seed)
    yield ("start", policy_seed(seed), Seal(env.hospital))
    done = False
    while not done:
        action = yield ("act", obs, info["action_mask"])
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    return _result(env.hospital, seed)


def team_episode(
    scenario: Scenario | ScenarioDistribution, seed: int
) -> Generator[Request, Any, EpisodeResult]:
    """One episode on the team track (one action per role per tick through the AEC env), as
    :func:`flat_episode`."""
    env = HospitalAECEnv(scenario=scenario)
    env.reset(seed=seed)
    yield ("start", policy_seed(seed), Seal(env.hospital))
    for role in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            action = None
        else:
            action = yield ("act_role", role, obs["observation"], obs["action_mask"])
        env.step(action)
    return _result(env.hospital, seed)


def play(agent: Any, episode: Generator[Request, Any, EpisodeResult]) -> EpisodeResult:
    """Drive one episode with ``agent``'s ``start`` / ``act`` / ``act_role``."""
    request = next(episode)
    while True:
        kind, *args = request
        try:
            request = episode.send(getattr(agent, kind)(*args))
        except StopIteration as end:
            return end.value


def run_flat_episode(policy: Policy, scenario: Scenario | ScenarioDistribution, seed: int) -> EpisodeResult:
    """One episode on the flat track: one Discrete(39) action per tick through the composed env.
    The policy sees observations, masks and a sealed handle (:func:`sealed`)."""
    return play(sealed(policy), flat_episode(scenario, seed))


def run_team_episode(policy: Policy, scenario: Scenario | ScenarioDistribution, seed: int) -> EpisodeResult:
    """One episode on the team track: one action per role per tick through the AEC env."""
    return play(sealed(policy), team_episode(scenario, seed))


EPISODES: dict[str, Callable[[Any, int], Generator[Request, Any, EpisodeResult]]] = {
    "flat": flat_episode,
    "team": team_episode,
}
RUNNERS: dict[str, Callable[[Policy, Any, int], EpisodeResult]] = {
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


def _grade_scenarios(
    agent: Any,
    scenarios: Sequence[Scenario | ScenarioDistribution],
    episodes: int,
    seed: int,
    run: Callable[[Any, Any, int], EpisodeResult],
    progress: Callable[[str, int], None] | None,
) -> dict[str, dict[str, Any]]:
    per_scenario: dict[str, dict[str, Any]] = {}
    for scenario in scenarios:
        before = dict(getattr(agent, "faults", {}))
        seeds = [episode_seed(seed, scenario.name, i) for i in range(episodes)]
        if callable(getattr(agent, "play_many", None)):
            # isolated: every episode at once, one request frame a step (progress once they end)
            results = agent.play_many([EPISODES[agent.track](scenario, s) for s in seeds])
            if progress is not None:
                for i in range(episodes):
                    progress(scenario.name, i)
        else:
            results = []
            for i, episode in enumerate(seeds):
                results.append(run(agent, scenario, episode))
                if progress is not None:
                    progress(scenario.name, i)
        per_scenario[scenario.name] = summarize_scenario(results)
        if before:
            per_scenario[scenario.name]["policy_faults"] = {k: agent.faults[k] - before[k] for k in FAULTS}
    return per_scenario


def grade(
    policy: Any,
    episodes: int = 10,
    seed: int = 0,
    scenarios: Iterable[str | Scenario | ScenarioDistribution] | None = None,
    track: str = "flat",
    progress: Callable[[str, int], None] | None = None,
    isolate: bool = False,
    time_limit: float = TIME_LIMIT,
    isolation: str = "sandbox",
    limits: Limits | None = None,
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
        scenarios: names or Scenario objects, or distributions (ScenarioDistribution or a
            registered name: each episode draws its hospital from its seed, e.g. "validation", "test").
        track: ``"flat"`` (one Discrete(39) action per tick) or ``"team"`` (one action per role per tick).
        progress: called as ``progress(scenario_name, episode_index)`` after each episode.
        isolate: run the policy in a sandboxed process of its own (:mod:`grading.isolated`,
            :mod:`grading.sandbox`; docs: Sealed evaluation): it receives only observations,
            masks and the sealed present, within ``time_limit`` seconds per decision; a name or
            path is then loaded only in that process. Use it for code you do not trust. A
            deterministic policy scores the same either way.
        time_limit: seconds per decision in isolated mode (a timeout is counted in the
            report's ``policy_faults`` and played as an invalid action, i.e. the no-op).
        isolation: with ``isolate``: ``"sandbox"`` (bubblewrap; raises
            :class:`~grading.sandbox.SandboxUnavailable` where it cannot run) or ``"process"``
            (a plain child process: no protection against a policy that attacks the grader).
        limits: with ``isolate``: the policy process's resource limits (:class:`~grading.sandbox.Limits`).

    Returns:
        The report: ``failed`` first when more than :data:`FAULT_LIMIT` of the decisions faulted
        (why, and the first fault), ``overall_score``, the five metrics, ``scenario_scores``,
        per-scenario breakdowns (``scenarios``) with counts and standard errors, ``track``,
        ``episodes``, ``seed``, ``policy_faults`` and ``policy_fault_rate`` (decisions that were not
        the policy's, its faults and those skipped after the fault budget dropped it, per decision:
        one per tick, one per role per tick on the team track).
    """
    if track not in TRACKS:
        raise ValueError(f"track must be one of {TRACKS}, got {track!r}")
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        raise ValueError(f"episodes must be a positive int, got {episodes!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    resolved = [resolve_scenario(s) for s in (scenarios if scenarios is not None else scenario_names())]
    if not resolved:
        raise ValueError("scenarios must not be empty")
    if isolate:
        agent: Any = IsolatedPolicy(policy, track, time_limit=time_limit, isolation=isolation, limits=limits)
    else:
        agent = SealedPolicy(as_policy(load(policy) if isinstance(policy, str) else policy, track))
    try:
        if track not in agent.tracks:
            raise ValueError(f"policy {agent.name!r} plays {agent.tracks}, not the {track!r} track")
        per_scenario = _grade_scenarios(agent, resolved, episodes, seed, RUNNERS[track], progress)
    finally:
        if isolate:
            agent.close()
    faults = {k: sum(s["policy_faults"][k] for s in per_scenario.values()) for k in FAULTS}
    decisions = sum(s["counts"]["ticks"] for s in per_scenario.values()) * (
        len(ROLES) if track == "team" else 1
    )
    # Decisions that were not the policy's: its faults, and those skipped once it was dropped
    # (the fault budget), so a policy that always fails is flagged whatever the budget.
    fault_rate = (sum(faults.values()) + agent.dropped["decisions"]) / max(decisions, 1)
    report: dict[str, Any] = {}
    if fault_rate > FAULT_LIMIT:  # at the top: the score below is the no-op's, not the policy's
        first = agent.messages[0] if agent.messages else "no message"
        report["failed"] = (
            f"{agent.name}: {fault_rate:.0%} of its decisions faulted or were skipped after it was dropped "
            f"(over {FAULT_LIMIT:.0%}) and were "
            f"played as no-ops, so the score is not the policy's; first fault: {first}"
        )
    report |= {
        "agent": agent.name,
        "track": track,
        "episodes": episodes,
        "seed": seed,
        "isolated": bool(isolate),
        "isolation": isolation if isolate else None,
        "overall_score": _mean([s["score"] for s in per_scenario.values()]),
    }
    for m in METRIC_NAMES:
        report[m] = _mean([s["metrics"][m] for s in per_scenario.values()])
    report["scenario_scores"] = {name: s["score"] for name, s in per_scenario.items()}
    report["policy_faults"] = faults
    report["policy_fault_rate"] = fault_rate
    report["policy_fault_messages"] = list(agent.messages)
    report["policy_dropped"] = dict(agent.dropped)
    report["scenarios"] = per_scenario
    report["score_formula"] = SCORE_FORMULA
    # What the policy itself counted (an LLM's unusable-reply rate: its no-ops are legal moves, so
    # the env's invalid_action_rate cannot show them).
    own = getattr(policy, "report_metrics", None)
    if callable(own):
        report["policy_metrics"] = dict(own())
    return report


def grade_generalisation(
    policy: Any,
    episodes: int = 10,
    seed: int = 0,
    track: str = "flat",
    in_distribution: str | ScenarioDistribution = "validation",
    out_of_distribution: str | ScenarioDistribution = "test",
    **options: Any,
) -> dict[str, Any]:
    """:func:`grade` on an in-distribution and an out-of-distribution family of hospitals
    (default: the ``validation`` and ``test`` splits, docs/generalisation.md). The report gains
    ``generalisation``: each side's mean score and standard error, and the gap (in − out) with
    its standard error (the two sides' episodes are independent draws). ``options`` go to
    :func:`grade` (``progress``, ``isolate``, ``time_limit``)."""
    ind, ood = resolve_scenario(in_distribution), resolve_scenario(out_of_distribution)
    if ind.name == ood.name:
        raise ValueError(f"in- and out-of-distribution must differ, both are {ind.name!r}")
    report = grade(policy, episodes, seed, [ind, ood], track, **options)
    a, b = report["scenarios"][ind.name], report["scenarios"][ood.name]
    report["generalisation"] = {
        "in_distribution": {"name": ind.name, "score": a["score"], "score_stderr": a["score_stderr"]},
        "out_of_distribution": {"name": ood.name, "score": b["score"], "score_stderr": b["score_stderr"]},
        "gap": a["score"] - b["score"],
        "gap_stderr": math.hypot(a["score_stderr"], b["score_stderr"]),
    }
    return report
