"""The OpenEnv ``Environment``: one session's episode, a thin view of the composed env.

Resets go through :class:`hospital_marl.HospitalEDEnv` itself (seeding,
scenario switch). Steps drive its simulator exactly as the gym envs do: a
flat step is :meth:`HospitalEDEnv.step`'s ``act_flat`` then ``tick``; a team
step carries out one action per role as :class:`hospital_marl.HospitalEDTeamEnv`
does. So a server trajectory is the in-process one for the same seed and
actions (the tests compare them step by step), without building the gym
observation and info dicts that the server would only convert again.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

import hospital_marl
from hospital_marl.core.actions import ROLES
from hospital_marl.envs.composed import HospitalEDEnv
from hospital_marl.envs.observations import BLOCK_OFFSETS, ObservationBuilder
from hospital_marl.envs.parallel import resolve_joint_action
from server.models import HospitalAction, HospitalObservation, HospitalState, ResetParams, Track
from server.settings import check_scenario, default_scenario

_BLOCK_LAYOUT: tuple[tuple[str, int, int, int], ...] = tuple(
    (key, start, stop, shape[1] if len(shape) == 2 else 0)
    for key in HospitalObservation.model_fields
    if key in BLOCK_OFFSETS
    for start, stop, shape in [BLOCK_OFFSETS[key]]
)
"""(key, start, stop, row length or 0 for a flat block) of each observation block in the
state vector, in the model's field order."""


class EpisodeStateError(RuntimeError):
    """A step the episode's state does not allow (HTTP 409; a WebSocket error message)."""

    code = "EPISODE_STATE"


class EpisodeNotStartedError(EpisodeStateError):
    code = "EPISODE_NOT_STARTED"


class EpisodeEndedError(EpisodeStateError):
    code = "EPISODE_ENDED"


class TrackMixError(EpisodeStateError):
    code = "TRACK_MIX"


def as_action(action: HospitalAction | Mapping[str, Any] | int | np.integer) -> HospitalAction:
    """A validated :class:`HospitalAction` from an action model, a JSON-like mapping or a plain int."""
    if isinstance(action, HospitalAction):
        return action
    if isinstance(action, Mapping):
        return HospitalAction.model_validate(dict(action))
    if (
        isinstance(action, np.ndarray)
        and action.shape in ((), (1,))
        and np.issubdtype(action.dtype, np.integer)
    ):
        action = action.reshape(()).item()
    if isinstance(action, (int, np.integer)) and not isinstance(action, (bool, np.bool_)):
        return HospitalAction(action=int(action))
    raise TypeError(f"an action is a HospitalAction, a mapping or an int, got {type(action).__name__}")


