"""Reads of many whole tiles made in columns (tessera.array.read.whole): the values, plan,
requests, tile reads and errors of the tile-by-tile read, on every store; the reads it
does not take."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera
from tessera._sync import run_sync
from tessera.array.read import direct, whole
from tessera.array.read.tiles import plan_tile_reads
from tessera.array.read.whole import WholeTiles, execute_whole, whole_tiles
from tessera.format.schema import ArraySchema, Attr, Dim
from tessera.format.selection import normalize_selection
from tessera.query import refine
from tessera.query.plan import tile_needs
from tessera.query.refine import TileChoice
from tessera.storage.window import ByteWindow


def _choice(c: TileChoice) -> tuple[Any, ...]:
    n = c.need
    return (c.method, c.requests.tolist(), c.mix, n.tile, n.key, n.offset, n.length, n.raw,
            n.ranges.tolist(), n.selected_bytes, n.pushdown_read_bytes)


def _both_ways(arr: tessera.Array, sel: Any, monkeypatch: pytest.MonkeyPatch,
               ) -> tuple[Any, Any, Any, Any]:
    """The values and report of a read of ``sel`` on the loop's path, in columns and
    tile by tile."""
    selection = normalize_selection(sel, arr.schema)
    names = [a.name for a in arr.schema.attrs]
    out = []
    for least in (1, 1 << 60):
        monkeypatch.setattr(whole, "BULK_WHOLE_READS", least)
        values = arr._run_read(arr._read_async(selection, names, "auto", 0.0))
        out += [values, arr.last_read]
    return out[0], out[1], out[2], out[3]


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
       tiles=st.lists(st.integers(1, 5), min_size=3, max_size=3),
       box=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=3, max_size=3),
       column_major=st.booleans(), cells_column_major=st.booleans(),
       codec=st.sampled_from([None, "zstd"]), cells=st.sampled_from([None, "lz4"]))
def test_whole_tiles_read_what_tile_by_tile_reads_read(shape, tiles, box, column_major,
                                                       cells_column_major, codec, cells,
                                                       ) -> None:
    """Any rank, tile and cell order, codec (compressed and raw attributes side by side, one
    of cells of three values) and box of whole tiles: the values, the tile reads (every
    field, in order), the plan (choices, requests, totals, estimate) and the printed plan
    of both ways are equal."""
    ndim = len(shape)
    extent = tiles[:ndim]
    grid = [n * e for n, e in zip(shape, extent, strict=True)]
    schema = ArraySchema([Dim(f"d{i}", (0, g - 1), e) for i, (g, e) in
                          enumerate(zip(grid, extent, strict=True))],
                         [Attr("a", "<i4", codec=codec), Attr("b", "<f8"),
                          Attr("c", "(3,)u1", codec=cells)],
                         tile_order="col-major" if column_major else "row-major",
                         cell_order="col-major" if cells_column_major else "row-major")
    arr = tessera.create_array(f"memory://whole-{uuid.uuid4().hex}", schema)
    values = np.random.default_rng(ndim).integers(0, 9, grid).astype(np.int32)
    rgb = np.stack([values, values + 1, values + 2], axis=-1).astype(np.uint8)
    arr[...] = {"a": values, "b": values * 0.5, "c": rgb}
    sel = tuple(slice(min(a % n, b % n) * e, (max(a % n, b % n) + 1) * e)
                for (a, b), n, e in zip(box[:ndim], shape, extent, strict=True))
    with pytest.MonkeyPatch.context() as mp:
        # the planner's bulk steps from one tile (as from 256): small examples, same plan
        mp.setattr(refine, "BULK_DESCENT_TILES", 1)
        mp.setattr(refine, "BULK_MERGE_TILES", 1)
        got, report, want, reference = _both_ways(arr, sel, mp)
    assert isinstance(report.tile_reads, WholeTiles)
    assert isinstance(reference.tile_reads, list)
    for name in ("a", "b", "c"):
        np.testing.assert_array_equal(got[name], want[name])
    np.testing.assert_array_equal(got["a"], values[sel])
    np.testing.assert_array_equal(got["c"], rgb[sel])
    assert list(report.tile_reads) == reference.tile_reads
    assert report.tile_reads[-1] == reference.tile_reads[-1]
    assert report.tile_reads[1:3] == reference.tile_reads[1:3]
    plan, ref = report.plan, reference.plan
    assert [_choice(c) for c in plan.choices] == [_choice(c) for c in ref.choices]
    assert (plan.requests, plan.totals, plan.estimate, plan.methods) == (
        ref.requests, ref.totals, ref.estimate, ref.methods)
    assert str(plan) == str(ref) and plan.to_dict() == ref.to_dict()
    assert (report.fragments_used, report.fragments_skipped) == (
        reference.fragments_used, reference.fragments_skipped)


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_a_large_read_is_made_in_columns_on_every_store(store_url, codec,
                                                        monkeypatch) -> None:
    """A whole read of 2,048 tiles takes the columns on the calling thread's stores and on
    S3 alike, its values, requests and explain() those of the tile-by-tile read."""
    url, options = store_url
    data = np.random.default_rng(3).integers(0, 1 << 20, (512, 1024), dtype=np.int32)
    arr = tessera.from_numpy(f"{url.rstrip('/')}/large-{codec}", data, tile=(16, 16),
                             codec=codec, storage_options=options)
    arr.reads = tessera.ReadConfig(refresh_s=float("inf"))  # no listing among the requests
    np.testing.assert_array_equal(arr[:], data)
    np.testing.assert_array_equal(arr[:], data)
    assert isinstance(arr.last_read.tile_reads, WholeTiles)
    stats = arr.last_read.stats
    assert stats.requests == len(arr.last_read.plan.requests)
    monkeypatch.setattr(whole, "BULK_WHOLE_READS", 1 << 60)
    np.testing.assert_array_equal(arr[:], data)
    assert isinstance(arr.last_read.tile_reads, list)
    assert (stats.requests, stats.bytes_received) == (arr.last_read.stats.requests,
                                                      arr.last_read.stats.bytes_received)
    monkeypatch.undo()
    explained = arr.explain()
    assert explained.requests == arr.last_read.plan.requests
    np.testing.assert_array_equal(arr[64:448], data[64:448])  # a slab of whole tiles
    assert isinstance(arr.last_read.tile_reads, WholeTiles)
    metas = run_sync(arr._visible_metas())
    sel = normalize_selection((slice(None), slice(None)), arr.schema)
    reads, _, _ = plan_tile_reads(arr.schema, sel, metas, ["data"])
    assert arr._plan_needs(reads, tile_needs(arr.schema, sel, reads), "auto",
                           0.0).requests == explained.requests


def test_reads_it_does_not_take(monkeypatch) -> None:
    """A box cutting tiles, a stepped or reversed slice, two fragments under the box, too
    few tiles: read tile by tile (and right)."""
    monkeypatch.setattr(direct, "NOW_BYTES", 0)  # every read through the loop's path
    data = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
    arr = tessera.from_numpy(f"memory://not-whole-{uuid.uuid4().hex}", data, tile=(2, 2))
    metas = run_sync(arr._visible_metas())

    def taken(sel: Any, least: int = 1) -> bool:
        return whole_tiles(arr.schema, normalize_selection(sel, arr.schema), metas,
                           ["data"], least) is not None

    assert taken((slice(0, 64), slice(0, 64))) and taken((slice(2, 6), 4)) is False
    assert taken((slice(2, 40), slice(4, 60)))
    assert not taken((slice(1, 40), slice(4, 60)))  # cuts tiles
    assert not taken((slice(2, 40), slice(4, 59)))
    assert not taken((slice(2, 6), slice(4, 8)))  # fewer tiles than the planner groups
    assert not taken((slice(0, 64, 2), slice(None)))
    assert not taken((slice(63, None, -1), slice(None)))
    assert not taken((slice(0, 64), slice(0, 64)), least=1025)  # 1,024 tiles
    for sel in [(slice(1, 63), slice(None)), (slice(None, None, 2), slice(None))]:
        np.testing.assert_array_equal(arr[sel], data[sel])
        assert isinstance(arr.last_read.tile_reads, list)
    arr[10:12, 10:12] = np.zeros((2, 2), np.int32)
    data[10:12, 10:12] = 0
    np.testing.assert_array_equal(arr[:], data)
    assert isinstance(arr.last_read.tile_reads, list)
    monkeypatch.setattr(whole, "BULK_WHOLE_READS", 256)
    np.testing.assert_array_equal(arr[32:], data[32:])  # one fragment under this box
    assert isinstance(arr.last_read.tile_reads, WholeTiles)


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_a_damaged_tile_is_named(codec, monkeypatch) -> None:
    monkeypatch.setattr(direct, "NOW_BYTES", 0)
    data = np.arange(128 * 64, dtype=np.int32).reshape(128, 64)
    arr = tessera.from_numpy(f"memory://whole-damaged-{uuid.uuid4().hex}", data, tile=(4, 2),
                             codec=codec)
    arr.read()
    reads = arr.last_read.tile_reads
    assert isinstance(reads, WholeTiles)
    target = reads[len(reads) // 2 + 3]
    raw = bytearray(arr.store.get(target.key))
    raw[target.offset + target.length // 2] ^= 0xFF
    arr.store.put(target.key, bytes(raw))
    fresh = tessera.open_array(arr.uri)
    with pytest.raises(tessera.CorruptDataError, match="checksum mismatch") as caught:
        fresh.read()
    assert caught.value.tile == target.tile_index
    assert caught.value.attr == "data" and caught.value.key == target.key
    assert caught.value.fragment == target.fragment


def test_plans_it_leaves_to_the_tile_by_tile_executor() -> None:
    """Requests that hold parts of a tile (a range read in two), and one request a tile
    (gets left unmerged), are read by the general executor: the values are right."""
    data = np.arange(64 * 64, dtype=np.int16).reshape(64, 64)
    arr = tessera.from_numpy(f"memory://whole-split-{uuid.uuid4().hex}", data, tile=(2, 2))
    metas = run_sync(arr._visible_metas())
    sel = normalize_selection((slice(None), slice(None)), arr.schema)
    tiles = whole_tiles(arr.schema, sel, metas, ["data"])
    assert tiles is not None and arr._whole_read(sel, metas, ["data"], "get", 0.0) is None
    plan = arr._whole_read(sel, metas, ["data"], "auto", 0.0)[1]
    first = plan.requests[0]
    assert len(first.tiles) > 2
    half = (tiles.offsets[first.tiles[1]] + tiles.offsets[first.tiles[2]]) // 2 + 1
    split = [dataclasses.replace(first, stop=int(half)),
             dataclasses.replace(first, start=int(half))]
    gets = [dataclasses.replace(first, method="get", start=int(tiles.offsets[t]),
                                stop=int(tiles.offsets[t] + tiles.sizes[t]), tiles=(t,))
            for t in range(len(tiles))]
    for requests in (split + plan.requests[1:], gets):
        odd = dataclasses.replace(plan, requests=requests)
        got = run_sync(execute_whole(arr.store.aio, arr.schema, sel, tiles, odd, arr.uri,
                                     ByteWindow(1 << 20)))
        np.testing.assert_array_equal(got["data"], data)


def test_tiles_stored_raw_beside_compressed_ones(monkeypatch) -> None:
    """A compressed attribute whose incompressible tiles are stored raw: both kinds in one
    read in columns, placed and decoded right, the same requests as tile by tile."""
    monkeypatch.setattr(direct, "NOW_BYTES", 0)
    data = np.zeros((256, 64), np.int32)  # 1,024 tiles
    data[128:] = np.random.default_rng(9).integers(-(1 << 31), 1 << 31, (128, 64), np.int64)
    arr = tessera.from_numpy(f"memory://whole-raw-{uuid.uuid4().hex}", data, tile=(4, 4),
                             codec="zstd")
    np.testing.assert_array_equal(arr[:], data)
    reads = arr.last_read.tile_reads
    assert isinstance(reads, WholeTiles)
    assert reads.raw.any() and not reads.raw.all()
    requests = arr.last_read.plan.requests
    monkeypatch.setattr(whole, "BULK_WHOLE_READS", 1 << 60)
    np.testing.assert_array_equal(arr[:], data)
    assert arr.last_read.plan.requests == requests
