"""The ED simulator's public face: :class:`Hospital`, one environment's view of
the compiled kernel (:mod:`hospital_marl.core.kernel`) over a one-row
:class:`~hospital_marl.core.types.State`. Every interface is a view of it.

One tick, in order: the roles' actions (:meth:`Hospital.act`, any number,
before :meth:`Hospital.tick`), then treatment, deterioration and deaths, then
waiting times, then arrivals. The rules themselves live in the kernel, once.
"""

from __future__ import annotations

import copy
from enum import Enum
from typing import Any, NamedTuple

import numpy as np

from hospital_marl.action_index import action_index_or_invalid
from hospital_marl.core import kernel
from hospital_marl.core.actions import ACTION_GROUPS, FLAT_OF, N_FLAT_ACTIONS, NOOP, ROLE_FLAT, ROLES, Kind
from hospital_marl.core.clinical import DEFAULT_CLINICAL, ClinicalParams
from hospital_marl.core.generator import (
    Day,
    DayArrays,
    DayGenerator,
    day_arrays,
    day_from_arrays,
    day_of_state,
    generate_day,
    user_day_rng,
)
from hospital_marl.core.metrics import EpisodeCounters, composite_score, episode_metrics
from hospital_marl.core.rewards import DEFAULT_REWARDS, RewardTable
from hospital_marl.core.rng import fresh_key, imagine_key, seal_salt, seed_key
from hospital_marl.core.scenarios import Scenario, ScenarioDistribution, resolve_scenario
from hospital_marl.core.types import (
    AWAY,
    BEDS_GENERAL,
    BEDS_ICU,
    BEDS_VENT,
    BEDS_VENT_IDLE,
    BOARD_DISCHARGE_SLOTS,
    BOARD_TRANSFER_SLOTS,
    BOUNCE_PID,
    BOUNCE_TICK,
    COUNTER_FIELDS,
    DEAD,
    DISCHARGED,
    EMPTY,
    F_LAST_REWARD,
    F_LAST_ROLE_REWARD,
    GENERAL,
    ICU,
    MAX_BEDS,
    NOT_ARRIVED,
    PAT_ADMITTED_AT,
    PAT_LOCATION,
    PAT_NEGLECT,
    PAT_READY_FOR,
    PAT_REMAINING,
    PAT_SEVERITY,
    PAT_VENT_OF,
    PAT_WAIT,
    PAT_WAS_CRITICAL,
    QUEUE_SLOTS,
    S_BOUNCE_CURSOR,
    S_COUNTERS,
    S_KEY,
    S_NEXT_ARRIVAL,
    S_QUEUE_LEN,
    S_TERMINATED,
    S_TICK,
    S_TRUNCATED,
    WAITING,
    Params,
    State,
    copy_state,
    counters_of,
    empty_state,
    grow_patients,
    make_params,
    packed_buffer,
    patient_capacity,
    with_bounce_room,
    with_buffer,
    write_day,
)

__all__ = [
    "AWAY",
    "BOARD_DISCHARGE_SLOTS",
    "BOARD_TRANSFER_SLOTS",
    "DEAD",
    "DISCHARGED",
    "EMPTY",
    "GENERAL",
    "ICU",
    "NOT_ARRIVED",
    "OUTCOMES",
    "QUEUE_SLOTS",
    "WAITING",
    "Hospital",
    "Outcome",
    "Seal",
    "SimulatorHandle",
    "TickResult",
]


def _role_spans() -> dict[str, tuple[int, int]]:
    """Each role's actions are one contiguous run of the flat table (checked here)."""
    spans = {}
    for role, flats in ROLE_FLAT.items():
        first, last = flats[1], flats[-1]
        assert list(flats[1:]) == list(range(first, last + 1)), f"{role}'s flat actions are not contiguous"
        spans[role] = (first, last + 1)
    return spans


ROLE_FLAT_SPAN = _role_spans()
ROLE_INDEX = {role: r for r, role in enumerate(ROLES)}
ROLE_ACTIONS = tuple(len(ROLE_FLAT[role]) for role in ROLES)


class Outcome(str, Enum):
    """What became of an action."""

    DONE = "done"
    NOOP = "noop"
    INVALID = "invalid"  # not valid when chosen: -1, counted
    CONFLICT = "conflict"  # valid when chosen, made impossible by an earlier role: counted, free


OUTCOMES = (Outcome.DONE, Outcome.NOOP, Outcome.INVALID, Outcome.CONFLICT)
"""Outcome by the kernel's code."""
assert [o.name for o in OUTCOMES] == ["DONE", "NOOP", "INVALID", "CONFLICT"]
assert (kernel.OUT_DONE, kernel.OUT_NOOP, kernel.OUT_INVALID, kernel.OUT_CONFLICT) == (0, 1, 2, 3)


class TickResult(NamedTuple):
    reward: float  # the tick's team reward
    role_rewards: dict[str, float]  # reward_mode="role" split (sums to ``reward``)
    terminated: bool
    truncated: bool


