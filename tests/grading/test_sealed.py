"""SPEC §12, attacked: nothing a policy receives reaches the live simulator, the day's future,
the episode's seed or key; what one process cannot block (its callers' frames, ``gc``, shared
modules) is shown real in-process and harmless in isolated mode.

The attackers (tests/grading/attacks.py) judge a leak against the test's own knowledge of the
graded days, never against what the grader hands them. Each test fails on the code before
SPEC §12 (the plain object and the package policy got the live Hospital or a handle on it;
``imagine(k).seed`` was the episode's seed; ``imagine()`` kept treatment quantiles; RT
policies got the live Plan; there was no isolated mode).
"""

from __future__ import annotations

import contextlib
import json
import pickle
import time

import numpy as np
import pytest

import grading.grader
import hospital_marl.core.metrics
from grading.common import episode_seed, policy_seed
from grading.grader import grade
from grading.isolated import FAULTS, MAX_FAULTS
from hospital_marl.core.hospital import WAITING, Hospital, SimulatorHandle
from hospital_marl.core.rng import seed_key
from hospital_marl.core.types import PAT_LOCATION, S_KEY
from tests.grading.attacks import attacker, findings, forward, secrets_of

SCENARIO = "surge"
ONE_DAY = {"episodes": 1, "seed": 0, "scenarios": [SCENARIO]}


@pytest.fixture(scope="module")
def secrets():
    return secrets_of(SCENARIO, [episode_seed(0, SCENARIO, 0)])


def graded(attack: str, secrets, tmp_path, track: str = "flat", isolate: bool = False, **kw):
    """Grade an attacker; it writes what it found to a file under ``tmp_path``. Isolated, that
    takes ``isolation="process"`` (the same child process and protocol as the sandbox, which
    would not let it write the file): what is tested here is that a separate interpreter holds
    nothing of the grader's; the sandbox's own attacks are in test_sandbox_attacks.py."""
    report = str(tmp_path / f"{attack}-{track}-{isolate}.jsonl")
    isolated = {"isolate": True, "isolation": "process"} if isolate else {}
    result = grade(attacker(attack, secrets, report), track=track, **isolated, **ONE_DAY, **kw)
    return result, findings(report)


def found(lines: list[dict]) -> list[str]:
    return sorted({leak for line in lines for leak in line["found"]})


class FirstLegal:
    """The attackers' own play without the attack: what their episodes must score."""

    name = "first_legal"

    def act(self, observation, action_mask) -> int:
        legal = np.flatnonzero(action_mask)
        return int(legal[1]) if len(legal) > 1 else 0


# ------------------------------------------------------- what arrives at reset
@pytest.mark.parametrize("track", ["flat", "team"])
def test_a_plain_object_gets_a_sealed_handle_never_the_hospital(track: str) -> None:
    got = []

    class Plain:
        def reset(self, seed=None, hospital=None):
            got.append(hospital)

        def act(self, observation, action_mask):
            return 0

        def act_role(self, role, observation, action_mask):
            return 0

    grade(Plain(), track=track, **ONE_DAY)
    assert got and all(isinstance(h, SimulatorHandle) for h in got)
    with pytest.raises(AttributeError):
        got[0]._hospital  # noqa: B018 - the private slot that returned the live simulator
    present = object.__getattribute__(got[0], "_present")
    assert isinstance(present, Hospital) and present.seed is None


@pytest.mark.parametrize("track", ["flat", "team"])
def test_every_reference_from_what_a_policy_receives_misses_every_secret(track, secrets, tmp_path) -> None:
    """Private slots, object.__getattribute__, gc.get_referents, bound methods' __self__, closure
    cells: from the handle, the observation, the mask and the seed."""
    _, lines = graded("forward", secrets, tmp_path, track)
    assert len(lines) >= 4, "the attack ran at reset and at decisions"
    assert found(lines) == []


def test_the_sealed_present_shows_what_the_live_one_does(secrets) -> None:
    """Sealing loses nothing of the present: observation, masks and everything the handle reads."""
    from hospital_marl.core.hospital import Seal  # (SPEC §12: new)
    from hospital_marl.envs.observations import ObservationBuilder

    h = Hospital(SCENARIO)
    h.reset(next(iter(secrets.seeds)))
    seal = Seal(h)
    rng = np.random.default_rng(0)
    while not h.done:
        seal.refresh()
        handle = seal.handle
        np.testing.assert_array_equal(ObservationBuilder(handle).state(), ObservationBuilder(h).state())
        assert handle.flat_mask() == h.flat_mask() and handle.counters == h.counters
        for name in ("queue", "general", "icu", "vents", "tick_count"):
            assert getattr(handle, name) == getattr(h, name), name
        assert handle.severity == h.severity[: h.arrived] and handle.remaining == h.remaining[: h.arrived]
        present = object.__getattribute__(handle, "_present")
        assert int(present.state.scalars[0, 0]) == h.arrived, "no patient of the future in the present"
        assert int(present.state.scalars[0, S_KEY]) != int(h.state.scalars[0, S_KEY])
        legal = np.flatnonzero(h.flat_mask())
        h.act_flat(int(rng.choice(legal)))
        h.tick()


