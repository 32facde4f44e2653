"""The LLM client's HTTP transport (imported when a model is reached: httpx is not needed to load
a policy)."""

from __future__ import annotations

from typing import Protocol

import httpx


class Counts(Protocol):
    """The counters the transport adds to (:class:`policies.llm.Traffic`)."""

    attempts: int
    server_errors: int
    rate_limited: int
    timeouts: int


class CountingTransport(httpx.BaseTransport):
    """An httpx transport that counts attempts, 5xx, 429 and timeouts (the openai client's retries
    happen below its API, so this is where they are seen)."""

    def __init__(self, traffic: Counts) -> None:
        self._inner = httpx.HTTPTransport()
        self._traffic = traffic

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self._traffic.attempts += 1
        try:
            response = self._inner.handle_request(request)
        except httpx.TimeoutException:
            self._traffic.timeouts += 1
            raise
        if response.status_code >= 500:
            self._traffic.server_errors += 1
        elif response.status_code == 429:
            self._traffic.rate_limited += 1
        return response

    def close(self) -> None:
        self._inner.close()