class _Direct:
    """A kernel function called through its compiled entry point, past numba's dispatcher.

    The dispatcher types every argument on every call (for the state's arrays that costs
    more than a whole tick); the Hospital always passes the same types (its own state, int
    indices, float32 observations, bool masks), so after the first call resolves the one
    signature, later calls go straight to the machine code."""

    __slots__ = ("dispatcher", "entry")

    def __init__(self, dispatcher: Any) -> None:
        self.dispatcher = dispatcher
        self.entry: Any = None

    def __call__(self, *args: Any) -> Any:
        if self.entry is not None:
            return self.entry(*args)
        result = self.dispatcher(*args)
        if len(self.dispatcher.signatures) == 1:
            self.entry = self.dispatcher.overloads[self.dispatcher.signatures[0]].entry_point
        return result


_expected_deaths = _Direct(kernel.expected_deaths)
_write_mask = _Direct(kernel.write_mask)
_act_role = _Direct(kernel.act_role)
_act_flat = _Direct(kernel.act_flat)
_step_flat_report = _Direct(kernel.step_flat_report)
_tick = _Direct(kernel.tick)
_write_observation = _Direct(kernel.write_observation)
_observe_row = _Direct(kernel.observe_row)
_start_row = _Direct(kernel.start_row)
_imagine_row = _Direct(kernel.imagine_row)
_seal_row = _Direct(kernel.seal_row)

ROLE_MASK_COLUMNS = {role: np.array([0, *range(*ROLE_FLAT_SPAN[role])], np.int64) for role in ROLES}
"""A role's mask as columns of the flat mask (its no-op is the flat no-op)."""
COUNTER_COLUMN = {name: S_COUNTERS + i for i, name in enumerate(COUNTER_FIELDS)}


