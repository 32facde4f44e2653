"""Plain helpers shared by the test modules: policies, state fingerprints, the
conservation invariants, hand-built days and per-view trajectory recorders.

Fixtures live in ``tests/conftest.py``; everything here is an ordinary function
so that hypothesis tests and the cross-process determinism script can use it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import hospital_marl
from hospital_marl import BUILTIN_SCENARIOS, ROLES, Hospital, Scenario
from hospital_marl.core import Day
from hospital_marl.core.actions import ACTION_TABLE, N_FLAT_ACTIONS, ROLE_FLAT, Kind
from hospital_marl.core.hospital import DEAD, DISCHARGED, EMPTY, GENERAL, ICU, NOT_ARRIVED, WAITING
from hospital_marl.envs.observations import COMPOSED_KEYS, ROLE_INDEX

TINY = Scenario(name="tiny", general_beds=3, icu_beds=2, ventilators=1)
"""Fewer beds and ventilators than the observation layout shows: masked-out slots must stay invalid."""

SCENARIOS_AND_TINY: tuple[str | Scenario, ...] = (*BUILTIN_SCENARIOS, TINY)


def scenario_id(scenario: str | Scenario) -> str:
    """pytest id for a scenario parameter."""
    return scenario if isinstance(scenario, str) else scenario.name


FLAT_OF: dict[tuple[Kind, int], int] = {(spec.kind, spec.index): spec.flat for spec in ACTION_TABLE}
"""(kind, index) -> flat action, so tests name actions by meaning, not by number."""
NOOP = 0
ADMIT_GENERAL_0 = FLAT_OF[(Kind.ADMIT_GENERAL, 0)]
ADMIT_ICU_0 = FLAT_OF[(Kind.ADMIT_ICU, 0)]
VENTILATE_0 = FLAT_OF[(Kind.VENTILATE, 0)]
TRANSFER_0 = FLAT_OF[(Kind.TRANSFER_ICU, 0)]
EARLY_DISCHARGE_0 = FLAT_OF[(Kind.EARLY_DISCHARGE, 0)]  # the least severe board patient
DISCHARGE_ICU_0 = FLAT_OF[(Kind.DISCHARGE_ICU, 0)]


# ------------------------------------------------------------------ policies
def masked_random_flat(mask: Sequence[bool], rng: np.random.Generator, p_unmasked: float = 0.0) -> int:
    """A uniformly random valid flat action; with probability ``p_unmasked`` any of the 39."""
    if p_unmasked and rng.random() < p_unmasked:
        return int(rng.integers(N_FLAT_ACTIONS))
    return int(rng.choice(np.flatnonzero(mask)))


def masked_random_role(mask: Sequence[bool], rng: np.random.Generator, p_unmasked: float = 0.0) -> int:
    """A uniformly random valid role action; with probability ``p_unmasked`` any role action."""
    if p_unmasked and rng.random() < p_unmasked:
        return int(rng.integers(len(mask)))
    return int(rng.choice(np.flatnonzero(mask)))


def play_flat(h: Hospital, ticks: int, rng: np.random.Generator, p_unmasked: float = 0.0) -> None:
    """One random flat action per tick (the composed env's rhythm)."""
    for _ in range(ticks):
        if h.done:
            return
        h.act_flat(masked_random_flat(h.flat_mask(), rng, p_unmasked))
        h.tick()


def reachable_states(
    scenario: str | Scenario, seed: int, *, p_unmasked: float = 0.15, per_role: bool = False
) -> Iterable[tuple[Hospital, str | None]]:
    """Yield (hospital, role to act) at every decision point of one random episode.

    ``per_role=False``: one flat action per tick, yielded at each tick start (role None).
    ``per_role=True``: the AEC rhythm, yielded before each role's action (mid-tick states too).
    The caller must not mutate the yielded hospital; it is played on afterwards.
    """
    h = Hospital(scenario)
    h.reset(seed)
    rng = np.random.default_rng(seed)
    while not h.done:
        if per_role:
            for role in ROLES:
                yield h, role
                h.act(role, masked_random_role(h.role_mask(role), rng, p_unmasked))
        else:
            yield h, None
            h.act_flat(masked_random_flat(h.flat_mask(), rng, p_unmasked))
        h.tick()


def admit_and_wait(h: Hospital) -> int:
    """Admit the queue head to a general bed whenever one is free; otherwise wait."""
    return ADMIT_GENERAL_0 if h.flat_mask()[ADMIT_GENERAL_0] else NOOP


def admit_then_discharge_early(h: Hospital) -> int:
    """The reward hack: early-discharge whoever can be sent home, else admit the queue head."""
    mask = h.flat_mask()
    if mask[EARLY_DISCHARGE_0]:
        return EARLY_DISCHARGE_0
    return ADMIT_GENERAL_0 if mask[ADMIT_GENERAL_0] else NOOP


def always_noop(h: Hospital) -> int:
    return NOOP


def episode_return(scenario: str | Scenario, seed: int, policy: Callable[[Hospital], int]) -> float:
    h = Hospital(scenario)
    h.reset(seed)
    total = 0.0
    while not h.done:
        h.act_flat(policy(h))
        total += h.tick().reward
    return total


# ------------------------------------------------------------ fingerprints
def clinical_state(h: Hospital) -> tuple:
    """Everything an action or a tick may change, except the counters and reward accumulators."""
    return (
        tuple(h.severity),
        tuple(h.location),
        tuple(h.queue),
        tuple(h.general),
        tuple(h.icu),
        tuple(h.vents),
        tuple(h.vent_of),
        tuple(h.vent_idle),
        tuple(h.remaining),
        tuple(h.ready_for),
        tuple(h.admitted_at),
        tuple(h.wait),
        tuple(h.neglect),
        tuple(h.was_critical),
        tuple(sorted((t, tuple(p)) for t, p in h.bounce_schedule.items())),
        h.tick_count,
    )


def counters_without(h: Hospital, *names: str) -> dict[str, float]:
    counters = h.counters.as_dict()
    for name in names:
        counters.pop(name)
    return counters


def global_vector(obs: dict[str, np.ndarray]) -> np.ndarray:
    """The composed Dict observation flattened in COMPOSED_KEYS order (= the AEC ``state()``)."""
    return np.concatenate([np.asarray(obs[key], np.float32).ravel() for key in COMPOSED_KEYS])


def role_masks_of(flat_mask: Sequence[bool]) -> dict[str, np.ndarray]:
    """The three role masks a flat mask implies (role action i <-> ROLE_FLAT[role][i])."""
    flat = np.asarray(flat_mask, dtype=bool)
    return {role: flat[list(ROLE_FLAT[role])] for role in ROLES}


# ------------------------------------------------------------- invariants
def assert_conservation(h: Hospital) -> None:
    """SPEC §2 conservation, from the census and from the counters, plus bed/vent consistency."""
    c, census, loc = h.counters, h.census(), h.location
    # Patients: every arrived patient is in exactly one place.
    assert sum(census.values()) == c.arrivals, (census, c.arrivals)
    assert loc.count(NOT_ARRIVED) == h.day.n_patients - c.arrivals
    assert census["discharged"] == c.discharges
    assert census["died"] == c.deaths
    assert census["away"] == c.early_discharges - c.bounce_backs  # a bounce-back: away -> waiting
    assert census["waiting"] + census["general"] + census["icu"] == (
        c.arrivals - c.discharges - c.deaths - (c.early_discharges - c.bounce_backs)
    )
    # The day's arrivals up to now, and nobody from the future.
    last_arrival_tick = h.tick_count - 1 if h.done else h.tick_count
    assert c.arrivals == sum(1 for t in h.day.arrival_tick if t <= last_arrival_tick)
    assert all(loc[p] == NOT_ARRIVED for p, t in enumerate(h.day.arrival_tick) if t > last_arrival_tick)
    # Critical patients: monotone flags, consistent counts.
    arrived = [p for p in range(h.day.n_patients) if loc[p] != NOT_ARRIVED]
    assert all(h.was_critical[p] for p in arrived if h.severity[p] >= 4)
    assert c.critical_total == sum(h.was_critical)
    assert c.critical_saved == sum(1 for p in arrived if loc[p] == DISCHARGED and h.was_critical[p])
    assert c.critical_deaths == sum(1 for p in arrived if loc[p] == DEAD and h.was_critical[p])
    assert c.critical_saved <= c.critical_total
    assert c.critical_deaths <= c.critical_total
    assert c.critical_saved + c.critical_deaths <= c.critical_total
    assert all(1 <= h.severity[p] <= 5 for p in arrived)
    # Queue and beds.
    assert len(h.queue) == census["waiting"] == len(set(h.queue))
    assert all(loc[p] == WAITING for p in h.queue)
    in_general = [p for p in h.general if p != EMPTY]
    in_icu = [p for p in h.icu if p != EMPTY]
    assert len(in_general) == census["general"] == len(set(in_general))
    assert len(in_icu) == census["icu"] == len(set(in_icu))
    assert all(loc[p] == GENERAL for p in in_general)
    assert all(loc[p] == ICU for p in in_icu)
    assert sorted(h.board()) == sorted(in_general)
    assert all(h.remaining[p] >= 0 for p in in_general + in_icu)
    # Ventilators: each one's patient is in the ICU and points back; nobody else has one.
    for v, p in enumerate(h.vents):
        if p != EMPTY:
            assert loc[p] == ICU and p in h.icu and h.vent_of[p] == v, (v, p)
    for p, v in enumerate(h.vent_of):
        if v != EMPTY:
            assert h.vents[v] == p, (p, v)
    # Waiting time and the episode flags.
    assert sum(h.wait) == c.wait_ticks
    assert c.invalid_actions + c.conflicts <= c.actions
    assert h.terminated == (c.deaths >= h.scenario.max_deaths)
    assert c.ticks == h.tick_count


# ------------------------------------------------------------ hand-built days
def scripted_day(patients: Sequence[dict[str, Any]]) -> Callable[[Scenario, np.random.Generator], Day]:
    """A day generator that ignores the rng and returns exactly these patients.

    Each patient: ``tick``, ``severity``, ``condition`` and optionally ``q`` (treatment
    quantile, default 0.0 = shortest) and ``latent`` (a float for every tick, or a
    ``{tick: u}`` dict over a default of 0.999, which makes every event improbable).
    """

    def generate(scenario: Scenario, rng: np.random.Generator) -> Day:
        n_ticks = scenario.episode_length
        ordered = sorted(patients, key=lambda p: p["tick"])
        latent = []
        for p in ordered:
            spec = p.get("latent", 0.999)
            if isinstance(spec, dict):
                row = [0.999] * n_ticks
                for t, u in spec.items():
                    row[t] = u
            else:
                row = [float(spec)] * n_ticks
            latent.append(row)
        arrivals_at: list[list[int]] = [[] for _ in range(n_ticks)]
        for pid, p in enumerate(ordered):
            arrivals_at[p["tick"]].append(pid)
        return Day(
            arrival_tick=tuple(p["tick"] for p in ordered),
            severity=tuple(p["severity"] for p in ordered),
            condition=tuple(p["condition"] for p in ordered),
            q_general=tuple(p.get("q", 0.0) for p in ordered),
            q_icu=tuple(p.get("q", 0.0) for p in ordered),
            latent=tuple(latent),
            arrivals_at=tuple(tuple(a) for a in arrivals_at),
        )

    return generate


def scripted_hospital(
    patients: Sequence[dict[str, Any]], *, episode_length: int = 30, **scenario_fields
) -> Hospital:
    """A reset hospital whose day is exactly ``patients`` (no random arrivals)."""
    scenario = Scenario(name="scripted", episode_length=episode_length, arrival_rate=0.0, **scenario_fields)
    h = Hospital(scenario, day_generator=scripted_day(patients))
    h.reset(0)
    return h


# ----------------------------------------------------- trajectories per view
def flat_action_script(scenario: str | Scenario, seed: int, p_unmasked: float = 0.15) -> list[int]:
    """The flat actions a seeded random policy (masked + some invalid) takes over one episode."""
    h = Hospital(scenario)
    h.reset(seed)
    rng = np.random.default_rng(seed)
    actions = []
    while not h.done:
        action = masked_random_flat(h.flat_mask(), rng, p_unmasked)
        actions.append(action)
        h.act_flat(action)
        h.tick()
    return actions


def tick_record(
    vector: np.ndarray,
    flat_mask: Sequence[bool] | None,
    reward: float,
    terminated: bool,
    truncated: bool,
    hospital: Hospital,
) -> dict[str, Any]:
    """What every view must agree on after a tick (``actions`` and its rate excluded: see callers)."""
    metrics = hospital.metrics()
    metrics.pop("invalid_action_rate")
    return {
        "state": np.asarray(vector, np.float32).copy(),
        "role_masks": None if flat_mask is None else role_masks_of(flat_mask),
        "reward": reward,
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "counters": counters_without(hospital, "actions"),
        "metrics": metrics,
    }


def record_composed(
    scenario: str | Scenario, seed: int, actions: Sequence[int], **env_kwargs: Any
) -> list[dict[str, Any]]:
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=scenario, **env_kwargs)
    obs, info = env.reset(seed=seed)
    h = env.unwrapped.hospital
    records = [tick_record(global_vector(obs), info["action_mask"], 0.0, False, False, h)]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        records.append(tick_record(global_vector(obs), info["action_mask"], reward, terminated, truncated, h))
        if terminated or truncated:
            break
    return records


