"""Fragments indexed by space: the tile reads planned through the index are exactly those a
brute-force check of every tile of every fragment against every newer dense fragment gives,
small reads find their fragment without a scan, and an open after a consolidation loads only
the live fragments' bookkeeping."""

from __future__ import annotations

import itertools
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera
from tessera._sync import run_sync
from tessera.array.commits import META_CACHE
from tessera.array.read.fragment_index import SCAN_BELOW, fragment_index, meta_box
from tessera.array.read.tiles import plan_tile_reads
from tessera.format.layout import covered, intersect, tile_box
from tessera.format.selection import normalize_selection


def _brute_force(schema, sel, metas):
    """(rank, tile) of every dense tile read the old rule makes: a fragment's part of a tile
    is read unless the newer dense fragments' boxes cover it."""
    bbox = sel.bounds()
    out = set()
    for rank, meta in enumerate(metas):
        fbox = intersect(meta_box(meta), bbox)
        if fbox is None or not meta.is_dense:
            continue
        newer = [b for m in metas[rank + 1:] if m.is_dense
                 and (b := intersect(meta_box(m), bbox)) is not None]
        spans = [range((a - lw) // e, (b - lw) // e + 1) for a, b, lw, e in
                 zip(fbox[0], fbox[1], schema.lower, schema.tile_shape, strict=True)]
        for tile in itertools.product(*spans):
            region = intersect(tile_box(schema, tile), fbox)
            if region is not None and not (newer and covered(region, newer, limit=10**9)):
                out.add((rank, tile, region))
    return out


boxes = st.tuples(st.integers(0, 59), st.integers(1, 30), st.integers(0, 49), st.integers(1, 30))


@settings(max_examples=40, deadline=None)
@given(writes=st.lists(boxes, min_size=1, max_size=40), read=boxes, sparse=st.booleans())
def test_planned_reads_are_the_brute_force_ones(writes, read, sparse) -> None:
    arr = tessera.from_numpy(f"memory://findex-{uuid.uuid4().hex}",
                             np.zeros((60, 50), np.int32), tile=(7, 9))
    model = np.zeros((60, 50), np.int32)
    for i, (y, h, x, w) in enumerate(writes, start=1):
        h, w = min(h, 60 - y), min(w, 50 - x)
        if sparse and i % 3 == 0:  # sparse cells never hide older ones
            arr.write_cells(([y], [x]), np.array([i], np.int32))
            model[y, x] = i
        else:
            arr[y:y + h, x:x + w] = np.full((h, w), i, np.int32)
            model[y:y + h, x:x + w] = i
    y, h, x, w = read
    h, w = min(h, 60 - y), min(w, 50 - x)
    sel = normalize_selection((slice(y, y + h), slice(x, x + w)), arr.schema)
    metas = run_sync(arr._visible_metas())
    reads, _, _ = plan_tile_reads(arr.schema, sel, metas, ["data"])
    got = {(r.rank, r.tile_index, r.region) for r in reads}
    assert got == _brute_force(arr.schema, sel, metas)
    ranks = [r.rank for r in reads]
    assert ranks == sorted(ranks)  # oldest first: newer cells are painted over older ones
    np.testing.assert_array_equal(arr[y:y + h, x:x + w], model[y:y + h, x:x + w])


def test_newest_cover_through_buckets_matches_a_scan() -> None:
    arr = tessera.from_numpy("memory://findex-cover", np.zeros((100, 100), np.int32),
                             tile=(10, 10))
    rng = np.random.default_rng(1)
    for i in range(2 * SCAN_BELOW):
        y, x = rng.integers(0, 90, 2)
        arr[y:y + 10, x:x + 10] = np.full((10, 10), i, np.int32)
    arr[0:100, 60:100] = np.ones((100, 40), np.int32)  # a wide one: not bucketed
    metas = run_sync(arr._visible_metas())
    index = fragment_index(metas, arr.schema)
    assert len(index) > SCAN_BELOW
    for _ in range(300):
        y, x = rng.integers(0, 95, 2)
        box = ((int(y), int(x)), (int(y) + 4, int(x) + 4))
        want = None
        for rank in range(len(metas) - 1, -1, -1):
            if intersect(meta_box(metas[rank]), box) is not None:
                holds = intersect(meta_box(metas[rank]), box) == box
                want = rank if holds else None
                break
        assert index.newest_cover(box) == want
        assert index.meeting(box) == [
            r for r in range(len(metas)) if intersect(meta_box(metas[r]), box) is not None]


def test_an_open_after_consolidation_loads_only_live_bookkeeping(store_url) -> None:
    url = f"{store_url[0]}/cons"
    arr = tessera.from_numpy(url, np.zeros((40, 40), np.int32), tile=(10, 10),
                             storage_options=store_url[1])
    for i in range(12):
        arr[i:i + 3, i:i + 3] = np.full((3, 3), i + 1, np.int32)
    want = arr[:, :]
    replaced = {m.name for m in run_sync(arr._visible_metas())}
    consolidated = arr.consolidate()
    assert consolidated is not None and consolidated.name.split("-")[1].startswith("r")
    arr[39, 39] = 7  # a write after the consolidation stays live
    want[39, 39] = 7
    META_CACHE().clear()
    fresh = tessera.open_array(url, storage_options=store_url[1])
    np.testing.assert_array_equal(fresh[:, :], want)
    assert not set(fresh._metas) & replaced  # none of the replaced bookkeeping was loaded
    assert len(fresh._metas) == 2
    # vacuum still sees everything it removes
    assert arr.vacuum(orphan_grace_s=0, force=True) > 0
    np.testing.assert_array_equal(tessera.open_array(url, storage_options=store_url[1])[:, :],
                                  want)


def test_a_plan_too_large_for_the_cache_is_not_kept() -> None:
    from tessera.query.need import TileNeed
    from tessera.query.plan_cache import TILE_BYTES, PlanCache

    cache = PlanCache(10 * TILE_BYTES)
    made = []

    def make(needs):
        made.append(len(needs))
        from tessera.query.plan import plan_needs
        from tessera.storage.url import parse_store_url
        return plan_needs(needs, url=parse_store_url("memory://x"))

    def needs(n):
        return [TileNeed(f"t{i}", "k", 64 * i, 64, True, np.array([[0, 64]]), 64)
                for i in range(n)]

    cache.plan(needs(11), ("auto",), make)
    cache.plan(needs(11), ("auto",), make)
    assert made == [11, 11] and cache.hits == 0 and len(cache._cache) == 0
    cache.plan(needs(2), ("auto",), make)
    cache.plan(needs(2), ("auto",), make)
    assert cache.hits == 1


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=3),
       tiles=st.lists(st.integers(1, 7), min_size=3, max_size=3),
       cut=st.lists(st.tuples(st.integers(0, 39), st.integers(0, 39)), min_size=3, max_size=3),
       column_major=st.booleans(), codec=st.sampled_from([None, "zstd"]))
