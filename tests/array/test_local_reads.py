"""Whole tiles of a folder store read in batches on worker threads (raw tiles slab by slab):
the same answers, the requests counted, and damaged, truncated or missing data objects named
as on any read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera.array.read import local as reader_mod
from tessera.errors import InvalidRangeError, ObjectNotFoundError, PermanentStorageError


def test_read_file_range_reads_a_folder_stores_objects(tmp_path: Path) -> None:
    store = tessera.open_store(tmp_path.as_uri())
    store.put("a/b.bin", bytes(range(100)))
    aio = store.aio
    assert aio.is_local
    with tessera.collect_stats() as stats:
        assert aio.read_file_range("a/b.bin", 10, 5) == bytes(range(10, 15))
        assert aio.read_file_range("a/b.bin", 95, 10) == bytes(range(95, 100))  # ends first
        assert aio.read_file_range("a/b.bin", 100, 0) == b""
        with pytest.raises(InvalidRangeError):
            aio.read_file_range("a/b.bin", 100, 1)
        with pytest.raises(ObjectNotFoundError):
            aio.read_file_range("a/none.bin", 0, 1)
    ranges = stats.by_method["range"]
    assert (ranges.requests, ranges.bytes_received) == (5, 10)
    with pytest.raises(tessera.InvalidKeyError):
        aio.read_file_range("../escape", 0, 1)
    memory = tessera.open_store("memory://file-range").aio
    assert not memory.is_local
    with pytest.raises(PermanentStorageError, match="folder stores only"):
        memory.read_file_range("k", 0, 1)


def test_read_file_chunks_fills_the_buffer_slab_by_slab(tmp_path: Path) -> None:
    store = tessera.open_store(tmp_path.as_uri())
    store.put("a/b.bin", bytes(range(100)))
    aio = store.aio
    buffer = memoryview(bytearray(16))
    with tessera.collect_stats() as stats:
        slabs = [bytes(s) for s in aio.read_file_chunks("a/b.bin", 10, 40, buffer)]
        assert slabs == [bytes(range(a, min(a + 16, 50))) for a in (10, 26, 42)]
        tail = [bytes(s) for s in aio.read_file_chunks("a/b.bin", 90, 40, buffer)]
        assert tail == [bytes(range(90, 100))]  # the object ends first
        assert list(aio.read_file_chunks("a/b.bin", 100, 0, buffer)) == []
        with pytest.raises(InvalidRangeError):
            list(aio.read_file_chunks("a/b.bin", 100, 1, buffer))
        with pytest.raises(ObjectNotFoundError):
            list(aio.read_file_chunks("a/none.bin", 0, 1, buffer))
    ranges = stats.by_method["range"]
    assert (ranges.requests, ranges.bytes_received) == (5, 50)  # one request per range
    with pytest.raises(tessera.InvalidKeyError):
        list(aio.read_file_chunks("../escape", 0, 1, buffer))
    with pytest.raises(ValueError, match="buffer"):
        list(aio.read_file_chunks("a/b.bin", 0, 1, memoryview(bytearray())))
    with pytest.raises(PermanentStorageError, match="folder stores only"):
        list(tessera.open_store("memory://file-chunks").aio.read_file_chunks(
            "k", 0, 1, buffer))


@pytest.fixture(params=[None, 1], ids=["slabs-4m", "slabs-1-row"])
def slab_bytes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Raw tiles read in slabs of the default size (one slab per small tile), or of one
    slowest-axis slice each."""
    if request.param is not None:
        monkeypatch.setattr(reader_mod, "STREAM_SLAB_BYTES", request.param)


@pytest.fixture
def batched(slab_bytes: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
            ) -> tuple[tessera.Array, np.ndarray]:
    """A folder-store array with raw and zstd tiles, read in local batches from any size."""
    monkeypatch.setattr(reader_mod, "LOCAL_BATCH_BYTES", 0)
    schema = tessera.ArraySchema(
        [tessera.Dim("y", (0, 63), 16), tessera.Dim("x", (0, 47), 16)],
        [tessera.Attr("a", "<i4"), tessera.Attr("z", "<f8", codec="zstd")])
    arr = tessera.create_array((tmp_path / "arr").as_uri(), schema)
    data = np.arange(64 * 48, dtype=np.int32).reshape(64, 48)
    arr.write({"a": data, "z": data * 0.5})
    return arr, data


def _data_key(arr: tessera.Array, attr: str) -> str:
    meta = next(o.key for o in arr.store.list("__fragments") if o.key.endswith("meta.json"))
    return json.loads(bytes(arr.store.get(meta)))["attrs"][attr]["key"]


