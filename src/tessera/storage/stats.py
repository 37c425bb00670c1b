"""Request accounting: every request a store makes is recorded here.

A :class:`RequestRecord` describes one HTTP-level request (one try: a retried request is
recorded once per try). :class:`IOStats` adds records up per request kind; each store keeps
one for its whole life (``store.stats``), and :func:`collect_stats` / ``store.collect()``
gather the requests made inside a ``with`` block, including those made by other threads or
tasks on behalf of that block.

>>> import tessera
>>> store = tessera.open_store("memory://doc-stats")
>>> with store.collect() as stats:
...     _ = store.put("a", b"x" * 1000)
...     _ = store.get_range("a", 0, 10)
>>> stats.requests, stats.bytes_sent, stats.bytes_received
(2, 1000, 10)
>>> stats.by_method["range"].requests
1
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import threading
import time
from typing import Any

from tessera.storage.pricing import PriceTable, get_pricing

REQUEST_KINDS = ("get", "range", "put", "list", "delete", "head", "pushdown")
"""The kinds of request Tessera records; each has a fee in every price table."""


@dataclasses.dataclass(slots=True)
class RequestRecord:
    """One request (one try) to a store (not frozen: a frozen dataclass's ``__init__`` costs
    7x more, and a small read makes one per request; treat it as read-only).

    Attributes:
        kind: one of :data:`REQUEST_KINDS`.
        key: the object key, or the listed prefix.
        bytes_received: payload bytes that came back (body only).
        bytes_sent: payload bytes sent (body only).
        latency_s: seconds from sending the request to having the whole answer.
        ok: False when the try failed (it may have been retried).
        started: ``time.monotonic()`` when the request started.
        compute_gb_s: serverless compute billed for the request (pushdown), in GB-seconds.
    """

    kind: str
    key: str
    bytes_received: int = 0
    bytes_sent: int = 0
    latency_s: float = 0.0
    ok: bool = True
    started: float = 0.0
    compute_gb_s: float = 0.0


@dataclasses.dataclass
class MethodStats:
    """Totals for one request kind."""

    requests: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0
    latency_s: float = 0.0
    failures: int = 0
    compute_gb_s: float = 0.0

    def add(self, other: MethodStats, sign: int = 1) -> None:
        self.requests += sign * other.requests
        self.bytes_received += sign * other.bytes_received
        self.bytes_sent += sign * other.bytes_sent
        self.latency_s += sign * other.latency_s
        self.failures += sign * other.failures
        self.compute_gb_s += sign * other.compute_gb_s


class IOStats:
    """Requests, bytes and latency, in total and per request kind, plus their price.

    ``elapsed_s`` is the wall-clock time the stats cover: from entering to leaving a
    ``collect()`` block, or for a store's running totals from the start of its first request
    to the end of its latest one. Thread-safe; stats can be added and subtracted
    (``after - before`` gives what happened in between).

    >>> import numpy as np, tessera
    >>> arr = tessera.from_numpy("memory://doc-iostats", np.zeros((8, 8)), tile=(4, 4))
    >>> _ = arr[0:4, 0:4]
    >>> stats = arr.last_read.stats
    >>> stats.requests >= 1, stats.bytes_received >= 4 * 4 * 8
    (True, True)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_method: dict[str, MethodStats] = {}
        self._first_start: float | None = None
        self._last_end: float | None = None
        self._wall_s: float | None = None

    # -- recording -------------------------------------------------------------------------
    def record(self, rec: RequestRecord) -> None:
        """Add one request."""
        with self._lock:
            m = self.by_method.get(rec.kind)
            if m is None:
                m = self.by_method[rec.kind] = MethodStats()
            m.requests += 1
            m.bytes_received += rec.bytes_received
            m.bytes_sent += rec.bytes_sent
            m.latency_s += rec.latency_s
            m.compute_gb_s += rec.compute_gb_s
            if not rec.ok:
                m.failures += 1
            end = rec.started + rec.latency_s
            if self._first_start is None or rec.started < self._first_start:
                self._first_start = rec.started
            if self._last_end is None or end > self._last_end:
                self._last_end = end

    # -- totals ----------------------------------------------------------------------------
    def _sum(self, field: str) -> Any:
        with self._lock:
            return sum(getattr(m, field) for m in self.by_method.values())

    @property
    def requests(self) -> int:
        """All requests, failed tries included."""
        return int(self._sum("requests"))

    @property
    def failures(self) -> int:
        """Tries that failed (and were retried or raised)."""
        return int(self._sum("failures"))

    @property
    def bytes_received(self) -> int:
        """Payload bytes received from the store."""
        return int(self._sum("bytes_received"))

    @property
    def bytes_sent(self) -> int:
        """Payload bytes sent to the store."""
        return int(self._sum("bytes_sent"))

    @property
    def latency_s(self) -> float:
        """Sum of request latencies (exceeds ``elapsed_s`` when requests overlap)."""
        return float(self._sum("latency_s"))

    @property
    def elapsed_s(self) -> float:
        """Wall-clock seconds covered (see the class docstring)."""
        if self._wall_s is not None:
            return self._wall_s
        if self._first_start is None or self._last_end is None:
            return 0.0
        return self._last_end - self._first_start

    def cost_usd(self, pricing: str | PriceTable = "s3") -> float:
        """Dollars these requests cost under a price table (``s3``, ``gcs``, ``azure``, ``local``).

        Request fees per kind, egress for bytes received, compute for pushdowns.
        """
        return sum(self.cost_breakdown(pricing).values())

    def cost_breakdown(self, pricing: str | PriceTable = "s3") -> dict[str, float]:
        """``{"requests": $, "egress": $, "compute": $}`` under a price table."""
        table = get_pricing(pricing)
        with self._lock:
            items = list(self.by_method.items())
        return {
            "requests": sum(table.request_fee(kind, m.requests) for kind, m in items),
            "egress": table.egress_usd(sum(m.bytes_received for _, m in items)),
            "compute": table.compute_usd(sum(m.compute_gb_s for _, m in items)),
        }

    # -- arithmetic ------------------------------------------------------------------------
    def copy(self) -> IOStats:
        """An independent snapshot."""
        out = IOStats()
        with self._lock:
            out.by_method = {k: dataclasses.replace(m) for k, m in self.by_method.items()}
            out._first_start, out._last_end, out._wall_s = (
                self._first_start,
                self._last_end,
                self._wall_s,
            )
        return out

    def _combine(self, other: IOStats, sign: int) -> IOStats:
        out = self.copy()
        for kind, m in other.copy().by_method.items():
            out.by_method.setdefault(kind, MethodStats()).add(m, sign)
        out._wall_s = None
        if sign > 0:
            starts = [t for t in (self._first_start, other._first_start) if t is not None]
            ends = [t for t in (self._last_end, other._last_end) if t is not None]
            out._first_start = min(starts) if starts else None
            out._last_end = max(ends) if ends else None
        else:
            out._first_start = other._last_end
        return out

    def __add__(self, other: IOStats) -> IOStats:
        return self._combine(other, 1)

    def __sub__(self, other: IOStats) -> IOStats:
        return self._combine(other, -1)

    def to_dict(self, pricing: str | PriceTable = "s3") -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "requests": self.requests,
            "failures": self.failures,
            "bytes_received": self.bytes_received,
            "bytes_sent": self.bytes_sent,
            "elapsed_s": self.elapsed_s,
            "cost_usd": self.cost_usd(pricing),
            "by_method": {k: dataclasses.asdict(m) for k, m in sorted(self.by_method.items())},
        }

    def __repr__(self) -> str:
        return (
            f"IOStats(requests={self.requests}, bytes_received={self.bytes_received}, "
            f"bytes_sent={self.bytes_sent}, elapsed_s={self.elapsed_s:.3f})"
        )


