"""Server metrics in the Prometheus text format (version 0.0.4): counters and one latency
histogram per server handler (``tessera_<handler>_seconds``), kept in memory by the one
process that serves.

>>> m = ServerMetrics()
>>> m.observe("/v1/read", 200, 0.012, bytes_out=100, histogram="read")
>>> text = m.render(0, 0, 0, 0)
>>> 'tessera_requests_total{path="/v1/read",status="200"} 1' in text
True
>>> "tessera_read_seconds_count 1" in text
True
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import threading

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                     10.0, 30.0)


@dataclasses.dataclass
class _Histogram:
    buckets: list[int] = dataclasses.field(
        default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    total_s: float = 0.0
    count: int = 0


class ServerMetrics:
    """Requests by path and status, bytes in and out, a latency histogram per handler
    (``histograms``: their names, rendered even before their first request), rejections by
    reason and tiles served."""

    def __init__(self, histograms: tuple[str, ...] = ("read",)) -> None:
        self._lock = threading.Lock()
        self.requests: collections.Counter[tuple[str, int]] = collections.Counter()
        self.rejections: collections.Counter[str] = collections.Counter()
        self.bytes_in = 0
        self.bytes_out = 0
        self.items = 0
        self.item_errors: collections.Counter[int] = collections.Counter()  # by status
        self.histograms = histograms
        self._latency: dict[str, _Histogram] = {}
        self.counters: dict[str, tuple[str, float]] = {}  # name -> (help, value)

    def observe(self, path: str, status: int, seconds: float, *, bytes_in: int = 0,
                bytes_out: int = 0, histogram: str | None = None) -> None:
        """Count one finished request; a handler's request also enters its latency
        histogram (``histogram``: the handler's name)."""
        with self._lock:
            self.requests[(path, status)] += 1
            self.bytes_in += bytes_in
            self.bytes_out += bytes_out
            if histogram is not None:
                h = self._latency.setdefault(histogram, _Histogram())
                h.buckets[bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
                h.total_s += seconds
                h.count += 1

    def reject(self, reason: str) -> None:
        """Count one request refused (``auth``, ``forbidden``, ``too_large``, ``busy``,
        ``bad_request``, ``timeout``, ``body_timeout``)."""
        with self._lock:
            self.rejections[reason] += 1

    def count(self, name: str, help: str, n: float = 1) -> None:
        """Add ``n`` to a handler's own counter, rendered as ``tessera_<name>_total``."""
        with self._lock:
            self.counters[name] = (help, self.counters.get(name, (help, 0))[1] + n)

    def served(self, items: int, error_statuses: list[int]) -> None:
        """Count the items of one read request and those that failed (one status each:
        404 missing, 422 damaged, 502 the store failed)."""
        with self._lock:
            self.items += items
            self.item_errors.update(error_statuses)

    def render(self, cache_hits: int, cache_misses: int, cache_bytes: int,
               in_flight: int, store_bytes_in: int = 0, store_requests: int = 0,
               active_peak: int = 0, ready: bool | None = None) -> str:
        """The metrics as Prometheus text (``ready``: the latest readiness probe, ``None``
        before the first)."""
        with self._lock:
            lines = ["# HELP tessera_requests_total HTTP requests by path and status.",
                     "# TYPE tessera_requests_total counter"]
            for (path, status), n in sorted(self.requests.items()):
                lines.append(f'tessera_requests_total{{path="{path}",status="{status}"}} {n}')
            lines += ["# HELP tessera_rejections_total Requests refused, by reason.",
                      "# TYPE tessera_rejections_total counter"]
            for reason, n in sorted(self.rejections.items()):
                lines.append(f'tessera_rejections_total{{reason="{reason}"}} {n}')
            lines += [
                "# HELP tessera_bytes_in_total Request body bytes received.",
                "# TYPE tessera_bytes_in_total counter",
                f"tessera_bytes_in_total {self.bytes_in}",
                "# HELP tessera_bytes_out_total Response body bytes sent.",
                "# TYPE tessera_bytes_out_total counter",
                f"tessera_bytes_out_total {self.bytes_out}",
                "# HELP tessera_store_bytes_total Bytes the server read from its store.",
                "# TYPE tessera_store_bytes_total counter",
                f"tessera_store_bytes_total {store_bytes_in}",
                "# HELP tessera_store_requests_total Requests the server made to its store.",
                "# TYPE tessera_store_requests_total counter",
                f"tessera_store_requests_total {store_requests}",
                "# HELP tessera_items_total Tile and cell reads served (errors included).",
                "# TYPE tessera_items_total counter",
                f"tessera_items_total {self.items}",
                "# HELP tessera_item_errors_total Tile and cell reads that failed, by status "
                "(404 missing, 422 damaged, 502 the store failed); clients fetch those tiles "
                "themselves.",
                "# TYPE tessera_item_errors_total counter",
                *(f'tessera_item_errors_total{{status="{status}"}} {n}'
                  for status, n in sorted(self.item_errors.items())),
                "# HELP tessera_ready 1 when the latest probe could list the served root, "
                "0 when it could not (-1: not probed yet).",
                "# TYPE tessera_ready gauge",
                f"tessera_ready {-1 if ready is None else int(ready)}",
                "# HELP tessera_cache_hits_total Decoded-tile cache hits.",
                "# TYPE tessera_cache_hits_total counter",
                f"tessera_cache_hits_total {cache_hits}",
                "# HELP tessera_cache_misses_total Decoded-tile cache misses.",
                "# TYPE tessera_cache_misses_total counter",
                f"tessera_cache_misses_total {cache_misses}",
                "# HELP tessera_cache_bytes Bytes held by the decoded-tile cache.",
                "# TYPE tessera_cache_bytes gauge",
                f"tessera_cache_bytes {cache_bytes}",
                "# HELP tessera_in_flight Read requests being served or queued.",
                "# TYPE tessera_in_flight gauge",
                f"tessera_in_flight {in_flight}",
                "# HELP tessera_active_peak Most read requests served at once so far.",
                "# TYPE tessera_active_peak gauge",
                f"tessera_active_peak {active_peak}",
            ]
            for name, (text, value) in sorted(self.counters.items()):
                lines += [f"# HELP tessera_{name}_total {text}",
                          f"# TYPE tessera_{name}_total counter",
                          f"tessera_{name}_total {value:g}"]
            for name in dict.fromkeys((*self.histograms, *self._latency)):
                h = self._latency.get(name, _Histogram())
                metric = f"tessera_{name}_seconds"
                lines += [f"# HELP {metric} Latency of the {name} handler's requests.",
                          f"# TYPE {metric} histogram"]
                cum = 0
                for bound, n in zip(LATENCY_BUCKETS_S, h.buckets, strict=False):
                    cum += n
                    lines.append(f'{metric}_bucket{{le="{bound}"}} {cum}')
                lines.append(f'{metric}_bucket{{le="+Inf"}} {h.count}')
                lines.append(f"{metric}_sum {h.total_s}")
                lines.append(f"{metric}_count {h.count}")
        return "\n".join(lines) + "\n"
