"""The engine's fast paths give the same answers as the general ones: threaded encoding and
landing of large tiles, raw tiles serialised while they upload, inline small sparse
fragments and their per-handle cache, and the single-pass merge of sparse updates."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

import tessera
from tessera.array import fragment as fragment_mod
from tessera.array.commits import META_CACHE
from tessera.array.read import local as reader_mod


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make 'large' small, so the threaded and streamed paths run on test-sized arrays
    (raw attributes are serialised while they upload, a few tiles per chunk)."""
    monkeypatch.setattr(reader_mod, "THREAD_BYTES", 256)
    monkeypatch.setattr(reader_mod, "LOCAL_BATCH_BYTES", 256)
    monkeypatch.setattr(fragment_mod, "STREAM_BYTES", 1)
    monkeypatch.setattr(fragment_mod, "STREAM_CHUNK_BYTES", 2000)
    monkeypatch.setattr(fragment_mod, "LOCAL_STREAM_CHUNK_BYTES", 2000)
    real = fragment_mod._work_groups
    monkeypatch.setattr(fragment_mod, "_work_groups",
                        lambda n, nbytes, min_bytes=0: real(n, nbytes, min_bytes=1))


@pytest.mark.parametrize("order", ["row-major", "col-major"])
def test_threaded_writes_and_reads_match_numpy(store_url, small_thresholds, order) -> None:
    url, options = store_url
    rng = np.random.default_rng(7)
    schema = tessera.ArraySchema(
        [tessera.Dim("y", (0, 59), 16), tessera.Dim("x", (0, 46), 10)],
        [tessera.Attr("a", "<i4", fill=-1),
         tessera.Attr("b", "<f8", codec="zstd"),
         tessera.Attr("rgb", "(3,)u1")],
        cell_order=order, tile_order=order)
    arr = tessera.create_array(f"{url.rstrip('/')}/big", schema, storage_options=options)
    model = {"a": np.full((60, 47), -1, np.int32), "b": np.full((60, 47), np.nan),
             "rgb": np.zeros((60, 47, 3), np.uint8)}
    for box in [((3, 5), (50, 41)), ((0, 0), (59, 46)), ((10, 12), (33, 20))]:
        (y0, x0), (y1, x1) = box
        shape = (y1 - y0 + 1, x1 - x0 + 1)
        vals = {"a": rng.integers(0, 1000, shape, dtype=np.int32),
                "b": rng.random(shape),
                "rgb": rng.integers(0, 255, (*shape, 3), dtype=np.uint8)}
        arr.write(vals, origin=(y0, x0))
        for k, v in vals.items():
            model[k][y0:y1 + 1, x0:x1 + 1] = v
        for sel in [(slice(None), slice(None)), (slice(2, 57, 3), slice(40, 0, -4)),
                    ([5, 5, 30], slice(9, 30))]:
            got = arr.read(sel)
            for k in model:
                np.testing.assert_array_equal(got[k], model[k][sel], err_msg=f"{k} {sel}")