# ---------------------------------------------------------------- imagine()
def test_imagined_copies_cannot_rebuild_the_day(secrets, tmp_path) -> None:
    """Their seed and key are not the episode's, and no imagined future is the real one."""
    _, lines = graded("imagine_seed", secrets, tmp_path)
    assert len(lines) >= 4 and found(lines) == []
    from hospital_marl.core.hospital import Seal  # (SPEC §12: new)

    h = Hospital(SCENARIO)
    seed = next(iter(secrets.seeds))
    h.reset(seed)
    for _ in range(10):
        h.tick()
    handle = Seal(h).handle
    for k in range(20):
        future = handle.imagine(k)
        assert future.seed is None
        assert int(future.state.scalars[0, S_KEY]) not in (seed_key(seed), seed_key(k))
    again = Seal(h).handle  # reproducible: the same episode imagines the same futures
    np.testing.assert_array_equal(handle.imagine(3).state.pat, again.imagine(3).state.pat)


def test_imagine_redraws_the_treatment_times_of_waiting_patients() -> None:
    """The same waiting patient, admitted in each imagined future, gets different treatment
    times, not the episode's: its quantiles are unrevealed draws."""
    h = Hospital("mass_casualty")
    h.reset(11)
    for _ in range(12):
        h.tick()  # nobody admitted: a long queue
    waiting = [pid for pid in h.queue if h.state.pat[0, pid, PAT_LOCATION] == WAITING][:8]
    assert len(waiting) >= 5
    real = h.state.quantile[0][:, waiting].copy()
    futures = [h.imagine(k) for k in range(200)]
    drawn = np.stack([f.state.quantile[0][:, waiting] for f in futures])  # (200, 2, patients)
    assert not np.isin(drawn, real).any(), "no imagined future keeps a waiting patient's draw"
    assert np.abs(drawn.mean(axis=0) - 0.5).max() < 6 * np.sqrt(1 / 12 / 200), "uniform, redrawn"
    remaining = set()
    for future in futures[:40]:
        future.act_flat(1)  # admit the queue's first patient to a general bed
        remaining.add(future.remaining[future.general[0]])
    assert len(remaining) > 1, "its treatment time varies across imagined futures"
    from hospital_marl.core.hospital import Seal  # (SPEC §12: new)

    seal = Seal(h)
    sealed = object.__getattribute__(seal.handle, "_present").state.quantile[0][:, waiting]
    assert not np.isin(sealed, real).any(), "the sealed present holds no unrevealed draw either"


# ------------------------------------------------------------- other paths
def test_pickling_the_handle_is_refused(secrets, tmp_path) -> None:
    h = Hospital(SCENARIO)
    h.reset(0)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(h.handle())
    _, lines = graded("pickle", secrets, tmp_path)
    assert len(lines) >= 4 and found(lines) == []


def test_acting_on_whatever_it_reaches_changes_nothing(secrets, tmp_path) -> None:
    """An attacker that ticks every Hospital it can reach to the end scores exactly as its
    honest play: what it reached were copies."""
    report, lines = graded("sabotage", secrets, tmp_path)
    assert any(line["found"] for line in lines), "it did reach (copies of) a simulator"
    honest = grade(FirstLegal(), **ONE_DAY)
    assert report["scenarios"][SCENARIO]["counts"] == honest["scenarios"][SCENARIO]["counts"]


# ------------------------------------------- what only isolation can stop
BACKWARD = ("frames", "referrers", "gc_objects", "closures")


@pytest.mark.parametrize("attack", BACKWARD)
def test_walking_back_into_the_grader_works_in_process_and_finds_nothing_isolated(
    attack, secrets, tmp_path
) -> None:
    """Frames, gc referrers, the whole heap, every closure: in one process a policy can walk back
    to the grader's objects (this is why untrusted code is graded isolated); in its own process
    there is nothing of the grader's to find."""
    _, in_process = graded(attack, secrets, tmp_path)
    if attack in ("frames", "gc_objects"):
        assert any(leak.startswith("live") for leak in found(in_process)), "the attack is real"
    _, isolated = graded(attack, secrets, tmp_path, isolate=True)
    assert len(isolated) >= 4 and {line["pid"] for line in isolated} != {line["pid"] for line in in_process}
    assert found(isolated) == []


