"""The agent script (SPEC §11): exactly the [START]/[STEP]/[END] lines on stdout, replies that name no
legal action played as the no-op and reported, endpoint failures ending in [END] success=false and a
non-zero exit, never a hang. The model is a scripted stand-in on loopback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grading.grader import episode_seed, run_flat_episode, run_team_episode
from hospital_marl.core.actions import ROLES
from hospital_marl.core.scenarios import BUILTIN_SCENARIOS, get_scenario
from hospital_marl.envs.aec import HospitalAECEnv
from hospital_marl.envs.composed import HospitalEDEnv
from hospital_marl_cli.agents.llm import main
from policies import HeuristicPolicy, TeamHeuristicPolicy
from tests.llm.conftest import FirstLegalPolicy, StandInFactory, first_legal

ROOT = Path(__file__).resolve().parents[2]
START = re.compile(r"\[START\] task=(\S+) env=(\S+) model=(\S+)")
STEP = re.compile(r"\[STEP\] step=(\d+) action=(\S+) reward=(-?\d+\.\d\d) done=(true|false) error=(\S+)")
END = re.compile(
    r"\[END\] success=(true|false) steps=(\d+) score=(\d\.\d\d) rewards=((?:-?\d+\.\d\d,)*-?\d+\.\d\d)?"
)


def _parse(stdout: str) -> tuple[re.Match, list[re.Match], re.Match]:
    """One episode's lines, each matching its format in full; nothing else on stdout."""
    lines = stdout.splitlines()
    start, *steps, end = lines
    matched = START.fullmatch(start), [STEP.fullmatch(s) for s in steps], END.fullmatch(end)
    assert matched[0] and all(matched[1]) and matched[2], stdout[:2000]
    return matched  # type: ignore[return-value]


