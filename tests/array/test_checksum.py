"""Tile checksums: new fragments use CRC-32C; fragments checksummed with zlib's CRC-32
(formats 1-3) still read and still catch damage; unknown checksums are refused clearly."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

import httpx
import numpy as np
import pytest

import tessera
from tessera.array.bookkeeping import tile_column
from tessera.array.fragment import FRAGMENT_VERSION
from tessera.format.checksum import CHECKSUMS, DEFAULT_CHECKSUM, check_algorithm, checksum
from tessera.pushdown.framing import PROTOCOL_VERSION, Limits, ProtocolError
from tessera.pushdown.read_items import Slice, TileItem, parse_read_request
from tessera.server.app import create_app

METHODS = ["auto", "get", "merge", "fetch", "pushdown"]


def test_known_check_values_and_continuation() -> None:
    # The standard check values of both CRCs over "123456789".
    assert checksum(b"123456789", "crc32c") == 0xE3069283
    assert checksum(b"123456789", "crc32") == 0xCBF43926
    data = np.arange(1000, dtype=np.int32)
    for name in CHECKSUMS:
        whole = checksum(data, name)
        assert whole == checksum(data[600:], name, checksum(data[:600], name))
        assert whole == checksum(memoryview(data.tobytes()), name)
    assert DEFAULT_CHECKSUM == "crc32c"
    with pytest.raises(ValueError, match=r"tile 3: unknown checksum 'md5'.*crc32, crc32c"):
        check_algorithm("md5", "tile 3")


def _metas(arr: tessera.Array) -> list[str]:
    return sorted(o.key for o in arr.store.list("__fragments") if o.key.endswith("meta.json"))


def _tile_groups(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [*doc["attrs"].values(), *([doc["coords"]] if "coords" in doc else [])]


def _rewrite_as_zlib_crc32(arr: tessera.Array, meta_key: str) -> None:
    """Turn a fragment's bookkeeping into what format 3 wrote: zlib CRC-32 of every tile and
    block, no checksum name."""
    doc = json.loads(bytes(arr.store.get(meta_key)))
    doc["version"] = 3
    for tiles in _tile_groups(doc):
        assert tiles.pop("checksum") == "crc32c"
        blob = (base64.b64decode(tiles["inline"]) if "inline" in tiles
                else bytes(arr.store.get(tiles["key"])))
        # format 3 listed the per-tile columns as JSON lists of numbers
        tiles["offsets"], tiles["sizes"] = (tile_column(tiles[k], k, k).tolist()
                                            for k in ("offsets", "sizes"))
        chunks = [blob[o:o + n] for o, n in zip(tiles["offsets"], tiles["sizes"], strict=True)]
        tiles["crc32"] = [zlib.crc32(c) for c in chunks]
        if "blocks" in tiles:
            b = tiles["blocks"]
            sizes = np.frombuffer(base64.b64decode(b["sizes"]), "<u4").reshape(len(chunks), -1)
            crcs = [zlib.crc32(chunk[int(s - n):int(s)]) for chunk, row in
                    zip(chunks, sizes, strict=True) for n, s in zip(row, np.cumsum(row),
                                                                     strict=True)]
            b["crc32"] = base64.b64encode(np.asarray(crcs, "<u4").tobytes()).decode()
    arr.store.put(meta_key, json.dumps(doc).encode())


def _history(store_url: tuple[str, dict[str, Any]], name: str,
             ) -> tuple[tessera.Array, dict[str, np.ndarray]]:
    """A raw and a blocked zstd attribute, a dense update and a sparse update."""
    url, options = store_url
    schema = tessera.ArraySchema(
        [tessera.Dim("y", (0, 63), 32), tessera.Dim("x", (0, 47), 16)],
        [tessera.Attr("raw", "<i4"), tessera.Attr("packed", "<f8", codec="zstd")])
    arr = tessera.create_array(f"{url.rstrip('/')}/{name}", schema, storage_options=options)
    arr.writes = tessera.WriteConfig(block_bytes=512)
    rng = np.random.default_rng(7)
    model = {"raw": rng.integers(-99, 99, (64, 48), dtype=np.int32),
             "packed": rng.random((64, 48))}
    arr.write(model)
    arr[10:30, 5:40] = {"raw": model["raw"][10:30, 5:40] * 2,
                        "packed": model["packed"][10:30, 5:40] * 2}
    model["raw"][10:30, 5:40] *= 2
    model["packed"][10:30, 5:40] *= 2
    ys, xs = rng.integers(0, 64, 50), rng.integers(0, 48, 50)
    arr.write_cells((ys, xs), {"raw": np.full(50, 7, np.int32), "packed": np.full(50, 0.5)})
    model["raw"][ys, xs] = 7
    model["packed"][ys, xs] = 0.5
    return arr, model


def _check_reads(arr: tessera.Array, model: dict[str, np.ndarray],
                 options: dict[str, Any]) -> None:
    fresh = tessera.open_array(arr.uri, storage_options=options)
    app = create_app(tessera.open_store(arr.uri, **options), token="checksum-test-token-01")
    fresh.pushdown = tessera.PushdownClient("http://pushdown", token="checksum-test-token-01",
                                            transport=httpx.ASGITransport(app))
    for method in METHODS:
        for sel in ((slice(None), slice(None)), (slice(3, 40), slice(20, 22))):
            got = fresh.read(sel, attrs=["raw", "packed"], method=method)
            for name, values in got.items():
                np.testing.assert_array_equal(values, model[name][sel], err_msg=method)
            assert fresh.last_read.pushdown_fallbacks == 0  # the server checked them too


def test_new_fragments_are_checksummed_with_crc32c(store_url) -> None:
    arr, model = _history(store_url, "crc32c-history")
    for key in _metas(arr):
        doc = json.loads(bytes(arr.store.get(key)))
        assert doc["version"] == FRAGMENT_VERSION
        for tiles in _tile_groups(doc):
            assert tiles["checksum"] == "crc32c"
            if "inline" not in tiles:
                blob = bytes(arr.store.get(tiles["key"]))
                o, n, crc = (int(tile_column(tiles[k], k, k)[0])
                             for k in ("offsets", "sizes", "crc32"))
                assert crc == checksum(blob[o:o + n], "crc32c")
    _check_reads(arr, model, store_url[1])


def test_fragments_checksummed_with_zlib_crc32_still_read_and_catch_damage(store_url) -> None:
    arr, model = _history(store_url, "crc32-history")
    for key in _metas(arr):
        _rewrite_as_zlib_crc32(arr, key)
    _check_reads(arr, model, store_url[1])
    # damage one byte of the first dense fragment's raw tile 0: reading it fails
    dense = [json.loads(bytes(arr.store.get(k))) for k in _metas(arr)]
    data_key = next(d["attrs"]["raw"]["key"] for d in dense
                    if d["kind"] == "dense" and d["subarray"] == [[0, 0], [63, 47]])
    blob = bytearray(bytes(arr.store.get(data_key)))
    blob[5] ^= 0xFF
    arr.store.put(data_key, bytes(blob))
    fresh = tessera.open_array(arr.uri, storage_options=store_url[1])
    with pytest.raises(tessera.CorruptDataError, match="checksum mismatch"):
        fresh.read((slice(0, 32), slice(0, 16)), attrs=["raw"], method="get")


def test_an_unknown_checksum_is_refused_clearly(store_url) -> None:
    arr, _ = _history(store_url, "crc-unknown")
    key = _metas(arr)[0]
    doc = json.loads(bytes(arr.store.get(key)))
    doc["attrs"]["raw"]["checksum"] = "sha3-999"
    arr.store.put(key, json.dumps(doc).encode())
    fresh = tessera.open_array(arr.uri, storage_options=store_url[1])
    with pytest.raises(tessera.CorruptDataError, match="unknown checksum 'sha3-999'"):
        fresh[:]  # (a read meeting the fragment: its bookkeeping is loaded when one does)


def _item(**change: Any) -> TileItem:
    base: dict[str, Any] = dict(array="a", key="k", offset=0, length=16, codec=None, crc32=5,
                                dtype="<i4", cell_shape=(), tile_shape=(2, 2),
                                cell_order="row-major", select=(Slice(0, 2, 1), Slice(0, 1, 1)))
    base.update(change)
    return TileItem(**base)


def _body(doc: dict[str, Any]) -> bytes:
    return json.dumps({"protocol": PROTOCOL_VERSION, "reads": [doc]}).encode()


def test_the_pushdown_protocol_names_the_checksum() -> None:
    doc = _item(checksum="crc32c").to_json()
    assert parse_read_request(_body(doc), Limits()).items[0].checksum == "crc32c"
    # a request without the field (an older client) means zlib's CRC-32
    del doc["checksum"]
    assert parse_read_request(_body(doc), Limits()).items[0].checksum == "crc32"
    doc["checksum"] = "adler"
    with pytest.raises(ProtocolError, match=r"checksum must be one of crc32, crc32c, not 'adler'"):
        parse_read_request(_body(doc), Limits())
