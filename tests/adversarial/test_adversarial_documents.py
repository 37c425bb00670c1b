"""Regression tests from the adversarial probe: damaged bookkeeping, a schema changed behind
the fragments' back and impossible table versions raised errors from outside Tessera's tree
(``AttributeError``, a bare ``ValueError``, deltalake's ``OverflowError``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tessera
from tessera.array.commits import META_CACHE
from tessera.errors import CorruptDataError, TableVersionError, TesseraError


def _array(tmp_path: Path) -> tuple[tessera.Array, str, str]:
    arr = tessera.from_numpy(f"file://{tmp_path}/a", np.arange(64, dtype=np.int32)
                             .reshape(8, 8), tile=(4, 4))
    keys = [o.key for o in arr.store.list("")]
    meta = next(k for k in keys if k.endswith("__meta.json"))
    schema = next(k for k in keys if k.endswith("__schema.json"))
    return arr, meta, schema


def _reopen_read(url: str) -> Any:
    META_CACHE().clear()  # the process keeps committed bookkeeping; a damaged one is re-read
    return tessera.open_array(url)[:, :]


@pytest.mark.parametrize("doc", [
    b"[]", b"17", b'{"format": "tessera.fragment"}',
    b'{"format":"tessera.fragment","version":5,"name":"n","timestamp":"t","kind":"dense",'
    b'"subarray":[[0,0],[7,7]],"tile_lo":[0,0],"tile_hi":[1,1],"cell_count":64,"attrs":{}}',
    b'{"format":"tessera.fragment","version":5,"name":"n","timestamp":1,"kind":"dense",'
    b'"subarray":[[0,0],[7,7]],"tile_lo":[0,0],"tile_hi":[1,1],"cell_count":64,'
    b'"attrs":{"v":[]}}',
    b'{"format":"tessera.fragment","version":5,"name":"n","timestamp":1,"kind":"dense",'
    b'"subarray":[[0,0],[7,7]],"tile_lo":[0,0],"tile_hi":[1,1],"cell_count":64,'
    b'"attrs":{"v":{"key":"k","codec":null,"offsets":[0,1],"sizes":[1],"crc32":[1]}}}',
    b'{"format":"tessera.fragment","version":7,"name":"n","timestamp":1,"kind":"dense",'
    b'"subarray":[[0,0],[7,7]],"tile_lo":[0,0],"tile_hi":[1,1],"cell_count":64,'
    b'"attrs":{"v":{"key":"k","codec":null,"offsets":"AAAA","sizes":"AQAAAAAAAAA=",'
    b'"crc32":"AQAAAA=="}}}',  # offsets: 3 bytes, not whole 8-byte values
    b'{"format":"tessera.fragment","version":7,"name":"n","timestamp":1,"kind":"dense",'
    b'"subarray":[[0,0],[7,7]],"tile_lo":[0,0],"tile_hi":[1,1],"cell_count":64,'
    b'"attrs":{"v":{"key":"k","codec":null,"offsets":"not base64!","sizes":"AQAAAAAAAAA=",'
    b'"crc32":"AQAAAA=="}}}',
    b'{"format":"tessera.fragment","version":5,"name":"n","timestamp":1,"kind":"weird",'
    b'"subarray":[[0,0],[7,7]],"tile_lo":[0,0],"tile_hi":[1,1],"cell_count":64,"attrs":{}}',
])
def test_damaged_bookkeeping_is_corrupt_data_naming_the_fragment(tmp_path: Path,
                                                                  doc: bytes) -> None:
    arr, meta, _ = _array(tmp_path)
    arr.store.put(meta, doc)
    with pytest.raises(CorruptDataError, match="unreadable fragment bookkeeping") as caught:
        _reopen_read(arr.uri)
    assert arr.uri in str(caught.value) and "fragment f" in str(caught.value)


@pytest.mark.parametrize("tile", [2, 8])
def test_a_schema_whose_tiling_changed_is_corrupt_data(tmp_path: Path, tile: int) -> None:
    arr, _, schema = _array(tmp_path)
    doc = json.loads(bytes(arr.store.get(schema)))
    doc["dims"][1]["tile"] = tile
    arr.store.put(schema, json.dumps(doc).encode())
    with pytest.raises(CorruptDataError, match="the schema's tiling was changed"):
        _reopen_read(arr.uri)


def test_a_schema_of_another_rank_is_corrupt_data(tmp_path: Path) -> None:
    arr, _, schema = _array(tmp_path)
    doc = json.loads(bytes(arr.store.get(schema)))
    doc["dims"].append({"name": "z", "domain": [0, 1], "tile": 2})
    arr.store.put(schema, json.dumps(doc).encode())
    with pytest.raises(CorruptDataError, match="2 dimensions, the array's schema 3"):
        _reopen_read(arr.uri)


def test_impossible_table_versions_are_tessera_errors(tmp_path: Path) -> None:
    pytest.importorskip("deltalake")
    from tessera.tables import TensorTable

    table = TensorTable.create(f"file://{tmp_path}/t")
    table.write("a", np.ones(3))
    with pytest.raises(TableVersionError, match=r"no version -1 \(versions 0..1\)"):
        TensorTable.open(table.url, version=-1)
    with pytest.raises(TableVersionError, match="no version 2"):
        TensorTable.open(table.url, version=2)
    with pytest.raises(tessera.BeforeFirstCommitError, match="before its first commit"):
        TensorTable.open(table.url, at="2026-01-01T00:00:00")  # UTC without a zone
    for bad in (True, 1.5, "yesterday"):
        with pytest.raises(TesseraError) as caught:
            TensorTable.open(table.url, version=bad)  # type: ignore[arg-type]
        assert isinstance(caught.value, (ValueError, TypeError)), bad
    with pytest.raises(TableVersionError):
        TensorTable.open(table.url, mode="w").restore(-3)
    assert TensorTable.open(table.url, version=np.int64(1)).version == 1


def test_new_bookkeeping_stores_per_tile_columns_as_base64_and_old_lists_still_read(
        tmp_path: Path) -> None:
    """Format 7 writes offsets, sizes and checksums as base64 of little-endian values; a
    fragment whose columns are JSON lists (format 6 and before) reads the same values."""
    arr, meta, _ = _array(tmp_path)
    want = tessera.open_array(arr.uri)[:, :]
    doc = json.loads(bytes(arr.store.get(meta)))
    tiles = doc["attrs"][next(iter(doc["attrs"]))]
    assert all(isinstance(tiles[k], str) for k in ("offsets", "sizes", "crc32"))
    from tessera.array.bookkeeping import tile_column
    for k in ("offsets", "sizes", "crc32"):
        tiles[k] = tile_column(tiles[k], k, k).tolist()
    doc["version"] = 6
    arr.store.put(meta, json.dumps(doc).encode())
    np.testing.assert_array_equal(_reopen_read(arr.uri), want)
