"""LLMPolicy: a language model graded like any other policy, through a scripted stand-in endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import policies
from grading import grade
from grading.grader import episode_seed, run_flat_episode
from hospital_marl.core.actions import ROLES
from hospital_marl.core.scenarios import get_scenario
from policies.llm import ROLE_PROMPTS, LLMConfig, LLMPolicy, LLMUnavailableError
from tests.llm.conftest import FirstLegalPolicy, StandInFactory


def _spec(url: str, **extra: object) -> str:
    items = {"model": "standin", "base_url": url, "api_key": "x", "timeout_s": 5, "max_retries": 0, **extra}
    return "llm:" + ",".join(f"{k}={v}" for k, v in items.items())


@pytest.mark.parametrize("track", ["flat", "team"])
def test_grade__an_llm_is_graded_like_the_policy_it_answers_for(standin: StandInFactory, track: str) -> None:
    """The stand-in answers the lowest legal non-no-op number it reads in the prompt; graded, that
    must be exactly the policy that reads the same choice off the mask (prompt, parse, play all agree)."""
    with standin() as (server, url):
        llm = policies.load(_spec(url))
        report = grade(llm, episodes=1, seed=4, scenarios=["night_shift"], track=track)
    reference = grade(FirstLegalPolicy(), episodes=1, seed=4, scenarios=["night_shift"], track=track)
    assert report["scenario_scores"] == reference["scenario_scores"]
    assert report["scenarios"]["night_shift"]["counts"] == reference["scenarios"]["night_shift"]["counts"]
    ticks = reference["scenarios"]["night_shift"]["counts"]["ticks"]
    # Every decision is counted; the ones with only one legal action are not asked (no request).
    assert llm.stats.decisions == ticks * (len(ROLES) if track == "team" else 1)
    assert len(server.requests) == llm.stats.asked == llm.stats.decisions - llm.stats.not_asked
    assert llm.stats.not_asked > 0 and llm.stats.invalid_replies == 0


def test_team_track__each_role_is_its_own_agent_with_its_own_prompt(standin: StandInFactory) -> None:
    with standin() as (server, url):
        grade(policies.load(_spec(url)), episodes=1, scenarios=["night_shift"], track="team")
    systems = [r["messages"][0]["content"] for r in server.requests[:3]]
    assert [s.startswith(ROLE_PROMPTS[role]) for s, role in zip(systems, ROLES)] == [True] * 3
    assert len(set(systems)) == 3


def test_transcript__logs_prompts_replies_and_counts_unusable_ones(
    standin: StandInFactory, tmp_path: Path
) -> None:
    transcript = tmp_path / "llm.jsonl"
    with standin("garbage", "illegal", "prose", "json") as (_, url):
        llm = LLMPolicy(model="standin", base_url=url, api_key="x", max_retries=0, transcript=transcript)
        result = run_flat_episode(llm, get_scenario("normal_day"), episode_seed(0, "normal_day", 0))
    rows = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert len(rows) == result.counts["ticks"] == llm.stats.decisions
    assert rows[0]["error"] == "no_action_number" and rows[0]["action"] == 0
    assert rows[1]["error"].startswith("illegal_action_") and rows[1]["action"] == 0
    assert [r["error"] for r in rows[2:]] == [None] * (len(rows) - 2)
    assert rows[2]["reply"].startswith("Looking at the queue") and rows[3]["reply"].startswith("```json")
    assert {"prompt", "system", "model", "latency_s", "tick", "episode"} <= set(rows[0])
    assert llm.stats.invalid_replies == 2
    chars = [len(r["system"]) + 1 + len(r["prompt"]) for r in rows]  # system, newline, user message
    assert llm.stats.prompt_tokens == sum(-(-c // 4) for c in chars)  # the documented chars / 4 estimate
    assert llm.stats.errors == {"no_action_number": 1, "illegal_action": 1}
    assert result.counts["invalid_actions"] == 0  # unusable replies are played as the no-op, not as invalid


def test_endpoint_failure__raises_after_the_bounded_retries(standin: StandInFactory) -> None:
    with standin(default="error500") as (server, url), pytest.raises(LLMUnavailableError, match="500"):
        grade(policies.load(_spec(url, max_retries=1)), episodes=1, scenarios=["night_shift"])
    assert len(server.requests) == 2  # the request and one retry, then the error


def test_config__reads_the_api_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MODEL_NAME", "some-model")
    monkeypatch.delenv("API_KEY", raising=False)
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    config = LLMConfig.from_env()
    assert (config.base_url, config.model, config.api_key) == ("http://127.0.0.1:9/v1", "some-model", "hf_x")
    monkeypatch.setenv("API_KEY", "k")
    assert (
        LLMConfig.from_env(model="other").api_key == "k"
        and LLMConfig.from_env(model="other").model == "other"
    )


def test_config__missing_or_bad_settings_are_clear_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MODEL_NAME", raising=False)
    monkeypatch.delenv("API_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="MODEL_NAME"):
        LLMConfig(model="", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="API_BASE_URL"):
        LLMConfig(model="m", base_url="")
    with pytest.raises(ValueError, match="temperature"):
        LLMConfig(model="m", base_url="http://x", temperature=3.0)
    with pytest.raises(ValueError, match="unknown LLMPolicy arguments"):
        LLMPolicy(model="m", base_url="http://x", nurse_model="y")
