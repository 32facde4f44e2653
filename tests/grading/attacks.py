"""Policies that try to read the answers (SPEC §12), for tests/grading/test_sealed.py.

Each attacker plays the masked "first legal action" rule and, at ``reset`` and at the first
decisions, tries one way to reach what a policy must not: the live simulator, the day's future
(patients who have not arrived, their treatment quantiles), the episode's seed or key. What it
finds is appended to ``report`` (a JSON-lines file, so an attacker in another process can say
it too). A leak is judged against the truth the test hands it (``Secrets``: the graded days'
seeds, keys and patients), never against anything the grader gives the policy.

They live in their own module so that the isolated grader's process can import them.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import json
import pickle
import sys
import types
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hospital_marl.core.types import N_PAT, PAT_ARRIVAL, PAT_ARRIVAL_SEVERITY, PAT_CONDITION, S_TICK


@dataclass
class Secrets:
    """What the test knows about the graded days (the attacker looks for any of it)."""

    seeds: set[int] = field(default_factory=set)
    keys: set[int] = field(default_factory=set)
    futures: list[tuple] = field(default_factory=list)  # per day: every (arrival, condition, severity)
    quantiles: list[np.ndarray] = field(default_factory=list)  # per day: (2, n) the day's quantiles


def secrets_of(scenario: str, seeds: list[int]) -> Secrets:
    from hospital_marl.core.hospital import Hospital
    from hospital_marl.core.rng import seed_key

    out = Secrets()
    for seed in seeds:
        h = Hospital(scenario)
        h.reset(seed)
        n = int(h.state.scalars[0, 0])
        pat = h.state.pat[0, :n]
        out.seeds.add(seed)
        out.keys.add(seed_key(seed))
        out.futures.append(
            tuple(map(tuple, pat[:, [PAT_ARRIVAL, PAT_CONDITION, PAT_ARRIVAL_SEVERITY]].tolist()))
        )
        out.quantiles.append(h.state.quantile[0, :, :n].copy())
    return out


def _future_rows(pat: np.ndarray, now: int) -> tuple:
    """(arrival, condition, severity on arrival) of the patients arriving after ``now``."""
    rows = pat.reshape(-1, N_PAT)
    rows = rows[(rows[:, PAT_ARRIVAL] > now) & (rows[:, PAT_CONDITION] != 0)]
    return tuple(map(tuple, rows[:, [PAT_ARRIVAL, PAT_CONDITION, PAT_ARRIVAL_SEVERITY]].tolist()))


def leaks(objects: list[Any], secrets: Secrets, now: int) -> list[str]:
    """What among ``objects`` is a secret: a live simulator or env, the seed or key, a future
    patient of the real day, a real unrevealed treatment quantile."""
    found = []
    real_futures = {tuple(r for r in day if r[0] > now) for day in secrets.futures}
    real_futures.discard(())
    real_quantiles = [
        q[:, [i for i, r in enumerate(day) if r[0] > now]]
        for q, day in zip(secrets.quantiles, secrets.futures)
    ]
    for obj in objects:
        if _dead(obj):
            continue
        kind = type(obj).__name__
        if kind in ("Seal", "HospitalEDEnv", "HospitalAECEnv", "HospitalEDTeamEnv"):
            found.append(f"live: {kind}")
        elif kind == "Hospital":
            seed = obj.__dict__.get("seed")
            if seed is not None:
                found.append(f"live: a Hospital with a seed ({seed})")
        elif isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
            if int(obj) in secrets.seeds or int(obj) in secrets.keys:
                found.append(f"seed or key: {int(obj)}")
        elif isinstance(obj, np.ndarray):
            if obj.dtype == np.int32 and obj.ndim == 3 and obj.shape[2] == N_PAT:
                if _future_rows(obj, now) in real_futures:
                    found.append("future: the real day's patients")
            elif obj.dtype == np.int64 and obj.ndim == 2 and obj.shape[1] > S_TICK:
                if any(int(v) in secrets.keys or int(v) in secrets.seeds for v in obj.ravel()):
                    found.append("seed or key: in a scalar array")
            elif obj.dtype == np.float64 and obj.ndim == 3 and obj.shape[1] == 2:
                values = set(obj.ravel().tolist()) - {0.0}
                for q in real_quantiles:
                    if q.size and values.issuperset(q.ravel().tolist()):
                        found.append("future: the real day's treatment quantiles")
    return sorted(set(found))


_SKIP = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.CodeType)


def forward(roots: list[Any], limit: int = 200_000) -> list[Any]:
    """Everything reachable from ``roots`` by any reference an object holds (``gc.get_referents``
    sees private slots, ``__dict__``, closures' cells, bound methods' ``__self__``), not going
    into modules, classes or functions' globals (they lead to the whole interpreter, and hold
    nothing of an episode). Breadth first, so that with a limit the nearest objects are read
    first (depth first from a frame walk spent the whole limit inside the test runner's own
    objects in a long session and never reached the grader's frame)."""
    seen: dict[int, Any] = {}
    stack = collections.deque(roots)
    while stack and len(seen) < limit:
        obj = stack.popleft()
        if id(obj) in seen or _dead(obj) or isinstance(obj, (_SKIP, Secrets)):
            continue  # (the test's own knowledge is not a leak)
        if isinstance(obj, dict) and "__builtins__" in obj:  # a module's globals
            continue
        seen[id(obj)] = obj
        stack.extend(gc.get_referents(obj))
        if isinstance(obj, types.MethodType):
            stack.append(obj.__self__)
            stack.extend(getattr(obj.__func__, "__closure__", None) or ())
        slots = [getattr(c, "__slots__", ()) for c in type(obj).__mro__]
        for name in (n for group in slots for n in ((group,) if isinstance(group, str) else group)):
            with contextlib.suppress(Exception):
                stack.append(object.__getattribute__(obj, name))
    return list(seen.values())


class Attacker:
    """Plays the first legal non-no-op action; tries ``attack`` at reset and a few decisions."""

    name = "attacker"
    tracks = ("flat", "team")
    attack = "forward"

    def __init__(self, secrets: Secrets, report: str, decisions: int = 3) -> None:
        self.secrets, self.report, self.decisions = secrets, report, decisions
        self.hospital: Any = None
        self.seen = 0

    def reset(self, seed: int | None = None, hospital: Any = None) -> None:
        self.hospital, self.seen = hospital, 0
        self._try(seed=seed)

    def act(self, observation: Any, action_mask: np.ndarray) -> int:
        self.seen += 1
        if self.seen <= self.decisions:
            self._try(observation=observation, action_mask=action_mask)
        legal = np.flatnonzero(action_mask)
        return int(legal[1]) if len(legal) > 1 else 0

    def act_role(self, role: str, observation: Any, action_mask: np.ndarray) -> int:
        return self.act(observation, action_mask)

    def _now(self) -> int:
        try:
            return int(self.hospital.tick_count)
        except Exception:
            return 0

    def _try(self, **received: Any) -> None:
        found = getattr(self, "attack_" + self.attack)(received)
        with Path(self.report).open("a") as f:
            f.write(json.dumps({"attack": self.attack, "found": found, "pid": _pid()}) + "\n")

    # ------------------------------------------------------------ attacks
    def attack_forward(self, received: dict[str, Any]) -> list[str]:
        """Every reference from what it was given (the handle, the observation, the mask, its seed)."""
        roots = [self.hospital, *received.values()]
        return leaks(forward(roots), self.secrets, self._now())

    def attack_imagine_seed(self, received: dict[str, Any]) -> list[str]:
        """Rebuild the day from an imagined copy's seed or key (the public API only)."""
        from hospital_marl.core.hospital import Hospital

        if self.hospital is None:
            return []
        imagined = self.hospital.imagine(7)
        found = []
        for attribute in ("seed", "_seed", "key"):
            value = getattr(imagined, attribute, None)
            if isinstance(value, int) and value >= 0:
                h = Hospital(self.hospital.scenario)
                h.reset(value)
                found += leaks([h.state.pat], self.secrets, self._now())
        return sorted(
            set(found + leaks([imagined.state.pat, imagined.state.quantile], self.secrets, self._now()))
        )

    def attack_pickle(self, received: dict[str, Any]) -> list[str]:
        """Pickle the handle and look inside the copy."""
        try:
            copy = pickle.loads(pickle.dumps(self.hospital))
        except Exception:
            return []
        return leaks(forward([copy]), self.secrets, self._now())

    def attack_frames(self, received: dict[str, Any]) -> list[str]:
        """Walk the callers' frames and their locals."""
        objects: list[Any] = []
        frame = sys._getframe()
        while frame is not None:
            objects.extend(frame.f_locals.values())
            frame = frame.f_back
        return leaks(forward(objects, limit=50_000), self.secrets, self._now())

    def attack_referrers(self, received: dict[str, Any]) -> list[str]:
        """Walk back from the handle: who refers to it, who refers to them (three steps)."""
        layer, objects = [self.hospital], []
        for _ in range(3):
            layer = [r for obj in layer for r in gc.get_referrers(obj) if not isinstance(r, types.FrameType)]
            objects += layer
        return leaks(forward(objects, limit=50_000), self.secrets, self._now())

    def attack_gc_objects(self, received: dict[str, Any]) -> list[str]:
        """Read the whole heap."""
        return leaks(_heap(), self.secrets, self._now())

    def attack_closures(self, received: dict[str, Any]) -> list[str]:
        """Every closure cell of every function object in the heap."""
        cells = [
            c.cell_contents
            for f in _heap()
            if isinstance(f, types.FunctionType) and getattr(f, "__closure__", None)
            for c in f.__closure__
            if _filled(c)
        ]
        return leaks(forward(cells, limit=50_000), self.secrets, self._now())


def _dead(obj: Any) -> bool:
    """A weak proxy whose referent is gone: touching it raises ``ReferenceError`` (the heap holds
    some, e.g. once torch is imported). A live proxy is read like its referent."""
    if type(obj) not in weakref.ProxyTypes:
        return False
    try:
        obj.__class__  # noqa: B018
    except ReferenceError:
        return True
    return False


def _heap() -> list[Any]:
    """Every object the collector tracks, but dead weak proxies."""
    return [obj for obj in gc.get_objects() if not _dead(obj)]


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _pid() -> int:
    import os

    return os.getpid()


class Saboteur(Attacker):
    """Acts on anything simulator-like it can reach (the handle's private slot, its present, an
    imagined copy): admits nobody, early-discharges nobody, just ticks them to the end."""

    attack = "sabotage"

    def attack_sabotage(self, received: dict[str, Any]) -> list[str]:
        done = []
        for obj in forward([self.hospital]):
            if type(obj).__name__ == "Hospital":
                try:
                    while not obj.done:
                        obj.tick()
                    done.append("ticked a Hospital to the end")
                except Exception:
                    pass
        return done


class Patcher(Attacker):
    """Monkey-patches the grader's modules from inside reset: every episode scores 100."""

    attack = "patch"

    def attack_patch(self, received: dict[str, Any]) -> list[str]:
        import grading.grader
        import hospital_marl.core.metrics

        def perfect(metrics: Any) -> float:
            return 100.0

        grading.grader.composite_score = perfect
        hospital_marl.core.metrics.composite_score = perfect
        return ["patched"]


def attacker(attack: str, secrets: Secrets, report: str, decisions: int = 3) -> Attacker:
    """An attacker of kind ``attack`` (a method ``attack_<attack>``)."""
    cls = {"sabotage": Saboteur, "patch": Patcher}.get(attack, Attacker)
    obj = cls(secrets, report, decisions)
    obj.attack = attack
    return obj


def findings(report: str) -> list[dict[str, Any]]:
    path = Path(report)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
