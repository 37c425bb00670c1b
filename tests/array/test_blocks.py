"""Blocked compressed tiles: blocks are found, fetched, checked and decoded one by one; every
read method and the pushdown server return what numpy holds; damage is caught per block."""

from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
import pytest
from box_reads import BOXES, read_box_checked
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from tessera.array.fragment import FRAGMENT_VERSION
from tessera.array.read.tiles import plan_tile_reads
from tessera.format.blocks import TileBlocks, decode_blocked, encode_blocked
from tessera.format.codecs import get_codec
from tessera.format.selection import normalize_selection
from tessera.pushdown.framing import Limits, ProtocolError
from tessera.pushdown.read_items import Slice, TileItem, encode_read_request, parse_read_request
from tessera.server.app import create_app
from tessera.server.cache import TileCache
from tessera.server.service import ReadService


def _table(sizes: list[int], block_bytes: int, raw: int) -> TileBlocks:
    return TileBlocks(block_bytes, raw, np.array(sizes, np.int64), np.zeros(len(sizes), np.uint32))


def test_block_span_and_encoded_ranges_by_hand() -> None:
    t = _table([5, 7, 3, 9], 10, 35)  # decoded bytes 0-9, 10-19, 20-29, 30-34
    assert t.starts.tolist() == [0, 5, 12, 15, 24]
    assert t.block_span(np.array([[3, 4], [9, 11]])).tolist() == [0, 1]
    assert t.block_span(np.array([[30, 35]])).tolist() == [3]
    assert t.block_span(np.empty((0, 2))).tolist() == []
    # blocks 0-1 are neighbours (one encoded range), block 3 stands alone
    assert t.encoded_ranges(np.array([[0, 1], [19, 20], [34, 35]])).tolist() == [[0, 12],
                                                                                [15, 24]]
    assert t.covered([(0, 12)]).tolist() == [0, 1]
    assert t.covered([(0, 4), (4, 13)]).tolist() == [0, 1]  # pieces that touch
    assert t.covered([(1, 12)]).tolist() == [1]
    assert t.covered([]).tolist() == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=40), st.integers(1, 20),
       st.lists(st.tuples(st.integers(0, 900), st.integers(0, 60)), max_size=45),
       st.lists(st.tuples(st.integers(0, 900), st.integers(0, 60)), max_size=45))
def test_plain_and_vectorised_block_lookups_agree(sizes, block_bytes, raw_picks, enc_picks):
    """Block lookups of a few ranges run in plain Python, of many with numpy: both give
    the same blocks, spans and covered blocks, for ranges empty, touching, overlapping and
    in any order."""
    from tessera.format import decompose as module

    raw_nbytes = (len(sizes) - 1) * block_bytes + 1
    table = _table(sizes, block_bytes, raw_nbytes)
    raw = np.array([(min(a, raw_nbytes), min(a + n, raw_nbytes)) for a, n in raw_picks],
                   dtype=np.int64).reshape(-1, 2)
    enc = [(a, a + n) for a, n in enc_picks]

    def lookups(small: int) -> tuple[list[int], list[list[int]], list[int], list[list[int]]]:
        old = module.PLAIN_PYTHON_MAX
        module.PLAIN_PYTHON_MAX = small
        try:
            span = table.block_span(raw)
            return (span.tolist(), table.spans(span).reshape(-1, 2).tolist(),
                    table.covered(enc).tolist(),
                    table.encoded_ranges(raw).reshape(-1, 2).tolist())
        finally:
            module.PLAIN_PYTHON_MAX = old

    assert lookups(10**6) == lookups(-1)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 700), st.lists(st.tuples(st.integers(0, 2999),
                                                                     st.integers(1, 300)),
                                                           min_size=1, max_size=6),
       st.sampled_from(["zstd", "lz4", "gzip:1", "blosc"]))
