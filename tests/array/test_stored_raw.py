"""Dense tiles a codec does not shrink are stored raw: the bookkeeping marks them, every read
method (the pushdown server's too) returns what numpy holds, ranges of them move exact bytes,
damage is still caught, and bookkeeping that lies about them is refused."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
from box_reads import BOXES, read_box_checked
from hypothesis import HealthCheck, given, settings

import tessera
from tessera.array.bookkeeping import tile_column
from tessera.format.blocks import raw_block_table
from tessera.format.checksum import checksum
from tessera.server.app import create_app

TILE = (32, 16)
TILE_BYTES = 32 * 16 * 4


def _mixed(seed: int = 5) -> np.ndarray:
    """96 x 80 int32 in 3 x 5 tiles of 32 x 16: random full-range values (zstd cannot shrink
    them) except in tile (0, 0), which is all zeros, and tile (1, 2), small counts."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 2**31 - 1, (96, 80), dtype=np.int32)
    data[0:32, 0:16] = 0
    data[32:64, 32:48] = rng.integers(0, 4, (32, 16), dtype=np.int32)
    return data


def _meta_doc(arr: tessera.Array) -> tuple[str, dict]:
    """The key and document of the bookkeeping of the newest fragment ``arr`` sees."""
    fid = arr.fragments[-1].name.split("-", 1)[1]
    key = f"__fragments/{fid}/__meta.json"
    return key, json.loads(bytes(arr.store.get(key)))


@pytest.fixture(params=[512, 0], ids=["blocked", "whole"])
def mixed(request, store_url, monkeypatch):
    """The mixed array in zstd, in blocks of 512 decoded bytes or compressed whole, served
    by an in-process pushdown server."""
    monkeypatch.setenv("TESSERA_WRITE_BLOCK_BYTES", str(request.param))
    url, options = store_url
    data = _mixed()
    arr = tessera.from_numpy(f"{url.rstrip('/')}/mixed", data, tile=TILE, codec="zstd",
                             storage_options=options)
    app = create_app(tessera.open_store(url, **options), token="stored-raw-token-0001")
    arr.pushdown = tessera.PushdownClient("http://pushdown", token="stored-raw-token-0001",
                                          transport=httpx.ASGITransport(app))
    return arr, data


def test_tiles_the_codec_cannot_shrink_are_stored_raw(mixed) -> None:
    arr, data = mixed
    _, doc = _meta_doc(arr)
    tiles = doc["attrs"]["data"]
    # tiles in global (row-major) order: (0, 0) is 0 and (1, 2) is 7; the rest are random
    assert tiles["codec"] == "zstd"
    assert tiles["stored_raw"] == [t for t in range(15) if t not in (0, 7)]
    sizes = tile_column(tiles["sizes"], "sizes", "sizes").tolist()
    assert all(sizes[t] == TILE_BYTES for t in tiles["stored_raw"])
    assert sizes[0] < TILE_BYTES // 20 and sizes[7] < TILE_BYTES // 2
    blob = bytes(arr.store.get(tiles["key"]))
    # tile (0, 1): its stored bytes are the raw cells, row-major
    o = int(tile_column(tiles["offsets"], "offsets", "offsets")[1])
    np.testing.assert_array_equal(np.frombuffer(blob[o:o + TILE_BYTES], "<i4").reshape(TILE),
                                  data[0:32, 16:32])
    assert arr.fragments[0].nbytes == sum(sizes)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(*BOXES)
def test_every_method_reads_mixed_tiles_right(mixed, method, y0, ny, ys, x0, nx, xs):
    read_box_checked(*mixed, method, y0, ny, ys, x0, nx, xs)


def test_ranges_of_a_raw_stored_tile_move_exact_bytes(mixed) -> None:
    arr, data = mixed
    sel = (slice(40, 45), slice(20, 23))  # 5 rows x 3 cells of tile (1, 1), stored raw
    plan = arr.explain(sel, method="fetch")
    assert plan.methods == {"range": 1} and plan.totals.nbytes == 5 * 3 * 4
    assert len(plan.requests) == 5
    with tessera.collect_stats() as stats:
        np.testing.assert_array_equal(arr.read(sel, method="fetch"), data[sel])
    assert stats.bytes_received == 5 * 3 * 4
    # the all-zero tile is still compressed: one block (or the whole tile), not 5 ranges
    assert len(arr.explain((slice(0, 5), slice(0, 3)), method="fetch").requests) == 1
    np.testing.assert_array_equal(arr[tessera.Points(([41, 0, 90], [21, 2, 77]))],
                                  data[[41, 0, 90], [21, 2, 77]])


