"""The ED simulator: all state and all rules (SPEC §2–§4). Every interface is a view of it.

Per-patient state is kept as parallel Python lists indexed by patient id
(ids come from the day, ordered by arrival): scalar access is cheap, and a
snapshot is a handful of list copies. The day itself is immutable and shared.

One tick, in order: the roles' actions (:meth:`Hospital.act`, any number,
before :meth:`Hospital.tick`), then treatment, deterioration and deaths, then
waiting times, then arrivals.
"""

from __future__ import annotations

import copy
from enum import Enum
from typing import Any, NamedTuple

import numpy as np

from hospital_marl.core.actions import (
    ACTION_TABLE,
    N_FLAT_ACTIONS,
    ROLE_FLAT,
    ROLE_KIND_INDEX,
    ROLES,
    Kind,
)
from hospital_marl.core.clinical import DEFAULT_CLINICAL, ClinicalParams, treatment_ticks
from hospital_marl.core.generator import Day, DayGenerator, arrived_by, generate_day, resample_future
from hospital_marl.core.metrics import EpisodeCounters, composite_score, episode_metrics
from hospital_marl.core.rewards import DEFAULT_REWARDS, RewardTable
from hospital_marl.core.scenarios import Scenario, get_scenario

# Where a patient is. Every arrived patient is in exactly one place (conservation).
NOT_ARRIVED, WAITING, GENERAL, ICU, DISCHARGED, AWAY, DEAD = range(7)
EMPTY = -1

BOARD_TRANSFER_SLOTS = 5
BOARD_DISCHARGE_SLOTS = 5
QUEUE_SLOTS = 10


_FIRST_10 = [[k < n for k in range(QUEUE_SLOTS)] for n in range(QUEUE_SLOTS + 1)]
_FIRST_5 = [[k < n for k in range(BOARD_TRANSFER_SLOTS)] for n in range(BOARD_TRANSFER_SLOTS + 1)]
_NONE_10 = [False] * 10


def _role_spans() -> dict[str, tuple[int, int]]:
    """Each role's actions are one contiguous run of the flat table (checked here)."""
    spans = {}
    for role, flats in ROLE_FLAT.items():
        first, last = flats[1], flats[-1]
        assert list(flats[1:]) == list(range(first, last + 1)), f"{role}'s flat actions are not contiguous"
        spans[role] = (first, last + 1)
    return spans


ROLE_FLAT_SPAN = _role_spans()


class Outcome(str, Enum):
    """What became of an action."""

    DONE = "done"
    NOOP = "noop"
    INVALID = "invalid"  # not valid when chosen: -1, counted
    CONFLICT = "conflict"  # valid when chosen, made impossible by an earlier role: counted, free


class TickResult(NamedTuple):
    reward: float  # the tick's team reward
    role_rewards: dict[str, float]  # reward_mode="role" split (sums to ``reward``)
    terminated: bool
    truncated: bool


_MUTABLE_LISTS = (
    "severity",
    "location",
    "wait",
    "neglect",
    "remaining",
    "was_critical",
    "admitted_at",
    "ready_for",
    "vent_of",
    "general",
    "icu",
    "vents",
    "vent_idle",
    "queue",
)


