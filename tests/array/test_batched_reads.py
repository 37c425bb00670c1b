"""Tiles that arrive in one planned request are placed as a batch on a worker thread
(tessera.array.read.batched): the values, requests and errors of tile-by-tile reads, on
memory and S3 stores, and never more held than the read's window."""

from __future__ import annotations

import dataclasses
import uuid

import numpy as np
import pytest

import tessera
from tessera.array.read import batched, direct


@pytest.fixture(params=["memory", "s3"])
def url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
        ) -> tuple[str, dict[str, str]]:
    monkeypatch.setattr(direct, "NOW_BYTES", 0)  # small memory reads take the loop too
    if request.param == "memory":
        return f"memory://batched-{uuid.uuid4().hex[:12]}", {}
    server = request.getfixturevalue("s3_server")
    return server.unique_url(), dict(server.storage_options())


def _placed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the tiles placed in batches."""
    counts: list[int] = []
    real = batched.place_batch

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        counts.append(len(args[2][1]))
        return real(*args, **kwargs)

    monkeypatch.setattr(batched, "place_batch", counted)
    return counts


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_batches_read_what_tile_by_tile_reads_read(url, codec, monkeypatch) -> None:
    data = np.random.default_rng(5).integers(0, 1000, (64, 48), dtype=np.int32)
    arr = tessera.from_numpy(f"{url[0].rstrip('/')}/b-{codec}", data, tile=(8, 8), codec=codec,
                             storage_options=url[1])
    arr.read()  # the first read also lists the fragments: not counted below
    placed = _placed(monkeypatch)
    for sel in [(slice(None), slice(None)), (slice(8, 40), slice(None)),
                (slice(3, 61), slice(None)), (slice(None), slice(0, 8))]:
        placed.clear()
        monkeypatch.setattr(batched, "BATCH_MIN_TILES", 4)
        monkeypatch.setattr(batched, "BATCH_MIN_BYTES", batched.THREAD_BYTES)
        got = arr[sel]
        batched_stats = arr.last_read.stats
        monkeypatch.setattr(batched, "BATCH_MIN_TILES", 10**9)  # tile by tile
        monkeypatch.setattr(batched, "BATCH_MIN_BYTES", 1 << 60)
        want = arr[sel]
        np.testing.assert_array_equal(got, data[sel])
        np.testing.assert_array_equal(want, data[sel])
        assert (batched_stats.requests, batched_stats.bytes_received) == (
            arr.last_read.stats.requests, arr.last_read.stats.bytes_received)
        if sel == (slice(None), slice(None)):
            assert sum(placed) == 48  # every tile of the full read came in a batch


@pytest.mark.parametrize("codec", ["zstd", None])
def test_a_damaged_tile_in_a_batch_is_named(url, codec, monkeypatch) -> None:
    """Compressed tiles, and raw ones placed a row at a time: the damaged tile is named."""
    data = np.arange(64 * 48, dtype=np.int32).reshape(64, 48)
    arr = tessera.from_numpy(f"{url[0].rstrip('/')}/damaged", data, tile=(8, 8), codec=codec,
                             storage_options=url[1])
    placed = _placed(monkeypatch)
    arr.read()
    assert placed
    target = arr.last_read.tile_reads[len(arr.last_read.tile_reads) // 2]
    raw = bytearray(arr.store.get(target.key))
    raw[target.offset + target.length // 2] ^= 0xFF
    arr.store.put(target.key, bytes(raw))
    fresh = tessera.open_array(arr.uri, storage_options=url[1])
    with pytest.raises(tessera.CorruptDataError, match="checksum mismatch") as caught:
        fresh.read()
    assert caught.value.tile == tuple(int(i) for i in target.tile_index)
    assert caught.value.attr == "data" and caught.value.key == target.key


def test_a_batch_larger_than_the_window_goes_tile_by_tile(url, monkeypatch) -> None:
    data = np.random.default_rng(6).normal(0, 1, (64, 64)).astype(np.float32)
    arr = tessera.from_numpy(f"{url[0].rstrip('/')}/window", data, tile=(8, 8),
                             storage_options=url[1])
    placed = _placed(monkeypatch)
    np.testing.assert_array_equal(arr.read(), data)
    assert placed and arr.last_read.window_peak_bytes <= arr.reads.window_bytes
    placed.clear()
    arr.reads = dataclasses.replace(arr.reads, window_bytes=2 * 8 * 8 * 4)  # two tiles
    np.testing.assert_array_equal(arr.read(), data)
    assert not placed and arr.last_read.window_peak_bytes <= 2 * 8 * 8 * 4


def test_two_or_three_large_tiles_in_a_request_are_a_batch_and_small_ones_are_not(
        url, monkeypatch) -> None:
    """A request of fewer than BATCH_MIN_TILES tiles is a batch only when its tiles decode
    to BATCH_MIN_BYTES (a whole zstd array's requests of 2-3 tiles of 1 MiB); a small read
    keeps its few tiles on the event loop."""
    data = np.random.default_rng(7).integers(0, 9, (16, 64), dtype=np.int32)
    arr = tessera.from_numpy(f"{url[0].rstrip('/')}/few", data, tile=(8, 8), codec="zstd",
                             storage_options=url[1])
    arr.read()
    placed = _placed(monkeypatch)
    monkeypatch.setattr(batched, "BATCH_MIN_TILES", 10**9)  # only the bytes rule applies
    sel = (slice(0, 8), slice(0, 24))  # three neighbouring tiles
    np.testing.assert_array_equal(arr[sel], data[sel])
    small = list(placed)
    monkeypatch.setattr(batched, "BATCH_MIN_BYTES", 3 * 8 * 8 * 4)
    np.testing.assert_array_equal(arr[sel], data[sel])
    merged = [len(r.tiles) for r in arr.last_read.plan.requests]
    assert small == [] and placed == [n for n in merged if n >= 2] and placed


@pytest.mark.parametrize("cell_order", ["row-major", "col-major"])
@pytest.mark.parametrize("tile_order", ["row-major", "col-major"])
@pytest.mark.parametrize(("shape", "tile", "dtype"), [
    ((64,), (4,), "<i2"), ((40, 48), (8, 6), "<i4"), ((12, 10, 16), (3, 5, 4), "<f8"),
    ((24, 32), (4, 8), "(3,)u1")])
def test_rows_of_whole_raw_tiles_are_placed_as_tile_by_tile(
        cell_order, tile_order, shape, tile, dtype, monkeypatch) -> None:
    """Raw tiles wholly selected and neighbours along the last dimension are placed a row at
    a time (one copy); the values are those of tile-by-tile placement, for any rank, cell
    and tile order and cells of several values, on whole reads and boxes cutting tiles."""
    from tessera.format.schema import ArraySchema, Attr, Dim

    monkeypatch.setattr(direct, "NOW_BYTES", 0)
    monkeypatch.setattr(batched, "BATCH_MIN_TILES", 2)
    rows: list[int] = []
    real = batched._place_row
    monkeypatch.setattr(batched, "_place_row",
                        lambda *a: rows.append(len(a[2])) or real(*a))
    schema = ArraySchema([Dim(f"d{i}", (0, n - 1), t) for i, (n, t) in
                          enumerate(zip(shape, tile, strict=True))], [Attr("v", dtype)],
                         cell_order=cell_order, tile_order=tile_order)
    arr = tessera.create_array(f"memory://rows-{uuid.uuid4().hex[:12]}", schema)
    cell = np.dtype(dtype)
    full = shape + cell.shape
    data = (np.arange(int(np.prod(full))) % 251).astype(cell.base).reshape(full)
    arr[...] = data
    boxes = [tuple(slice(None) for _ in shape),
             tuple(slice(1, n - 1) for n in shape),
             tuple(slice(t, n) for n, t in zip(shape, tile, strict=True))]
    for box in boxes:
        np.testing.assert_array_equal(arr[box], data[box])
    # Tiles stored column-major are neighbours in bytes along the first dimension: no rows.
    assert bool(rows) == (tile_order == "row-major" or len(shape) == 1)