def test_the_blocks_of_any_ranges_decode_to_those_bytes(nbytes, block_bytes, picks, codec):
    raw = np.random.default_rng(nbytes).integers(0, 6, nbytes, dtype=np.uint8).tobytes()
    encoded, blocks = encode_blocked(get_codec(codec), raw, block_bytes)
    assert blocks.count == -(-nbytes // block_bytes) and blocks.raw_nbytes == nbytes
    assert bytes(decode_blocked(get_codec(codec), encoded, blocks)) == raw
    ranges = np.array([(min(a, nbytes - 1), min(a + n, nbytes)) for a, n in picks])
    fetched = blocks.encoded_ranges(ranges)
    # Only the fetched bytes are known: everything else is garbage.
    buf = np.full(len(encoded), 0xAB, dtype=np.uint8)
    for a, b in fetched:
        buf[a:b] = np.frombuffer(encoded, np.uint8)[a:b]
    wanted = blocks.covered([(int(a), int(b)) for a, b in fetched])
    assert wanted.tolist() == blocks.block_span(ranges).tolist()
    out = decode_blocked(get_codec(codec), buf, blocks, wanted, check=True)
    for a, b in ranges:
        assert out[a:b].tobytes() == raw[a:b]


def test_a_damaged_block_is_named(tmp_path) -> None:
    raw = bytes(range(256)) * 8
    encoded, blocks = encode_blocked(get_codec("zstd"), raw, 512)
    bad = bytearray(encoded)
    bad[int(blocks.starts[2]) + 1] ^= 0xFF
    with pytest.raises(tessera.CorruptDataError, match="block 2"):
        decode_blocked(get_codec("zstd"), bytes(bad), blocks, np.array([2]), check=True,
                       where="here")
    out = decode_blocked(get_codec("zstd"), bytes(bad), blocks, np.array([0, 1, 3]),
                         check=True)
    assert out[:1024].tobytes() == raw[:1024]
    with pytest.raises(tessera.CorruptDataError, match="bytes"):
        decode_blocked(get_codec("zstd"), encoded[:-1], blocks)


@pytest.fixture
def blocked(store_url, monkeypatch):
    """A zstd array in blocks of 512 decoded bytes (32 rows of a 64 x 16 int32 tile hold
    four blocks), served by an in-process pushdown server."""
    monkeypatch.setenv("TESSERA_WRITE_BLOCK_BYTES", "512")
    url, options = store_url
    data = np.random.default_rng(3).integers(0, 50, (96, 80), dtype=np.int32)
    arr = tessera.from_numpy(f"{url.rstrip('/')}/blocked", data, tile=(32, 16), codec="zstd",
                             storage_options=options)
    app = create_app(tessera.open_store(url, **options), token="blocked-reads-token-01")
    arr.pushdown = tessera.PushdownClient("http://pushdown", token="blocked-reads-token-01",
                                          transport=httpx.ASGITransport(app))
    return arr, data


def test_the_bookkeeping_keeps_a_block_table(blocked, store_url) -> None:
    arr, _ = blocked
    meta_key = next(o.key for o in arr.store.list("__fragments") if o.key.endswith("meta.json"))
    doc = json.loads(bytes(arr.store.get(meta_key)))
    assert doc["version"] == FRAGMENT_VERSION and doc["attrs"]["data"]["checksum"] == "crc32c"
    blocks = doc["attrs"]["data"]["blocks"]
    assert blocks["block_bytes"] == 512 and blocks["per_tile"] == 4
    assert blocks["tile_bytes"] == 32 * 16 * 4
    # a table that does not add up is refused when the fragment is opened
    blocks["block_bytes"] = 1024
    arr.store.put(meta_key, json.dumps(doc).encode())
    with pytest.raises(tessera.CorruptDataError, match="blocks"):
        tessera.open_array(arr.uri, storage_options=store_url[1])[0, 0]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(*BOXES)
def test_every_method_reads_blocked_tiles_right(blocked, method, y0, ny, ys, x0, nx, xs):
    arr, _ = blocked
    read_box_checked(*blocked, method, y0, ny, ys, x0, nx, xs)
    if method in ("merge", "fetch"):
        assert set(arr.last_read.plan.methods) <= {"range"}


def test_ranges_fetch_only_the_needed_blocks(blocked) -> None:
    arr, data = blocked
    sel = (slice(40, 44), slice(None))  # 4 rows: one block of each of 5 tiles
    moved = {}
    for method in ("get", "fetch"):
        with tessera.collect_stats() as stats:
            np.testing.assert_array_equal(arr.read(sel, method=method), data[sel])
        moved[method] = stats.bytes_received
    plan = arr.explain(sel, method="fetch")
    assert plan.methods == {"range": 5} and plan.totals.nbytes == moved["fetch"]
    assert moved["fetch"] * 3 < moved["get"]
    np.testing.assert_array_equal(arr[tessera.Points(([41, 90], [3, 77]))],
                                  data[[41, 90], [3, 77]])


def test_the_pushdown_server_reads_only_the_needed_blocks(blocked) -> None:
    arr, data = blocked
    sel = (slice(40, 44), slice(None))
    with tessera.collect_stats() as stats:  # the in-process server's requests land here too
        np.testing.assert_array_equal(arr.read(sel, method="pushdown"), data[sel])
    assert arr.last_read.pushdown_fallbacks == 0
    whole = arr.explain(sel, method="get").totals.nbytes
    blocks = arr.explain(sel, method="fetch").totals.nbytes
    assert stats.by_method["range"].bytes_received == blocks < whole / 3
    assert "get" not in stats.by_method


def test_a_damaged_block_fails_a_partial_read_and_spares_the_rest(blocked) -> None:
    arr, data = blocked
    key = next(o.key for o in arr.store.list("__fragments") if o.key.endswith("data.data"))
    raw = bytearray(arr.store.get(key))
    raw[-3] ^= 0xFF  # the last block of the last tile (rows 64-95, columns 64-79)
    arr.store.put(key, bytes(raw))
    np.testing.assert_array_equal(arr.read((slice(64, 70), slice(64, 80)), method="fetch"),
                                  data[64:70, 64:80])  # the tile's first block is intact
    for method in ("fetch", "get"):
        with pytest.raises(tessera.CorruptDataError) as info:
            arr.read((slice(90, 96), slice(64, 80)), method=method)
        assert "(2, 4)" in str(info.value) and "checksum" in str(info.value)
    np.testing.assert_array_equal(arr.read((slice(64, 70), slice(64, 80)), method="pushdown"),
                                  data[64:70, 64:80])
    # the server refuses the damaged block; the client's fallback fetch finds it damaged too
    with pytest.raises(tessera.CorruptDataError, match="checksum"):
        arr.read((slice(90, 96), slice(64, 80)), method="pushdown")


def test_fragments_without_blocks_still_read(store_url, monkeypatch) -> None:
    """Compressed tiles written whole (format 2, or block_bytes=0) are fetched whole."""
    url, options = store_url
    data = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
    arr = tessera.from_numpy(f"{url.rstrip('/')}/blocked-mixed", data, tile=(32, 32),
                             codec="zstd", storage_options=options)
    arr.writes = tessera.WriteConfig(block_bytes=0)
    arr[0:16, 0:16] = -data[0:16, 0:16]
    expected = data.copy()
    expected[0:16, 0:16] *= -1
    for method in ("auto", "get", "fetch"):
        np.testing.assert_array_equal(arr.read((slice(0, 40), slice(5, 9)), method=method),
                                      expected[0:40, 5:9])
    plan = arr.explain((slice(0, 8), slice(0, 4)), method="fetch")
    assert plan.methods == {"get": 1}  # the newest fragment's tile has no blocks


def test_protocol_carries_and_checks_block_tables() -> None:
    raw = np.arange(1024, dtype=np.int32).tobytes()
    encoded, blocks = encode_blocked(get_codec("zstd"), raw, 1000)
    item = TileItem("a", "k", 0, len(encoded), "zstd", 0, "<i4", (), (32, 32), "row-major",
                    (Slice(0, 2, 1), Slice(0, 32, 1)), blocks)
    back = parse_read_request(encode_read_request([item]), Limits()).items[0]
    assert isinstance(back, TileItem) and back.blocks is not None
    assert back.blocks.sizes.tolist() == blocks.sizes.tolist()
    assert back.blocks.raw_nbytes == 4096 and back.blocks.block_bytes == 1000
    doc = json.loads(encode_read_request([item]))
    for change, message in [({"sizes": blocks.sizes.tolist()[:-1]}, "list of 5"),
                            ({"sizes": [1] * 5}, "add up"),
                            ({"tile_bytes": 4001}, "tile_bytes is 4001"),
                            ({"block_bytes": 0}, "block_bytes")]:
        bad = json.loads(json.dumps(doc))
        bad["reads"][0]["blocks"].update(change)
        with pytest.raises(ProtocolError, match=message):
            parse_read_request(json.dumps(bad).encode(), Limits())
    bad = json.loads(json.dumps(doc))
    bad["reads"][0]["codec"] = None
    with pytest.raises(ProtocolError, match="compressed"):
        parse_read_request(json.dumps(bad).encode(), Limits())


def test_write_config_sets_the_block_size(monkeypatch) -> None:
    monkeypatch.setenv("TESSERA_WRITE_BLOCK_BYTES", "1000")
    data = np.arange(4096, dtype=np.int32).reshape(64, 64)
    arr = tessera.from_numpy("memory://blocks-config", data, tile=(32, 32), codec="lz4")
    assert arr.writes.block_bytes == 1000
    meta = next(o.key for o in arr.store.list("__fragments") if o.key.endswith("meta.json"))
    assert json.loads(bytes(arr.store.get(meta)))["attrs"]["data"]["blocks"]["per_tile"] == 5
    arr.writes = tessera.WriteConfig(block_bytes=4096)
    arr[0:8, 0:8] = data[0:8, 0:8]  # a second fragment, in blocks of 4096 bytes
    arr.consolidate()  # so is the consolidated one
    metas = [json.loads(bytes(arr.store.get(o.key))) for o in arr.store.list("__fragments")
             if o.key.endswith("meta.json")]
    assert sorted(m["attrs"]["data"]["blocks"]["per_tile"] for m in metas) == [1, 1, 5]
    np.testing.assert_array_equal(arr.read(method="fetch"), data)
    with pytest.raises(tessera.ConfigError, match="block_bytes"):
        tessera.WriteConfig(block_bytes=-1)
    monkeypatch.setenv("TESSERA_WRITE_BLOCK_BYTES", "lots")
    with pytest.raises(tessera.ConfigError):
        tessera.open_array(arr.uri)


def test_the_server_answers_blocks_from_a_cached_whole_tile(blocked) -> None:
    """A tile the server's cache holds whole is sliced from there, not read again."""
    arr, data = blocked
    metas = asyncio.run(arr._visible_metas())
    reads = plan_tile_reads(arr.schema, normalize_selection(..., arr.schema), metas, ["data"])[0]
    read = next(r for r in reads if r.tile_index == (0, 0))

    def item(rows: int) -> TileItem:
        return TileItem("", read.key, read.offset, read.length, read.codec, read.crc32, "<i4",
                        (), (32, 16), "row-major", (Slice(0, rows, 1), Slice(0, 16, 1)),
                        read.blocks, read.checksum)

    service = ReadService(arr.store.aio, TileCache(1 << 20))
    # 4 rows: one block read; 32 rows: the whole tile, now cached; 4 rows again: no read
    for rows, requests in ((4, 1), (32, 1), (4, 0)):
        before = arr.store.stats.requests
        [got], _ = asyncio.run(service.read([item(rows)]))
        np.testing.assert_array_equal(got["cells"], data[:rows, :16])
        assert arr.store.stats.requests - before == requests
    assert service.cache.hits == 1


def test_a_handle_makes_each_tiles_block_table_once(blocked) -> None:
    """The tables (and their summed offsets) are kept with the fragment's bookkeeping; a
    copy of the bookkeeping with other tiles starts its own."""
    import dataclasses

    arr, data = blocked
    arr.read()
    assert arr._last_visible is not None  # the fragments the read used
    tiles = arr._last_visible[0].attrs["data"]
    first = tiles.blocks(0)
    assert first is not None and tiles.blocks(0) is first and first.count == 4
    assert np.array_equal(arr.read(), data)
    raw = dataclasses.replace(tiles, stored_raw=np.ones(len(tiles.sizes), bool))
    assert raw.blocks(0) is None and tiles.blocks(0) is first
