"""The wrapped AEC env keeps PettingZoo's order checks (its loop calls are forwarded in one hop)."""

from __future__ import annotations

import pytest
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

import hospital_marl


def test_env__is_an_order_enforcing_wrapper_that_refuses_last_before_reset() -> None:
    env = hospital_marl.env(scenario="surge")
    assert isinstance(env, OrderEnforcingWrapper)
    with pytest.raises(AttributeError):
        env.last()


def test_agent_iter__requires_a_step_between_turns() -> None:
    env = hospital_marl.env(scenario="surge")
    env.reset(seed=0)
    turns = iter(env.agent_iter())
    assert next(turns) == "triage"
    with pytest.raises(AssertionError, match="step"):
        next(turns)


def test_last__equals_the_raw_envs_for_the_same_seed_and_actions() -> None:
    wrapped, raw = hospital_marl.env(scenario="surge"), hospital_marl.raw_env(scenario="surge")
    wrapped.reset(seed=3)
    raw.reset(seed=3)
    for agent, _ in zip(wrapped.agent_iter(), range(60)):
        assert agent == raw.agent_selection
        (obs_w, *rest_w), (obs_r, *rest_r) = wrapped.last(), raw.last()
        assert (obs_w["observation"] == obs_r["observation"]).all() and rest_w == rest_r
        assert (obs_w["action_mask"] == obs_r["action_mask"]).all()
        wrapped.step(1)
        raw.step(1)


def test_step__after_the_episode_logs_pettingzoos_warning(caplog) -> None:
    env = hospital_marl.env(scenario="surge", max_cycles=1)
    env.reset(seed=0)
    for _ in env.agent_iter():
        env.step(None if env.terminations[env.agent_selection] or env.truncations[env.agent_selection] else 0)
    assert not env.agents
    env.step(0)
    assert "called after all agents are terminated or truncated" in caplog.text