def test_a_damaged_raw_stored_tile_is_caught_whole(mixed) -> None:
    arr, data = mixed
    _, doc = _meta_doc(arr)
    tiles = doc["attrs"]["data"]
    blob = bytearray(arr.store.get(tiles["key"]))
    # tile (0, 1), stored raw
    blob[int(tile_column(tiles["offsets"], "offsets", "offsets")[1]) + 7] ^= 0xFF
    arr.store.put(tiles["key"], bytes(blob))
    for method in ("get", "pushdown"):
        with pytest.raises(tessera.CorruptDataError, match="checksum"):
            arr.read((slice(0, 32), slice(16, 32)), method=method)
    np.testing.assert_array_equal(arr.read((slice(0, 32), slice(0, 16)), method="get"),
                                  data[0:32, 0:16])  # the compressed tile beside it is intact


def test_updates_and_consolidation_keep_raw_and_compressed_tiles_right(store_url) -> None:
    url, options = store_url
    data = _mixed(9)
    arr = tessera.from_numpy(f"{url.rstrip('/')}/mixed-history", data, tile=TILE,
                             codec="zstd", storage_options=options)
    arr[10:50, 5:70] = np.zeros((40, 65), dtype=np.int32)  # turns some tiles compressible
    data[10:50, 5:70] = 0
    arr.consolidate()
    fresh = tessera.open_array(arr.uri, storage_options=options)
    assert len(fresh.fragments) == 1
    for method in ("auto", "get", "fetch"):
        np.testing.assert_array_equal(fresh.read(..., method=method), data)
    _, doc = _meta_doc(fresh)
    raw_tiles = set(doc["attrs"]["data"].get("stored_raw", []))
    assert 0 not in raw_tiles and 14 in raw_tiles  # tile (0, 0) is mostly zeros now


def test_raw_arrays_mark_nothing(store_url) -> None:
    url, options = store_url
    arr = tessera.from_numpy(f"{url.rstrip('/')}/raw", _mixed(), tile=TILE,
                             storage_options=options)
    _, doc = _meta_doc(arr)
    assert "stored_raw" not in doc["attrs"]["data"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: t.update(stored_raw=[99]), "only 15 tiles"),
    (lambda t: t.update(stored_raw="1"), "list of tile indices"),
    (lambda t: t.update(stored_raw=[0]), "must hold 2048 bytes"),  # tile 0 is compressed
    (lambda t: t.update(codec=None), "without a codec"),
])
def test_bookkeeping_that_lies_about_raw_tiles_is_refused(store_url, monkeypatch, change,
                                                          message) -> None:
    monkeypatch.setenv("TESSERA_WRITE_BLOCK_BYTES", "512")
    url, options = store_url
    arr = tessera.from_numpy(f"{url.rstrip('/')}/lies", _mixed(), tile=TILE, codec="zstd",
                             storage_options=options)
    key, doc = _meta_doc(arr)
    change(doc["attrs"]["data"])
    arr.store.put(key, json.dumps(doc).encode())
    with pytest.raises(tessera.CorruptDataError, match=message):
        tessera.open_array(arr.uri, storage_options=options)[0, 0]


def test_older_fragments_without_marks_still_read(store_url) -> None:
    """A format-4 fragment (before tiles were stored raw) reads as before."""
    url, options = store_url
    data = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
    arr = tessera.from_numpy(f"{url.rstrip('/')}/v4", data, tile=(32, 32), codec="zstd",
                             storage_options=options)
    key, doc = _meta_doc(arr)
    assert "stored_raw" not in doc["attrs"]["data"]
    doc["version"] = 4
    arr.store.put(key, json.dumps(doc).encode())
    fresh = tessera.open_array(arr.uri, storage_options=options)
    np.testing.assert_array_equal(fresh.read(..., method="fetch"), data)


def test_raw_block_table_covers_the_raw_bytes() -> None:
    raw = bytes(range(256)) * 5  # 1280 bytes: blocks of 512, 512, 256
    table = raw_block_table(raw, 512)
    assert table.sizes.tolist() == [512, 512, 256] and table.raw_nbytes == 1280
    assert int(table.crc32[2]) == checksum(raw[1024:], table.checksum)