class HospitalEnvironment(Environment[HospitalAction, HospitalObservation, HospitalState]):
    """One episode at a time of the emergency department, for one client session.

    Args:
        scenario: the scenario of a ``reset`` that names none (default:
            ``$HOSPITAL_SCENARIO``, else ``normal_day``).

    ``reset(seed=, scenario=, episode_id=)`` starts an episode; ``step`` takes
    a :class:`HospitalAction` (flat or team form). A step before the first
    reset, after the episode ended, or on the other track than the episode's
    first step raises an :class:`EpisodeStateError` (never a silent new
    episode). Instances share nothing: each session owns its simulator.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, scenario: str | None = None) -> None:
        super().__init__()
        self.default_scenario = check_scenario(scenario) if scenario is not None else default_scenario()
        self._env = HospitalEDEnv(scenario=self.default_scenario)
        self._builder = ObservationBuilder(self._env.hospital)
        self._started = False
        self._episode_id: str | None = None
        self._track: Track | None = None
        self._steps = 0

    # ------------------------------------------------------------ episodes
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        scenario: str | None = None,
        **kwargs: Any,
    ) -> HospitalObservation:
        """Start an episode. Unknown keyword arguments are rejected (pydantic ``ValidationError``)."""
        params = ResetParams.model_validate(
            {"seed": seed, "episode_id": episode_id, "scenario": scenario, **kwargs}
        )
        name = params.scenario or self.default_scenario
        try:
            self._env.reset(seed=params.seed, options={"scenario": name})
        except ValueError:
            # A registered scenario with another episode length: it needs its own env.
            self._env = HospitalEDEnv(scenario=name)
            self._builder = ObservationBuilder(self._env.hospital)
            self._env.reset(seed=params.seed)
        self._started = True
        self._episode_id = params.episode_id or str(uuid.uuid4())
        self._track = None
        self._steps = 0
        return self._observation(None, False, False, {})

    def step(
        self, action: HospitalAction | Mapping[str, Any] | int, timeout_s: float | None = None, **kwargs: Any
    ) -> HospitalObservation:
        """One tick: the action (flat, or one per role), then the simulation. ``timeout_s`` is unused."""
        action = as_action(action)
        if not self._started:
            raise EpisodeNotStartedError("no episode in this session yet: reset first")
        hospital = self._env.hospital
        if hospital.done:
            raise EpisodeEndedError(
                f"the episode has ended (done after tick {hospital.tick_count}); reset to start another"
            )
        if self._track is not None and action.track != self._track:
            raise TrackMixError(
                f"this episode is on the {self._track} track (its first step); a {action.track} action "
                "needs a new episode: reset first"
            )
        self._track = action.track
        if action.action is not None:
            # As HospitalEDEnv.step (the server's env never renders).
            extra: dict[str, Any] = {"outcome": hospital.act_flat(action.action).value}
        else:
            # As HospitalEDTeamEnv.step: every role chose from the same state's mask.
            flat_mask = hospital.flat_mask()
            masks = {role: hospital.role_mask(role, flat_mask) for role in ROLES}
            extra = {"outcomes": resolve_joint_action(hospital, action.joint(), masks)}
        result = hospital.tick()
        self._steps += 1
        return self._observation(float(result.reward), bool(result.terminated), bool(result.truncated), extra)

    # The simulator steps in tens of microseconds: run it on the event loop
    # rather than hopping to a worker thread per message (OpenEnv awaits these
    # directly when they are overridden).
    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> HospitalObservation:
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    async def step_async(
        self, action: HospitalAction, timeout_s: float | None = None, **kwargs: Any
    ) -> HospitalObservation:
        return self.step(action, timeout_s=timeout_s, **kwargs)

    def _observation(
        self, reward: float | None, terminated: bool, truncated: bool, extra: dict[str, Any]
    ) -> HospitalObservation:
        """The current state as the wire model, built without re-validation.

        One ``tolist`` of the global state vector, then list slices: the same
        float values as each block's ``tolist`` in-process, for a fraction of
        the cost. :meth:`HospitalObservation.from_simulator` skips validation:
        these values come from the simulator, already of the declared types
        and shapes, in field order (tests check it). Clients validate what
        they receive.
        """
        h = self._env.hospital
        done = terminated or truncated
        info: dict[str, Any] = {"tick": h.tick_count, "scenario": h.scenario.name, **extra}
        metrics = None
        if done:
            metrics = h.metrics()
            info["counters"] = h.counters.as_dict()
            info["score"] = h.score()
        flat = self._builder.vector().tolist()
        # metadata given, not defaulted: pydantic's default_factory lookup is costly per step
        values: dict[str, Any] = {"done": done, "reward": reward, "metadata": {}}
        for key, start, stop, row in _BLOCK_LAYOUT:
            values[key] = (
                flat[start:stop] if not row else [flat[i : i + row] for i in range(start, stop, row)]
            )
        values.update(
            action_mask=h.flat_mask(),
            terminated=terminated,
            truncated=truncated,
            metrics=metrics,
            info=info,
        )
        return HospitalObservation.from_simulator(values)

    # --------------------------------------------------------------- state
    @property
    def state(self) -> HospitalState:
        h = self._env.hospital
        if not self._started:
            return HospitalState(
                scenario=self.default_scenario, max_ticks=h.max_ticks, episode_id=None, step_count=0
            )
        c = h.counters
        return HospitalState(
            episode_id=self._episode_id,
            step_count=self._steps,
            started=True,
            scenario=h.scenario.name,
            seed=h.seed,
            track=self._track,
            tick=h.tick_count,
            max_ticks=h.max_ticks,
            queue_length=len(h.queue),
            census=h.census(),
            counters=c.as_dict(),
            cumulative_reward=c.cumulative_reward,
            metrics=h.metrics(),
            score=h.score() if h.done else None,
            done=h.done,
            terminated=h.terminated,
            truncated=h.truncated,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="hospital_marl",
            description=(
                "Emergency-department resource allocation: triage patients to general or ICU beds, "
                "transfer, discharge and ventilate over a 24-hour shift. One Discrete(39) masked action "
                "per tick (flat track) or one action per role (team track)."
            ),
            version=hospital_marl.__version__,
            author="hospital_marl contributors",
        )

    def close(self) -> None:
        """Nothing to release: the simulator is plain Python objects."""
