"""The per-handle index of many small updates: same answers as numpy, built once per
fragment list, rebuilt when the list changes, and only for the newest run of updates."""

from __future__ import annotations

import numpy as np
import pytest

import tessera
from tessera.array.read import updates as update_index


def _schema() -> tessera.ArraySchema:
    return tessera.ArraySchema([tessera.Dim("y", (0, 63), 16), tessera.Dim("x", (0, 47), 16)],
                               [tessera.Attr("a", "<i4", fill=-7),
                                tessera.Attr("rgb", "(3,)u1")])


def test_many_updates_read_like_numpy(store_url) -> None:
    url, options = store_url
    rng = np.random.default_rng(11)
    arr = tessera.create_array(f"{url.rstrip('/')}/upd", _schema(), storage_options=options)
    model = {"a": rng.integers(0, 1000, (64, 48), dtype=np.int32),
             "rgb": rng.integers(0, 255, (64, 48, 3), dtype=np.uint8)}
    arr.write({k: v.copy() for k, v in model.items()})
    for i in range(24):
        ys, xs = rng.integers(0, 64, 40), rng.integers(0, 48, 40)
        if i % 5 == 4:
            arr.delete_cells((ys, xs))
            model["a"][ys, xs], model["rgb"][ys, xs] = -7, 0
            continue
        vals = {"a": rng.integers(0, 1000, 40, dtype=np.int32),
                "rgb": rng.integers(0, 255, (40, 3), dtype=np.uint8)}
        arr.write_cells((ys, xs), vals)
        for j in range(40):  # repeated coordinates: the last one wins
            model["a"][ys[j], xs[j]], model["rgb"][ys[j], xs[j]] = vals["a"][j], vals["rgb"][j]
        if i == 10:  # a dense write in the middle: only the updates after it form the run
            arr.write({"a": np.full((32, 32), 5, np.int32),
                       "rgb": np.full((32, 32, 3), 9, np.uint8)}, origin=(16, 16))
            model["a"][16:48, 16:48], model["rgb"][16:48, 16:48] = 5, 9
            assert arr.fragments[-1].kind == "dense"
    reader = tessera.open_array(arr.uri, storage_options=options)
    for sel in [(slice(None), slice(None)), (slice(3, 60, 4), slice(47, 0, -3)),
                ([1, 5, 5, 63], slice(10, 40)), (slice(30, 41), slice(28, 42)), (7, 9)]:
        got = reader.read(sel, attrs=["a", "rgb"])
        np.testing.assert_array_equal(got["a"], model["a"][sel])
        np.testing.assert_array_equal(got["rgb"], model["rgb"][sel])
    assert len(reader._updates) == 1
    ((_, index),) = reader._updates.values()
    assert index is not None and len(index.fragments) == 13  # the updates after the dense write
    reader[0:2, 0:2]
    assert next(iter(reader._updates.values()))[1] is index  # built once per fragment list
    arr.write_cells(([0], [0]), {"a": np.array([123], np.int32),
                                 "rgb": np.array([[1, 2, 3]], np.uint8)})
    assert reader.read((0, 0), attrs=["a"])["a"] == 123
    ((_, fresh),) = reader._updates.values()
    assert fresh is not None and fresh is not index and len(fresh.fragments) == 14
    assert reader.last_read.fragments_used >= 2  # the base and the update at (0, 0)


def test_short_runs_and_non_inline_updates_use_the_general_path() -> None:
    arr = tessera.from_numpy("memory://upd-short", np.zeros((8, 8), np.int32), tile=(4, 4))
    for v in range(update_index.MIN_FRAGMENTS - 1):
        arr.write_cells(([1], [2]), np.array([v + 1], np.int32))
    assert arr[1, 2] == update_index.MIN_FRAGMENTS - 1
    assert [v for _, v in arr._updates.values()] == [None]
    arr.write_cells(([1], [2]), np.array([99], np.int32))
    assert arr[1, 2] == 99
    assert [v is not None for _, v in arr._updates.values()] == [True]


@pytest.mark.parametrize("n", [0, 1, 5])
def test_within_picks_the_box(n: int) -> None:
    rng = np.random.default_rng(n)
    coords = np.unique(rng.integers(0, 20, (max(n * 30, 1), 3)), axis=0)[: n * 30]
    vals = np.arange(len(coords))
    idx = update_index.MergedUpdates(("f",), np.array([[[0, 0, 0], [19, 19, 19]]]), 0, 0, coords,
                                     {"v": vals})
    lo, hi = (2, 5, 0), (15, 9, 19)
    got, got_vals = idx.within(lo, hi)
    want = np.all((coords >= lo) & (coords <= hi), axis=1)
    np.testing.assert_array_equal(got, coords[want])
    np.testing.assert_array_equal(got_vals["v"], vals[want])