class Hospital:
    """The emergency department simulation (one environment of the kernel).

    Args:
        scenario: a registered name, a :class:`Scenario`, or a mapping of overrides; or a
            :class:`ScenarioDistribution` (or its name): each :meth:`reset` then draws the
            episode's scenario from its seed (:attr:`distribution`), before the day.
        clinical: dynamics parameters (defaults calibrated, SPEC §8).
        rewards: the reward table (SPEC §4).
        day_generator: a user's arrival model (the default, :func:`generate_day`, is drawn in
            the kernel from the seed's key; a user's gets a NumPy generator seeded from the seed).
        max_ticks: truncate earlier than ``scenario.episode_length`` (PettingZoo's max_cycles).

    ``scenario``, ``clinical``, ``rewards`` and ``max_ticks`` may be changed between
    episodes; they take effect at the next :meth:`reset`. Per-patient attributes
    (``severity``, ``location``, ``queue``, ``general``, ...) are read-only lists by
    patient id / bed; the state itself is :attr:`state` (arrays, see ``core/types.py``).
    """

    _seal_key: int
    """Set only on a sealed present (:class:`Seal`): the key its imagined futures are drawn from."""

    def __init__(
        self,
        scenario: str | Scenario | ScenarioDistribution | None = None,
        *,
        clinical: ClinicalParams = DEFAULT_CLINICAL,
        rewards: RewardTable = DEFAULT_REWARDS,
        day_generator: DayGenerator = generate_day,
        max_ticks: int | None = None,
    ) -> None:
        self.distribution: ScenarioDistribution | None = None
        self.scenario = self.set_scenario(scenario)
        self.clinical = clinical
        self.rewards = rewards
        self.day_generator = day_generator
        if max_ticks is not None and (not isinstance(max_ticks, int) or max_ticks < 1):
            raise ValueError(f"max_ticks must be a positive int or None, got {max_ticks!r}")
        self.max_ticks = min(max_ticks or self.scenario.episode_length, self.scenario.episode_length)
        self.seed: int | None = None
        self._reset_called = False
        self._version = 0
        self._params_key: tuple | None = None
        self._mask_version = -1
        self._mask = np.zeros(N_FLAT_ACTIONS, np.bool_)

    def set_scenario(self, scenario: str | Scenario | ScenarioDistribution | None) -> Scenario:
        """Use ``scenario`` (or a distribution) from the next :meth:`reset` on. Returns the
        scenario in force until then (a distribution's draw for seed 0, for the spaces)."""
        resolved = resolve_scenario(scenario)
        if isinstance(resolved, ScenarioDistribution):
            self.distribution = resolved
            self.scenario = resolved.sample(0)
        else:
            self.distribution = None
            self.scenario = resolved
        return self.scenario

    # ------------------------------------------------------------------ reset
    def reset(self, seed: int | None = None) -> None:
        """Start a new day. ``seed`` defines the day (and, with a :attr:`distribution`, the
        scenario first); ``None`` draws fresh entropy."""
        if seed is not None and (not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
        if seed is None and self.distribution is not None:  # the scenario needs a seed to draw from
            entropy = np.random.SeedSequence().entropy  # an int when drawn fresh
            assert isinstance(entropy, int)
            seed = entropy & ((1 << 63) - 1)
        self.seed = int(seed) if seed is not None else None
        if self.distribution is not None:
            self.scenario = self.distribution.sample(self.seed)  # type: ignore[arg-type]
        key = fresh_key() if seed is None else seed_key(int(seed))
        params_key = (self.scenario, self.clinical, self.rewards, self.max_ticks)
        if params_key != self._params_key:
            self.params: Params = make_params(self.scenario, self.clinical, self.rewards, self.max_ticks)
            self._capacity = patient_capacity(self.scenario)
            self._params_key = params_key
        if self.day_generator is generate_day:  # the built-in day: drawn in the kernel from the key
            self._day, self._day_arrays = None, None
            state = empty_state(1, self._capacity)
            n = _start_row(state, self.params, 0, key)
            if n > self._capacity:  # a day beyond eight standard deviations: room for it, same day
                state = empty_state(1, n)
                _start_row(state, self.params, 0, key)
        else:  # a user's day generator: its own NumPy stream, as before the kernel drew days
            self._day = self.day_generator(self.scenario, user_day_rng(self.seed))
            self._day_arrays = day_arrays(self._day, self.scenario.episode_length)
            n = len(self._day_arrays.arrival)
            state = empty_state(1, n, self.scenario.episode_length)
            write_day(state, 0, self._day_arrays)
            state.scalars[0, S_KEY] = key  # bounce-backs still come from the key
            kernel.reset_row(state, self.params, 0, n)
        self.state: State = state
        self._bind()
        self._version += 1  # monotonic: views cache on it
        self._reset_called = True

    def _bind(self) -> None:
        """Row views of the one-row state (cheap reads for the properties)."""
        st = self.state
        self._pat, self._beds, self._sc, self._fl = st.pat[0], st.beds[0], st.scalars[0], st.floats[0]
        self._n = int(self._sc[0])
        self._buffer = packed_buffer(st)

    # ------------------------------------------------------------- properties
    @property
    def version(self) -> int:
        """Changes whenever the state does (never repeats for one instance): views cache on it."""
        return self._version

    @property
    def day(self) -> Day:
        """The day's patients (immutable record; built from the state on first use). For an
        imagined copy: the imagined day (its dynamics uniforms count from the imagining tick)."""
        if self._day is None:
            self._day = day_from_arrays(self.day_arrays)
        return self._day

    @property
    def day_arrays(self) -> DayArrays:
        if self._day_arrays is None:
            self._day_arrays = day_of_state(self.state, 0, self.scenario.episode_length)
        return self._day_arrays

    @property
    def arrived(self) -> int:
        """Patients arrived so far (they are ids 0..arrived-1)."""
        return int(self._sc[S_NEXT_ARRIVAL])

    @property
    def tick_count(self) -> int:
        return int(self._sc[S_TICK])

    @property
    def terminated(self) -> bool:
        return bool(self._sc[S_TERMINATED])

    @property
    def truncated(self) -> bool:
        return bool(self._sc[S_TRUNCATED])

    @property
    def done(self) -> bool:
        return bool(self._sc[S_TERMINATED] or self._sc[S_TRUNCATED])

    @property
    def counters(self) -> EpisodeCounters:
        """A fresh record of the counters so far (mutating it changes nothing)."""
        return counters_of(self._sc, self._fl)

    @property
    def last_reward(self) -> float:
        """The last tick's team reward (``last_result.reward`` without building the record)."""
        return float(self._fl[F_LAST_REWARD])

    @property
    def last_result(self) -> TickResult:
        fl = self._fl
        return TickResult(
            float(fl[F_LAST_REWARD]),
            {role: float(fl[F_LAST_ROLE_REWARD + r]) for r, role in enumerate(ROLES)},
            self.terminated,
            self.truncated,
        )

    def _patients(self, field: int) -> list[int]:
        return self._pat[: self._n, field].tolist()

    severity = property(lambda self: self._patients(PAT_SEVERITY), doc="Severity by patient id.")
    location = property(lambda self: self._patients(PAT_LOCATION), doc="NOT_ARRIVED..DEAD by patient id.")
    wait = property(lambda self: self._patients(PAT_WAIT), doc="Ticks waited by patient id.")
    neglect = property(lambda self: self._patients(PAT_NEGLECT), doc="Ticks without adequate care.")
    remaining = property(lambda self: self._patients(PAT_REMAINING), doc="Treatment ticks left.")
    admitted_at = property(lambda self: self._patients(PAT_ADMITTED_AT), doc="Tick of the last placement.")
    ready_for = property(lambda self: self._patients(PAT_READY_FOR), doc="Ticks ready for step-down.")
    vent_of = property(lambda self: self._patients(PAT_VENT_OF), doc="Ventilator index or EMPTY.")

    @property
    def was_critical(self) -> list[bool]:
        return (self._pat[: self._n, PAT_WAS_CRITICAL] != 0).tolist()

    @property
    def queue(self) -> list[int]:
        """Waiting patients, first come first served."""
        return self.state.queue[0, : self._sc[S_QUEUE_LEN]].tolist()

    @property
    def general(self) -> list[int]:
        return self._beds[BEDS_GENERAL, : self.scenario_beds[0]].tolist()

    @property
    def icu(self) -> list[int]:
        return self._beds[BEDS_ICU, : self.scenario_beds[1]].tolist()

    @property
    def vents(self) -> list[int]:
        return self._beds[BEDS_VENT, : self.scenario_beds[2]].tolist()

    @property
    def vent_idle(self) -> list[int]:
        return self._beds[BEDS_VENT_IDLE, : self.scenario_beds[2]].tolist()

    @property
    def scenario_beds(self) -> tuple[int, int, int]:
        """(general beds, ICU beds, ventilators) of the running episode."""
        ints = self.params.ints
        return int(ints[0]), int(ints[1]), int(ints[2])

    @property
    def bounce_schedule(self) -> dict[int, list[int]]:
        """Pending bounce-backs: return tick -> patients, in the order they return."""
        bounce = self.state.bounce[0]
        schedule: dict[int, list[int]] = {}
        for k in range(int(self._sc[S_BOUNCE_CURSOR])):
            if bounce[BOUNCE_TICK, k] >= 0:
                schedule.setdefault(int(bounce[BOUNCE_TICK, k]), []).append(int(bounce[BOUNCE_PID, k]))
        return schedule

    def needs_ventilator(self, pid: int) -> bool:
        """(respiratory and severity >= 4) or severity == 5 (the kernel's rule)."""
        return bool(kernel.needs_ventilator(int(self._pat[pid, PAT_SEVERITY]), int(self._pat[pid, 0])))

    def is_ready(self, pid: int) -> bool:
        """ICU patient ready for step-down: treatment done and severity <= 3 (the kernel's rule)."""
        return bool(
            kernel.ready_for_step_down(int(self._pat[pid, PAT_REMAINING]), int(self._pat[pid, PAT_SEVERITY]))
        )

    def board(self) -> list[int]:
        """The general board: occupied general beds' patients, most severe first, then longest stay."""
        out = np.empty(MAX_BEDS, np.int32)
        n = kernel.board(self.state, self.params, 0, out)
        return out[:n].tolist()

    def board_shown(self) -> list[int]:
        """The board positions' patients as an observation shows them (at most
        ``MAX_GENERAL_OBS`` rows; a longer board shows its most and least severe, see
        :func:`~hospital_marl.core.kernel.observe.board_row`)."""
        board = self.board()
        rows = min(len(board), kernel.MAX_GENERAL_OBS)
        return [board[kernel.board_row(k, len(board))] for k in range(rows)]

    def expected_deaths(self) -> float:
        """Expected deaths in the coming tick under the current care (the death rule, summed)."""
        return float(_expected_deaths(self.state, self.params, 0))

    def ventilator_target(self) -> int:
        """The ICU patient a free ventilator would go to, or EMPTY (the kernel's rule)."""
        return int(kernel.ventilator_target(self.state, self.params, 0))

    # ------------------------------------------------------------------ masks
    def flat_mask_array(self) -> np.ndarray:
        """Validity of the N_FLAT_ACTIONS flat actions as a fresh bool array (the kernel's is_valid)."""
        return self._cached_mask().copy()

    def _cached_mask(self) -> np.ndarray:
        """The flat mask of this state (computed once per state; do not mutate)."""
        if self._mask_version != self._version:
            out = np.empty(N_FLAT_ACTIONS, np.bool_)
            _write_mask(self.state, self.params, 0, out)
            self._mask, self._mask_version = out, self._version
        return self._mask

    def role_mask_array(self, role: str) -> np.ndarray:
        """A role's validity (0 = its no-op) as a fresh int8 array (PettingZoo's mask dtype)."""
        return self._cached_mask()[ROLE_MASK_COLUMNS[role]].view(np.int8)

    def observe(self, offsets: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """Every observation block into ``obs`` and the flat mask of this state, in one kernel
        call; returns the mask (cached for this state)."""
        if obs.dtype != np.float32 or offsets.dtype != np.int64 or not obs.flags.c_contiguous:
            raise TypeError("observe needs a contiguous float32 obs and int64 offsets")
        mask = np.empty(N_FLAT_ACTIONS, np.bool_)
        _observe_row(self.state, self.params, 0, offsets, obs, mask)
        self._mask, self._mask_version = mask, self._version
        return mask

    def count(self, name: str) -> int:
        """One integer counter (e.g. ``"invalid_actions"``) without building :attr:`counters`."""
        return int(self._sc[COUNTER_COLUMN[name]])

    def flat_mask(self) -> list[bool]:
        """Validity of each flat action: exactly what :meth:`act` would carry out."""
        return self._cached_mask().tolist()

    def role_mask(self, role: str, flat_mask: list[bool] | None = None) -> list[bool]:
        """Validity of a role's actions (0 = its no-op): a slice of the flat mask."""
        start, stop = ROLE_FLAT_SPAN[role]
        mask = self.flat_mask() if flat_mask is None else flat_mask
        return [True, *mask[start:stop]]

    def is_valid(self, kind: Kind, index: int) -> bool:
        """Whether one action would be carried out now (the mask, for a single action)."""
        if not isinstance(kind, Kind):
            raise ValueError(f"unknown action kind {kind!r}")
        return bool(kernel.is_valid(self.state, self.params, 0, int(kind), int(index)))

    # ---------------------------------------------------------------- actions
    def act(self, role: str, role_action: Any, *, valid_when_chosen: bool | None = None) -> Outcome:
        """Carry out one role action now (before :meth:`tick`). Never raises for a bad action
        (anything but a valid int, ``None`` included, is counted invalid).

        ``valid_when_chosen`` (parallel resolution): if the action was valid on
        the mask the role saw but an earlier role's action made it impossible,
        it is a *conflict* (no-op, counted, no penalty) rather than invalid.
        """
        if not self._reset_called or self._sc[S_TERMINATED] or self._sc[S_TRUNCATED]:
            self._check_running()
        r = ROLE_INDEX.get(role)
        if r is None:
            raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
        index = action_index_or_invalid(role_action, ROLE_ACTIONS[r])
        if self._sc[S_BOUNCE_CURSOR] >= self.state.bounce.shape[2]:
            self._before_act()
        code = _act_role(self.state, self.params, 0, r, index, bool(valid_when_chosen))
        self._version += 1
        return OUTCOMES[code]

    def act_flat(self, flat: int) -> Outcome:
        """Carry out one flat action (SPEC §3 table); counts as one action."""
        self._check_running()
        index = action_index_or_invalid(flat, N_FLAT_ACTIONS)
        self._before_act()
        code = _act_flat(self.state, self.params, 0, index)
        self._version += 1
        return OUTCOMES[code]

    def step_flat(self, flat: Any, offsets: np.ndarray, obs: np.ndarray, mask: np.ndarray) -> Outcome:
        """act_flat, tick, then the next observation (into ``obs``, float32) and mask (bool):
        one kernel call (the composed env's hot path)."""
        if obs.dtype != np.float32 or mask.dtype != np.bool_ or offsets.dtype != np.int64:
            raise TypeError("step_flat needs a float32 obs, a bool mask and int64 offsets")
        return OUTCOMES[self.step_flat_report(flat, offsets, obs, mask)[0]]

    def step_flat_report(
        self, flat: Any, offsets: np.ndarray, obs: np.ndarray, mask: np.ndarray
    ) -> tuple[int, float, int, bool, bool]:
        """:meth:`step_flat` for a caller that owns its arrays (the composed env: a fresh
        float32 ``obs`` and bool ``mask`` of the right sizes, int64 ``offsets``; not checked
        again here). Returns ``(outcome code, reward, tick, terminated, truncated)``
        (``OUTCOMES[code]``) from the one kernel call, so the caller reads no property."""
        if not self._reset_called:
            self._check_running()
        if (type(flat) is not int and type(flat) is not np.int64) or not 0 <= flat < N_FLAT_ACTIONS:
            flat = action_index_or_invalid(flat, N_FLAT_ACTIONS)
        report = _step_flat_report(self.state, self.params, 0, flat, offsets, obs, mask)
        if report[0] < 0:  # ended (raises), or the bounce-back schedule needs room
            self._check_running()
            self._before_act()
            report = _step_flat_report(self.state, self.params, 0, flat, offsets, obs, mask)
        self._version += 1
        return report

    def _before_act(self) -> None:
        """An action may early-discharge: make sure the bounce-back schedule has a free slot."""
        self.ready_for_actions(1)

    def ready_for_actions(self, actions: int) -> None:
        """Make room now for what ``actions`` more actions may need (one bounce-back slot each,
        for an early discharge), so compiled code can act that often on :attr:`state` without
        returning to Python (the planner's rollouts). The draws themselves come from the key."""
        if self._sc[S_BOUNCE_CURSOR] + actions <= self.state.bounce.shape[2]:
            return  # room already (the one-row state's cursor: what with_bounce_room reads)
        state = with_bounce_room(self.state, actions)
        if state is not self.state:
            self.state = state
            self._bind()

    def _check_running(self) -> None:
        if not self._reset_called:
            raise RuntimeError("call reset() before acting")
        if self._sc[S_TERMINATED] or self._sc[S_TRUNCATED]:
            raise RuntimeError("the episode has ended; call reset()")

    # ------------------------------------------------------------------- tick
    def tick(self) -> TickResult:
        """Advance one tick after the roles' actions: treatment, deterioration and deaths,
        waiting, then arrivals. Returns the tick's team reward and the episode flags."""
        self._check_running()
        _tick(self.state, self.params, 0)
        self._version += 1
        return self.last_result

    def write_observation(self, offsets: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Every observation block into ``out`` (float32, laid out by ``offsets``, int64)."""
        if out.dtype != np.float32 or offsets.dtype != np.int64 or not out.flags.c_contiguous:
            raise TypeError("write_observation needs a contiguous float32 out and int64 offsets")
        _write_observation(self.state, self.params, 0, offsets, out)
        return out

    # ---------------------------------------------------------------- metrics
    def metrics(self) -> dict[str, float]:
        """The five graded metrics so far (SPEC §7)."""
        return episode_metrics(self.counters)

    def score(self) -> float:
        return composite_score(self.metrics())

    def census(self) -> dict[str, int]:
        """Where every arrived patient is now (conservation: these sum to arrivals)."""
        counts = np.bincount(self._pat[: self._n, PAT_LOCATION], minlength=7)
        return {
            "waiting": int(counts[WAITING]),
            "general": int(counts[GENERAL]),
            "icu": int(counts[ICU]),
            "discharged": int(counts[DISCHARGED]),
            "away": int(counts[AWAY]),
            "died": int(counts[DEAD]),
        }

    # ------------------------------------------------------ snapshot / restore
    def snapshot(self) -> dict[str, Any]:
        """The full mutable state, cheaply copied (one contiguous buffer; the day and the random
        key are in it). The parameters are shared (immutable)."""
        buffer = self._buffer
        return {
            "state": self.state,  # the layout and shared arrays; the mutable fields are in "mutable"
            "mutable": buffer.copy() if buffer is not None else copy_state(self.state),
            "day_arrays": self._day_arrays,
            "day": self._day,
            "seed": self.seed,
            "params": self.params,
        }

    def restore(self, snap: dict[str, Any]) -> None:
        """Return to a snapshot (it stays valid: restore it as often as you like)."""
        mutable = snap["mutable"]
        if isinstance(mutable, np.ndarray):
            if snap["state"] is getattr(self, "state", None):  # same layout and shared arrays: in place
                assert self._buffer is not None  # a snapshot's array is the packed buffer's copy
                np.copyto(self._buffer, mutable)
            else:
                self.state = with_buffer(snap["state"], mutable.copy())
                self._bind()
        else:
            self.state = copy_state(mutable)
            self._bind()
        self._day_arrays = snap["day_arrays"]
        self._day = snap["day"]
        self.seed = snap["seed"]
        self.params = snap["params"]
        self._version += 1
        self._reset_called = True

    def __deepcopy__(self, memo: dict[int, Any]) -> Hospital:
        clone = copy.copy(self)
        if self._reset_called:
            clone.state = copy_state(self.state)
            clone._bind()
        return clone

    def imagine(self, seed: int | np.random.SeedSequence) -> Hospital:
        """A copy whose every unrevealed draw is redrawn from ``seed`` (SPEC §10): later
        arrivals, the patients' dynamics from now on, the bounce-backs of patients sent
        home who have not returned yet, and the treatment quantiles of every care level a
        patient is not in now (a waiting patient's two). What a planner may use without seeing
        the future.

        The present is copied and gets a new random key (:func:`~hospital_marl.core.rng.imagine_key`,
        never the episode's own for the same seed); the kernel redraws the rest from it."""
        return self._imagined(imagine_key(seed))

    def _imagined(self, key: int) -> Hospital:
        """:meth:`imagine` with the key given (a sealed handle salts it)."""
        self._check_running()
        state = self._present()
        n = _imagine_row(state, self.params, 0, key)
        if n > state.pat.shape[1]:  # more imagined patients than room: grow the present, again
            state = grow_patients(self._present(), n)
            kernel.imagine_row(state, self.params, 0, key)
        return self._clone_with(state)

    def _clone_with(self, state: State) -> Hospital:
        """A Hospital on ``state`` with this one's parameters (no day record, no seed)."""
        clone = object.__new__(type(self))  # copy.copy's effect at a third of its cost
        clone.__dict__.update(self.__dict__)
        clone._day = None
        clone._day_arrays = None
        clone.seed = None
        clone._mask, clone._mask_version = np.zeros(N_FLAT_ACTIONS, np.bool_), -1
        clone.state = state
        clone._bind()
        clone._version += 1
        return clone

    def _present(self) -> State:
        """A copy of the state that reads its dynamics from its key (a user day's own uniforms
        are part of the future an imagined copy redraws), with its own scratch space."""
        st = self.state
        shared = {"scratch": np.empty_like(st.scratch)}  # working space: written before every read
        if st.latent.shape[1]:
            shared["latent"] = np.zeros((1, 0, st.latent.shape[2]))
        if self._buffer is not None:
            return with_buffer(st, self._buffer.copy(), **shared)
        return copy_state(st, **shared)

    def handle(self) -> SimulatorHandle:
        """A read-only view for policies that follows this simulator: the present state and
        :meth:`imagine`, never the future (SPEC §10). For a loop of your own (training, tests):
        the view keeps a way back to this simulator so that it follows it. Code you do not
        trust gets a :class:`Seal`'s handle, which has none (the grader's, SPEC §12)."""
        seal = Seal(self)
        object.__setattr__(seal.handle, "_sync", seal.refresh)
        return seal.handle


class Seal:
    """The owner's side of a sealed view of a live episode (SPEC §12): ``seal.handle`` is what
    a policy gets, ``seal.refresh()`` (the grader calls it before every decision) brings its
    present up to date.

    The handle holds a *copy* of the present, sealed by the kernel (:func:`kernel.seal_row`):
    the patients who have not arrived are erased, and every unrevealed draw of those who have
    comes from a key derived from a salt (:func:`~hospital_marl.core.rng.seal_salt`, a one-way
    function of the episode's seed). Nothing the handle refers to, however reached (attributes,
    ``object.__getattribute__``, ``gc.get_referents``, pickling), is the live simulator, the
    day's future, the seed or the episode's key; its :meth:`~SimulatorHandle.imagine` keys
    futures from the salt, so grading stays reproducible and no imagined future is the real
    one. Only the seal refers to the live simulator: keep it out of the policy's reach."""

    __slots__ = ("_live", "_params", "_present", "_seed", "_seen", "handle")

    def __init__(self, live: Hospital) -> None:
        if not live._reset_called:
            raise RuntimeError("reset the simulator before sealing a view of it")
        self._live = live
        self._seen = -1
        self._seed: Any = object()  # no seed yet
        self._params: Params | None = None
        self._present: Hospital | None = None
        self.handle = SimulatorHandle.__new__(SimulatorHandle)
        object.__setattr__(self.handle, "_sync", None)
        self.refresh()

    def refresh(self) -> None:
        """Copy the live present into the handle's (cheap: one buffer copy and one kernel call)."""
        live = self._live
        if live._version == self._seen:
            return
        self._seen = live._version
        present, handle = self._present, self.handle
        if live.seed != self._seed or present is None:  # a new day: a new salt, a new present
            self._seed = live.seed
            salt = seal_salt(live.seed)
            present = live._clone_with(live._present())
            present._version = 0
            present._seal_key = imagine_key(np.random.SeedSequence([salt, 0x5EA1]))
            present.params, self._params = _own_params(live.params), live.params
            self._present = present
            object.__setattr__(handle, "_present", present)
            object.__setattr__(handle, "_salt", salt)
        elif (
            present.state.pat.shape == live.state.pat.shape
            and present.state.bounce.shape == live.state.bounce.shape
            and live._buffer is not None
            and present._buffer is not None
            and live.params is self._params
        ):
            np.copyto(present._buffer, live._buffer)
        else:  # the live state grew (or changed its parameters): copy it whole
            key, version = present._seal_key, present._version
            present.__dict__.update(live.__dict__)
            present._seal_key, present._version = key, version
            present._day = present._day_arrays = present.seed = None
            present._mask, present._mask_version = np.zeros(N_FLAT_ACTIONS, np.bool_), -1
            present.params, self._params = _own_params(live.params), live.params
            present.state = live._present()
            present._bind()
        present._version += 1
        _seal_row(present.state, present.params, 0, present._seal_key)

    def export(self, full: bool = True) -> dict[str, Any]:
        """The handle's present as plain data, for a policy in another process (the isolated
        grader): the sealed state's bytes, and with ``full`` what a fresh :func:`mirror`
        needs besides (parameters, salt). Nothing in it is the live simulator's."""
        self.refresh()
        p = self._present
        assert p is not None  # refresh made it
        data: dict[str, Any] = {
            "buffer": p._buffer.tobytes() if p._buffer is not None else None,
            "shape": (p.state.pat.shape[1], p.state.bounce.shape[2]),
            "version": p._version,
        }
        if full or data["buffer"] is None:
            data.update(scenario=p.scenario, clinical=p.clinical, rewards=p.rewards, max_ticks=p.max_ticks)
            data.update(salt=self.handle._salt, seal_key=p._seal_key)
            data["state"] = None if p._buffer is not None else p.state
        return data


def mirror(data: dict[str, Any], handle: SimulatorHandle | None = None) -> SimulatorHandle:
    """A handle on an exported present (:meth:`Seal.export`): the policy process's side. With
    ``handle``, that handle's present is brought up to date instead (a smaller export will do)."""
    if handle is not None and "salt" not in data:
        present = handle._present
        if (present.state.pat.shape[1], present.state.bounce.shape[2]) == tuple(data["shape"]):
            assert present._buffer is not None  # a mirrored present is always packed
            np.copyto(present._buffer, np.frombuffer(data["buffer"], np.uint8))
            present._version = data["version"]
            return handle
        raise ValueError("the exported present changed its layout: export it in full")
    present = Hospital(
        data["scenario"], clinical=data["clinical"], rewards=data["rewards"], max_ticks=data["max_ticks"]
    )
    present.params = make_params(present.scenario, present.clinical, present.rewards, present.max_ticks)
    present._capacity = patient_capacity(present.scenario)
    present._params_key = (present.scenario, present.clinical, present.rewards, present.max_ticks)
    if data["buffer"] is not None:
        patients, slots = data["shape"]
        state = empty_state(1, patients, 0, slots)
        buffer = packed_buffer(state)
        assert buffer is not None  # empty_state packs the mutable arrays in one buffer
        np.copyto(buffer, np.frombuffer(data["buffer"], np.uint8))
    else:
        state = data["state"]
    present.state = state
    present._bind()
    present._reset_called = True
    present._version = data["version"]
    present._seal_key = data["seal_key"]
    handle = handle if handle is not None else SimulatorHandle.__new__(SimulatorHandle)
    object.__setattr__(handle, "_present", present)
    object.__setattr__(handle, "_salt", data["salt"])
    object.__setattr__(handle, "_sync", None)
    return handle


class SimulatorHandle:
    """What a policy may see of the episode's simulator (SPEC §10, §12): the present (arrived
    patients, beds, queue, masks, counters, metrics, the observation) and :meth:`imagine`. Not
    the day's future draws, not the bounce-back stream, not even how many patients the day
    holds, and nothing that changes the episode: it reads a sealed copy of the present (see
    :class:`Seal`). A centralised team policy reads the global state explicitly
    (``write_observation`` / an ``ObservationBuilder`` over this handle)."""

    _PRESENT = frozenset(
        {
            "scenario", "clinical", "rewards", "max_ticks", "tick_count", "done", "terminated", "truncated",
            "counters", "metrics", "score", "census", "queue", "general", "icu", "vents", "vent_idle",
            "board", "expected_deaths", "ventilator_target", "needs_ventilator", "is_ready", "flat_mask",
            "flat_mask_array", "role_mask", "role_mask_array", "is_valid", "version",
            "write_observation", "observe", "count", "last_reward",
            "scenario_beds", "arrived",
        }
    )  # fmt: skip
    _PER_PATIENT = frozenset(
        {
            "severity",
            "location",
            "wait",
            "neglect",
            "remaining",
            "admitted_at",
            "ready_for",
            "vent_of",
            "was_critical",
        }
    )

    __slots__ = ("_present", "_salt", "_sync")

    def __init__(self, hospital: Hospital) -> None:
        """Same as ``hospital.handle()``."""
        seal = Seal(hospital)
        for name in SimulatorHandle.__slots__:
            object.__setattr__(self, name, getattr(seal.handle, name))
        object.__setattr__(self, "_sync", seal.refresh)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # private names (and the interpreter's probes) are not the view's
            raise AttributeError(f"a policy's simulator handle has no {name!r}")
        if self._sync is not None:
            self._sync()
        h = self._present
        if name in SimulatorHandle._PER_PATIENT:  # arrived patients only: ids are in arrival order
            return getattr(h, name)[: h.arrived]
        if name not in SimulatorHandle._PRESENT:
            raise AttributeError(
                f"a policy's simulator handle has no {name!r} (present state and imagine() only)"
            )
        return getattr(h, name)

    def imagine(self, seed: int | np.random.SeedSequence) -> Hospital:
        """An imagined future from the present (:meth:`Hospital.imagine`), keyed by ``seed`` and
        this episode's salt: reproducible, and never the real day."""
        if self._sync is not None:
            self._sync()
        return self._present._imagined(imagine_key(seed, self._salt))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("the simulator handle is read-only")

    def __deepcopy__(self, memo: dict[int, Any]) -> SimulatorHandle:
        return self  # read-only: copies are the same view

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a simulator handle cannot be pickled: it is a view of a running episode")

    def __repr__(self) -> str:
        h = self._present
        return f"SimulatorHandle({h.scenario.name!r}, tick={h.tick_count})"


def _own_params(params: Params) -> Params:
    """A copy of ``params`` whose arrays a sealed view may not share with the live episode (the
    read-only action table stays shared: it is the module's, with the same flags)."""
    own = []
    for array in params:
        if array.flags.writeable:
            array = array.copy()
        own.append(array)
    return type(params)(*own)


def warm_up() -> None:
    """Compile (or load from the on-disk cache) every kernel entry point the views use: one
    short episode through each. Call it outside timed regions; tests call it once per session."""
    h = Hospital("mass_casualty")
    h.reset(0)
    obs, mask = np.empty(128, np.float32), np.empty(N_FLAT_ACTIONS, np.bool_)
    offsets = np.zeros(12, np.int64)  # any layout: the same compiled types as the views'
    h.imagine(1)
    for flat in (NOOP, *(FLAT_OF[(group.kind, 0)] for group in ACTION_GROUPS)):  # one of each kind
        h.act("triage", 1, valid_when_chosen=True)
        h.step_flat(flat, offsets, obs, mask)  # the step_flat_report entry
    h.board(), h.ventilator_target(), h.is_valid(Kind.ADMIT_GENERAL, 0), h.needs_ventilator(0), h.is_ready(0)
