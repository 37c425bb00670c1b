"""Connection limits of the pushdown server, below the application: how many connections it
keeps open (in total and per client address), and how long a connection may take to send a
request's headers.

uvicorn calls the application only once a request's headers have arrived, and keeps any
connection that never completes them open for ever; so these limits live in its HTTP
protocol (:func:`guarded_protocol` returns uvicorn's h11 protocol class with them added).
A request's *body* is bounded in time by the application itself
(:meth:`tessera.server.app.PushdownApp.admit`), before the request takes an admission slot.

- A connection past ``max_connections`` in total, or past ``max_connections_per_client`` from
  its address, is answered ``503`` (with ``Retry-After``) and closed at once.
- A connection that has not completed a request's headers within ``body_timeout_s`` of
  opening (or of its previous response) is closed: a stalled client holds a socket for at
  most that long.

>>> guard = ConnectionGuard(max_total=2, max_per_client=1, header_timeout_s=5.0)
>>> guard.open("10.0.0.1"), guard.open("10.0.0.1"), guard.open("10.0.0.2"), guard.open("x")
(None, 'from 10.0.0.1', None, 'in total')
>>> guard.close("10.0.0.1"); guard.counts()
(1, {'10.0.0.2': 1})
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from typing import Any

from tessera.config import ServerConfig


class ConnectionGuard:
    """Counts of open connections, in total and per client address (thread-safe: uvicorn's
    workers run one loop each, but the counts may be read from another thread)."""

    def __init__(self, max_total: int, max_per_client: int, header_timeout_s: float) -> None:
        self.max_total = max_total
        self.max_per_client = max_per_client
        self.header_timeout_s = header_timeout_s
        self._by_client: collections.Counter[str] = collections.Counter()
        self._total = 0
        self._lock = threading.Lock()

    @classmethod
    def of(cls, config: ServerConfig) -> ConnectionGuard:
        """The guard a server with ``config`` uses."""
        return cls(config.max_connections, config.max_connections_per_client,
                   config.body_timeout_s)

    def open(self, client: str) -> str | None:
        """Count a new connection from ``client``; ``None`` when it may stay, else which
        limit it passes (``in total``, ``from <address>``), and it is not counted."""
        with self._lock:
            if self._total >= self.max_total:
                return "in total"
            if self.max_per_client and self._by_client[client] >= self.max_per_client:
                return f"from {client}"
            self._total += 1
            self._by_client[client] += 1
            return None

    def close(self, client: str) -> None:
        """Forget one connection of ``client`` counted by :meth:`open`."""
        with self._lock:
            self._total -= 1
            self._by_client[client] -= 1
            if self._by_client[client] <= 0:
                del self._by_client[client]

    def counts(self) -> tuple[int, dict[str, int]]:
        """Open connections: in total, and per client address."""
        with self._lock:
            return self._total, dict(self._by_client)


def _refusal(limit: str, guard: ConnectionGuard) -> bytes:
    most = guard.max_total if limit == "in total" else guard.max_per_client
    body = json.dumps({"error": f"too many open connections {limit} (at most {most}); "
                                "retry shortly or reuse a connection", "status": 503}).encode()
    head = (f"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            f"retry-after: 1\r\nconnection: close\r\ncontent-length: {len(body)}\r\n\r\n")
    return head.encode() + body


def guarded_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """uvicorn's h11 HTTP protocol class with ``guard``'s limits (pass it as
    ``uvicorn.run(..., http=...)``)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        """H11Protocol that counts its connection in ``guard`` and closes it when a
        request's headers do not arrive in time."""

        _client_host: str | None = None
        _deadline: asyncio.TimerHandle | None = None
        _seen_cycle: Any = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            host = self.client[0] if self.client else "unknown"
            refused = guard.open(host)
            if refused is not None:
                transport.write(_refusal(refused, guard))
                transport.close()
                return
            self._client_host = host
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._client_host is not None:
                guard.close(self._client_host)
                self._client_host = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._client_host is None:  # refused: nothing of it is read
                return
            super().data_received(data)

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and self.cycle is not self._seen_cycle:
                self._seen_cycle = self.cycle  # a request's headers arrived: the body's
                self._disarm()                  # time is the application's to bound

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request's headers get the same time

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(guard.header_timeout_s, self._stalled)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _stalled(self) -> None:
            self._deadline = None
            busy = self.cycle is not None and not self.cycle.response_complete \
                and self.cycle is self._seen_cycle
            if not busy and not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol
