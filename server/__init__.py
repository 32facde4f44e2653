"""The OpenEnv server over FastAPI, and its typed client.

- :mod:`server.models` — pydantic ``HospitalAction`` / ``HospitalObservation`` / ``HospitalState``;
- :mod:`server.environment` — ``HospitalEnvironment``, the OpenEnv ``Environment``;
- :mod:`server.app` — ``app`` (openenv-core's ``create_app`` plus stateful HTTP sessions) and ``main``;
  it serves the ED or, chosen at start (``--env radiotherapy``), RT planning;
- :mod:`server.radiotherapy` — the RT env's OpenEnv models and ``RTEnvironment``;
- :mod:`server.web`, :mod:`server.rt_web` — the web views at ``/web`` (ED, RT);
- :mod:`server.client` — ``HospitalClient``, sync (``with``) and async (``async with``);
- :mod:`server.mcp_tools` — the MCP tools every session serves at ``/mcp``;
- :mod:`server.routes`, :mod:`server.mcp_http` — the app's routes and the standard MCP transport.

The LLM agent script (``inference.py``, ``hospital-marl llm``) is a client: it lives in
:mod:`hospital_marl_cli.agents.llm`.

Names are imported lazily so that ``import server.settings`` (the ``hospital-marl
serve`` subcommand) needs neither fastapi nor openenv-core.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "HospitalAction": "server.models",
    "HospitalObservation": "server.models",
    "HospitalState": "server.models",
    "HospitalEnvironment": "server.environment",
    "HospitalClient": "server.client",
    "HospitalServerError": "server.client",
    "ServerSettings": "server.settings",
    "build_app": "server.app",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'server' has no attribute {name!r}")