class Hospital:
    """The emergency department simulation.

    Args:
        scenario: a registered name, a :class:`Scenario`, or a mapping of overrides.
        clinical: dynamics parameters (defaults calibrated, SPEC §8).
        rewards: the reward table (SPEC §4).
        day_generator: draws the day's patients from the day stream.
        max_ticks: truncate earlier than ``scenario.episode_length`` (PettingZoo's max_cycles).
    """

    def __init__(
        self,
        scenario: str | Scenario | None = None,
        *,
        clinical: ClinicalParams = DEFAULT_CLINICAL,
        rewards: RewardTable = DEFAULT_REWARDS,
        day_generator: DayGenerator = generate_day,
        max_ticks: int | None = None,
    ) -> None:
        self.scenario = get_scenario(scenario)
        self.clinical = clinical
        self.rewards = rewards
        self.day_generator = day_generator
        if max_ticks is not None and (not isinstance(max_ticks, int) or max_ticks < 1):
            raise ValueError(f"max_ticks must be a positive int or None, got {max_ticks!r}")
        self.max_ticks = min(max_ticks or self.scenario.episode_length, self.scenario.episode_length)
        self.seed: int | None = None
        self._reset_called = False

    # ------------------------------------------------------------------ reset
    def reset(self, seed: int | None = None) -> None:
        """Start a new day. ``seed`` defines the day; ``None`` draws fresh entropy."""
        if seed is not None and (not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
        seq = np.random.SeedSequence(None if seed is None else int(seed))
        self.seed = int(seed) if seed is not None else None
        day_seq, bounce_seq = seq.spawn(2)
        self.day: Day = self.day_generator(self.scenario, np.random.default_rng(day_seq))
        self._bounce_stream = _DrawStream(np.random.default_rng(bounce_seq))
        self._bounce_cursor = 0
        n = self.day.n_patients
        s = self.scenario
        self.severity: list[int] = list(self.day.severity)
        self.location: list[int] = [NOT_ARRIVED] * n
        self.wait: list[int] = [0] * n
        self.neglect: list[int] = [0] * n
        self.remaining: list[int] = [0] * n
        self.was_critical: list[bool] = [False] * n
        self.admitted_at: list[int] = [0] * n
        self.ready_for: list[int] = [0] * n
        self.vent_of: list[int] = [EMPTY] * n
        self.general: list[int] = [EMPTY] * s.general_beds
        self.icu: list[int] = [EMPTY] * s.icu_beds
        self.vents: list[int] = [EMPTY] * s.ventilators
        self.vent_idle: list[int] = [0] * s.ventilators
        self.queue: list[int] = []
        self.bounce_schedule: dict[int, list[int]] = {}
        self.counters = EpisodeCounters()
        self.tick_count = 0
        self.terminated = False
        self.truncated = False
        self._reset_accumulators()
        self.last_result = TickResult(0.0, {r: 0.0 for r in ROLES}, False, False)
        self._version = getattr(self, "_version", 0) + 1  # monotonic: views cache on it
        self._board_cache: tuple[int, list[int]] = (-1, [])
        self._mask_cache: tuple[int, list[bool]] = (-1, [])
        self._reset_called = True
        self._arrive(0)

    def _reset_accumulators(self) -> None:
        self._tick_reward = 0.0
        self._role_reward = dict.fromkeys(ROLES, 0.0)

    # ------------------------------------------------------------- properties
    @property
    def version(self) -> int:
        """Changes whenever the state does (never repeats for one instance): views cache on it."""
        return self._version

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def needs_ventilator(self, pid: int) -> bool:
        """(respiratory and severity >= 4) or severity == 5."""
        sev = self.severity[pid]
        return sev == 5 or (sev == 4 and self.day.condition[pid] == 2)

    def is_ready(self, pid: int) -> bool:
        """ICU patient ready for step-down: treatment done and severity <= 3."""
        return self.remaining[pid] <= 0 and self.severity[pid] <= 3

    def board(self) -> list[int]:
        """The general board: occupied general beds' patients, most severe first, then longest stay."""
        version, board = self._board_cache
        if version != self._version:
            sev, adm = self.severity, self.admitted_at
            board = sorted((p for p in self.general if p != EMPTY), key=lambda p: (-sev[p], adm[p], p))
            self._board_cache = (self._version, board)
        return board

    def ventilator_target(self) -> int:
        """The ICU patient a free ventilator would go to, or EMPTY.

        Most severe without one; ties: needs one first, then longest in ICU, then bed index.
        """
        best, best_key = EMPTY, None
        for bed, pid in enumerate(self.icu):
            if pid != EMPTY and self.vent_of[pid] == EMPTY:
                key = (-self.severity[pid], not self.needs_ventilator(pid), self.admitted_at[pid], bed)
                if best_key is None or key < best_key:
                    best, best_key = pid, key
        return best

    # ------------------------------------------------------------------ masks
    def flat_mask(self) -> list[bool]:
        """Validity of each of the 39 flat actions: exactly what :meth:`act` would carry out.

        Cached per state; the returned list is a copy, safe to keep.
        """
        return self._flat_mask().copy()

    def _flat_mask(self) -> list[bool]:
        """The cached flat mask itself (do not mutate): the no-op, then each role's span."""
        version, mask = self._mask_cache
        if version != self._version:
            mask = [True]
            for part in _MASK_PARTS_IN_FLAT_ORDER:
                mask += part(self)
            self._mask_cache = (self._version, mask)
        return mask

    def role_mask(self, role: str, flat_mask: list[bool] | None = None) -> list[bool]:
        """Validity of a role's actions (0 = its no-op): a slice of the flat mask.

        Without ``flat_mask``, only this role's part is computed (unless the flat
        mask is cached for this state): the AEC env asks for one role per state.
        """
        start, stop = ROLE_FLAT_SPAN[role]
        if flat_mask is None:
            version, cached = self._mask_cache
            if version != self._version:
                return [True, *_MASK_PART[role](self)]
            flat_mask = cached
        return [True, *flat_mask[start:stop]]

    # Each role's part of the mask. Prefix tables (_FIRST[n][k] = k < n) instead of
    # per-slot comprehensions: hot path.
    def _triage_mask(self) -> list[bool]:
        """Admit queue slot i to a general bed (10), then to an ICU bed (10)."""
        slots = _FIRST_10[min(len(self.queue), QUEUE_SLOTS)]
        return (slots if EMPTY in self.general else _NONE_10) + (slots if EMPTY in self.icu else _NONE_10)

    def _ventilator_mask(self) -> list[bool]:
        """Ventilator v (3): free, and some ICU patient has none."""
        vent_of = self.vent_of
        for p in self.icu:
            if p != EMPTY and vent_of[p] == EMPTY:
                return [v == EMPTY for v in self.vents] + _NONE_10[: 3 - len(self.vents)]
        return _NONE_10[:3]

    def _bed_manager_mask(self) -> list[bool]:
        """Transfer board k to ICU (5), early-discharge k from the bottom (5), discharge ICU bed j (5)."""
        board = self.board()
        n_board = len(board)
        sev = self.severity
        mask = _FIRST_5[min(n_board, BOARD_TRANSFER_SLOTS)] if EMPTY in self.icu else _NONE_10[:5]
        # A new list (the prefix tables are shared), then the bottom of the board, least severe first.
        mask = mask + [sev[p] <= 3 for p in board[: -BOARD_DISCHARGE_SLOTS - 1 : -1]]
        mask += _NONE_10[: BOARD_DISCHARGE_SLOTS - min(n_board, BOARD_DISCHARGE_SLOTS)]
        # Ready implies severity <= 3, so "ready or non-critical" is "severity <= 3".
        mask += [p != EMPTY and sev[p] <= 3 for p in self.icu]
        mask += _NONE_10[: 5 - len(self.icu)]
        return mask

    def is_valid(self, kind: Kind, index: int) -> bool:
        """Whether one action would be carried out now (the mask, for a single action)."""
        if kind is Kind.NOOP:
            return True
        if kind in (Kind.ADMIT_GENERAL, Kind.ADMIT_ICU):
            beds = self.general if kind is Kind.ADMIT_GENERAL else self.icu
            return 0 <= index < min(len(self.queue), QUEUE_SLOTS) and EMPTY in beds
        if kind is Kind.VENTILATE:
            return (
                0 <= index < len(self.vents)
                and self.vents[index] == EMPTY
                and any(p != EMPTY and self.vent_of[p] == EMPTY for p in self.icu)
            )
        if kind is Kind.TRANSFER_ICU:
            return 0 <= index < min(len(self.board()), BOARD_TRANSFER_SLOTS) and EMPTY in self.icu
        if kind is Kind.EARLY_DISCHARGE:
            board = self.board()
            return (
                0 <= index < min(len(board), BOARD_DISCHARGE_SLOTS)
                and self.severity[board[len(board) - 1 - index]] <= 3
            )
        if kind is Kind.DISCHARGE_ICU:
            return (
                0 <= index < len(self.icu)
                and self.icu[index] != EMPTY
                and self.severity[self.icu[index]] <= 3
            )
        raise ValueError(f"unknown action kind {kind!r}")

    # ---------------------------------------------------------------- actions
    def act(self, role: str, role_action: int, *, valid_when_chosen: bool | None = None) -> Outcome:
        """Carry out one role action now (before :meth:`tick`). Never raises for a bad action.

        ``valid_when_chosen`` (parallel resolution): if the action was valid on
        the mask the role saw but an earlier role's action made it impossible,
        it is a *conflict* (no-op, counted, no penalty) rather than invalid.
        """
        self._check_running()
        table = ROLE_KIND_INDEX.get(role)
        if table is None:
            raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
        self.counters.actions += 1
        try:
            role_action = _as_action_index(role_action, len(table))
        except (TypeError, ValueError, IndexError):
            return self._invalid(role)
        kind, index = table[role_action]
        return self._carry_out(role, kind, index, ROLE_FLAT[role][role_action], valid_when_chosen)

    def act_flat(self, flat: int) -> Outcome:
        """Carry out one flat action (SPEC §3 table); counts as one action."""
        self._check_running()
        self.counters.actions += 1
        try:
            flat = _as_action_index(flat, N_FLAT_ACTIONS)
        except (TypeError, ValueError, IndexError):
            return self._invalid(None)
        spec = ACTION_TABLE[flat]
        return self._carry_out(spec.role, spec.kind, spec.index, flat, None)

    def _carry_out(
        self, role: str | None, kind: Kind, index: int, flat: int, valid_when_chosen: bool | None
    ) -> Outcome:
        if kind is Kind.NOOP:
            return Outcome.NOOP
        version, mask = self._mask_cache  # the views have usually just built it: no need to re-check
        if not (mask[flat] if version == self._version else self.is_valid(kind, index)):
            if valid_when_chosen:
                self.counters.conflicts += 1
                return Outcome.CONFLICT
            return self._invalid(role)
        if kind is Kind.ADMIT_GENERAL:
            self._admit(self.queue.pop(index), GENERAL)
        elif kind is Kind.ADMIT_ICU:
            self._admit(self.queue.pop(index), ICU)
        elif kind is Kind.VENTILATE:
            pid = self.ventilator_target()
            self.vents[index] = pid
            self.vent_idle[index] = 0
            self.vent_of[pid] = index
        elif kind is Kind.TRANSFER_ICU:
            pid = self.board()[index]
            self.general[self.general.index(pid)] = EMPTY
            self._place(pid, ICU)
        elif kind is Kind.EARLY_DISCHARGE:
            board = self.board()
            pid = board[len(board) - 1 - index]
            self.general[self.general.index(pid)] = EMPTY
            self._early_discharge(pid, role)
        elif kind is Kind.DISCHARGE_ICU:
            pid = self.icu[index]
            self.icu[index] = EMPTY
            self._release_ventilator(pid)
            if self.is_ready(pid):
                self._discharge(pid, role)
            else:
                self._early_discharge(pid, role)
        self._version += 1  # after the change: board() above must read the pre-action cache
        return Outcome.DONE

    def _invalid(self, role: str | None) -> Outcome:
        self.counters.invalid_actions += 1
        self._reward(self.rewards.invalid_action, role)
        return Outcome.INVALID

    def _check_running(self) -> None:
        if not self._reset_called:
            raise RuntimeError("call reset() before acting")
        if self.terminated or self.truncated:
            raise RuntimeError("the episode has ended; call reset()")

    def _reward(self, value: float, role: str | None = None) -> None:
        self._tick_reward += value
        if role is not None:
            self._role_reward[role] += value

    def _admit(self, pid: int, where: int) -> None:
        self.counters.admissions += 1
        self._place(pid, where)

    def _place(self, pid: int, where: int) -> None:
        """Put a patient in the first free bed of a kind and draw the treatment time."""
        beds = self.general if where == GENERAL else self.icu
        beds[beds.index(EMPTY)] = pid
        self.location[pid] = where
        self.admitted_at[pid] = self.tick_count
        self.ready_for[pid] = 0
        if where == GENERAL:
            ranges, q = self.clinical.treatment_general, self.day.q_general[pid]
        else:
            ranges, q = self.clinical.treatment_icu, self.day.q_icu[pid]
        self.remaining[pid] = treatment_ticks(ranges, self.severity[pid], q)

    def _release_ventilator(self, pid: int) -> None:
        v = self.vent_of[pid]
        if v != EMPTY:
            self.vents[v] = EMPTY
            self.vent_idle[v] = 0
            self.vent_of[pid] = EMPTY

    def _discharge(self, pid: int, role: str | None) -> None:
        """A successful discharge (treatment done)."""
        self.location[pid] = DISCHARGED
        self.counters.discharges += 1
        if self.was_critical[pid]:
            self.counters.critical_saved += 1
            self._reward(self.rewards.critical_discharge, role)
        else:
            self._reward(self.rewards.discharge, role)

    def _early_discharge(self, pid: int, role: str | None) -> None:
        """Home before treatment is done: a cost, and maybe a bounce-back later this shift."""
        sev = self.severity[pid]
        self.location[pid] = AWAY
        self.counters.early_discharges += 1
        self._reward(self.rewards.early_discharge_per_severity * sev, role)
        u_bounce, u_delay = self._bounce_stream.pair(self._bounce_cursor)
        self._bounce_cursor += 1
        if u_bounce < self.clinical.bounce_back_per_severity * sev:
            low, high = self.clinical.bounce_back_delay
            back = self.tick_count + low + int(u_delay * (high - low + 1))
            if back < self.max_ticks:
                self.bounce_schedule.setdefault(back, []).append(pid)

    def _die(self, pid: int) -> None:
        self.location[pid] = DEAD
        self._release_ventilator(pid)
        self.counters.deaths += 1
        if self.was_critical[pid]:
            self.counters.critical_deaths += 1
        self._reward(self.rewards.death)

    def _mark_critical(self, pid: int) -> None:
        if not self.was_critical[pid] and self.severity[pid] >= 4:
            self.was_critical[pid] = True
            self.counters.critical_total += 1

    # ------------------------------------------------------------------- tick
    def tick(self) -> TickResult:
        """Advance one tick after the roles' actions: treatment, deterioration and deaths,
        waiting, then arrivals. Returns the tick's team reward and the episode flags."""
        self._check_running()
        self._version += 1
        cp = self.clinical
        t = self.tick_count
        latent = self.day.latent
        cond = self.day.condition
        sev = self.severity
        c = self.counters

        # ICU: adequate unless the patient needs a ventilator and has none.
        icu, remaining, vent_of, location = self.icu, self.remaining, self.vent_of, self.location
        for bed, pid in enumerate(icu):
            if pid == EMPTY:
                continue
            s = sev[pid]
            if remaining[pid] <= 0 and s <= 3:  # ready: holds the bed, stable
                self.ready_for[pid] += 1
                if self.ready_for[pid] >= cp.step_down_block_ticks:
                    icu[bed] = EMPTY
                    self._release_ventilator(pid)
                    self._discharge(pid, None)
                continue
            if vent_of[pid] != EMPTY or not self.needs_ventilator(pid):
                self._treat(pid, latent[pid][t], cp.improve_icu)
            else:
                self._neglect(pid, latent[pid][t], in_bed=True)
            if location[pid] == DEAD:
                icu[bed] = EMPTY

        # General beds: adequate for severity <= 3; critical patients make no progress.
        # Nothing later this tick changes a general patient's severity, so the critical
        # ones left in a bed are counted here (for the unattended penalty below).
        n_crit_general = 0
        general = self.general
        occupied = [(bed, p) for bed, p in enumerate(general) if p != EMPTY]  # most beds are often empty
        for bed, pid in occupied:
            if sev[pid] <= 3:
                self._treat(pid, latent[pid][t], cp.improve_general)
                if remaining[pid] <= 0:
                    general[bed] = EMPTY
                    self._discharge(pid, None)
            else:
                self._neglect(pid, latent[pid][t], in_bed=True)
                if location[pid] == DEAD:
                    general[bed] = EMPTY
                else:
                    n_crit_general += 1

        # Ventilator weaning: released after wean_ticks consecutive ticks not needed.
        for v, pid in enumerate(self.vents):
            if pid == EMPTY:
                continue
            if self.needs_ventilator(pid):
                self.vent_idle[v] = 0
            else:
                self.vent_idle[v] += 1
                if self.vent_idle[v] >= cp.wean_ticks:
                    self._release_ventilator(pid)

        # Waiting room: never adequate care. One pass: neglect, deaths, waiting time.
        # (Inlined _neglect: this loop is the simulator's hot path under pressure.)
        rw = self.rewards
        n_crit_waiting = 0
        if self.queue:
            wait, neglect, was_critical = self.wait, self.neglect, self.was_critical
            base, cfac, scale = cp.deteriorate_base, cp.condition_factor, cp.neglect_scale
            cap, death_waiting = cp.deteriorate_cap, cp.death_waiting
            died = False
            for pid in self.queue:
                u = latent[pid][t]
                n = neglect[pid]
                neglect[pid] = n + 1
                s = sev[pid]
                if s == 5:
                    if u < death_waiting:
                        self._die(pid)
                        died = True
                        continue
                else:
                    p = base[s] * (1.0 + n / scale) * cfac[cond[pid]]
                    if u < (p if p < cap else cap):
                        s += 1
                        sev[pid] = s
                        c.deteriorations += 1
                        if s >= 4 and not was_critical[pid]:
                            was_critical[pid] = True
                            c.critical_total += 1
                wait[pid] += 1
                if s >= 4:
                    n_crit_waiting += 1
            if died:
                self.queue = [p for p in self.queue if self.location[p] == WAITING]
        n_queue = len(self.queue)
        c.wait_ticks += n_queue
        self._reward(
            rw.critical_unattended_per_tick * (n_crit_waiting + n_crit_general)
            + rw.waiting_per_tick * (n_queue - n_crit_waiting)
        )
        icu_used = len(self.icu) - self.icu.count(EMPTY)
        if icu_used / len(self.icu) > rw.icu_busy_threshold:
            self._reward(rw.icu_busy_bonus)
        general_used = len(self.general) - self.general.count(EMPTY)
        c.occupancy_sum += (general_used + icu_used) / (len(self.general) + len(self.icu))
        c.ticks += 1

        # Next tick: bounce-backs return, then the day's arrivals.
        self.tick_count = t + 1
        if c.deaths >= self.scenario.max_deaths:
            self.terminated = True
        elif self.tick_count >= self.max_ticks:
            self.truncated = True
        else:
            self._arrive(self.tick_count)
        if self.terminated or self.truncated:
            self._reward(rw.survival_bonus * self.metrics()["survival_rate"])

        team = self._tick_reward
        own = self._role_reward
        shared = team - sum(own.values())
        result = TickResult(team, {r: own[r] + shared for r in ROLES}, self.terminated, self.truncated)
        c.cumulative_reward += team
        self.last_result = result
        self._reset_accumulators()
        return result

    def _treat(self, pid: int, u: float, improve: tuple[float, ...]) -> None:
        """Adequate care: treatment progresses; severity may improve; residual mortality at 5."""
        if self.remaining[pid] > 0:
            self.remaining[pid] -= 1
        sev = self.severity[pid]
        if sev == 5:
            if u < self.clinical.death_residual:
                self._die(pid)
            elif u < self.clinical.death_residual + improve[5]:
                self.severity[pid] = 4
        elif u < improve[sev]:
            self.severity[pid] = sev - 1

    def _neglect(self, pid: int, u: float, *, in_bed: bool) -> None:
        """No adequate care: severity may rise (faster the longer the neglect); death at 5."""
        cp = self.clinical
        n = self.neglect[pid]
        self.neglect[pid] = n + 1
        sev = self.severity[pid]
        if sev == 5:
            if u < (cp.death_in_bed if in_bed else cp.death_waiting):
                self._die(pid)
            return
        p = (
            cp.deteriorate_base[sev]
            * (1.0 + n / cp.neglect_scale)
            * cp.condition_factor[self.day.condition[pid]]
            * (cp.bed_factor if in_bed else 1.0)
        )
        if u < min(cp.deteriorate_cap, p):
            self.severity[pid] = sev + 1
            self.counters.deteriorations += 1
            self._mark_critical(pid)

    def _arrive(self, t: int) -> None:
        for pid in self.bounce_schedule.pop(t, ()):
            self.severity[pid] = min(5, self.severity[pid] + 1)
            self.location[pid] = WAITING
            self.queue.append(pid)
            self.counters.bounce_backs += 1
            self._mark_critical(pid)
        if t < len(self.day.arrivals_at):
            for pid in self.day.arrivals_at[t]:
                self.location[pid] = WAITING
                self.queue.append(pid)
                self.counters.arrivals += 1
                self._mark_critical(pid)

    # ---------------------------------------------------------------- metrics
    def metrics(self) -> dict[str, float]:
        """The five graded metrics so far (SPEC §7)."""
        return episode_metrics(self.counters)

    def score(self) -> float:
        return composite_score(self.metrics())

    def census(self) -> dict[str, int]:
        """Where every arrived patient is now (conservation: these sum to arrivals)."""
        loc = self.location
        return {
            "waiting": loc.count(WAITING),
            "general": loc.count(GENERAL),
            "icu": loc.count(ICU),
            "discharged": loc.count(DISCHARGED),
            "away": loc.count(AWAY),
            "died": loc.count(DEAD),
        }

    # ------------------------------------------------------ snapshot / restore
    def snapshot(self) -> dict[str, Any]:
        """The full mutable state, cheaply copied. The day and parameters are shared (immutable)."""
        snap: dict[str, Any] = {name: getattr(self, name).copy() for name in _MUTABLE_LISTS}
        snap.update(
            day=self.day,
            seed=self.seed,
            tick_count=self.tick_count,
            terminated=self.terminated,
            truncated=self.truncated,
            counters=self.counters.copy(),
            last_result=self.last_result,
            bounce_schedule={t: list(p) for t, p in self.bounce_schedule.items()},
            bounce_stream=self._bounce_stream,
            bounce_cursor=self._bounce_cursor,
            tick_reward=self._tick_reward,
            role_reward=dict(self._role_reward),
        )
        return snap

    def restore(self, snap: dict[str, Any]) -> None:
        """Return to a snapshot (it stays valid: restore it as often as you like)."""
        for name in _MUTABLE_LISTS:
            setattr(self, name, snap[name].copy())
        self.day = snap["day"]
        self.seed = snap["seed"]
        self.tick_count = snap["tick_count"]
        self.terminated = snap["terminated"]
        self.truncated = snap["truncated"]
        self.counters = snap["counters"].copy()
        self.last_result = snap["last_result"]
        self.bounce_schedule = {t: list(p) for t, p in snap["bounce_schedule"].items()}
        self._bounce_stream = snap["bounce_stream"]
        self._bounce_cursor = snap["bounce_cursor"]
        self._tick_reward = snap["tick_reward"]
        self._role_reward = dict(snap["role_reward"])
        self._version = getattr(self, "_version", 0) + 1
        self._board_cache = (-1, [])
        self._mask_cache = (-1, [])
        self._reset_called = True

    def __deepcopy__(self, memo: dict[int, Any]) -> Hospital:
        clone = copy.copy(self)
        if self._reset_called:
            for name in _MUTABLE_LISTS:
                setattr(clone, name, getattr(self, name).copy())
            clone.counters = self.counters.copy()
            clone.bounce_schedule = {t: list(p) for t, p in self.bounce_schedule.items()}
            clone._role_reward = dict(self._role_reward)
            clone._board_cache = (-1, [])
            clone._mask_cache = (-1, [])
        return clone

    def imagine(self, seed: int | np.random.SeedSequence) -> Hospital:
        """A copy whose unrevealed future (later arrivals, the patients' dynamics from
        now on, bounce-backs) is redrawn from ``seed``: what a planner may use
        without seeing the episode's future."""
        self._check_running()
        seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        day_seq, bounce_seq = seq.spawn(2)
        clone = copy.deepcopy(self)
        day = resample_future(self.day, self.scenario, self.tick_count, np.random.default_rng(day_seq))
        n_new = day.n_patients
        known = arrived_by(day, self.tick_count)
        for name, fill in (
            ("severity", None),
            ("location", NOT_ARRIVED),
            ("wait", 0),
            ("neglect", 0),
            ("remaining", 0),
            ("was_critical", False),
            ("admitted_at", 0),
            ("ready_for", 0),
            ("vent_of", EMPTY),
        ):
            values = getattr(clone, name)[:known]
            if name == "severity":
                values += list(day.severity[known:n_new])
            else:
                values += [fill] * (n_new - known)
            setattr(clone, name, values)
        clone.day = day
        clone._bounce_stream = _DrawStream(np.random.default_rng(bounce_seq))
        clone._bounce_cursor = 0
        clone._version += 1
        return clone


_MASK_PART = {
    "triage": Hospital._triage_mask,
    "ventilator_officer": Hospital._ventilator_mask,
    "bed_manager": Hospital._bed_manager_mask,
}
"""Each role's part of the flat mask (its span of ACTION_TABLE, without the no-op)."""
assert set(_MASK_PART) == set(ROLES)
_MASK_ORDER = sorted(ROLES, key=lambda role: ROLE_FLAT_SPAN[role])
_MASK_PARTS_IN_FLAT_ORDER = tuple(_MASK_PART[role] for role in _MASK_ORDER)
_spans = [ROLE_FLAT_SPAN[role] for role in _MASK_ORDER]
assert [1] + [stop for _, stop in _spans] == [start for start, _ in _spans] + [N_FLAT_ACTIONS], (
    "the role spans must tile the flat table after the no-op"
)


class _DrawStream:
    """An append-only list of uniform pairs drawn from one generator.

    The k-th draw is the same number on every branch of a snapshot tree, and a
    snapshot only needs the cursor (an int), not the generator's state.
    """

    __slots__ = ("_draws", "_rng")

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._draws: list[tuple[float, float]] = []

    def pair(self, k: int) -> tuple[float, float]:
        while k >= len(self._draws):
            block = self._rng.random((64, 2)).tolist()
            self._draws.extend(tuple(row) for row in block)
        return self._draws[k]


def _as_action_index(action: Any, n: int) -> int:
    """Accept ints and integer numpy scalars/0-d arrays; anything else is invalid."""
    if type(action) is int and 0 <= action < n:  # the common cases, first
        return action
    if isinstance(action, np.integer):  # never a bool: np.bool_ is not an np.integer
        index = int(action)
        if not 0 <= index < n:
            raise IndexError(index)
        return index
    if isinstance(action, (bool, np.bool_)):
        raise TypeError("bool is not an action")
    if isinstance(action, np.ndarray):
        if action.shape not in ((), (1,)) or not np.issubdtype(action.dtype, np.integer):
            raise TypeError("action array must be a single integer")
        action = action.reshape(()).item()
    if not isinstance(action, (int, np.integer)):
        raise TypeError(f"action must be an int, got {type(action).__name__}")
    index = int(action)
    if not 0 <= index < n:
        raise IndexError(index)
    return index