def test_batched_reads_match_and_count_one_request_per_tile(batched, monkeypatch) -> None:
    arr, data = batched
    calls: list[tuple[str, str]] = []
    cls = type(arr.store.aio)
    whole, slabs = cls.read_file_range, cls.read_file_chunks

    def spy_whole(self, key, offset, length):  # type: ignore[no-untyped-def]
        calls.append(("whole", key))
        return whole(self, key, offset, length)

    def spy_slabs(self, key, offset, length, buffer):  # type: ignore[no-untyped-def]
        calls.append(("slabs", key))
        return slabs(self, key, offset, length, buffer)

    monkeypatch.setattr(cls, "read_file_range", spy_whole)
    monkeypatch.setattr(cls, "read_file_chunks", spy_slabs)
    got = arr.read(attrs=["a", "z"], method="get")
    # every tile read on a worker thread: raw ones in slabs, zstd ones whole
    assert sorted(calls) == sorted([("slabs", _data_key(arr, "a"))] * 12
                                   + [("whole", _data_key(arr, "z"))] * 12)
    np.testing.assert_array_equal(got["a"], data)
    np.testing.assert_array_equal(got["z"], data * 0.5)
    assert arr.last_read.stats.by_method["range"].requests == 2 * 4 * 3  # 12 tiles each
    # a box that cuts tiles, and strided selections, land where numpy puts them
    sel = (slice(5, 60, 3), slice(40, 2, -2))
    np.testing.assert_array_equal(arr.read(sel, attrs=["a"], method="get")["a"], data[sel])


def test_batched_reads_name_a_damaged_tile(batched) -> None:
    arr, _ = batched
    key = _data_key(arr, "a")
    blob = bytearray(bytes(arr.store.get(key)))
    blob[16 * 16 * 4 * 5 + 3] ^= 0x55  # tile 5 in the global order: (1, 2)
    arr.store.put(key, bytes(blob))
    with pytest.raises(tessera.CorruptDataError,
                       match=r"attribute 'a', tile \(1, 2\): checksum mismatch"):
        arr.read(attrs=["a"], method="get")
    np.testing.assert_array_equal(arr.read((slice(0, 16), slice(0, 16)), attrs=["a"])["a"],
                                  np.arange(64 * 48).reshape(64, 48)[:16, :16])


def test_batched_reads_name_truncated_and_missing_objects(batched) -> None:
    arr, _ = batched
    key = _data_key(arr, "a")
    path = Path(arr.store.aio.url.path) / key
    path.write_bytes(path.read_bytes()[:16 * 16 * 4 * 7 + 10])  # ends inside tile 7
    with pytest.raises(tessera.CorruptDataError, match="is truncated"):
        arr.read(attrs=["a"], method="get")
    path.unlink()
    with pytest.raises(tessera.CorruptDataError, match=f"data object {key} is missing"):
        arr.read(attrs=["a"], method="get")


@pytest.mark.parametrize("order", ["row-major", "col-major"])
@pytest.mark.parametrize("slab", [1, 200, None])
def test_slab_reads_place_every_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     order: str, slab: int | None) -> None:
    """Raw tiles in both cell orders, with vector cells, read in slabs that split tiles
    unevenly, for boxes that cut tiles and dropped dimensions: where numpy puts them."""
    monkeypatch.setattr(reader_mod, "LOCAL_BATCH_BYTES", 0)
    if slab is not None:
        monkeypatch.setattr(reader_mod, "STREAM_SLAB_BYTES", slab)
    schema = tessera.ArraySchema(
        [tessera.Dim("t", (0, 4), 2), tessera.Dim("y", (0, 20), 7),
         tessera.Dim("x", (0, 12), 5)],
        [tessera.Attr("rgb", "3u1"), tessera.Attr("v", "<f8", fill=-1.0)],
        cell_order=order, tile_order=order)
    arr = tessera.create_array((tmp_path / "arr").as_uri(), schema)
    rgb = np.random.default_rng(3).integers(0, 255, (5, 21, 13, 3), dtype=np.uint8)
    v = np.random.default_rng(4).random((5, 21, 13))
    arr.write({"rgb": rgb, "v": v})
    for sel in [(slice(None),) * 3, (slice(1, 4), slice(3, 19), slice(2, 11)),
                (2, slice(6, 15), slice(None)), (slice(None), 20, slice(4, 5))]:
        got = arr.read(sel, method="get")
        np.testing.assert_array_equal(got["rgb"], rgb[sel])
        np.testing.assert_array_equal(got["v"], v[sel])
        tiles = len(arr.last_read.tile_reads)
        assert arr.last_read.stats.by_method["range"].requests == tiles
