"""How ``trustjudge serve`` runs uvicorn: a deadline on request heads (uvicorn has none of its own) and
keep-alive connections closed after the same timeout."""

from __future__ import annotations

import asyncio
from typing import Any

from ._guard import DEFAULT_BODY_TIMEOUT_S

__all__ = ["uvicorn_options"]


def _header_deadline_protocol(timeout_s: float) -> type:
    """uvicorn's h11 protocol with a deadline on request headers: a client that opens a connection and
    sends no complete request head within ``timeout_s`` (slow or no headers) is disconnected. uvicorn
    has no such timeout of its own (its keep-alive timer stops at the first byte)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _cycle_seen: Any = None

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            if self.cycle is self._cycle_seen or self.cycle is None or self.cycle.response_complete:
                self.transport.close()  # no new request head arrived in time

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and self.cycle is not self._cycle_seen:
                self._cycle_seen = self.cycle  # a complete request head: the body has its own timeout
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadlineProtocol


def uvicorn_options(*, timeout_s: float = DEFAULT_BODY_TIMEOUT_S) -> dict[str, Any]:
    """The uvicorn options ``trustjudge serve`` runs with (``uvicorn.run(app, host=..., **options)``): request
    heads must arrive within ``timeout_s`` (bodies: ``create_app(body_timeout_s=..., request_deadline_s=...)``)
    and idle keep-alive connections close after it.

    uvicorn's own ``limit_concurrency`` is not used: it counts every open connection, those still sending
    their request head included, so 16 clients that never finish a head made 58% of ``/healthz`` requests
    get 503. The app counts requests instead (``create_app(max_connections=...)``)."""
    return {"workers": 1, "http": _header_deadline_protocol(timeout_s), "timeout_keep_alive": max(1, int(timeout_s))}