def test_bulk_tile_reads_are_the_tile_by_tile_ones(shape, tiles, cut, column_major, codec,
                                                    ) -> None:
    """A plain read of one fragment's tiles made with array operations gives the reads (in
    order, every field) that the tile-by-tile path gives: any rank, tile order and codec,
    two attributes, boxes cutting tiles at any place."""
    import tessera.array.read.tiles as tiles_mod
    from tessera.format.schema import ArraySchema, Attr, Dim

    ndim = len(shape)
    dims = [Dim(f"d{i}", (0, n - 1), min(tiles[i], n)) for i, n in enumerate(shape)]
    schema = ArraySchema(dims, [Attr("a", "<i4", codec=codec), Attr("b", "<f8")],
                         tile_order="col-major" if column_major else "row-major")
    arr = tessera.create_array(f"memory://bulk-{uuid.uuid4().hex}", schema)
    values = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    arr[...] = {"a": values, "b": values.astype(np.float64)}
    box = tuple(slice(min(a, b) % n, max(a, b) % n + 1)
                for (a, b), n in zip(cut[:ndim], shape, strict=True))
    sel = normalize_selection(box, arr.schema)
    metas = run_sync(arr._visible_metas())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tiles_mod, "BULK_TILES", 1)
        bulk = plan_tile_reads(arr.schema, sel, metas, ["a", "b"])
        mp.setattr(tiles_mod, "BULK_TILES", 1 << 60)
        single = plan_tile_reads(arr.schema, sel, metas, ["a", "b"])
    assert bulk == single
    assert [(r.blocks is None) for r in bulk[0]] == [(r.blocks is None) for r in single[0]]
