"""Natively batched envs: B emergency departments stepped by one kernel call.

- :class:`HospitalEDVectorEnv` -- ``gymnasium.make_vec("hospital_marl/HospitalED-v0", num_envs=B)``:
  ``Discrete(39)`` per env, batched Dict observations, ``action_masks()`` ``(B, 39)``.
- :class:`HospitalEDTeamVectorEnv` -- the team id: ``MultiDiscrete([21, 16, 4])`` per env,
  ``action_masks()`` ``(B, 41)`` (the three role masks concatenated).
- :class:`HospitalMARLVectorEnv` -- the batched multi-agent form for MARL libraries:
  per-role batched observations and masks plus the global state, parallel-env semantics.

Autoreset (``autoreset_mode``, declared in ``metadata["autoreset_mode"]``):

- ``NEXT_STEP``, what ``gymnasium.make_vec`` builds (Gymnasium's own default, the mode its vector
  wrappers -- ``RecordEpisodeStatistics``, ``FlattenObservation``, ``NormalizeObservation``... --
  expect): an ended env returns its episode's last observation, with ``metrics``, ``counters`` and
  ``score`` in ``infos`` (``_key`` masks) as ``SyncVectorEnv`` batches the scalar env's; on the next
  ``step()`` its action is ignored and it returns its next episode's first observation, reward 0.
  At that last step its ``action_mask`` is already the next episode's (the action is ignored).
- ``SAME_STEP``, the classes' default (the trainers': no step wasted per episode): the observation
  returned is already the next episode's first, and ``infos["final_obs"]`` /
  ``infos["final_info"]`` hold the finished episode's last observation, metrics, counters and score.

Either way the restart happens inside the compiled batch step (on the threads): the kernel keeps
the ended episode's last observation and counters and starts the env's next day from a key drawn
ahead for it (:data:`KEYS_AHEAD` per env, from the env's own seed sequence); in ``NEXT_STEP`` the
restarted env sits out the next batch step (the kernel skips ended rows).

Seeding: ``reset(seed=s)`` seeds env ``i`` exactly as the scalar env ``reset(seed=s + i)``
would (a list of seeds seeds each env itself), and its later episodes follow the scalar
env's ``reset()`` seed sequence, so env ``i``'s trajectory equals the scalar one bit for bit.

Scenario distributions (``scenario="train"`` or a :class:`ScenarioDistribution`): env ``i``
draws its hospital per episode from its day's seed, as the scalar env does, so each row has
its own kernel parameters: one row of a parameter table per env (a named scenario is a one-row
table every env reads). The whole batch is still stepped by one compiled call (or one per thread);
only ended rows restart from Python, where the next hospital is drawn and written into the env's
row of the table.

Threads: ``threads=k`` steps the batch on k Python threads, each running the compiled
(GIL-free) loop over its own contiguous range of rows; results are bit-identical to
serial (``threads=None``, the default). numba's own parallel layer is not used, so no
threading-layer choice is needed and nothing resizes torch's thread pool; next to a
torch learner, share the cores: ``torch.set_num_threads(cores - k)``.

Returned arrays are fresh each step (safe to keep); observations are views of one
``(B, 106)`` float32 block per step, and ``infos["final_obs"]`` views one copy of the ended
envs' last observations.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from hospital_marl.core import kernel
from hospital_marl.core.actions import N_FLAT_ACTIONS, ROLE_ACTION_COUNTS, ROLES
from hospital_marl.core.clinical import DEFAULT_CLINICAL, ClinicalParams
from hospital_marl.core.generator import DayGenerator, day_arrays, generate_day, user_day_rng
from hospital_marl.core.hospital import ROLE_MASK_COLUMNS, Hospital
from hospital_marl.core.kernel import ROW_ENDED, ROW_LIVE
from hospital_marl.core.metrics import METRIC_NAMES, composite_score, episode_metrics
from hospital_marl.core.rewards import DEFAULT_REWARDS, RewardTable
from hospital_marl.core.rng import seed_key, seed_keys
from hospital_marl.core.scenarios import Scenario, ScenarioDistribution, resolve_scenario
from hospital_marl.core.types import (
    COUNTER_FIELDS,
    F_CUMULATIVE_REWARD,
    F_OCCUPANCY_SUM,
    PAT_ARRIVAL_SEVERITY,
    S_COUNTERS,
    S_KEY,
    S_N_PATIENTS,
    S_TERMINATED,
    S_TICK,
    S_TRUNCATED,
    Params,
    State,
    counters_of,
    empty_state,
    grow_patients,
    make_params,
    params_row,
    patient_capacity,
    set_params_row,
    stack_params,
    with_bounce_room,
    write_day,
)
from hospital_marl.envs._common import EpisodeSeeder, check_reward_mode
from hospital_marl.envs.composed import TEAM_MASK_COLUMNS
from hospital_marl.envs.infos import NOOP
from hospital_marl.envs.observations import (
    MAX_VENTILATORS,
    OFFSETS,
    PRESENCE_SIZE,
    ROLE_INDEX,
    STATE_SIZE,
    VECTOR_FORMATS,
    VENT_PRESENCE,
    check_composed_format,
    check_layout,
    composed_space,
    composed_views,
    outage_row,
    presence_space,
    presence_vector,
    presence_views,
    role_space,
    state_space,
    with_presence,
)
from hospital_marl.envs.protocol import TURN_ORDER

_INVALID, _CONFLICTS = COUNTER_FIELDS.index("invalid_actions"), COUNTER_FIELDS.index("conflicts")

KEYS_AHEAD = 16
"""Seedless days drawn ahead per env (so the kernel restarts ended envs without Python)."""


class _Batch:
    """What the batched envs share: B rows of kernel state, per-env seeders and days."""

    def __init__(
        self,
        num_envs: int,
        scenario: str | Scenario | ScenarioDistribution | None,
        max_cycles: int | None,
        clinical: ClinicalParams | None,
        rewards: RewardTable | None,
        day_generator: DayGenerator | None,
        threads: int | None,
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if threads is not None and (type(threads) is not int or threads < 1):
            raise ValueError(f"threads must be a positive int or None, got {threads!r}")
        self.template = Hospital(
            scenario,
            clinical=clinical or DEFAULT_CLINICAL,
            rewards=rewards or DEFAULT_REWARDS,
            day_generator=day_generator or generate_day,
            max_ticks=max_cycles,
        )
        s = self.template.scenario
        self.scenario = s
        self.distribution = self.template.distribution
        self.n = num_envs
        self.params = make_params(s, self.template.clinical, self.template.rewards, self.template.max_ticks)
        # The batch loops' parameter table and each env's row of it (``which``): a named scenario is
        # one row every env reads; a distribution draws each env's scenario per episode, so each env
        # has its own row, rewritten when its next day starts (from Python, where the draw is made).
        rows = num_envs if self.distribution else 1  # a distribution's draws share its episode length
        self.table: Params = stack_params([self.params] * rows, s.episode_length)
        self.which = np.zeros(num_envs, np.int64)  # env e reads row which[e]
        if self.distribution:
            self.which[:] = np.arange(num_envs)
        self._params_cache: dict[Scenario, Params] = {}
        self.user_days = self.template.day_generator is not generate_day
        latent_ticks = s.episode_length if self.user_days else 0  # a user day brings its own draws
        self.state: State = empty_state(num_envs, patient_capacity(s), latent_ticks)
        self.seeders = [EpisodeSeeder() for _ in range(num_envs)]
        # The keys of each env's next seedless days, drawn ahead (KEYS_AHEAD at a time, from its
        # seeder: the same sequence as one seeder call per reset), so the kernel restarts an
        # ended env in the step itself. A user day generator is Python: none drawn ahead.
        ahead = 0 if self.user_days or self.distribution else KEYS_AHEAD
        self.keys = np.zeros((num_envs, ahead), np.int64)
        self.key_cursor = np.full(num_envs, ahead, np.int64)  # == ahead: none left
        self.resets = np.zeros(num_envs, np.int8)
        self.row_scenarios: list[Scenario] = [s] * num_envs
        self.day_seeds = [0] * num_envs  # a user day's seed (its generator's)
        self.final_obs = np.zeros((num_envs, STATE_SIZE), np.float32)
        self.final_scalars = np.zeros_like(self.state.scalars)
        self.final_floats = np.zeros_like(self.state.floats)
        self.threads = min(threads or 1, num_envs)
        k, n = self.threads, num_envs
        self.chunks = [(i * n // k, (i + 1) * n // k) for i in range(k)]  # contiguous row ranges
        self.pool = ThreadPoolExecutor(self.threads - 1, "hospital_marl-batch") if self.threads > 1 else None

    def run(self, batch_loop: Callable[..., None], *args: Any) -> None:
        """``batch_loop(state, table, which, lo, hi, *args, ends)`` over every row: one call (serial),
        or one call per contiguous row range on ``threads`` threads (the kernel releases the GIL;
        rows are independent, so the result is the serial one bit for bit). ``ends`` is what the
        kernel needs to restart the rows whose episode ends (see :meth:`ended`)."""
        args = (*args, (self.resets, self.final_obs, self.final_scalars, self.final_floats,
                        self.keys, self.key_cursor))  # fmt: skip
        state = (self.state, self.table, self.which)  # the rows and each one's parameters
        if self.pool is None:
            batch_loop(*state, 0, self.n, *args)
            return
        (lo, hi), *rest = self.chunks
        futures = [self.pool.submit(batch_loop, *state, a, b, *args) for a, b in rest]
        try:
            batch_loop(*state, lo, hi, *args)
        finally:
            for future in futures:
                future.result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None

    # ------------------------------------------------------------- resets
    def reset_rows(self, rows: np.ndarray, seeds: list[int | None]) -> None:
        """Start a new day in each of ``rows`` (seed per row, None = that env's next seed): the
        scalar env's day for that seed (same key, same kernel draws)."""
        keys = np.array([self.key_of(e, seed) for e, seed in zip(rows.tolist(), seeds)], np.int64)
        if self.distribution is not None:
            self._draw_scenarios(rows)
        if self.distribution is not None and not self.user_days:
            for e, key in zip(rows.tolist(), keys.tolist()):
                one, k, params = np.array([e], np.int64), np.array([key], np.int64), self.params_of(e)
                need = kernel.start_rows(self.state, params, one, k)
                if need:  # a day beyond the capacity: room for it, then the same day again
                    self.state = grow_patients(self.state, need)
                    kernel.start_rows(self.state, params, one, k)
            return
        if not self.user_days:
            rows = rows.astype(np.int64, copy=False)
            need = kernel.start_rows(self.state, self.params, rows, keys)
            if need:  # a day beyond the capacity: room for it, then the same days again
                self.state = grow_patients(self.state, need)
                kernel.start_rows(self.state, self.params, rows, keys)
            return
        for e, key in zip(rows.tolist(), keys.tolist()):
            rng = user_day_rng(self.day_seeds[e])
            scenario = self.row_scenario(e)
            day = day_arrays(self.template.day_generator(scenario, rng), scenario.episode_length)
            if len(day.arrival) > self.state.pat.shape[1]:
                self.state = grow_patients(self.state, len(day.arrival))
            write_day(self.state, e, day)
            self.state.scalars[e, S_KEY] = key
            kernel.reset_row(self.state, self.params_of(e), e, len(day.arrival))

    def _draw_scenarios(self, rows: np.ndarray) -> None:
        """Each row's scenario of its day's seed (what the scalar env draws for that seed), written
        into the row's line of the parameter table."""
        assert self.distribution is not None
        t = self.template
        for e in rows.tolist():
            scenario = self.distribution.sample(self.day_seeds[e])
            params = self._params_cache.get(scenario)
            if params is None:
                if len(self._params_cache) > 4 * self.n:
                    self._params_cache.clear()
                params = make_params(scenario, t.clinical, t.rewards, t.max_ticks)
                self._params_cache[scenario] = params
            set_params_row(self.table, int(self.which[e]), params)
            self.row_scenarios[e] = scenario

    def row_scenario(self, e: int) -> Scenario:
        """Env ``e``'s scenario this episode."""
        return self.row_scenarios[e]

    def params_of(self, e: int) -> Params:
        """Env ``e``'s kernel parameters this episode (a view of its row of the table)."""
        return params_row(self.table, int(self.which[e])) if self.distribution is not None else self.params

    def key_of(self, e: int, seed: int | None) -> int:
        """The key of env ``e``'s next day: of ``seed``, or (None) its seeder's next seed, drawn
        ahead in :attr:`keys` (a seeded reset drops those drawn from the old seed)."""
        if seed is not None or self.user_days or self.distribution is not None:
            day_seed = self.seeders[e](seed)
            self.key_cursor[e] = self.keys.shape[1]
            self.day_seeds[e] = int(day_seed)
            return seed_key(int(day_seed))
        c = int(self.key_cursor[e])
        if c >= self.keys.shape[1]:
            self.keys[e] = seed_keys(self.seeders[e].ahead(self.keys.shape[1]))
            c = 0
        self.key_cursor[e] = c + 1
        return int(self.keys[e, c])

    def ensure_bounce_room(self, actions_per_env: int) -> None:
        """Every row has a free bounce-back schedule slot for each early discharge this step could make."""
        self.state = with_bounce_room(self.state, actions_per_env)

    def observe(self, rows: np.ndarray, obs: np.ndarray, masks: np.ndarray) -> None:
        for e in rows.tolist():
            kernel.observe_row(self.state, self.params_of(e), e, OFFSETS, obs[e], masks[e])

    def seeds_for(self, seed: int | list[int] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.n
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + i for i in range(self.n)]
        seeds: list[int | None] = list(seed)
        if len(seeds) != self.n:
            raise ValueError(f"reset(seed=...) needs one seed per env ({self.n}), got {len(seeds)}")
        return seeds

    def ended(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """After a batch step: (terminated, truncated, rows the kernel could not restart). The
        ended rows' last observations and counters are in :attr:`final_obs` / ``final_scalars``."""
        ended = self.resets != ROW_LIVE
        sc = self.final_scalars
        return (ended & (sc[:, S_TERMINATED] != 0), ended & (sc[:, S_TRUNCATED] != 0),
                np.flatnonzero(self.resets == ROW_ENDED))  # fmt: skip

    def final_info(self, rows: np.ndarray, present: np.ndarray) -> dict[str, Any]:
        """The ended episodes' (``rows``, as a mask ``present``) metrics, counters and score,
        Gymnasium-batched (``_key`` masks), from the counters the kernel kept at their end."""
        n = self.n
        sc, fl = self.final_scalars, self.final_floats
        counters: dict[str, Any] = {}
        for i, name in enumerate(COUNTER_FIELDS):  # the counters are columns: no per-env work
            counters[name] = np.where(present, sc[:, S_COUNTERS + i], 0)
        counters["occupancy_sum"] = np.where(present, fl[:, F_OCCUPANCY_SUM], 0.0)
        counters["cumulative_reward"] = np.where(present, fl[:, F_CUMULATIVE_REWARD], 0.0)
        metrics: dict[str, Any] = {name: np.zeros(n) for name in METRIC_NAMES}
        score = np.zeros(n)
        for e in rows.tolist():  # the metric formulas are the grader's (episode_metrics), per env
            m = episode_metrics(counters_of(sc[e], fl[e]))
            for key, value in m.items():
                metrics[key][e] = value
            score[e] = composite_score(m)
        for group in (metrics, counters):
            for key in list(group):
                group["_" + key] = present
        return {
            "metrics": metrics,
            "_metrics": present,
            "counters": counters,
            "_counters": present,
            "score": score,
            "_score": present,
            "tick": np.where(present, sc[:, S_TICK], 0),
            "_tick": present,
        }


AUTORESET_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)


def check_autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    """An :class:`~gymnasium.vector.AutoresetMode`, its value (``"NextStep"``) or name (``"next_step"``)."""
    for known in AUTORESET_MODES:
        if mode == known or (
            isinstance(mode, str) and mode.lower() in (known.value.lower(), known.name.lower())
        ):
            return known
    raise ValueError(f"autoreset_mode must be one of {[m.name for m in AUTORESET_MODES]}, got {mode!r}")


class _VectorBase(VectorEnv):
    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
    render_mode = None

    _actions_per_env = 1
    _outcome_shape: tuple[int, ...] = ()

    def __init__(
        self,
        num_envs: int = 1,
        scenario: str | Scenario | ScenarioDistribution | None = None,
        max_cycles: int | None = None,
        clinical: ClinicalParams | None = None,
        rewards: RewardTable | None = None,
        day_generator: DayGenerator | None = None,
        threads: int | None = None,
        render_mode: str | None = None,
        observation_format: str = "dict",
        observation_layout: str | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    ) -> None:
        mode = check_autoreset_mode(autoreset_mode)
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self._next_step = mode == AutoresetMode.NEXT_STEP
        if render_mode is not None:
            raise ValueError("the vector envs do not render; render a scalar env (gym.make) instead")
        self.observation_format = observation_format
        self._one_d = check_composed_format(observation_format, VECTOR_FORMATS)
        self._batch = _Batch(num_envs, scenario, max_cycles, clinical, rewards, day_generator, threads)
        self.observation_layout = check_layout(observation_layout, self._batch.template)
        self._masked = self.observation_layout == "masked"
        self._presence = np.zeros((num_envs, PRESENCE_SIZE), np.float32)
        self._outages = np.zeros((num_envs, 4), np.int64)  # [ventilators, out, start, end] per row
        self._outage_rows = np.zeros(0, np.int64)
        self.num_envs = num_envs
        self._obs = np.zeros((num_envs, STATE_SIZE), np.float32)
        self._masks = np.zeros((num_envs, N_FLAT_ACTIONS), np.bool_)
        self._reset_called = False
        self._pending = np.zeros(num_envs, np.bool_)  # NEXT_STEP: ended last step, sitting this one out
        self._ended = np.zeros(num_envs, np.bool_)  # ended in the step just returned
        self._ended_presence = self._presence  # their presence blocks, before their restart

    @property
    def scenario(self) -> Scenario:
        return self._batch.scenario

    @property
    def state_vectors(self) -> np.ndarray:
        """The global state of every env ``(B, 106)`` (every observation block, flattened)."""
        return self._obs

    def flat_masks(self) -> np.ndarray:
        """``(B, 39)`` bool validity of the flat actions of every env's current state."""
        return self._masks.copy()

    def episode_counters(self) -> dict[str, np.ndarray]:
        """Every env's episode so far, ``(B,)`` copies: each :class:`EpisodeCounters` number but
        ``cumulative_reward``, and the day's ``day_patients``, ``day_critical`` (arriving at severity
        >= 4) and ``max_ticks``: what a per-step score reward reads (``wrappers.VectorScoreReward``)."""
        st = self._batch.state
        out = {name: st.scalars[:, S_COUNTERS + i].copy() for i, name in enumerate(COUNTER_FIELDS)}
        out["occupancy_sum"] = st.floats[:, F_OCCUPANCY_SUM].copy()
        out["day_patients"] = st.scalars[:, S_N_PATIENTS].copy()
        of_day = np.arange(st.pat.shape[1]) < out["day_patients"][:, None]
        critical = st.pat[:, :, PAT_ARRIVAL_SEVERITY] >= kernel.CRITICAL_SEVERITY
        out["day_critical"] = (critical & of_day).sum(axis=1)
        out["max_ticks"] = np.full(self.num_envs, self._batch.template.max_ticks, np.int64)
        return out

    def _reset(self, seed: int | list[int] | None, options: dict[str, Any] | None) -> None:
        VectorEnv.reset(self, seed=seed if isinstance(seed, int) else None)  # seeds self.np_random
        if options and options.get("scenario") is not None:
            new = resolve_scenario(options["scenario"])
            if new != (self._batch.distribution or self._batch.scenario):
                raise ValueError("a vector env keeps its scenario: make a new one with scenario=...")
        b = self._batch
        rows = np.arange(b.n)
        b.reset_rows(rows, b.seeds_for(seed))
        self._obs = np.empty((b.n, STATE_SIZE), np.float32)
        self._masks = np.empty((b.n, N_FLAT_ACTIONS), np.bool_)
        b.observe(rows, self._obs, self._masks)
        self._refresh_presence(rows)
        self._reset_called = True
        self._pending = np.zeros(b.n, np.bool_)
        self._ended = np.zeros(b.n, np.bool_)
        self._turn = 0

    def _hold(self) -> np.ndarray:
        """Before a batch step (``NEXT_STEP``): the rows restarted by the last one, marked ended so
        the kernel skips them (their action ignored, as Gymnasium's next-step autoreset does)."""
        rows = np.flatnonzero(self._pending)
        if len(rows):
            self._batch.state.scalars[rows, S_TRUNCATED] = 1
        return rows

    def _release(self, rows: np.ndarray, obs: np.ndarray, masks: np.ndarray, outcomes: np.ndarray) -> None:
        """After the batch step: the held rows live again, showing their next episode's first
        observation and mask (reward 0, outcome :data:`NOOP`)."""
        if len(rows):
            self._batch.state.scalars[rows, S_TRUNCATED] = 0
            obs[rows], masks[rows], outcomes[rows] = self._obs[rows], self._masks[rows], NOOP

    def _shown(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The observation vectors and presence returned: in ``NEXT_STEP`` an ended env's last
        observation (the kernel has already restarted it), else ``obs`` as it is."""
        if not (self._next_step and self._ended.any()):
            return obs, self._presence
        shown = obs.copy()
        shown[self._ended] = self._batch.final_obs[self._ended]
        return shown, np.where(self._ended[:, None], self._ended_presence, self._presence)

    def _refresh_presence(self, rows: np.ndarray) -> None:
        """The presence blocks of ``rows``' current hospitals (the ``"masked"`` layout), and
        which rows have an outage this episode (their ventilators' presence changes by tick)."""
        if self._masked:
            self._presence = self._presence.copy()  # returned arrays stay as they were
            ticks = self._batch.state.scalars[:, S_TICK]
            for e in rows.tolist():
                s = self._batch.row_scenario(e)
                row = self._outages[e] = outage_row(s)
                vents = kernel.in_service(*row, int(ticks[e]))
                self._presence[e] = presence_vector(s.general_beds, s.icu_beds, vents)
            self._outage_rows = np.flatnonzero(self._outages[:, 1])

    def _tick_presence(self) -> None:
        """After a batch step: the ventilators' presence of the rows with an outage, at the tick
        they reached (an ended row's at its last tick, for its final observation)."""
        rows = self._outage_rows
        if not (self._masked and len(rows)):
            return
        b = self._batch
        ended = b.resets[rows] != ROW_LIVE
        ticks = np.where(ended, b.final_scalars[rows, S_TICK], b.state.scalars[rows, S_TICK])
        count = np.empty(len(rows), np.int64)
        kernel.in_service_rows(self._outages[rows], ticks, count)
        self._presence = self._presence.copy()
        self._presence[rows, VENT_PRESENCE] = np.arange(MAX_VENTILATORS) < count[:, None]

    def _composed(self, obs: np.ndarray, presence: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The batched Dict observation in this env's layout."""
        views = composed_views(obs, self._one_d)
        if self._masked:
            views.update(presence_views(self._presence if presence is None else presence))
        return views

    def _autoreset(self, obs: np.ndarray, masks: np.ndarray, infos: dict[str, Any]) -> tuple:
        """After a batch step: the ended episodes' final observations and info, and the start
        of the rows the kernel left to Python (a user day, a day too big for the state, or
        an env whose keys drawn ahead ran out)."""
        b = self._batch
        terminated, truncated, left = b.ended()
        ended = terminated | truncated
        finished = np.flatnonzero(ended)
        self._ended, self._ended_presence = ended, self._presence
        if self._next_step:
            self._pending = ended
            if len(finished):  # where SyncVectorEnv puts the scalar env's last info
                infos.update(
                    {k: v for k, v in b.final_info(finished, ended).items() if k not in ("tick", "_tick")}
                )
        elif len(finished):
            final_obs = np.full(b.n, None, dtype=object)
            last = b.final_obs[finished]  # one copy: every final observation views into it
            for e, vector in zip(finished.tolist(), last):
                final_obs[e] = self._single_obs(vector, self._presence[e])
            infos["final_obs"] = final_obs
            infos["_final_obs"] = ended
            infos["final_info"] = b.final_info(finished, ended)
            infos["_final_info"] = ended
        if len(left):
            b.reset_rows(left, [None] * len(left))
            b.observe(left, obs, masks)
        self._refresh_presence(finished)
        return terminated, truncated

    def _single_obs(self, vector: np.ndarray, presence: np.ndarray) -> Any:
        views = composed_views(vector, self._one_d)
        if self._masked:
            views.update(presence_views(presence))
        return views

    def _counter_infos(self, outcome: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The infos every batched env returns from ``reset()`` and ``step()`` alike: ``(B,)`` int64
        ``tick``, ``invalid_actions``, ``conflicts`` (of each row's current episode) and ``outcome``
        (codes of :data:`~hospital_marl.envs.infos.OUTCOME_NAMES`; ``(B, 3)`` role by role on the
        joint envs; :data:`~hospital_marl.envs.infos.NOOP` after ``reset()``)."""
        sc = self._batch.state.scalars
        if self._next_step and self._ended.any():  # an ended env's counters are its last episode's
            sc = np.where(self._ended[:, None], self._batch.final_scalars, sc)
        if outcome is None:
            outcome = np.full((self.num_envs, *self._outcome_shape), NOOP, np.int64)
        return {
            "tick": sc[:, S_TICK].astype(np.int64),
            "invalid_actions": sc[:, S_COUNTERS + _INVALID].astype(np.int64),
            "conflicts": sc[:, S_COUNTERS + _CONFLICTS].astype(np.int64),
            "outcome": outcome,
        }

    def _gym_infos(self, infos: dict[str, Any]) -> dict[str, Any]:
        """The Gymnasium vector envs' infos as ``SyncVectorEnv`` batches the scalar env's: also
        ``scenario`` (each env's, an object array of names) and a ``_key`` mask beside every key."""
        infos["scenario"] = np.array([s.name for s in self._batch.row_scenarios], dtype=object)
        every = np.ones(self.num_envs, np.bool_)
        for key in ("action_mask", "tick", "scenario", "outcome", "invalid_actions", "conflicts", "outcomes"):
            if key in infos:
                infos["_" + key] = every
        return infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Each env's ``name`` (called with the arguments when it is a method), as ``SyncVectorEnv.call``
        gives it: ``env.unwrapped.call("action_masks")`` is every env's mask, under any vector wrapper."""
        value = getattr(self, name)
        if callable(value):
            value = value(*args, **kwargs)
        if isinstance(value, np.ndarray) and value.shape[:1] == (self.num_envs,):
            return tuple(value)
        return tuple(value for _ in range(self.num_envs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Each env's attribute ``name``, as ``SyncVectorEnv.get_attr`` (``"scenario"``: this episode's)."""
        if name == "scenario":
            return tuple(self._batch.row_scenario(e) for e in range(self.num_envs))
        return self.call(name)

    def _check_reset(self) -> None:
        if not self._reset_called:
            raise RuntimeError("call reset() before step()")

    def close_extras(self, **kwargs: Any) -> None:
        batch = getattr(self, "_batch", None)  # None if __init__ refused its arguments
        if batch is not None:
            batch.close()


class HospitalEDVectorEnv(_VectorBase):
    """B composed envs (``Discrete(39)`` each) in one batch; see the module docstring.

    Arguments: ``num_envs``, then those of :class:`~hospital_marl.envs.composed.HospitalEDEnv`
    (scenario, max_cycles, clinical, rewards, day_generator), and ``threads`` (see the module
    docstring; None = serial).
    """

    def __init__(
        self, num_envs: int = 1, scenario: str | Scenario | ScenarioDistribution | None = None, **kwargs: Any
    ) -> None:
        super().__init__(num_envs, scenario, **kwargs)
        self.single_observation_space = composed_space(self._batch.template, self._one_d)
        if self._masked:
            self.single_observation_space = spaces.Dict(
                {**self.single_observation_space.spaces, **presence_space()}
            )
        self.single_action_space = spaces.Discrete(N_FLAT_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        self._reset(seed, options)
        infos = {"action_mask": self._masks.copy(), **self._counter_infos()}
        return self._composed(self._obs), self._gym_infos(infos)

    def action_masks(self) -> np.ndarray:
        """``(B, 39)`` bool validity of every env's actions (sb3-contrib's convention)."""
        return self._masks.copy()

    def step(self, actions: Any):
        self._check_reset()
        b = self._batch
        actions = _int_actions(actions, (b.n,))
        b.ensure_bounce_room(1)
        obs = np.empty((b.n, STATE_SIZE), np.float32)
        masks = np.empty((b.n, N_FLAT_ACTIONS), np.bool_)
        rewards = np.zeros(b.n, np.float64)
        outcomes = np.zeros(b.n, np.int64)
        held = self._hold()
        b.run(kernel.step_flat_batch, actions, OFFSETS, obs, masks, rewards, outcomes)
        self._release(held, obs, masks, outcomes)
        self._tick_presence()
        infos: dict[str, Any] = {}
        terminated, truncated = self._autoreset(obs, masks, infos)
        self._obs, self._masks = obs, masks
        infos["action_mask"] = masks.copy()
        infos.update(self._counter_infos(outcomes))
        return self._composed(*self._shown(obs)), rewards, terminated, truncated, self._gym_infos(infos)


class _JointVectorBase(_VectorBase):
    """Three role actions per env and step, resolved like the parallel env (conflicts)."""

    _actions_per_env = 3
    _outcome_shape = (len(ROLES),)

    _turn = 0
    """How many roles have taken their AEC turn this tick (:meth:`HospitalMARLVectorEnv.turn`)."""

    def _joint_step(self, actions: np.ndarray) -> tuple:
        self._check_reset()
        if self._turn:
            raise RuntimeError(
                f"a tick is under way in turns ({TURN_ORDER[self._turn]}'s turn): finish it with turn() "
                "and end_tick(), not step()"
            )
        b = self._batch
        b.ensure_bounce_room(3)
        obs = np.empty((b.n, STATE_SIZE), np.float32)
        masks = np.empty((b.n, N_FLAT_ACTIONS), np.bool_)
        rewards = np.zeros(b.n, np.float64)
        role_rewards = np.zeros((b.n, len(ROLES)), np.float64)
        outcomes = np.zeros((b.n, len(ROLES)), np.int64)
        seen = self._masks
        held = self._hold()
        b.run(kernel.step_joint_batch, actions, seen, OFFSETS, obs, masks, rewards, role_rewards, outcomes)
        self._release(held, obs, masks, outcomes)
        return self._after_tick(obs, masks, rewards, role_rewards, outcomes)

    def _after_tick(
        self,
        obs: np.ndarray,
        masks: np.ndarray,
        rewards: np.ndarray,
        role_rewards: np.ndarray,
        outcomes: np.ndarray,
    ) -> tuple:
        self._tick_presence()
        infos: dict[str, Any] = {}
        terminated, truncated = self._autoreset(obs, masks, infos)
        self._obs, self._masks = obs, masks
        return obs, masks, rewards, role_rewards, outcomes, terminated, truncated, infos


class HospitalEDTeamVectorEnv(_JointVectorBase):
    """B team envs (``MultiDiscrete([21, 16, 4])`` each); ``action_masks()`` is ``(B, 41)``."""

    def __init__(
        self, num_envs: int = 1, scenario: str | Scenario | ScenarioDistribution | None = None, **kwargs: Any
    ) -> None:
        super().__init__(num_envs, scenario, **kwargs)
        self.single_observation_space = composed_space(self._batch.template, self._one_d)
        if self._masked:
            self.single_observation_space = spaces.Dict(
                {**self.single_observation_space.spaces, **presence_space()}
            )
        self.single_action_space = spaces.MultiDiscrete([ROLE_ACTION_COUNTS[r] for r in ROLES])
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        self._reset(seed, options)
        infos = {"action_mask": self.action_masks(), **self._counter_infos()}
        infos["outcomes"] = infos["outcome"].copy()  # the name kept from before the shared keys
        return self._composed(self._obs), self._gym_infos(infos)

    def action_masks(self) -> np.ndarray:
        """``(B, 41)``: the three role masks (each with its no-op) concatenated, as MaskablePPO expects."""
        return self._masks[:, TEAM_MASK_COLUMNS]

    def step(self, actions: Any):
        obs, masks, rewards, _, outcomes, terminated, truncated, infos = self._joint_step(
            _int_actions(actions, (self._batch.n, len(ROLES)))
        )
        infos["action_mask"] = masks[:, TEAM_MASK_COLUMNS]
        infos.update(self._counter_infos(outcomes))
        infos["outcomes"] = outcomes.copy()
        return self._composed(*self._shown(obs)), rewards, terminated, truncated, self._gym_infos(infos)


class HospitalMARLVectorEnv(_JointVectorBase):
    """The batched multi-agent form (for MARL libraries): B parallel envs at once.

    ``reset()`` / ``step(actions)`` speak dicts keyed by role: observations
    ``{role: {"observation": (B, d_role) float32, "action_mask": (B, n_role) int8}}``,
    actions ``{role: (B,) ints}``, rewards ``{role: (B,)}`` (``reward_mode`` as the
    parallel env), and ``state()`` the global state ``(B, 106)``. Semantics are the
    parallel env's (role-order resolution, conflicts); ``terminations``/``truncations``
    are ``(B,)`` per role; finished envs reset at once (``infos["final_info"]``).
    Not a Gymnasium ``VectorEnv`` subclass in spirit (dict spaces per role), but it keeps
    the same autoreset and seeding contract.
    """

    possible_agents = list(ROLES)

    def __init__(
        self,
        num_envs: int = 1,
        scenario: str | Scenario | ScenarioDistribution | None = None,
        reward_mode: str = "team",
        **kwargs: Any,
    ) -> None:
        if (
            check_autoreset_mode(kwargs.get("autoreset_mode", AutoresetMode.SAME_STEP))
            != AutoresetMode.SAME_STEP
        ):
            raise ValueError("the MARL vector env autoresets same-step (autoreset_mode='same_step')")
        super().__init__(num_envs, scenario, **kwargs)
        self.reward_mode = check_reward_mode(reward_mode)
        h = self._batch.template
        observed = {role: role_space(role, h) for role in ROLES}
        if self._masked:
            observed = {role: with_presence(box) for role, box in observed.items()}
        self.single_observation_spaces: dict[str, spaces.Space[Any]] = {
            role: spaces.Dict(
                {
                    "observation": with_presence(role_space(role, h))
                    if self._masked
                    else role_space(role, h),
                    "action_mask": spaces.Box(0, 1, (ROLE_ACTION_COUNTS[role],), np.int8),
                }
            )
            for role in ROLES
        }
        self.single_action_spaces: dict[str, spaces.Space[Any]] = {
            role: spaces.Discrete(ROLE_ACTION_COUNTS[role]) for role in ROLES
        }
        self.single_state_space = with_presence(state_space(h)) if self._masked else state_space(h)
        self.single_observation_space = spaces.Dict(self.single_observation_spaces)
        self.single_action_space = spaces.Dict(self.single_action_spaces)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

    def _role_observations(self, obs: np.ndarray, masks: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
        if self._masked:
            obs = np.concatenate([obs, self._presence], axis=1)
            index = {
                role: np.concatenate([ROLE_INDEX[role], STATE_SIZE + np.arange(PRESENCE_SIZE)])
                for role in ROLES
            }
        else:
            index = ROLE_INDEX
        return {
            role: {
                "observation": obs[:, index[role]],
                "action_mask": masks[:, ROLE_MASK_COLUMNS[role]].view(np.int8),
            }
            for role in ROLES
        }

    def _single_obs(self, vector: np.ndarray, presence: np.ndarray) -> Any:
        if self._masked:
            return {role: np.concatenate([vector[ROLE_INDEX[role]], presence]) for role in ROLES}
        return {role: vector[ROLE_INDEX[role]] for role in ROLES}

    def observations(self) -> dict[str, dict[str, np.ndarray]]:
        """Every role's batched observation and mask of the current state (mid-tick between
        :meth:`turn` calls: what the next role reads), as :meth:`step` returns them."""
        self._check_reset()
        return self._role_observations(self._obs, self._masks)

    def turn(self, role: str, actions: Any) -> np.ndarray:
        """One AEC turn of every env (the graded team protocol, :mod:`hospital_marl.envs.protocol`):
        ``role``'s actions ``(B,)`` carried out at once, as the AEC env does (an impossible one is
        invalid: -1, counted); afterwards :meth:`observations` / :meth:`state` show the mid-tick
        state the next role reads. Roles take turns in :data:`~hospital_marl.envs.protocol.TURN_ORDER`;
        after the last, :meth:`end_tick` runs the tick. Returns the role's outcome codes ``(B,)``.
        Env ``i``'s trajectory equals the AEC env's seeded alike, bit for bit."""
        self._check_reset()
        if self._next_step:  # the turns restart ended envs in the same step, as the trainers do
            raise RuntimeError("turn() needs autoreset_mode='same_step' (the trainers' mode)")
        expected = TURN_ORDER[self._turn]
        if role != expected:
            raise ValueError(f"it is {expected}'s turn, not {role!r} (roles act in {TURN_ORDER})")
        b = self._batch
        r = ROLES.index(role)
        if r == 0:
            b.ensure_bounce_room(3)
            self._turn_outcomes = np.zeros((b.n, len(ROLES)), np.int64)
        obs, masks = self._obs.copy(), self._masks.copy()  # arrays returned before stay as they were
        b.run(kernel.turn_batch, r, _int_actions(actions, (b.n,)), OFFSETS, obs, masks, self._turn_outcomes)
        self._obs, self._masks = obs, masks
        self._turn = r + 1
        return self._turn_outcomes[:, r].copy()

    def end_tick(self):
        """The tick after every role's :meth:`turn`: returns what :meth:`step` returns (the next
        tick's observations, the tick's rewards, ends and infos; ended envs restarted)."""
        self._check_reset()
        if self._turn != len(ROLES):
            raise RuntimeError(f"end_tick() after all three turns; it is {TURN_ORDER[self._turn]}'s turn")
        self._turn = 0
        b = self._batch
        obs = np.empty((b.n, STATE_SIZE), np.float32)
        masks = np.empty((b.n, N_FLAT_ACTIONS), np.bool_)
        rewards = np.zeros(b.n, np.float64)
        role_rewards = np.zeros((b.n, len(ROLES)), np.float64)
        b.run(kernel.tick_batch, OFFSETS, obs, masks, rewards, role_rewards)
        return self._tick_result(self._after_tick(obs, masks, rewards, role_rewards, self._turn_outcomes))

    def state(self) -> np.ndarray:
        """The global state of every env, ``(B, 106)`` (a copy; ``"masked"``: presence appended)."""
        if self._masked:
            return np.concatenate([self._obs, self._presence], axis=1)
        return self._obs.copy()

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        self._reset(seed, options)
        infos = self._counter_infos()
        infos["outcomes"] = infos["outcome"]  # the name kept from before the shared keys
        return self._role_observations(self._obs, self._masks), infos

    def step(self, actions: dict[str, Any]):
        joint = np.zeros((self._batch.n, len(ROLES)), np.int64)
        for r, role in enumerate(ROLES):
            if role in actions:
                joint[:, r] = _int_actions(actions[role], (self._batch.n,))
        return self._tick_result(self._joint_step(joint))

    def _tick_result(self, result: tuple) -> tuple:
        obs, masks, rewards, role_rewards, outcomes, terminated, truncated, infos = result
        if self.reward_mode == "role":
            per_role = {role: role_rewards[:, r].copy() for r, role in enumerate(ROLES)}
        else:
            per_role = {role: rewards.copy() for role in ROLES}
        infos.update(self._counter_infos(outcomes))
        infos["outcomes"] = outcomes
        return (
            self._role_observations(obs, masks),
            per_role,
            {role: terminated for role in ROLES},
            {role: truncated for role in ROLES},
            infos,
        )


def _int_actions(actions: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A batch of integer actions. As in the scalar envs, a non-integer action (a float, a bool)
    is never an error: every action of such a batch is played as invalid (-1, counted)."""
    array = np.asarray(actions)
    if array.shape != shape:
        raise ValueError(f"actions must have shape {shape}, got {array.shape}")
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        return np.full(shape, -1, np.int64)
    return array.astype(np.int64, copy=False)


def make_composed_vector(num_envs: int = 1, **kwargs: Any) -> HospitalEDVectorEnv:
    """``gymnasium.make_vec("hospital_marl/HospitalED-v0", num_envs)``: :class:`HospitalEDVectorEnv`,
    next-step autoreset unless ``autoreset_mode`` says otherwise (Gymnasium's vector wrappers
    expect it)."""
    kwargs.setdefault("autoreset_mode", AutoresetMode.NEXT_STEP)
    return HospitalEDVectorEnv(num_envs, **kwargs)


def make_team_vector(num_envs: int = 1, **kwargs: Any) -> HospitalEDTeamVectorEnv:
    """``gymnasium.make_vec`` of the team id: as :func:`make_composed_vector`."""
    kwargs.setdefault("autoreset_mode", AutoresetMode.NEXT_STEP)
    return HospitalEDTeamVectorEnv(num_envs, **kwargs)