# -- collection ----------------------------------------------------------------------------

_COLLECTORS: contextvars.ContextVar[tuple[tuple[object | None, IOStats], ...]] = (
    contextvars.ContextVar("tessera_stats_collectors", default=())
)


class StatsRecorder:
    """Owned by one store: keeps its running totals and feeds active collectors."""

    def __init__(self) -> None:
        self.total = IOStats()

    def record(self, rec: RequestRecord) -> None:
        """Record one request in the store's totals and in every collector watching it."""
        self.total.record(rec)
        for scope, sink in _COLLECTORS.get():
            if scope is None or scope is self:
                sink.record(rec)

    def collect(self) -> contextlib.AbstractContextManager[IOStats]:
        """Collect the requests this store makes inside the block."""
        return _Collect(self)


class _Collect(contextlib.AbstractContextManager[IOStats]):
    """Collects the requests of one store (``scope``; ``None``: every store) made inside a
    ``with`` block into a fresh :class:`IOStats`, with the block's wall time (a class, not a
    generator: a small read enters one per call)."""

    __slots__ = ("scope", "stats", "t0", "token")

    def __init__(self, scope: object | None) -> None:
        self.scope = scope

    def __enter__(self) -> IOStats:
        self.stats = IOStats()
        self.token = _COLLECTORS.set((*_COLLECTORS.get(), (self.scope, self.stats)))
        self.t0 = time.monotonic()
        return self.stats

    def __exit__(self, *exc: object) -> None:
        self.stats._wall_s = time.monotonic() - self.t0
        _COLLECTORS.reset(self.token)


def collect_stats() -> contextlib.AbstractContextManager[IOStats]:
    """Collect the requests of every store made inside a ``with`` block.

    >>> import tessera
    >>> store = tessera.open_store("memory://doc-collect")
    >>> with tessera.collect_stats() as stats:
    ...     _ = store.put("k", b"abc")
    >>> stats.by_method["put"].bytes_sent
    3
    """
    return _Collect(None)