def test_monkey_patching_the_grader_is_harmless_isolated(secrets, tmp_path) -> None:
    saved = (grading.grader.composite_score, hospital_marl.core.metrics.composite_score)
    try:
        in_process, _ = graded("patch", secrets, tmp_path)
    finally:
        grading.grader.composite_score, hospital_marl.core.metrics.composite_score = saved
    assert in_process["overall_score"] == 100.0, "in one process the patch is real"
    isolated, lines = graded("patch", secrets, tmp_path, isolate=True)
    assert lines and lines[0]["found"] == ["patched"]
    assert isolated["overall_score"] == grade(FirstLegal(), **ONE_DAY)["overall_score"] < 100.0


# ------------------------------------------------- isolated == in-process
@pytest.mark.parametrize(
    ("policy", "track"),
    [("heuristic", "flat"), ("random", "flat"), ("planner", "flat"), ("team_heuristic", "team")],
)
def test_isolated_grading_equals_in_process_grading(policy: str, track: str) -> None:
    days = {"episodes": 2, "seed": 3, "scenarios": ["normal_day", "surge"], "track": track}
    if policy == "planner":
        days.update(episodes=1, scenarios=["surge"])
    here, there = grade(policy, **days), grade(policy, isolate=True, **days)
    assert there.pop("isolated") and not here.pop("isolated")
    assert there.pop("isolation") == "sandbox" and here.pop("isolation") is None
    assert there["policy_faults"] == here["policy_faults"] == dict.fromkeys(FAULTS, 0)
    assert there["policy_fault_messages"] == here["policy_fault_messages"] == []
    assert there == here


# ----------------------------------------------------------- bad policies
class Faulty(FirstLegal):
    """Raises, returns garbage or hangs at chosen decisions (else plays like FirstLegal). A
    package-style policy (``tracks``): the grader takes its answers as they are."""

    tracks = ("flat",)

    def __init__(self, how: str, at: tuple[int, ...], day: int | None = None) -> None:
        self.how, self.at, self.seen, self.day, self.bad = how, at, 0, day, True

    def reset(self, seed=None, hospital=None) -> None:
        self.seen, self.bad = 0, self.day is None or seed == self.day

    def act(self, observation, action_mask):
        self.seen += 1
        if self.bad and self.seen in self.at:
            if self.how == "raise":
                raise RuntimeError("a policy bug")
            if self.how == "garbage":
                return "admit everybody"
            time.sleep(3600)
        return super().act(observation, action_mask)

    def act_role(self, role, observation, action_mask):
        raise NotImplementedError


@pytest.mark.parametrize("isolate", [True, False], ids=["isolated", "in_process"])
@pytest.mark.parametrize(("how", "fault"), [("raise", "errors"), ("garbage", "garbage")])
def test_a_policy_that_raises_or_returns_garbage_gets_counted_invalid_actions(
    how: str, fault: str, isolate: bool
) -> None:
    """Either way the grader goes on: each bad decision is a counted fault played as an invalid
    action (the no-op), never a crashed grade (issue #23's bad-input rule)."""
    report = grade(Faulty(how, (5, 9, 30)), isolate=isolate, **ONE_DAY)
    assert report["policy_faults"][fault] == 3 and sum(report["policy_faults"].values()) == 3
    honest = grade(FirstLegal(), **ONE_DAY)["scenarios"][SCENARIO]["counts"]
    assert report["scenarios"][SCENARIO]["counts"]["invalid_actions"] == honest["invalid_actions"] + 3
    assert report["policy_fault_messages"]


def test_a_policy_that_hangs_times_out_counted_and_the_grader_goes_on() -> None:
    """Each hang costs one time limit and a fresh process; at the fault budget the episode
    finishes on no-ops (so a hanging policy costs MAX_FAULTS time limits, not the episode).
    The budget is the episode's: graded in lockstep with it, another day on which the policy
    plays honestly is not dropped and scores as its honest play (reset in each new process)."""
    days = {**ONE_DAY, "episodes": 2}
    bad = policy_seed(episode_seed(0, SCENARIO, 0))
    report = grade(Faulty("hang", tuple(range(3, 200)), day=bad), isolate=True, time_limit=0.5, **days)
    faults = report["policy_faults"]
    assert faults["timeouts"] == MAX_FAULTS and sum(faults.values()) == MAX_FAULTS
    assert report["policy_dropped"]["episodes"] == 1 and report["policy_dropped"]["decisions"] > 0
    assert report["scenarios"][SCENARIO]["counts"]["ticks"] > 0
    honest = grade(FirstLegal(), **days)["scenarios"][SCENARIO]["episode_scores"]
    scores = report["scenarios"][SCENARIO]["episode_scores"]
    assert scores[1] == honest[1] and scores[0] < honest[0]


