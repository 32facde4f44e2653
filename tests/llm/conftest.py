"""Fixtures of the LLM-agent tests: a scripted OpenAI-compatible stand-in on loopback (no model,
no network), a live env server, and a reference policy that plays what the stand-in answers."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import numpy as np
import pytest

from policies.base import BasePolicy
from tests.llm.openai_standin import OpenAIStandIn, serve_standin

StandInFactory = Callable[..., AbstractContextManager[tuple[OpenAIStandIn, str]]]


@pytest.fixture
def standin() -> StandInFactory:
    """``with standin(script=[...], default=..., slow_s=...) as (server, url):`` a fresh stand-in."""

    @contextmanager
    def start(
        *script: str, default: str = "first_legal", slow_s: float = 2.0
    ) -> Iterator[tuple[OpenAIStandIn, str]]:
        server = OpenAIStandIn(script, default, slow_s)
        with serve_standin(server) as url:
            yield server, url

    return start


@pytest.fixture(scope="module")
def live_url() -> Iterator[str]:
    """A real env server (uvicorn) on a loopback port, shared by a test module."""
    from server.settings import ServerSettings
    from tests.server.live import live_server

    with live_server(ServerSettings(max_sessions=8)) as url:
        yield url


def first_legal(mask: Any) -> int:
    """What the stand-in's ``first_legal`` answers: the lowest legal action but the no-op (else 0)."""
    legal = np.flatnonzero(np.asarray(mask, dtype=bool))
    return int(legal[legal != 0][0]) if (legal != 0).any() else 0


class FirstLegalPolicy(BasePolicy):
    """The reference the LLM path must reproduce exactly: reads the mask, never a prompt."""

    name = "first_legal"
    tracks = ("flat", "team")

    def act(self, observation: Mapping[str, np.ndarray], action_mask: np.ndarray) -> int:
        return first_legal(action_mask)

    def act_role(self, role: str, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return first_legal(action_mask)
