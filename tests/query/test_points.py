"""Point reads return numpy's fancy-indexing answer, newest fragment first."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera


@pytest.fixture
def history(store_url):
    """A dense array with a box overwrite, sparse updates and deletions on top."""
    url, options = store_url
    rng = np.random.default_rng(11)
    schema = tessera.ArraySchema([tessera.Dim("y", (0, 39), 8), tessera.Dim("x", (0, 29), 16)],
                                 [tessera.Attr("v", "int32", fill=-1),
                                  tessera.Attr("w", "float64", codec="zstd")],
                                 cell_order="col-major")
    arr = tessera.create_array(f"{url.rstrip('/')}/pts", schema, storage_options=options)
    v = rng.integers(0, 100, (40, 30), dtype=np.int32)
    w = rng.random((40, 30))
    arr.write({"v": v, "w": w})
    arr.write({"v": np.full((5, 7), 500, np.int32), "w": np.zeros((5, 7))}, origin=(10, 3))
    v[10:15, 3:10], w[10:15, 3:10] = 500, 0.0
    ys, xs = rng.integers(0, 40, 30), rng.integers(0, 30, 30)
    vals = rng.integers(1000, 2000, 30, dtype=np.int32)
    arr.write_cells((ys, xs), {"v": vals, "w": vals / 10})
    last = {(int(y), int(x)): i for i, (y, x) in enumerate(zip(ys, xs, strict=True))}
    for (y, x), i in last.items():
        v[y, x], w[y, x] = vals[i], vals[i] / 10
    arr.delete_cells((ys[:5], xs[:5]))
    v[ys[:5], xs[:5]], w[ys[:5], xs[:5]] = -1, np.nan
    return arr, v, w


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 39), st.integers(0, 29)), max_size=40),
       st.sampled_from(["auto", "get", "fetch"]))
def test_points_match_numpy(history, pts, method) -> None:
    arr, v, w = history
    ys = np.array([p[0] for p in pts], dtype=np.int64)
    xs = np.array([p[1] for p in pts], dtype=np.int64)
    got = arr.read(tessera.Points((ys, xs)), method=method)
    np.testing.assert_array_equal(got["v"], v[ys, xs])
    np.testing.assert_array_equal(got["w"], w[ys, xs])


def test_points_fetch_only_their_cells(store_url) -> None:
    url, options = store_url
    data = np.arange(256 * 256, dtype=np.int64).reshape(256, 256)
    arr = tessera.from_numpy(f"{url.rstrip('/')}/few", data, tile=(128, 128),
                             storage_options=options)
    ys, xs = np.array([3, 200, 3]), np.array([7, 250, 7])
    with tessera.collect_stats() as stats:
        got = arr.read(tessera.Points((ys, xs)), method="fetch")
    np.testing.assert_array_equal(got, data[ys, xs])
    assert stats.by_method["range"].bytes_received == 2 * 8  # two distinct cells
    plan = arr.explain(tessera.Points((ys, xs)), method="fetch")
    assert len(plan.choices) == 2


def test_bad_points_are_refused(history) -> None:
    arr, _, _ = history
    with pytest.raises(tessera.SelectionError, match="outside"):
        arr.read(tessera.Points((np.array([40]), np.array([0]))))
    with pytest.raises(tessera.SelectionError, match="equal length"):
        arr.read(tessera.Points((np.array([1, 2]), np.array([0]))))
    with pytest.raises(tessera.SelectionError, match="tuple"):
        tessera.Points(np.array([1, 2]))