def test_the_grader_never_unpickles_what_the_policy_process_sends(tmp_path) -> None:
    """A policy that finds its end of the pipe and sends a pickle that would run code in the
    grader: the answer is read as JSON, so it is a counted fault, and no code runs."""
    marker = tmp_path / "pwned"
    report = grade(PipeForger(str(marker)), isolate=True, **ONE_DAY)
    assert not marker.exists()
    assert report["policy_faults"]["protocol"] == 1 and sum(report["policy_faults"].values()) == 1


class _Pwn:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


class PipeForger(FirstLegal):
    """Forges at the day's first decision (a fresh process, reset later in the day, plays
    honestly: one fault, one restart, a short test)."""

    name = "pipe_forger"

    def __init__(self, marker: str) -> None:
        self.marker, self.hospital = marker, None

    def reset(self, seed=None, hospital=None) -> None:
        self.hospital = hospital

    def act(self, observation, action_mask):
        import gc
        import os
        import struct

        from grading.frames import Channel

        if self.hospital is None or self.hospital.tick_count > 0:
            return super().act(observation, action_mask)
        for obj in gc.get_objects():
            if isinstance(obj, Channel):  # its end of the protocol: a pickle, framed
                payload = pickle.dumps((1, "ok", _Pwn(self.marker)))
                os.set_blocking(obj.write_fd, True)
                os.write(obj.write_fd, struct.pack(">I", len(payload)) + payload)
        return super().act(observation, action_mask)


# ------------------------------------------------------------ radiotherapy
class PlanTamper:
    """An RT policy that tries to change the graded plan through what ``reset`` gave it."""

    name = "plan_tamper"

    def __init__(self, tamper: bool) -> None:
        self.tamper, self.plan = tamper, None

    def reset(self, seed=None, plan=None) -> None:
        self.plan = plan

    def act(self, observation, action_mask) -> int:
        if self.tamper:
            target = self.plan
            with contextlib.suppress(AttributeError):
                target = object.__getattribute__(self.plan, "_plan")  # the view's own copy
            target.angles[:] = 0
            target.weights[:] = 10
            target.score = 1.0
        legal = np.flatnonzero(action_mask)
        return int(legal[0])


def test_an_rt_policy_gets_a_read_only_copy_of_the_plan() -> None:
    from grading.radiotherapy import grade_all
    from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv

    days = {"n_episodes": 2, "seed": 1, "tasks": ["prostate"]}
    tampered, honest = grade_all(PlanTamper(True), **days), grade_all(PlanTamper(False), **days)
    assert tampered["tasks"] == honest["tasks"]
    from hospital_marl.radiotherapy.core.sealed import PlanSeal  # (SPEC §12: new)

    env = RadiotherapyPlanningEnv("prostate")
    env.reset(seed=3)
    view = PlanSeal(env.plan).view
    for mutator in ("step", "reset", "restore"):
        with pytest.raises(AttributeError):
            getattr(view, mutator)
    with pytest.raises(AttributeError):
        view.score = 1.0
    live_arrays = [a for a in vars(env.plan).values() if isinstance(a, np.ndarray)]
    for obj in forward([view]):
        assert obj is not env.plan and obj is not env
        if isinstance(obj, np.ndarray) and obj.flags.writeable:
            assert not any(np.shares_memory(obj, a) for a in live_arrays)


def test_the_cli_grades_isolated_and_says_so(capsys) -> None:
    from hospital_marl_cli.app import main

    argv = ["evaluate", "--agent", "heuristic", "--episodes", "1", "--scenarios", SCENARIO, "--quiet"]
    assert main([*argv, "--isolated", "--time-limit", "30"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["isolated"] is True and report["policy_faults"] == dict.fromkeys(FAULTS, 0)
    assert report["overall_score"] == grade("heuristic", **ONE_DAY)["overall_score"]
    assert main(["evaluate", "--agent", "no_such_policy", "--isolated", "--quiet"]) == 2
    assert "could not be loaded in its process: ValueError: unknown policy" in capsys.readouterr().err