def _run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str, *argv: str):
    monkeypatch.setenv("API_BASE_URL", url)
    monkeypatch.setenv("MODEL_NAME", "standin-model")
    monkeypatch.setenv("API_KEY", "test-key")
    status = main(["--timeout", "5", "--retries", "0", *argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def _replay_flat(scenario: str, seed: int, actions: list[int]) -> tuple[list[str], str]:
    """The rewards (as printed) and the score / 100 of playing these actions in-process."""
    env = HospitalEDEnv(scenario=scenario)
    env.reset(seed=seed)
    rewards = [f"{env.step(a)[1]:.2f}" for a in actions]
    return rewards, f"{env.hospital.score() / 100:.2f}"


def _asked(scenario: str, seed: int, actions: list[int]) -> list[int]:
    """The steps at which more than one action was legal: the only ones the model is asked about."""
    env = HospitalEDEnv(scenario=scenario)
    _, info = env.reset(seed=seed)
    asked = []
    for i, a in enumerate(actions):
        if int(info["action_mask"].sum()) > 1:
            asked.append(i)
        _, _, _, _, info = env.step(a)
    return asked


def test_inference_py__prints_exactly_the_protocol_and_the_graded_score(standin: StandInFactory) -> None:
    with standin() as (_, url):
        env = {**os.environ, "API_BASE_URL": url, "MODEL_NAME": "standin-model", "HF_TOKEN": "hf_test"}
        env.pop("API_KEY", None)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        done = subprocess.run(
            [sys.executable, "inference.py", "--scenarios", "night_shift", "--seed", "3"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    start, steps, end = _parse(done.stdout)
    assert start.group(0) == "[START] task=night_shift env=hospital_marl/HospitalED-v0 model=standin-model"
    seed = episode_seed(3, "night_shift", 0)
    rewards, score = _replay_flat("night_shift", seed, [int(s.group(2)) for s in steps])
    assert [s.group(1) for s in steps] == [str(i) for i in range(1, len(steps) + 1)]
    assert [s.group(3) for s in steps] == rewards
    assert [s.group(4) for s in steps] == ["false"] * (len(steps) - 1) + ["true"]
    assert {s.group(5) for s in steps} == {"null"}
    assert end.group(2) == str(len(steps)) and end.group(3) == score and end.group(4) == ",".join(rewards)
    heuristic = run_flat_episode(HeuristicPolicy(), get_scenario("night_shift"), seed).score
    ours = run_flat_episode(FirstLegalPolicy(), get_scenario("night_shift"), seed).score
    assert end.group(1) == ("true" if ours >= heuristic else "false")
    assert "[llm]" in done.stderr and "unusable replies" in done.stderr
    # the success line names the --seed given, then the day it derives (issue #44)
    assert seed != 3 and f"night_shift --seed 3 (day seed {seed}): score " in done.stderr


def test_script__unusable_replies_are_reported_played_as_noop_and_counted(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with standin("prose", "json", "illegal", "garbage", "first_legal", "illegal") as (_, url):
        status, out, err = _run(monkeypatch, capsys, url, "--scenarios", "surge")
    assert status == 0
    _, all_steps, end = _parse(out)
    asked = _asked("surge", episode_seed(0, "surge", 0), [int(s.group(2)) for s in all_steps])
    assert {all_steps[i].group(5) for i in range(len(all_steps)) if i not in asked} <= {"null"}
    steps = [all_steps[i] for i in asked]  # the scripted replies answer these, in order
    errors = [s.group(5) for s in steps]
    assert errors[:2] == ["null", "null"]  # prose- and JSON-wrapped numbers are understood
    assert re.fullmatch(r"illegal_action_\d+", errors[2]) and errors[3] == "no_action_number"
    assert re.fullmatch(r"illegal_action_\d+", errors[5]) and set(errors[6:]) == {"null"}
    assert [steps[i].group(2) for i in (2, 3, 5)] == ["0", "0", "0"]  # played as the no-op
    steps = all_steps
    rewards, score = _replay_flat("surge", episode_seed(0, "surge", 0), [int(s.group(2)) for s in steps])
    assert [s.group(3) for s in steps] == rewards and end.group(3) == score
    assert "3 unusable replies" in err
    assert f"surge --seed 0 (day seed {episode_seed(0, 'surge', 0)}): score " in err  # the success line


def test_script__a_5xx_endpoint_ends_with_success_false_and_exit_1(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with standin("first_legal", "first_legal", default="error500") as (server, url):
        status, out, err = _run(
            monkeypatch, capsys, url, "--scenarios", "normal_day", "surge", "--retries", "1"
        )
    assert status == 1
    lines = out.splitlines()
    ends = [i for i, line in enumerate(lines) if line.startswith("[END]")]
    assert len(ends) == 2 and lines[ends[0]].startswith("[END] success=false ")  # normal_day failed...
    assert lines[ends[0] + 1].startswith("[START] task=surge ")  # ...and surge was still played
    assert lines[ends[1]] == "[END] success=false steps=0 score=0.00 rewards="
    assert len(server.requests) == 2 + 2 + 2  # two answers, then per task one request and one retry
    assert err.count("FAILED after") == 2 and "500" in err
    for scenario in ("normal_day", "surge"):  # the seed given, then the day it derives (issue #44)
        assert f"{scenario} --seed 0 (day seed {episode_seed(0, scenario, 0)}): FAILED after" in err
    # Retries and 5xx answers are counted and reported.
    assert "4 requests, 2 retries, 4 5xx" in err


def test_script__a_slow_answer_is_retried_and_a_dead_one_fails_bounded(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with standin("slow", slow_s=2.0) as (server, url):
        status, out, err = _run(
            monkeypatch, capsys, url, "--scenarios", "night_shift", "--timeout", "0.3", "--retries", "1"
        )
    _, steps, _ = _parse(out)
    asked = _asked("night_shift", episode_seed(0, "night_shift", 0), [int(s.group(2)) for s in steps])
    assert status == 0 and len(server.requests) == len(asked) + 1  # one timed out, its retry answered
    assert "1 retries" in err and "1 timeouts" in err
    with standin(default="slow", slow_s=2.0) as (server, url):
        status, out, err = _run(
            monkeypatch, capsys, url, "--scenarios", "night_shift", "--timeout", "0.2", "--retries", "1"
        )
    # The quiet first ticks need no request; the first question times out twice and ends the episode.
    assert status == 1 and out.splitlines()[-1].startswith("[END] success=false ")
    assert " score=0.00 " in out.splitlines()[-1]
    assert len(server.requests) == 2 and "APITimeoutError" in err


def test_script__team_track_runs_three_role_agents(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with standin() as (server, url):
        status, out, _ = _run(monkeypatch, capsys, url, "--scenarios", "night_shift", "--track", "team")
    start, steps, end = _parse(out)
    assert status == 0 and start.group(2) == "hospital_marl/HospitalEDTeam-v0"
    assert all(re.fullmatch(r"\d+,\d+,\d+", s.group(2)) for s in steps)
    seed = episode_seed(0, "night_shift", 0)
    aec = HospitalAECEnv(scenario="night_shift")  # the grader's team track: roles in turn
    aec.reset(seed=seed)
    actions, rewards, asked = [], [], 0
    while not aec.hospital.done:
        joint = []
        for role in ROLES:
            mask = aec.observe(role)["action_mask"]
            asked += int(mask.sum()) > 1  # a role with only the no-op is not asked
            joint.append(first_legal(mask))
            aec.step(joint[-1])
        actions.append(",".join(map(str, joint)))
        rewards.append(f"{aec.rewards[ROLES[0]]:.2f}")  # the tick's team reward, every role's
    assert [s.group(2) for s in steps] == actions and [s.group(3) for s in steps] == rewards
    assert len(server.requests) == asked
    reference = run_team_episode(FirstLegalPolicy(), get_scenario("night_shift"), seed)
    assert end.group(3) == f"{reference.score / 100:.2f}" and int(end.group(2)) == reference.counts["ticks"]
    heuristic = run_team_episode(TeamHeuristicPolicy(), get_scenario("night_shift"), seed).score
    assert end.group(1) == ("true" if reference.score >= heuristic else "false")


def test_script__bad_settings_exit_2_with_an_end_line_for_every_task(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MODEL_NAME", "m")
    assert main(["--scenarios", "no_such_day", "surge"]) == 2
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "[START] task=no_such_day env=hospital_marl/HospitalED-v0 model=m",
        "[END] success=false steps=0 score=0.00 rewards=",
        "[START] task=surge env=hospital_marl/HospitalED-v0 model=m",
        "[END] success=false steps=0 score=0.00 rewards=",
    ]
    assert "unknown scenario" in out.err
    assert main(["--mcp"]) == 2  # every task by default: each gets its lines
    assert capsys.readouterr().out.count("[END] success=false") == len(BUILTIN_SCENARIOS)


def test_cli__hospital_marl_llm_is_the_same_script(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hospital_marl_cli import main as cli_main

    with standin() as (_, url):
        status, script_out, _ = _run(monkeypatch, capsys, url, "--scenarios", "night_shift")
        assert cli_main(["llm", "--scenarios", "night_shift", "--timeout", "5", "--retries", "0"]) == 0
    assert status == 0 and capsys.readouterr().out == script_out


def test_script__a_role_can_have_its_own_model(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with standin() as (server, url):
        argv = ["--scenarios", "night_shift", "--track", "team", "--role-model", "ventilator_officer=vent-7b"]
        status, out, _ = _run(monkeypatch, capsys, url, *argv)
    assert status == 0
    assert out.splitlines()[0].endswith("model=standin-model;ventilator_officer=vent-7b")
    officer = {
        r["model"] for r in server.requests if "ventilator officer" in r["messages"][0]["content"].lower()
    }
    others = {r["model"] for r in server.requests} - officer
    assert officer == {"vent-7b"} and others == {"standin-model"}
    assert _run(monkeypatch, capsys, url, "--role-model", "nurse=x", "--track", "team")[0] == 2
    assert _run(monkeypatch, capsys, url, "--role-model", "triage=x")[0] == 2  # flat track: no roles


# ------------------------------------------------------------- radiotherapy (--env)
def test_radiotherapy__the_same_script_plans_a_patient_and_prints_the_protocol(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from grading.common import episode_seed as rt_episode_seed
    from hospital_marl.radiotherapy.core.plan import ADD, LOCK
    from hospital_marl.radiotherapy.envs.planning import RadiotherapyPlanningEnv

    # The stand-in finds no ED action list in an RT prompt and answers 0 (add a beam) every time:
    # seven beams, then 0 is illegal (at most seven beams) and the reply is played as the fallback, lock.
    with standin() as (server, url):
        status, out, _ = _run(monkeypatch, capsys, url, "--env", "radiotherapy", "--tasks", "prostate")
    assert status == 0
    start, steps, end = _parse(out)
    assert start.groups() == ("prostate", "hospital_marl/RadiotherapyProstate-v0", "standin-model")
    actions = [int(s.group(2)) for s in steps]
    assert actions == [ADD] * 7 + [LOCK]
    assert [s.group(5) for s in steps][:7] == ["null"] * 7 and steps[7].group(5) != "null"
    assert len(server.requests) == 8
    env = RadiotherapyPlanningEnv("prostate")  # the grader's patient 0 for seed 0, replayed
    env.reset(seed=rt_episode_seed(0, "prostate", 0))
    rewards = [f"{env.step(a)[1]:.2f}" for a in actions]
    assert [s.group(3) for s in steps] == rewards
    assert end.group(3) == f"{env.unwrapped.plan.score:.2f}"  # the plan's score (0-1), locked
    assert end.group(2) == "8"


def test_radiotherapy__an_endpoint_that_keeps_failing_ends_with_success_false(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with standin(default="error500") as (server, url):
        status, out, err = _run(monkeypatch, capsys, url, "--env", "radiotherapy", "--tasks", "head_neck")
    assert status == 1
    lines = out.splitlines()
    assert lines[0].startswith("[START] task=head_neck ")
    assert lines[-1] == "[END] success=false steps=0 score=0.00 rewards="
    assert len(server.requests) == 1  # --retries 0: one request, then the run ends
    assert "InternalServerError" in err or "500" in err
