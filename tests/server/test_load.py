"""Load test (loopback, bounded): 8 concurrent clients x 200 requests against a server
limited to 2 requests at once and 2 waiting. It must stay within those limits and its
memory, refuse the excess with 503 + Retry-After rather than stall, and answer every
request it accepts correctly. ``benchmarks/pushdown_load.py`` reports the figures."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

import tessera
from tessera.testing import PushdownTestServer, S3TestServer
from tessera.testing.loadgen import run_load, tile_request_factory

pytestmark = pytest.mark.s3


def test_load_8_clients_x_200_requests(s3_server: S3TestServer) -> None:
    opts = s3_server.storage_options()
    uri = s3_server.unique_url("load")
    data = np.random.default_rng(0).integers(0, 1 << 30, (512, 512)).astype(np.int32)
    arr = tessera.from_numpy(uri, data, tile=(64, 64), codec="zstd", storage_options=opts)
    path = uri.split("/", 3)[3]
    with PushdownTestServer(s3_server.url(""), storage_options=opts,
                            extra_args=["--max-concurrency", "2", "--queue", "2",
                                        "--cache-bytes", str(256 << 10)]) as server:
        factory = tile_request_factory(arr, data, path)
        result = run_load(server.url, server.token or "", factory, clients=8, requests=200,
                          server_pid=server.pid)
        metrics = httpx.get(f"{server.url}/metrics", timeout=10,
                            headers={"Authorization": f"Bearer {server.token}"}).text
    peak = int(metrics.split("\ntessera_active_peak ")[1].split()[0])
    assert 1 <= peak <= 2  # never more than --max-concurrency at once
    assert result.accepted + result.busy == 1600 and result.other == 0
    assert result.wrong == 0 and result.retry_after_missing == 0
    assert result.busy > 0 and result.accepted > 200  # the excess is refused, not stalled
    assert max(result.latencies_s) < 30  # nothing waited anywhere near the request timeout
    if result.peak_rss_bytes is not None:
        assert result.peak_rss_bytes < 512 << 20