def record_team(
    scenario: str | Scenario, seed: int, actions: Sequence[int], **env_kwargs: Any
) -> list[dict[str, Any]]:
    env = gym.make(hospital_marl.TEAM_ENV_ID, scenario=scenario, **env_kwargs)
    obs, info = env.reset(seed=seed)
    h = env.unwrapped.hospital

    def flat_mask() -> np.ndarray:  # rebuilt from the 41-long team mask
        team = np.asarray(info["action_mask"], bool)
        flat = np.zeros(N_FLAT_ACTIONS, bool)
        start = 0
        for role in ROLES:
            n = len(ROLE_FLAT[role])
            flat[list(ROLE_FLAT[role])] = team[start : start + n]
            start += n
        return flat

    records = [tick_record(global_vector(obs), flat_mask(), 0.0, False, False, h)]
    for action in actions:
        joint = hospital_marl.flat_to_joint(action)
        obs, reward, terminated, truncated, info = env.step(np.array([joint[r] for r in ROLES]))
        records.append(tick_record(global_vector(obs), flat_mask(), reward, terminated, truncated, h))
        if terminated or truncated:
            break
    return records


def record_aec(
    scenario: str | Scenario, seed: int, actions: Sequence[int], **env_kwargs: Any
) -> list[dict[str, Any]]:
    """Each flat action decomposed into the three roles' actions (one acts, two no-op)."""
    env = hospital_marl.env(scenario=scenario, **env_kwargs)
    env.reset(seed=seed)
    h = env.unwrapped.hospital

    def snapshot_tick(reward: float, terminated: bool, truncated: bool) -> dict[str, Any]:
        state = env.state()
        masks = {}
        for role in ROLES:
            obs = env.observe(role)
            np.testing.assert_array_equal(obs["observation"], state[ROLE_INDEX[role]])
            masks[role] = obs["action_mask"].astype(bool)
        record = tick_record(state, None, reward, terminated, truncated, h)
        record["role_masks"] = masks
        return record

    records = [snapshot_tick(0.0, False, False)]
    for action in actions:
        joint = hospital_marl.flat_to_joint(action)
        for role in ROLES:
            assert env.agent_selection == role
            env.step(joint[role])
        rewards = {role: env.rewards[role] for role in ROLES}
        assert len(set(rewards.values())) == 1, f"team reward differs between roles: {rewards}"
        assert env.last()[1] == rewards[ROLES[0]]  # triage's accumulated reward is the tick's
        terminated = all(env.terminations[r] for r in ROLES)
        truncated = all(env.truncations[r] for r in ROLES)
        assert terminated == any(env.terminations[r] for r in ROLES)
        assert truncated == any(env.truncations[r] for r in ROLES)
        records.append(snapshot_tick(rewards[ROLES[0]], terminated, truncated))
        if terminated or truncated:
            break
    return records


