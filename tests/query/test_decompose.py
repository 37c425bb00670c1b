"""Decomposition against a brute-force model: the byte ranges cover exactly the bytes of the
selected cells, sorted, disjoint and merged."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.format.decompose import merge_ranges, tile_byte_ranges, unique_indices


def _bytes_of(ranges: np.ndarray) -> set[int]:
    return {b for a, z in ranges.tolist() for b in range(a, z)}


@st.composite
def tile_and_selection(draw):
    ndim = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 6)) for _ in range(ndim)]
    sets = [np.array(draw(st.lists(st.integers(0, n - 1), max_size=6)), dtype=np.int64)
            for n in shape]
    return shape, sets, draw(st.sampled_from([1, 2, 4, 12])), draw(
        st.sampled_from(["row-major", "col-major"]))


@settings(max_examples=300, deadline=None)
@given(tile_and_selection())
def test_ranges_cover_exactly_the_selected_cells(case) -> None:
    shape, sets, cell, order = case
    ranges = tile_byte_ranges(shape, cell, order, sets)
    expected: set[int] = set()
    if all(len(s) for s in sets):
        grids = np.meshgrid(*sets, indexing="ij")
        cells = np.ravel_multi_index([g.ravel() for g in grids], shape,
                                     order="C" if order == "row-major" else "F")
        expected = {int(c) * cell + k for c in cells for k in range(cell)}
    assert _bytes_of(ranges) == expected
    if len(ranges):
        assert np.all(ranges[:, 0] < ranges[:, 1])
        assert np.all(ranges[1:, 0] > ranges[:-1, 1])  # sorted, disjoint, never touching


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 10)), max_size=12))
def test_merge_ranges_is_the_union(pairs) -> None:
    ranges = np.array([[a, a + n] for a, n in pairs], dtype=np.int64).reshape(-1, 2)
    merged = merge_ranges(ranges)
    assert _bytes_of(merged) == _bytes_of(ranges)
    if len(merged):
        assert np.all(merged[1:, 0] > merged[:-1, 1])


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="dimension 1 leave"):
        tile_byte_ranges((4, 4), 1, "row-major", [np.array([0]), np.array([4])])
    with pytest.raises(ValueError, match="index sets"):
        tile_byte_ranges((4, 4), 1, "row-major", [np.array([0])])
    with pytest.raises(ValueError, match="cell_order"):
        tile_byte_ranges((4, 4), 1, "z-order", [np.array([0]), np.array([0])])


def test_a_vertical_box_over_8192_rows_is_vectorised() -> None:
    """Not a timing assertion: checks the result size and reports the time (the benchmark
    suite measures speed)."""
    t0 = time.perf_counter()
    r = tile_byte_ranges((8192, 8192), 4, "row-major", [np.arange(8192), np.arange(100, 164)])
    elapsed = time.perf_counter() - t0
    assert r.shape == (8192, 2)
    assert r[0].tolist() == [400, 656] and r[1, 0] == 8192 * 4 + 400
    print(f"8192-row vertical box decomposed in {elapsed * 1e3:.1f} ms")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-3, 12), max_size=12))
def test_unique_indices_is_np_unique(values) -> None:
    a = np.array(values, dtype=np.int64)
    np.testing.assert_array_equal(unique_indices(a), np.unique(a))
    np.testing.assert_array_equal(unique_indices(np.sort(a)), np.unique(a))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 9), st.lists(st.integers(0, 9), min_size=1,
                                                      max_size=6),
                          st.tuples(st.integers(0, 9), st.integers(0, 10),
                                    st.integers(1, 3))), min_size=2, max_size=2))
def test_whole_tile_needs_match_decomposition(items) -> None:
    """Tiles whose every cell a plain selection takes skip decomposition: their needs are
    those decomposition gives, ``contiguous`` says exactly when coordinates run without
    gaps or repeats, and ``ascending_run`` when they also come in ascending order."""
    from tessera import ArraySchema, Attr, Dim
    from tessera.format.selection import normalize_selection
    from tessera.format.tile import TileRead
    from tessera.query.plan import tile_needs

    schema = ArraySchema([Dim("y", (0, 9), 4), Dim("x", (0, 9), 5)], [Attr("v", "<i2")])
    sel = normalize_selection(tuple(slice(*i) if isinstance(i, tuple) else i
                                    for i in items), schema)
    for d in sel.dims:
        c = np.unique(d.coords)
        runs = len(c) == len(d.coords) and bool(len(c)) and c[-1] - c[0] == len(c) - 1
        assert d.contiguous == runs
        ascending = runs and bool(np.array_equal(d.coords, c))
        assert d.ascending_run == ascending  # a slice of step 1: output order = coordinates
    if sel.empty:
        return
    reads = []
    for ty in range(3):
        for tx in range(2):
            lo = (max(ty * 4, sel.dims[0].lo), max(tx * 5, sel.dims[1].lo))
            hi = (min(ty * 4 + 3, sel.dims[0].hi), min(tx * 5 + 4, sel.dims[1].hi))
            if lo[0] <= hi[0] and lo[1] <= hi[1]:
                reads.append(TileRead("f", 0, "v", "k", 0, 40, None, 0, (ty, tx),
                                      (ty * 4, tx * 5), (lo, hi)))
    for read, need in zip(reads, tile_needs(schema, sel, reads), strict=True):
        sets = [np.unique(d.within(lo, hi)[0] - o) for d, lo, hi, o in
                zip(sel.dims, *read.region, read.tile_origin, strict=True)]
        np.testing.assert_array_equal(need.ranges, tile_byte_ranges((4, 5), 2, "row-major",
                                                                     sets))
        assert need.selected_bytes == 2 * np.prod([len(s) for s in sets])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.integers(0, 12), st.integers(0, 12),
                          st.booleans()), min_size=1, max_size=4),
       st.integers(1, 8), st.sampled_from(["row-major", "col-major"]), st.booleans())
def test_box_ranges_match_decomposition(dims, cell, order, numpy_path) -> None:
    """A box's ranges by arithmetic are exactly the ranges decomposing its index sets gives,
    for boxes that are empty, whole, or take part of any dimension, by both the plain Python
    path of small boxes and the numpy path of large ones."""
    from tessera.format import decompose

    shape, runs = [], []
    for n, a, b, whole in dims:
        shape.append(n)
        runs.append((0, n) if whole else (min(a, n), min(max(a, b), n)))
    small = 0 if numpy_path else 10**9
    old = decompose.PLAIN_PYTHON_MAX
    decompose.PLAIN_PYTHON_MAX = small
    try:
        got = decompose.box_byte_ranges(shape, cell, order, runs)
    finally:
        decompose.PLAIN_PYTHON_MAX = old
    expected = tile_byte_ranges(shape, cell, order, [np.arange(a, b) for a, b in runs])
    assert got.dtype == np.int64 and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_box_ranges_refuse_runs_outside_the_tile() -> None:
    from tessera.format.decompose import box_byte_ranges

    with pytest.raises(ValueError, match="dimension 1"):
        box_byte_ranges((4, 4), 1, "row-major", [(0, 2), (3, 5)])
    with pytest.raises(ValueError, match="2 runs"):
        box_byte_ranges((4, 4, 4), 1, "row-major", [(0, 2), (0, 1)])
    with pytest.raises(ValueError, match="cell_order"):
        box_byte_ranges((4, 4), 1, "diagonal", [(0, 2), (0, 1)])
