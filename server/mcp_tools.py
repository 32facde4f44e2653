"""MCP tools of the served environment (openenv-core's ``MCPEnvironment``, FastMCP tools).

Each session's :class:`HospitalMCPEnvironment` wraps one
:class:`~server.environment.HospitalEnvironment` (the episode) and exposes it
as tools a tool-calling model can use, with JSON schemas derived from the
action table (:data:`hospital_marl.core.actions.ACTION_GROUPS`):

==================  ===================================================================
tool                what it does
==================  ===================================================================
``start_shift``     start an episode (scenario, seed); returns the board
``read_board``      the board as text, its numbered legal actions, tick, done, score
``legal_actions``   each legal action: number, meaning, and the tool call that plays it
``admit``           waiting patient [queue_slot] to a ``general`` or ``icu`` bed
``ventilate``       ventilator [ventilator] on the most severe ICU patient without one
``transfer``        general-board patient [board_position] (from the top) to the ICU
``discharge``       step down / discharge ICU bed [icu_bed]
``early_discharge`` general-board patient [board_position] (from the bottom) home early
``wait``            the no-op
``act``             any flat action by number (0..38)
==================  ===================================================================

Every acting tool plays one tick on the flat track (as ``step`` with that
action) and returns the reward, ``done``, the action's outcome, the score once
done, and the next board. An action the mask does not allow is *refused* (a
tool error naming the legal actions; nothing is played), so a model can
correct itself; ``wait`` is always legal. The same episode is reachable
through ``/ws`` and HTTP ``reset``/``step`` as before.

Sessions: tools are served at HTTP ``POST /mcp`` (JSON-RPC; ``openenv/session/create``
opens a persistent session, ``openenv/session/close`` ends it; a call without
``session_id`` runs on a throwaway environment), at WebSocket ``/mcp`` (one
session per connection) and as ``{"type": "mcp"}`` messages on ``/ws``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from openenv.core.env_server.types import EnvironmentMetadata
from pydantic import Field

from hospital_marl.core.actions import ACTION_GROUPS, ACTION_TABLE, FLAT_OF, N_FLAT_ACTIONS, NOOP, Kind
from hospital_marl.envs.observations import BLOCK_BY_KEY
from hospital_marl.envs.text import legal_actions, render_prompt
from server.environment import EpisodeStateError, HospitalEnvironment
from server.models import MAX_SEED, HospitalAction, HospitalObservation, HospitalState, json_int

_LAST: dict[Kind, int] = {group.kind: group.count - 1 for group in ACTION_GROUPS}
"""Largest index of each action kind (the tools' schema bounds)."""

TOOL_OF_KIND: dict[Kind, tuple[str, str, dict[str, Any]]] = {
    Kind.NOOP: ("wait", "", {}),
    Kind.ADMIT_GENERAL: ("admit", "queue_slot", {"unit": "general"}),
    Kind.ADMIT_ICU: ("admit", "queue_slot", {"unit": "icu"}),
    Kind.VENTILATE: ("ventilate", "ventilator", {}),
    Kind.TRANSFER_ICU: ("transfer", "board_position", {}),
    Kind.EARLY_DISCHARGE: ("early_discharge", "board_position", {}),
    Kind.DISCHARGE_ICU: ("discharge", "icu_bed", {}),
}
"""Action kind -> (tool, its index argument, its other arguments): the named tool that plays it."""
assert set(TOOL_OF_KIND) == set(Kind)

ACTING_TOOLS: tuple[str, ...] = (*dict.fromkeys(t for t, _, _ in TOOL_OF_KIND.values()), "act")
READING_TOOLS: tuple[str, ...] = ("read_board", "legal_actions")


def tool_call(flat: int) -> tuple[str, dict[str, Any]]:
    """The named tool call that plays flat action ``flat``."""
    spec = ACTION_TABLE[flat]
    name, index_arg, extra = TOOL_OF_KIND[spec.kind]
    return name, ({index_arg: spec.index} if index_arg else {}) | extra


def observation_blocks(observation: HospitalObservation) -> dict[str, Any]:
    """The observation blocks of a server observation, by key (for the text renderer)."""
    return {key: getattr(observation, key) for key in BLOCK_BY_KEY}


class HospitalMCPEnvironment(MCPEnvironment):
    """A :class:`~server.environment.HospitalEnvironment` session with MCP tools.

    ``reset``/``step``/``state`` behave exactly as the wrapped environment's;
    ``ListToolsAction`` / ``CallToolAction`` (and the ``/mcp`` routes) reach the tools.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, scenario: str | None = None) -> None:
        # Not MCPEnvironment.__init__: building the tools has a cost most sessions never need: built on
        # first use (``mcp_server`` / ``mcp_client``); a session that never asks for them (most
        # /ws sessions) costs what a plain HospitalEnvironment costs.
        Environment.__init__(self)
        self._mode_tools: defaultdict[str, dict] = defaultdict(dict)
        self._mode_tool_schemas: defaultdict[str, dict] = defaultdict(dict)
        self._mcp: tuple[FastMCP, Client] | None = None
        self._closed = False
        self.episode = HospitalEnvironment(scenario=scenario)
        self._last: HospitalObservation | None = None

    # ------------------------------------------------------ lazy MCP parts
    def _tools(self) -> tuple[FastMCP, Client]:
        if self._closed:
            raise RuntimeError("MCP is not available; environment is closed")
        if self._mcp is None:
            server = build_tools(lambda: self)
            self._validate_tool_names(server)
            self._mcp = (server, Client(server))
        return self._mcp

    @property
    def mcp_server(self) -> FastMCP:  # type: ignore[override]
        return self._tools()[0]

    @property
    def mcp_client(self) -> Client:  # type: ignore[override]
        return self._tools()[1]

    @asynccontextmanager
    async def mcp_session(self) -> AsyncIterator[Client | None]:
        """Hold the MCP client open, once the tools exist. OpenEnv enters this for every session at
        its start (before any tool use): then there is nothing to hold, and each tool request opens
        its own in-memory client session (cheap, in-process) instead."""
        if self._mcp is None:
            yield None
            return
        async with self._mcp[1] as client:
            yield client

    async def _async_list_tools(self) -> list:
        self._tools()
        return await super()._async_list_tools()

    async def _async_call_tool(self, tool_name: str, arguments: dict) -> Any:
        self._tools()
        return await super()._async_call_tool(tool_name, arguments)

    # ------------------------------------------------------- the episode
    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> HospitalObservation:
        self._last = self.episode.reset(seed=seed, episode_id=episode_id, **kwargs)
        return self._last

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> HospitalObservation:
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    def _step_impl(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> HospitalObservation:
        self._last = self.episode.step(action, timeout_s=timeout_s, **kwargs)
        return self._last

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        if isinstance(action, (ListToolsAction, CallToolAction)):
            return await super().step_async(action, timeout_s=timeout_s, **kwargs)
        return self._step_impl(action, timeout_s=timeout_s, **kwargs)  # on the loop, as HospitalEnvironment

    @property
    def state(self) -> HospitalState:
        return self.episode.state

    def get_metadata(self) -> EnvironmentMetadata:
        return self.episode.get_metadata()

    def close(self) -> None:
        self._mcp, self._closed = None, True
        self.episode.close()

    # ------------------------------------------------------------ tools
    def board(self) -> dict[str, Any]:
        """What ``read_board`` returns (and every acting tool, after its tick)."""
        obs = self._require_episode()
        state = self.episode.state
        mask = obs.action_mask
        return {
            "tick": state.tick,
            "max_ticks": state.max_ticks,
            "scenario": state.scenario,
            "done": bool(obs.done),
            "score": state.score,
            "text": render_prompt(observation_blocks(obs), mask, None, state.max_ticks),
            "legal_actions": [n for n in range(N_FLAT_ACTIONS) if mask[n]],
        }

    def legal(self) -> list[dict[str, Any]]:
        obs = self._require_episode()
        rows = []
        for number, meaning in legal_actions(obs.action_mask, None, observation_blocks(obs)):
            name, arguments = tool_call(number)
            rows.append({"action": number, "meaning": meaning, "tool": name, "arguments": arguments})
        return rows

    def play(self, flat: int) -> dict[str, Any]:
        """One tick with a legal flat action; an illegal one is refused (ToolError), nothing played."""
        obs = self._require_episode()
        if obs.done:
            raise ToolError("the shift has ended: call start_shift for a new one")
        if not obs.action_mask[flat]:
            legal = [n for n in range(N_FLAT_ACTIONS) if obs.action_mask[n]]
            raise ToolError(
                f"action {flat} ({ACTION_TABLE[flat].label}) is not legal now; nothing was played. "
                f"Legal actions: {legal} (see legal_actions)"
            )
        try:
            after = self._step_impl(HospitalAction(action=flat))
        except EpisodeStateError as exc:
            raise ToolError(str(exc)) from None
        return {
            "action": flat,
            "meaning": ACTION_TABLE[flat].label if flat != NOOP else "wait (no-op)",
            "reward": after.reward,
            "outcome": after.info.get("outcome"),
            **self.board(),
        }

    def _require_episode(self) -> HospitalObservation:
        if self._last is None:
            raise ToolError("no shift yet: call start_shift first")
        return self._last


def build_tools(env_of: Callable[[], HospitalMCPEnvironment]) -> FastMCP:
    """A FastMCP server whose tools read or play the episode of ``env_of()``: one session's own
    (OpenEnv's ``/mcp`` routes), or the current MCP session's (the streamable HTTP transport,
    :mod:`server.mcp_http`). Integer arguments follow ``/step``'s rule (:func:`server.models.json_int`):
    ``"5"``, ``5.5`` or ``true`` is refused, never read as an action; ``5.0`` is the JSON integer 5."""
    mcp = FastMCP("hospital_marl")

    @mcp.tool
    def start_shift(
        scenario: Annotated[
            str | None, Field(strict=True, description="scenario name, e.g. normal_day, surge")
        ] = None,
        seed: Annotated[json_int(0, MAX_SEED) | None, Field(description="defines the day's patients")] = None,
    ) -> dict[str, Any]:
        """Start a new 24-hour shift (100 ticks); returns the board."""
        try:
            env_of().reset(seed=seed, scenario=scenario)
        except ValueError as exc:  # pydantic's ValidationError too: unknown scenario, bad seed
            raise ToolError(str(exc)) from None
        return env_of().board()

    @mcp.tool
    def read_board() -> dict[str, Any]:
        """The department now: text board, numbered legal actions, tick, done, score (0-100 at the end)."""
        return env_of().board()

    @mcp.tool
    def legal_actions() -> list[dict[str, Any]]:
        """Every legal action now: its number, meaning, and the tool call that plays it."""
        return env_of().legal()

    @mcp.tool
    def admit(
        queue_slot: Annotated[
            json_int(0, _LAST[Kind.ADMIT_GENERAL]), Field(description="waiting-queue slot")
        ],
        unit: Annotated[
            Literal["general", "icu"], Field(description="general bed (severity 1-3) or ICU bed")
        ],
    ) -> dict[str, Any]:
        """Admit waiting patient [queue_slot] to a general or an ICU bed; plays one tick."""
        kind = Kind.ADMIT_GENERAL if unit == "general" else Kind.ADMIT_ICU
        return env_of().play(FLAT_OF[(kind, queue_slot)])

    @mcp.tool
    def ventilate(
        ventilator: Annotated[json_int(0, _LAST[Kind.VENTILATE]), Field(description="a free ventilator")],
    ) -> dict[str, Any]:
        """Put ventilator [ventilator] on the most severe ICU patient without one; plays one tick."""
        return env_of().play(FLAT_OF[(Kind.VENTILATE, ventilator)])

    @mcp.tool
    def transfer(
        board_position: Annotated[
            json_int(0, _LAST[Kind.TRANSFER_ICU]),
            Field(
                description="general-board position, 0 = most severe",
            ),
        ],
    ) -> dict[str, Any]:
        """Transfer general-board patient [board_position] to an ICU bed; plays one tick."""
        return env_of().play(FLAT_OF[(Kind.TRANSFER_ICU, board_position)])

    @mcp.tool
    def discharge(
        icu_bed: Annotated[json_int(0, _LAST[Kind.DISCHARGE_ICU]), Field(description="ICU bed index")],
    ) -> dict[str, Any]:
        """Discharge (step down) the patient in ICU bed [icu_bed]; plays one tick."""
        return env_of().play(FLAT_OF[(Kind.DISCHARGE_ICU, icu_bed)])

    @mcp.tool
    def early_discharge(
        board_position: Annotated[
            json_int(0, _LAST[Kind.EARLY_DISCHARGE]),
            Field(
                description="from the bottom of the board, 0 = least severe",
            ),
        ],
    ) -> dict[str, Any]:
        """Send a non-critical general-board patient home before treatment ends (costly); plays one tick."""
        return env_of().play(FLAT_OF[(Kind.EARLY_DISCHARGE, board_position)])

    @mcp.tool
    def wait() -> dict[str, Any]:
        """Do nothing this tick (always legal); plays one tick."""
        return env_of().play(NOOP)

    @mcp.tool
    def act(
        action: Annotated[json_int(0, N_FLAT_ACTIONS - 1), Field(description="a legal action number")],
    ) -> dict[str, Any]:
        """Play any legal action by its number (as listed on the board); plays one tick."""
        return env_of().play(action)

    return mcp


__all__ = [
    "ACTING_TOOLS",
    "READING_TOOLS",
    "TOOL_OF_KIND",
    "HospitalMCPEnvironment",
    "build_tools",
    "observation_blocks",
    "tool_call",
]