def record_parallel(
    scenario: str | Scenario, seed: int, actions: Sequence[int], **env_kwargs: Any
) -> list[dict[str, Any]]:
    env = hospital_marl.parallel_env(scenario=scenario, **env_kwargs)
    observations, _ = env.reset(seed=seed)
    h = env.hospital

    def snapshot_tick(obs: dict, reward: float, terminated: bool, truncated: bool) -> dict[str, Any]:
        state = env.state()
        for role in ROLES:
            np.testing.assert_array_equal(obs[role]["observation"], state[ROLE_INDEX[role]])
        record = tick_record(state, None, reward, terminated, truncated, h)
        record["role_masks"] = {role: obs[role]["action_mask"].astype(bool) for role in ROLES}
        return record

    records = [snapshot_tick(observations, 0.0, False, False)]
    for action in actions:
        observations, rewards, terminations, truncations, _ = env.step(hospital_marl.flat_to_joint(action))
        assert len(set(rewards.values())) == 1, f"team reward differs between roles: {rewards}"
        terminated, truncated = terminations[ROLES[0]], truncations[ROLES[0]]
        assert set(terminations.values()) == {terminated} and set(truncations.values()) == {truncated}
        records.append(snapshot_tick(observations, rewards[ROLES[0]], terminated, truncated))
        if terminated or truncated:
            break
    return records