def test_sparse_updates_merge_newest_wins_with_deletes(store_url, small_thresholds) -> None:
    url, options = store_url
    rng = np.random.default_rng(8)
    truth = rng.integers(0, 100, (40, 40), dtype=np.int32)
    arr = tessera.from_numpy(f"{url.rstrip('/')}/upd", truth, tile=(16, 16),
                             storage_options=options)
    for step in range(12):
        flat = rng.choice(1600, 60, replace=True)  # repeats inside one write: last one wins
        coords = (flat // 40, flat % 40)
        if step % 4 == 3:
            arr.delete_cells(coords)
            truth[coords] = 0
        else:
            vals = rng.integers(100, 200, len(flat), dtype=np.int32)
            arr.write_cells(coords, vals)
            for y, x, v in zip(*coords, vals, strict=True):
                truth[y, x] = v
        for sel in [(slice(None), slice(None)), (slice(5, 31), slice(7, 40, 2))]:
            np.testing.assert_array_equal(arr[sel], truth[sel])
    reader = tessera.open_array(arr.uri, storage_options=options)
    first = reader[:, :]
    np.testing.assert_array_equal(reader[:, :], first)  # served from the decoded cache
    np.testing.assert_array_equal(first, truth)


def test_small_sparse_fragments_are_inline_large_ones_are_not(store_url) -> None:
    url, options = store_url
    arr = tessera.from_numpy(f"{url.rstrip('/')}/inl", np.zeros((300, 300), np.int64),
                             storage_options=options)
    small = arr.write_cells((np.array([1, 2]), np.array([3, 4])), np.array([5, 6]))
    n = 100_000
    flat = np.random.default_rng(9).choice(90_000, n, replace=True)
    big = arr.write_cells((flat // 300, flat % 300), np.arange(n, dtype=np.int64))
    objects = [o.key for o in arr.store.list("__fragments")]
    small_id = small.name.split("-", 1)[1]
    big_id = big.name.split("-", 1)[1]
    assert [k for k in objects if small_id in k] == [f"__fragments/{small_id}/__meta.json"]
    assert f"__fragments/{big_id}/__coords.data" in objects
    model = np.zeros((300, 300), np.int64)
    model[1, 3], model[2, 4] = 5, 6
    last = {int(f): i for i, f in enumerate(flat)}  # repeats: the last one given wins
    model.reshape(-1)[list(last)] = list(last.values())
    np.testing.assert_array_equal(arr[:, :], model)
    reader = tessera.open_array(arr.uri, storage_options=options)
    with tessera.collect_stats() as stats:
        got = reader[0:3, 0:5]
    np.testing.assert_array_equal(got, model[0:3, 0:5])
    # the dense tile's planned requests, two (coordinates, values) for the large fragment's
    # first data tile; the small fragment's cells came with its bookkeeping
    planned = len(reader.last_read.plan.requests)
    assert stats.by_method["range"].requests == planned + 2


def test_damaged_inline_tiles_are_reported(store_url) -> None:
    url, options = store_url
    arr = tessera.from_numpy(f"{url.rstrip('/')}/bad", np.zeros((8, 8), np.int32),
                             storage_options=options)
    info = arr.write_cells((np.array([1]), np.array([2])), np.array([9], np.int32))
    key = f"__fragments/{info.name.split('-', 1)[1]}/__meta.json"
    doc = json.loads(bytes(arr.store.get(key)))
    raw = bytearray(base64.b64decode(doc["attrs"]["data"]["inline"]))
    raw[0] ^= 0xFF
    doc["attrs"]["data"]["inline"] = base64.b64encode(bytes(raw)).decode()
    arr.store.put(key, json.dumps(doc).encode())
    with pytest.raises(tessera.CorruptDataError, match=f"fragment {info.name}.*checksum"):
        tessera.open_array(arr.uri, storage_options=options)[:, :]
    doc["attrs"]["data"]["inline"] = "not base64!"
    arr.store.put(key, json.dumps(doc).encode())
    META_CACHE().clear()  # the process keeps committed bookkeeping, which never changes
    with pytest.raises(tessera.CorruptDataError, match="unreadable fragment bookkeeping"):
        tessera.open_array(arr.uri, storage_options=options)[:, :]


def test_reads_see_fragments_committed_by_others_since_the_last_read(store_url) -> None:
    """Handles that list at every read (refresh_s=0) speculate with the previous read's
    fragments while listing; a new fragment from another handle must still show up."""
    url, options = store_url
    writer = tessera.from_numpy(f"{url.rstrip('/')}/spec", np.zeros((8, 8), np.int32),
                                tile=(4, 4), storage_options=options)
    reader = tessera.open_array(writer.uri, storage_options=options, refresh_s=0)
    assert reader[2, 3] == 0
    with tessera.collect_stats() as stats:  # nothing new: one listing, beside the data
        assert reader[2, 3] == 0
    assert stats.by_method["list"].requests == 1
    writer[2:3, 3:4] = np.full((1, 1), 7, np.int32)
    assert reader[2, 3] == 7
    writer.write_cells((np.array([2]), np.array([3])), np.array([9], np.int32))
    assert reader[2, 3] == 9 and writer[2, 3] == 9
    writer.consolidate()
    writer.vacuum(orphan_grace_s=0, force=True)
    assert reader[2, 3] == 9  # the old fragments are gone: read again with the new list
    np.testing.assert_array_equal(reader[:, :], writer[:, :])


def test_streamed_write_checksums_guard_every_tile(store_url, small_thresholds) -> None:
    """A streamed write's checksums are the tiles' own: a damaged tile is still caught."""
    url, options = store_url
    schema = tessera.ArraySchema([tessera.Dim("y", (0, 63), 8), tessera.Dim("x", (0, 63), 8)],
                                 [tessera.Attr("v", "<i4")])
    arr = tessera.create_array(f"{url.rstrip('/')}/streamed", schema, storage_options=options)
    truth = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
    arr.write(truth)
    np.testing.assert_array_equal(arr[:, :], truth)
    (frag,) = arr.fragments
    store = tessera.open_store(f"{url.rstrip('/')}/streamed", **options)
    key = next(o.key for o in store.list() if o.key.endswith("v.data"))
    blob = bytearray(bytes(store.get(key)))
    assert len(blob) == truth.nbytes
    blob[5 * 256 + 3] ^= 0xFF  # one byte of tile 5
    store.put(key, bytes(blob))
    fresh = tessera.open_array(f"{url.rstrip('/')}/streamed", storage_options=options)
    with pytest.raises(tessera.CorruptDataError, match="checksum"):
        fresh.read((slice(None), slice(None)), method="get")
    assert frag.name


def test_an_attribute_parses_its_dtype_once(monkeypatch) -> None:
    """Readers ask for cell shapes on worker threads; numpy parses "(3,)u1" with Python's ast
    module, which CPython 3.11 cannot run on two threads at once (a SystemError seen in this
    suite), so the parsing happens once, when the attribute is made."""
    from tessera.format import schema as schema_mod

    attr = tessera.Attr("rgb", "(3,)u1")

    def refuse(*args, **kwargs):
        raise AssertionError("np.dtype parsed again")

    monkeypatch.setattr(schema_mod.np, "dtype", refuse)
    assert attr.cell_shape == (3,) and attr.np_dtype == np.uint8 and attr.cell_nbytes == 3


@pytest.mark.parametrize(("method", "sel", "hops"), [
    ("merge", (slice(100, 121), slice(200, 221)), 0),  # a few KiB of one 4 MiB tile
    ("get", (slice(100, 121), slice(200, 221)), 1),    # the tile checked on a thread only
    ("get", (slice(0, 1024), slice(0, 1024)), 2),      # checked and placed on threads
])
def test_worker_threads_take_only_large_work(monkeypatch, method, sel, hops) -> None:
    """A thread hop costs a small read through a 20 ms link measurably (~0.1-0.3 ms each):
    a tile is decoded on a worker thread when decoding makes THREAD_BYTES or more (the
    fetched part of it, for ranges), and placed there when it gives that many cells."""
    import asyncio

    truth = np.arange(1024 * 2048, dtype=np.int32).reshape(1024, 2048)
    arr = tessera.from_numpy(f"memory://thread-hops-{method}-{hops}", truth, tile=(1024, 1024))
    real = asyncio.to_thread
    calls = []

    async def counted(fn, *args, **kwargs):
        calls.append(fn)
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    np.testing.assert_array_equal(arr.read(sel, method=method), truth[sel])
    assert len(calls) == hops
