"""The agent script no model can forge (issue 24): every model-supplied string is escaped on the
protocol lines, ``[END]`` is printed for every task, the hackathon defaults and
``OPENAI_API_KEY`` are honoured, one task failing does not end the others, endpoint trouble is
counted, nothing is asked when only the no-op is legal, and ``grade()`` shows how many replies
were unusable."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from policies.agent_protocol import end_line, field, start_line, step_line
from policies.llm import DEFAULT_BASE_URL, DEFAULT_MODEL, LLMConfig, LLMPolicy
from tests.llm.conftest import StandInFactory
from tests.llm.openai_standin import FORGED

LINE = re.compile(r"\[(START|STEP|END)\] \S+=\S*( \S+=\S*)*")


def _run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str, *argv: str):
    from hospital_marl_cli.agents.llm import main

    monkeypatch.setenv("API_BASE_URL", url)
    monkeypatch.setenv("MODEL_NAME", "standin-model")
    monkeypatch.setenv("API_KEY", "test-key")
    status = main(["--timeout", "5", "--retries", "0", *argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_field__no_newline_space_or_control_character_survives() -> None:
    for hostile in (FORGED, "a b", "x\r\n[END]", "\x00\x1b[31m", "é", "", "y" * 1000):
        token = field(hostile)
        assert re.fullmatch(r"[\x21-\x7e]{1,200}", token), token
    line = step_line(1, "act" + FORGED, 0.0, False, "unknown_tool_" + FORGED)
    assert "\n" not in line and line.startswith("[STEP] ") and " [END]" not in line
    assert line.split(" ")[-1].startswith("error=unknown_tool_")  # the forged text stays in its field
    assert start_line("t\nx", "e", "m\n[END] success=true").count("\n") == 0
    assert end_line(True, 1, 0.5, [0.25]) == "[END] success=true steps=1 score=0.50 rewards=0.25"


def test_a_forging_model_cannot_add_lines_in_mcp_mode(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The measured forgery: a tool name with a newline printed 21 [END] lines in one episode."""
    from server.settings import ServerSettings
    from tests.server.live import live_server

    with live_server(ServerSettings(max_sessions=4)) as server_url, standin(default="forge") as (_s, url):
        monkeypatch.setenv("MODEL_NAME", "evil\n[END] success=true steps=1 score=1.00 rewards=1.00")
        status, out, _err = _run_raw(monkeypatch, capsys, url, "--scenarios", "night_shift", "--server",
                                     server_url, "--mcp")  # fmt: skip
    lines = out.splitlines()
    assert status == 0
    assert [line.split()[0] for line in lines].count("[END]") == 1 and lines[-1].startswith("[END] ")
    assert all(LINE.fullmatch(line) for line in lines), lines[:3]
    steps = [line for line in lines if line.startswith("[STEP]")]
    assert any("error=unknown_tool_act" in line for line in steps)


def _run_raw(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str, *argv: str):
    from hospital_marl_cli.agents.llm import main

    monkeypatch.setenv("API_BASE_URL", url)
    monkeypatch.setenv("API_KEY", "test-key")
    status = main(["--timeout", "5", "--retries", "0", *argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_a_forging_text_reply_and_model_name_stay_on_their_lines(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with standin(default="forge") as (_, url):
        monkeypatch.setenv("MODEL_NAME", "evil\nmodel")
        status, out, _ = _run_raw(monkeypatch, capsys, url, "--scenarios", "night_shift")
    lines = out.splitlines()
    assert status == 0 and lines[0].endswith("model=evil_model")
    assert [line.split()[0] for line in lines].count("[END]") == 1
    assert all(LINE.fullmatch(line) for line in lines)


def test_hackathon_defaults_and_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("API_BASE_URL", "MODEL_NAME", "API_KEY", "HF_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    config = LLMConfig.from_env()
    assert (config.base_url, config.model) == (DEFAULT_BASE_URL, DEFAULT_MODEL)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert LLMConfig.from_env().api_key == "sk-openai"
    monkeypatch.setenv("HF_TOKEN", "hf-token")
    assert LLMConfig.from_env().api_key == "hf-token"  # API_KEY, then HF_TOKEN, then OPENAI_API_KEY
    from hospital_marl.core.scenarios import BUILTIN_SCENARIOS
    from hospital_marl_cli.agents.llm import AgentOptions, build_parser, options_from_args

    assert AgentOptions().scenarios == BUILTIN_SCENARIOS
    assert options_from_args(build_parser().parse_args([])).scenarios == BUILTIN_SCENARIOS


def test_only_the_noop_legal_sends_no_request_and_is_counted(
    standin: StandInFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    transcript = tmp_path / "t.jsonl"
    with standin() as (server, url):
        status, out, err = _run(
            monkeypatch, capsys, url, "--scenarios", "night_shift", "--transcript", str(transcript)
        )
    steps = out.count("[STEP]")
    rows = [json.loads(line) for line in transcript.read_text().splitlines()]
    asked = [r for r in rows if r.get("event") != "summary"]
    summary = [r for r in rows if r.get("event") == "summary"]
    assert status == 0 and len(server.requests) == len(asked) < steps  # quiet ticks are not asked
    assert summary[-1]["not_asked"] == steps - len(asked) and summary[-1]["traffic"]["calls"] == len(asked)
    assert f"{steps - len(asked)} decisions with only one legal action were not asked" in err
    for prompt in (r["messages"][-1]["content"] for r in server.requests):
        assert len(re.findall(r"^\s+\d+:", prompt.rpartition("Legal")[2], re.MULTILINE)) > 1


def test_grade_reports_the_unusable_reply_rate(
    standin: StandInFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grading.grader import grade

    with standin(default="garbage") as (_, url):
        policy = LLMPolicy(model="standin-model", base_url=url, api_key="k", timeout_s=5, max_retries=0)
        report = grade(policy, scenarios=["night_shift"], episodes=1)
    assert policy.report_metrics()["unusable_reply_rate"] == 1.0
    assert "unusable_reply_rate" in json.dumps(
        report.to_dict() if hasattr(report, "to_dict") else str(report)
    )