def assert_same_trajectory(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> None:
    assert len(actual) == len(expected), "episode lengths differ"
    for tick, (e, a) in enumerate(zip(expected, actual)):
        np.testing.assert_array_equal(a["state"], e["state"], err_msg=f"state differs at tick {tick}")
        for role in ROLES:
            np.testing.assert_array_equal(
                a["role_masks"][role], e["role_masks"][role], err_msg=f"{role} mask differs at tick {tick}"
            )
        assert a["reward"] == e["reward"], f"reward differs at tick {tick}"
        assert (a["terminated"], a["truncated"]) == (e["terminated"], e["truncated"]), f"flags at tick {tick}"
        assert a["counters"] == e["counters"], f"counters differ at tick {tick}"
        assert a["metrics"] == e["metrics"], f"metrics differ at tick {tick}"


# ------------------------------------------------------- determinism digest
def trajectory_digest(scenario: str, seed: int, episodes: int = 2) -> str:
    """SHA-256 of several seeded episodes in every view (the second one seeded by the env).

    Used in-process and in fresh interpreters: identical digests mean bit-identical
    observations, rewards, flags and counters.
    """
    digest = hashlib.sha256()

    def feed(*values: Any) -> None:
        for value in values:
            if isinstance(value, np.ndarray):
                digest.update(np.ascontiguousarray(value).tobytes())
            else:
                digest.update(repr(value).encode())

    actions = flat_action_script(scenario, seed)
    for record in (*record_composed(scenario, seed, actions), *record_aec(scenario, seed, actions)):
        feed(
            record["state"],
            record["reward"],
            record["terminated"],
            record["truncated"],
            sorted(record["counters"].items()),
        )
    # reset() without a seed continues from the seeded one, in every view.
    env = gym.make(hospital_marl.COMPOSED_ENV_ID, scenario=scenario)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(episodes):
        obs, info = env.reset()
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(
                masked_random_flat(info["action_mask"], rng, 0.1)
            )
            feed(global_vector(obs), reward, terminated, truncated)
            done = terminated or truncated
    return digest.hexdigest()


def value_id(value: Any) -> str:
    """A pytest id that is the same in every xdist worker (no memory addresses)."""
    return f"{type(value).__name__}()" if type(value) is object else repr(value)


BAD_ACTIONS: list[object] = [
    # Out of range for the flat table and for every role.
    -1,
    39,
    40,
    10**12,
    -(10**12),
    np.int64(39),
    np.int64(99),
    np.int32(-1),
    np.int32(-3),
    np.uint8(200),
    # Not integers at all.
    2.5,
    float("nan"),
    float("inf"),
    "3",
    "noop",
    None,
    True,
    False,
    np.bool_(True),
    np.array([1, 2]),
    np.array([[3]]),
    np.array(2.5),
    [1],
    (1,),
    {"a": 1},
    object(),
]
"""Actions that must be counted invalid (-1), never raise, in every view (one list for core and envs)."""


def stream_handlers(where: Callable[[Any], bool]) -> list[str]:
    """Every logger's ``StreamHandler`` whose stream satisfies ``where`` (``"<logger>: <handler>"``)."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return [
        f"{logger.name}: {handler!r}"
        for logger in loggers
        if isinstance(logger, logging.Logger)
        for handler in logger.handlers
        if isinstance(handler, logging.StreamHandler) and where(handler.stream)
    ]
