"""A typed Python client over the WebSocket, built on openenv-core's ``EnvClient``.

Synchronous::

    from server.client import HospitalClient

    with HospitalClient("http://127.0.0.1:8000") as env:
        result = env.reset(seed=0, scenario="surge")
        while not result.done:
            mask = result.observation.action_mask_array()
            result = env.step(int(mask.nonzero()[0][-1]))     # or a HospitalAction
        print(result.observation.metrics, env.state().score)

Asynchronous (``async with`` keeps openenv's async API)::

    async with HospitalClient(url) as env:
        result = await env.reset(seed=0)
        result = await env.step(3)
        result = await env.step_team(triage=1, bed_manager=0, ventilator_officer=0)

openenv-core 0.3.0's ``EnvClient`` is async and refuses ``with``; this
client's ``with`` returns openenv's own synchronous wrapper
(``EnvClient.sync()``), connected, and closes it on exit.

Server errors raise :class:`HospitalServerError` (a ``RuntimeError``, as
openenv's client raises) carrying the server's error ``code``; a full server
is ``code == "CAPACITY_REACHED"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.sync_client import SyncEnvClient
from websockets.exceptions import ConnectionClosed

from server.environment import as_action
from server.models import HospitalAction, HospitalObservation, HospitalState

WS_TRY_AGAIN_LATER = 1013


class HospitalServerError(RuntimeError):
    """The server answered an error message (or refused the session).

    Attributes:
        code: the server's error code (``VALIDATION_ERROR``, ``EXECUTION_ERROR``,
            ``CAPACITY_REACHED``, ``MESSAGE_TOO_LARGE``, ...).
        data: the error message's full data.
    """

    def __init__(self, message: str, code: str, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"Server error: {message} (code: {code})")
        self.code = code
        self.data = dict(data or {})


class HospitalClient(EnvClient[HospitalAction, HospitalObservation, HospitalState]):
    """Typed client of the hospital_marl OpenEnv server (one WebSocket session).

    Args:
        base_url: ``http://host:port`` (or ``ws://``).
        **kwargs: as :class:`openenv.core.env_client.EnvClient` (timeouts, message size).
    """

    def __init__(self, base_url: str, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._sync_client: SyncEnvClient | None = None

    # -------------------------------------------------------------- API
    async def reset(  # type: ignore[override]
        self, seed: int | None = None, scenario: str | None = None, episode_id: str | None = None
    ) -> StepResult[HospitalObservation]:
        """Start an episode; the same seed and actions give the in-process trajectory."""
        params = {"seed": seed, "scenario": scenario, "episode_id": episode_id}
        return await super().reset(**{k: v for k, v in params.items() if v is not None})

    async def step(  # type: ignore[override]
        self, action: HospitalAction | Mapping[str, Any] | int, **kwargs: Any
    ) -> StepResult[HospitalObservation]:
        """One tick: a flat action (an int 0..38), a team mapping, or a :class:`HospitalAction`."""
        return await super().step(as_action(action), **kwargs)

    async def step_team(
        self, triage: int = 0, bed_manager: int = 0, ventilator_officer: int = 0
    ) -> StepResult[HospitalObservation]:
        """One tick on the team track: one action per role (0 = that role no-ops)."""
        action = HospitalAction(triage=triage, bed_manager=bed_manager, ventilator_officer=ventilator_officer)
        return await super().step(action)

    # ------------------------------------------------ EnvClient's hooks
    def _step_payload(self, action: HospitalAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True, exclude={"metadata"} if not action.metadata else set())

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[HospitalObservation]:
        observation = HospitalObservation.model_validate(
            {
                **payload.get("observation", {}),
                "reward": payload.get("reward"),
                "done": payload.get("done", False),
            }
        )
        return StepResult(observation=observation, reward=payload.get("reward"), done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> HospitalState:
        return HospitalState.model_validate(payload)

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            await self._send(message)
            response = await self._receive()
        except ConnectionClosed as exc:
            raise _closed_error(exc) from exc
        if response.get("type") == "error":
            data = response.get("data", {})
            raise HospitalServerError(
                data.get("message", "unknown error"), str(data.get("code", "UNKNOWN")), data
            )
        return response

    # ------------------------------------------------------- sync usage
    def __enter__(self) -> SyncEnvClient:  # type: ignore[override]
        """``with HospitalClient(url) as env:`` -> openenv's synchronous wrapper, connected."""
        self._sync_client = self.sync()
        return self._sync_client.__enter__()

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        if self._sync_client is not None:
            self._sync_client.__exit__(exc_type, exc_val, exc_tb)
            self._sync_client = None


def _closed_error(exc: ConnectionClosed) -> HospitalServerError:
    rcvd = exc.rcvd
    code = rcvd.code if rcvd is not None else None
    reason = rcvd.reason if rcvd is not None else ""
    if code == WS_TRY_AGAIN_LATER:
        return HospitalServerError(reason or "server at capacity", "CAPACITY_REACHED", {"close_code": code})
    return HospitalServerError(f"connection closed ({exc})", "CONNECTION_CLOSED", {"close_code": code})


__all__ = ["HospitalClient", "HospitalServerError"]
