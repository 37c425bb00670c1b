"""A load generator for the pushdown server: ``clients`` concurrent clients each send
``requests`` read requests over loopback, check every accepted answer against numpy, and
count what the server refused. Used by the load test and ``benchmarks/pushdown_load.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from tessera.pushdown.framing import decode_response
from tessera.pushdown.read_items import TileItem, dim_select, encode_read_request

#: A request factory: given a random generator, the items to send and, per item, the
#: cells the answer must hold.
RequestFactory = Callable[[np.random.Generator],
                          tuple[Sequence[TileItem], Sequence[np.ndarray]]]


@dataclasses.dataclass
class LoadResult:
    """What a load run saw.

    Attributes:
        accepted, busy, other: answers with 200, with 503, with anything else.
        wrong: accepted answers whose cells differed from numpy (must be 0).
        retry_after_missing: 503 answers without a Retry-After header (must be 0).
        latencies_s: per accepted request.
        wall_s: the whole run.
        peak_rss_bytes: the server's peak resident memory after the run (``None`` when
            its pid was not given).
    """

    accepted: int = 0
    busy: int = 0
    other: int = 0
    wrong: int = 0
    retry_after_missing: int = 0
    latencies_s: list[float] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    peak_rss_bytes: int | None = None

    @property
    def throughput(self) -> float:
        """Accepted requests per second."""
        return self.accepted / self.wall_s if self.wall_s else 0.0

    def percentile_s(self, q: float) -> float:
        """Latency percentile ``q`` (0-100) of accepted requests."""
        if not self.latencies_s:
            return 0.0
        if len(self.latencies_s) == 1:
            return self.latencies_s[0]
        return statistics.quantiles(self.latencies_s, n=100, method="inclusive")[
            max(0, min(98, round(q) - 1))]


def tile_request_factory(arr: Any, data: np.ndarray, array_path: str) -> RequestFactory:
    """Requests of 1-4 random tiles of a 2-D ``<i4`` array each, random rows and a run of
    columns from each, with the cells numpy says they hold (``data`` is the array)."""
    arr.read(method="get")
    reads = arr.last_read.tile_reads
    ext = arr.schema.tile_shape

    def factory(rng: np.random.Generator) -> tuple[list[TileItem], list[np.ndarray]]:
        items, expected = [], []
        for i in rng.choice(len(reads), int(rng.integers(1, min(5, len(reads) + 1))),
                            replace=False):
            r = reads[int(i)]
            rows = np.sort(rng.choice(ext[0], int(rng.integers(1, ext[0])), replace=False))
            cols = np.arange(int(rng.integers(0, ext[1] // 2)), ext[1])
            items.append(TileItem(array_path, r.key, r.offset, r.length, r.codec, r.crc32,
                                  "<i4", (), ext, "row-major",
                                  (dim_select(rows), dim_select(cols)), checksum=r.checksum))
            y0, x0 = r.tile_origin
            expected.append(data[y0 + rows][:, x0 + cols])
        return items, expected

    return factory


def peak_rss(pid: int) -> int | None:
    """A process's peak resident memory (Linux ``VmHWM``), or ``None`` elsewhere."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


async def _client(base: str, token: str, factory: RequestFactory, requests: int, seed: int,
                  result: LoadResult) -> None:
    rng = np.random.default_rng(seed)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=base, timeout=60.0, headers=headers) as client:
        for _ in range(requests):
            items, expected = factory(rng)
            t0 = time.perf_counter()
            r = await client.post("/v1/read", content=encode_read_request(list(items)))
            elapsed = time.perf_counter() - t0
            if r.status_code == 503:
                result.busy += 1
                if "retry-after" not in r.headers:
                    result.retry_after_missing += 1
                continue
            if r.status_code != 200:
                result.other += 1
                continue
            result.accepted += 1
            result.latencies_s.append(elapsed)
            answers = decode_response(r.content, len(items)).results
            for got, want in zip(answers, expected, strict=True):
                if not isinstance(got, dict) or not np.array_equal(got["cells"], want):
                    result.wrong += 1


def run_load(base_url: str, token: str, factory: RequestFactory, *, clients: int = 8,
             requests: int = 200, seed: int = 0, server_pid: int | None = None) -> LoadResult:
    """Run ``clients`` x ``requests`` against ``base_url`` (blocking)."""
    result = LoadResult()

    async def go() -> None:
        await asyncio.gather(*(_client(base_url, token, factory, requests, seed + i, result)
                               for i in range(clients)))

    t0 = time.perf_counter()
    asyncio.run(go())
    result.wall_s = time.perf_counter() - t0
    result.peak_rss_bytes = peak_rss(server_pid) if server_pid else None
    return result
