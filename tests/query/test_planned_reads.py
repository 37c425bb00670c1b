"""Reads that follow a plan return what numpy holds, whatever the method, and the methods
move the bytes and requests they promise."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from tessera.server.app import create_app

METHODS = ["auto", "get", "merge", "fetch", "pushdown"]


@pytest.fixture
def grid(store_url):
    """An array on each backend, its handle served by a pushdown server in-process (the ASGI
    app over the same store root, reached through httpx's ASGI transport)."""
    url, options = store_url
    data = np.arange(96 * 80, dtype=np.int32).reshape(96, 80)
    arr = tessera.from_numpy(f"{url.rstrip('/')}/grid", data, tile=(32, 16),
                             storage_options=options)
    app = create_app(tessera.open_store(url, **options), token="planned-reads-token-01")
    arr.pushdown = tessera.PushdownClient("http://pushdown", token="planned-reads-token-01",
                                          transport=httpx.ASGITransport(app))
    return arr, data


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(METHODS), st.integers(0, 95), st.integers(1, 96), st.integers(1, 3),
       st.integers(0, 79), st.integers(1, 80), st.integers(1, 4), st.sampled_from([0.0, 1e6]))
def test_every_method_reads_the_right_cells(grid, method, y0, ny, ys, x0, nx, xs, phi):
    arr, data = grid
    sel = (slice(y0, min(96, y0 + ny), ys), slice(x0, min(80, x0 + nx), xs))
    np.testing.assert_array_equal(arr.read(sel, method=method, phi=phi), data[sel])
    plan = arr.last_read.plan
    assert plan is not None and plan.method == method
    if method in ("merge", "fetch"):
        assert set(plan.methods) == {"range"}
    if method == "get":
        assert set(plan.methods) == {"get"}
    if method == "pushdown":
        assert set(plan.methods) == {"pushdown"}
        assert arr.last_read.pushdown_fallbacks == 0, arr.last_read.pushdown_error


def _data_requests(stats: tessera.IOStats) -> int:
    """Requests other than listings (a read lists the commit markers when its handle's
    list of fragments is older than reads.refresh_s)."""
    lists = stats.by_method.get("list")
    return stats.requests - (lists.requests if lists is not None else 0)


def test_fetch_moves_fewer_bytes_than_merge_than_get(grid) -> None:
    arr, data = grid
    sel = (slice(0, 96), slice(3, 5))  # a narrow vertical box
    moved = {}
    for method in ("get", "merge", "fetch"):
        with tessera.collect_stats() as stats:
            np.testing.assert_array_equal(arr.read(sel, method=method), data[sel])
        moved[method] = (stats.bytes_received, _data_requests(stats))
        assert stats.bytes_received == arr.last_read.plan.totals.nbytes
    assert moved["fetch"][0] < moved["merge"][0] < moved["get"][0]
    assert moved["fetch"][0] == 96 * 2 * 4
    assert moved["fetch"][1] > moved["merge"][1] == moved["get"][1]


def test_explain_matches_the_read_and_prints(grid) -> None:
    arr, _ = grid
    plan = arr.explain((slice(10, 20), slice(0, 80)), method="merge")
    assert len(plan.choices) == 5 and plan.methods == {"range": 5}
    text = str(plan)
    assert "read plan: method=merge" in text and "total" in text
    arr.read((slice(10, 20), slice(0, 80)), method="merge")
    assert arr.last_read.plan.totals == plan.totals


def test_neighbouring_tiles_can_share_a_request(store_url) -> None:
    url, options = store_url
    data = np.arange(64 * 64, dtype=np.int16).reshape(64, 64)
    arr = tessera.from_numpy(f"{url.rstrip('/')}/rows", data, tile=(4, 64),
                             storage_options=options)
    arr.planner = tessera.PlannerConfig(pricing="s3")  # requests cost money
    sel = (slice(0, 64), slice(0, 56))  # most of every row: small gaps
    np.testing.assert_array_equal(arr.read(sel, phi=1e9), data[sel])
    plan = arr.last_read.plan
    assert len(plan.requests) == 1 and plan.requests[0].tiles == tuple(range(16))
    with tessera.collect_stats() as stats:  # one request, every tile checked and decoded
        np.testing.assert_array_equal(arr.read(sel, phi=1e9), data[sel])
    assert _data_requests(stats) == 1
    np.testing.assert_array_equal(arr.read(sel, phi=0.0), data[sel])


def test_bad_planner_arguments(grid) -> None:
    arr, _ = grid
    with pytest.raises(tessera.ConfigError, match="unknown read method"):
        arr.read((0, 0), method="teleport")
    with pytest.raises(tessera.ConfigError, match="phi"):
        arr.read((0, 0), phi=-1)
    with pytest.raises(tessera.ConfigError, match="phi must be a number"):
        arr.read((0, 0), phi="fast")
    arr.pushdown = None
    with pytest.raises(tessera.ConfigError, match="pushdown server"):
        arr.read((0, 0), method="pushdown")


def test_last_read_prints_estimates_beside_measurements(grid) -> None:
    arr, data = grid
    np.testing.assert_array_equal(arr.read((slice(0, 96), 5), method="merge"), data[:, 5])
    report = arr.last_read
    text = str(report)
    assert "estimated" in text and "measured" in text
    data_bytes = sum(report.stats.by_method[k].bytes_received for k in ("get", "range")
                     if k in report.stats.by_method)
    assert f"{data_bytes:,}" in text and f"{report.plan.totals.nbytes:,}" in text


def test_a_union_of_hyperslabs_is_pushed_down(grid):
    """Regression: a Hyperslabs read planned its tiles for pushdown but fetched them whole."""
    arr, data = grid
    sels = [(slice(None), slice(5, 9)), (slice(40, 44), slice(None))]
    got = arr.read(tessera.Hyperslabs(sels), method="pushdown")
    for g, s in zip(got, sels, strict=True):
        np.testing.assert_array_equal(g, data[s])
    kinds = arr.last_read.stats.by_method
    assert kinds["pushdown"].requests >= 1
    assert "get" not in kinds and "range" not in kinds
    assert arr.last_read.pushdown_fallbacks == 0
