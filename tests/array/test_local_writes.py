"""Large raw writes to a folder store: tiles filled on one thread while another writes them
straight into a staging file, which is renamed over the object when every chunk is in. The
same answers, one request counted, and nothing half-written left behind on failure."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera.array import fragment as fragment_mod
from tessera.errors import PermanentStorageError, StorageError


def _staging_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if "#" in p.name]


def test_write_file_chunks_writes_the_object_whole(tmp_path: Path) -> None:
    store = tessera.open_store(tmp_path.as_uri())
    chunks = [b"ab", memoryview(b"cd"), b"", np.arange(3, dtype="<i4"),
              np.arange(4, dtype="<i2")[::2]]  # not contiguous: copied
    expected = (b"abcd" + np.arange(3, dtype="<i4").tobytes()
                + np.arange(4, dtype="<i2")[::2].tobytes())
    with tessera.collect_stats() as stats:
        res = store.aio.write_file_chunks("a/b/k.bin", iter(chunks))
    assert bytes(store.get("a/b/k.bin")) == expected
    assert res.etag == store.head("a/b/k.bin").etag
    puts = stats.by_method["put"]
    assert (puts.requests, puts.bytes_sent) == (1, len(expected))
    store.aio.write_file_chunks("a/b/k.bin", [b"new"])  # replaces the object
    assert bytes(store.get("a/b/k.bin")) == b"new"
    assert [o.key for o in store.list("a")] == ["a/b/k.bin"]
    assert not _staging_files(tmp_path)


def test_write_file_chunks_failing_chunk_leaves_the_object_as_it_was(tmp_path: Path) -> None:
    store = tessera.open_store(tmp_path.as_uri())
    store.put("k", b"old")

    def chunks():
        yield b"x" * 1000
        raise RuntimeError("producer broke")

    with tessera.collect_stats() as stats, pytest.raises(RuntimeError, match="producer broke"):
        store.aio.write_file_chunks("k", chunks())
    assert bytes(store.get("k")) == b"old"
    assert not _staging_files(tmp_path)
    assert stats.by_method["put"].failures == 1
    with pytest.raises(PermanentStorageError, match="bytes-like"):
        store.aio.write_file_chunks("k", [b"a", 5])
    assert bytes(store.get("k")) == b"old"


def test_write_file_chunks_names_file_system_failures(tmp_path: Path) -> None:
    store = tessera.open_store(tmp_path.as_uri())
    store.put("plain", b"a file, not a folder")
    with pytest.raises(StorageError, match="plain/k"):
        store.aio.write_file_chunks("plain/k", [b"x"])
    with pytest.raises(tessera.InvalidKeyError):
        store.aio.write_file_chunks("../escape", [b"x"])
    with pytest.raises(PermanentStorageError, match="folder stores only"):
        tessera.open_store("memory://write-chunks").aio.write_file_chunks("k", [b"x"])


@pytest.fixture
def streamed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Stream every raw write, a few tiles per chunk, and note the keys written by
    ``write_file_chunks``."""
    monkeypatch.setattr(fragment_mod, "STREAM_BYTES", 1)
    monkeypatch.setattr(fragment_mod, "LOCAL_STREAM_CHUNK_BYTES", 3 * 16 * 10 * 4)
    keys: list[str] = []
    real = tessera.storage.store.AsyncStore.write_file_chunks

    def spy(self, key, chunks):
        keys.append(key)
        return real(self, key, chunks)

    monkeypatch.setattr(tessera.storage.store.AsyncStore, "write_file_chunks", spy)
    return keys


@pytest.mark.parametrize("order", ["row-major", "col-major"])
def test_streamed_local_writes_match_numpy(tmp_path: Path, streamed: list[str],
                                           order: str) -> None:
    schema = tessera.ArraySchema(
        [tessera.Dim("y", (0, 59), 16), tessera.Dim("x", (0, 46), 10)],
        [tessera.Attr("a", "<i4", fill=-1), tessera.Attr("rgb", "(3,)u1")],
        cell_order=order, tile_order=order)
    arr = tessera.create_array((tmp_path / "arr").as_uri(), schema)
    rng = np.random.default_rng(3)
    model = {"a": np.full((60, 47), -1, np.int32), "rgb": np.zeros((60, 47, 3), np.uint8)}
    for (y0, x0), (y1, x1) in [((3, 5), (50, 41)), ((0, 0), (59, 46))]:
        shape = (y1 - y0 + 1, x1 - x0 + 1)
        vals = {"a": rng.integers(0, 1000, shape, dtype=np.int32),
                "rgb": rng.integers(0, 255, (*shape, 3), dtype=np.uint8)}
        arr.write(vals, origin=(y0, x0))
        for k, v in vals.items():
            model[k][y0:y1 + 1, x0:x1 + 1] = v
    assert len(streamed) == 4 and all(k.endswith(".data") for k in streamed)
    reader = tessera.open_array(arr.uri)
    for sel in [(slice(None), slice(None)), (slice(2, 57, 3), slice(40, 0, -4))]:
        got = reader.read(sel)
        for k in model:
            np.testing.assert_array_equal(got[k], model[k][sel], err_msg=f"{k} {sel}")


def test_failed_streamed_write_leaves_nothing_visible(tmp_path: Path, streamed: list[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    arr = tessera.from_numpy((tmp_path / "arr").as_uri(), np.ones((60, 47), np.int32),
                             tile=(16, 10))
    before = arr.fragments
    real = fragment_mod._fill_raw_tiles
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise MemoryError("no room for the third chunk")
        return real(*args, **kwargs)

    monkeypatch.setattr(fragment_mod, "_fill_raw_tiles", failing)
    with pytest.raises(MemoryError, match="third chunk"):
        arr.write(np.full((60, 47), 7, np.int32))
    assert not _staging_files(tmp_path)
    assert not [t for t in threading.enumerate() if t.name.startswith("tessera-fill")]
    reader = tessera.open_array(arr.uri)
    assert reader.fragments == before
    np.testing.assert_array_equal(reader[:, :], np.ones((60, 47), np.int32))


def test_a_full_disk_mid_write_leaves_nothing_and_stops_the_filler(
        tmp_path: Path, streamed: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import os

    arr = tessera.from_numpy((tmp_path / "arr").as_uri(), np.ones((60, 47), np.int32),
                             tile=(16, 10))
    real_write = os.write
    calls = []

    def full_disk(fd: int, data: object) -> int:
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(tessera.storage.store.os, "write", full_disk)
    with tessera.collect_stats() as stats, \
            pytest.raises(StorageError, match=r"data\.data: .*No space"):
        arr.write(np.full((60, 47), 7, np.int32))
    monkeypatch.setattr(tessera.storage.store.os, "write", real_write)
    assert stats.by_method["put"].failures == 1
    assert not _staging_files(tmp_path)
    assert not [t for t in threading.enumerate() if t.name.startswith("tessera-fill")]
    np.testing.assert_array_equal(tessera.open_array(arr.uri)[:, :], np.ones((60, 47)))
