"""A union of selections is planned once, fetches each tile once, and returns one result
per selection, each equal to numpy's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera


@pytest.fixture
def grid(store_url):
    url, options = store_url
    data = np.arange(64 * 48, dtype=np.float32).reshape(64, 48)
    arr = tessera.from_numpy(f"{url.rstrip('/')}/grid", data, tile=(16, 16),
                             storage_options=options)
    return arr, data


box = st.tuples(st.integers(0, 63), st.integers(1, 20), st.integers(0, 47), st.integers(1, 20))


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(box, min_size=1, max_size=5), st.sampled_from(["auto", "get", "fetch"]))
def test_union_results_match_numpy(grid, boxes, method) -> None:
    arr, data = grid
    sels = [(slice(y, min(64, y + h)), slice(x, min(48, x + w))) for y, h, x, w in boxes]
    results = arr.read(tessera.Hyperslabs(sels), method=method)
    assert len(results) == len(sels)
    for got, sel in zip(results, sels, strict=True):
        np.testing.assert_array_equal(got, data[sel])


def test_shared_tiles_are_fetched_once(grid) -> None:
    arr, data = grid
    sels = [(slice(0, 4), slice(0, 8)), (slice(2, 6), slice(4, 12)), (5, 5)]  # one tile
    with tessera.collect_stats() as union:
        got = arr.read(tessera.Hyperslabs(sels), method="get")
    assert union.by_method["get" if "get" in union.by_method else "range"].requests == 1
    for g, sel in zip(got, sels, strict=True):
        np.testing.assert_array_equal(g, data[sel])
    plan = arr.explain(tessera.Hyperslabs(sels), method="get")
    assert len(plan.choices) == 1 and plan.totals.nbytes == 16 * 16 * 4


def test_union_with_updates_and_several_attributes(store_url) -> None:
    url, options = store_url
    schema = tessera.ArraySchema([tessera.Dim("y", (0, 31), 8), tessera.Dim("x", (0, 31), 8)],
                                 [tessera.Attr("a", "int32"), tessera.Attr("b", "float64",
                                                                           codec="zstd")])
    arr = tessera.create_array(f"{url.rstrip('/')}/multi", schema, storage_options=options)
    a = np.arange(1024, dtype=np.int32).reshape(32, 32)
    b = a.astype(np.float64) / 2
    arr.write({"a": a, "b": b})
    arr.write_cells((np.array([3, 20]), np.array([4, 30])),
                    {"a": np.array([-1, -2], np.int32), "b": np.array([-1.0, -2.0])})
    a[3, 4], a[20, 30], b[3, 4], b[20, 30] = -1, -2, -1.0, -2.0
    sels = [(slice(0, 10), slice(0, 10)), (20, slice(None)), (slice(None), [30, 4])]
    for got, sel in zip(arr.read(tessera.Hyperslabs(sels)), sels, strict=True):
        np.testing.assert_array_equal(got["a"], a[sel])
        np.testing.assert_array_equal(got["b"], b[sel])


def test_hyperslabs_need_boxes_and_dense_arrays(store_url) -> None:
    url, options = store_url
    with pytest.raises(tessera.SelectionError, match="at least one"):
        tessera.Hyperslabs([])
    schema = tessera.ArraySchema([tessera.Dim("x", (0, 9), 5)], [tessera.Attr("v", "int32")],
                                 sparse=True)
    arr = tessera.create_array(f"{url.rstrip('/')}/sp", schema, storage_options=options)
    with pytest.raises(tessera.SelectionError, match="dense arrays"):
        arr.read(tessera.Hyperslabs([slice(0, 3)]))
