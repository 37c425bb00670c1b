"""Corruption is detected and named; bad input is refused with nothing written."""

from __future__ import annotations

import numpy as np
import pytest

import tessera


def _arr(store_url, codec=None) -> tessera.Array:
    url, options = store_url
    schema = tessera.ArraySchema([tessera.Dim("y", (0, 15), 8), tessera.Dim("x", (0, 15), 8)],
                                 [tessera.Attr("v", "int32", codec=codec)])
    arr = tessera.create_array(f"{url.rstrip('/')}/arr", schema, storage_options=options)
    arr.write(np.arange(256, dtype=np.int32).reshape(16, 16))
    return arr


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_checksum_failure_names_array_fragment_attr_tile(store_url, codec) -> None:
    arr = _arr(store_url, codec)
    frag = arr.fragments[0].name
    key = next(o.key for o in arr.store.list("__fragments") if o.key.endswith("v.data"))
    data = bytearray(arr.store.get(key))
    data[-3] ^= 0xFF  # damage the last tile
    arr.store.put(key, bytes(data))
    np.testing.assert_array_equal(arr[0:8, 0:8], np.arange(256).reshape(16, 16)[0:8, 0:8])
    with pytest.raises(tessera.CorruptDataError) as info:
        arr[8:, 8:]
    text = str(info.value)
    assert arr.uri in text and frag in text and "'v'" in text and "(1, 1)" in text
    assert "checksum" in text
    err = info.value  # the same, as fields: callers need not parse the message
    assert (err.array, err.fragment, err.attr, err.tile, err.key) == (arr.uri, frag, "v",
                                                                      (1, 1), key)


def test_truncated_and_missing_objects(store_url) -> None:
    arr = _arr(store_url)
    key = next(o.key for o in arr.store.list("__fragments") if o.key.endswith("v.data"))
    data = bytes(arr.store.get(key))
    arr.store.put(key, data[: len(data) // 2])
    with pytest.raises(tessera.CorruptDataError, match="truncated"):
        arr[:, :]
    arr.store.delete(key)
    with pytest.raises(tessera.CorruptDataError, match="missing"):
        arr[:, :]
    meta = next(o.key for o in arr.store.list("__fragments") if o.key.endswith("__meta.json"))
    arr.store.delete(meta)
    with pytest.raises(tessera.CorruptDataError, match="bookkeeping"):
        tessera.open_array(arr.uri, storage_options=store_url[1])[:, :]


def test_bad_selections_are_index_errors(store_url) -> None:
    arr = _arr(store_url)
    for sel in [(16, 0), (0, -17), (slice(0, 20), 0), ([1, 99], 0), (0, 0, 0), (..., ...),
                (slice(None, None, 0),), ("a",), (np.array([True, False]),), (None,)]:
        with pytest.raises(IndexError):
            arr[sel]
    assert arr[-1, -1] == 255 and arr[..., 3].shape == (16,)


def test_bad_writes_write_nothing(store_url) -> None:
    arr = _arr(store_url)
    before = len(arr.fragments)
    with pytest.raises(TypeError, match="cast"):
        arr[0:2, 0:2] = np.ones((2, 2), dtype=np.float64)
    with pytest.raises(ValueError, match="shape"):
        arr[0:2, 0:2] = np.ones((3, 2), dtype=np.int32)
    with pytest.raises(IndexError, match="domain"):
        arr.write(np.ones((4, 4), np.int32), origin=(14, 0))
    with pytest.raises(IndexError, match="domain"):  # (a list of rows is written as cells)
        arr[[0, 99], 0:2] = np.ones((2, 2), dtype=np.int32)
    with pytest.raises(ValueError, match="shape"):
        arr.vindex[[0, 2], [1, 1]] = np.ones(3, dtype=np.int32)
    with pytest.raises(tessera.SchemaError, match="no attribute"):
        arr.write({"w": np.ones((2, 2), np.int32)})
    _, options = store_url
    reader = tessera.open_array(arr.uri, storage_options=options)
    with pytest.raises(tessera.ReadOnlyError, match="mode='w'"):
        reader[0:2, 0:2] = np.ones((2, 2), dtype=np.int32)
    assert len(arr.fragments) == before


def test_create_and_open_errors(store_url) -> None:
    arr = _arr(store_url)
    url, options = store_url
    with pytest.raises(tessera.ArrayExistsError):
        tessera.create_array(arr.uri, arr.schema, storage_options=options)
    with pytest.raises(tessera.ArrayNotFoundError) as info:
        tessera.open_array(f"{url.rstrip('/')}/nothing", storage_options=options)
    assert isinstance(info.value, FileNotFoundError)
    arr.store.put("__schema.json", b'{"format": "tessera.array", "version": 99}')
    with pytest.raises(tessera.SchemaError, match="newer"):
        tessera.open_array(arr.uri, storage_options=options)


def test_time_travel_and_fragment_info(store_url) -> None:
    arr = _arr(store_url, "zstd")
    first = arr.fragments[0]
    arr[0:4, 0:4] = np.zeros((4, 4), np.int32)
    second = arr.fragments[1]
    assert first.timestamp < second.timestamp and second.kind == "dense"
    assert second.nonempty_domain == ((0, 3), (0, 3)) and second.cell_count == 16
    assert first.cell_count == 256 and first.nbytes > 0
    _, options = store_url
    old = tessera.open_array(arr.uri, at=first.timestamp, storage_options=options)
    assert old[0, 0] == 0 and old[1, 1] == 17 and len(old.fragments) == 1
    assert arr[1, 1] == 0
    import datetime as dt

    before_all = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    with pytest.raises(tessera.BeforeFirstCommitError, match="before its first commit") as err:
        tessera.open_array(arr.uri, at=before_all, storage_options=options)
    assert err.value.first_commit == dt.datetime.fromtimestamp(first.timestamp / 1e9, dt.UTC)


def test_fully_covered_fragments_are_not_fetched(store_url) -> None:
    arr = _arr(store_url)
    arr[0:8, 0:8] = np.full((8, 8), 5, np.int32)
    arr[0:8, 0:8] = np.full((8, 8), 6, np.int32)
    assert (arr[0:8, 0:8] == 6).all()
    report = arr.last_read
    assert report.fragments_used == 1 and report.fragments_skipped == 2
    assert report.stats.by_method["range"].requests == 1
    arr[0:9, 0:8]  # needs the first fragment's row 8 too
    assert arr.last_read.fragments_used == 2


def test_attribute_subsets_and_vector_cells(store_url) -> None:
    url, options = store_url
    schema = tessera.ArraySchema(
        [tessera.Dim("i", (0, 9), 4)],
        [tessera.Attr("rgb", "(3,)u1", codec="lz4"), tessera.Attr("z", "complex64", 1j)])
    arr = tessera.create_array(f"{url.rstrip('/')}/vec", schema, storage_options=options)
    rgb = np.arange(30, dtype=np.uint8).reshape(10, 3)
    arr.write({"rgb": rgb[2:6], "z": np.full(4, 2 + 3j, np.complex64)}, origin=(2,))
    out = arr.read(slice(0, 10), attrs=["rgb"])
    assert list(out) == ["rgb"] and out["rgb"].shape == (10, 3)
    np.testing.assert_array_equal(out["rgb"][2:6], rgb[2:6])
    assert (out["rgb"][0] == 0).all()
    both = arr[1:3]
    assert both["z"].tolist() == [1j, 2 + 3j]


def test_a_handle_reads_its_settings_from_one_snapshot(monkeypatch) -> None:
    """open_array(config=) takes one Config for the handle and its store; without it the
    environment is read once when the handle opens, and later changes do not reach it."""
    from tessera.config import Config

    cfg = Config.from_env({"TESSERA_WRITE_CAST": "unsafe", "TESSERA_STORE_MAX_CONCURRENCY": "3",
                           "TESSERA_READ_REFRESH_S": "0"})
    arr = tessera.from_numpy("memory://cfg-snapshot", np.zeros((4, 4), np.int32), config=cfg)
    again = tessera.open_array(arr.uri, mode="w", config=cfg)
    assert again.writes.cast == "unsafe" and again.reads.refresh_s == 0
    assert again.store.aio.config.max_concurrency == 3
    again[0, 0] = np.int64(2**32 + 5)  # the snapshot's unsafe cast: wraps, as asked
    assert again[0, 0] == 5
    monkeypatch.setenv("TESSERA_WRITE_CAST", "unsafe")
    plain = tessera.open_array(arr.uri, mode="w")
    monkeypatch.setenv("TESSERA_WRITE_CAST", "checked")  # after the open: not seen
    assert plain.writes.cast == "unsafe" and plain.config.writes.cast == "unsafe"


def test_a_name_too_long_for_the_file_system_is_a_url_error(tmp_path):
    with pytest.raises(tessera.errors.InvalidURLError, match="at most 255") as err:
        tessera.from_numpy((tmp_path / ("a" * 300)).as_uri(), np.zeros(4))
    assert isinstance(err.value, ValueError)


def test_a_read_larger_than_the_machine_is_a_memory_limit_error(tmp_path):
    schema = tessera.ArraySchema([tessera.Dim("x", (0, 2**40 - 1), 2**20),
                                  tessera.Dim("y", (0, 7), 8)], [tessera.Attr("v", "u1")])
    arr = tessera.create_array((tmp_path / "big").as_uri(), schema)
    for sel in ((slice(None), slice(None)), (slice(0, 2**39), 0), (slice(None, None, 2), 0)):
        with pytest.raises(tessera.errors.MemoryLimitError, match="read it in pieces") as err:
            arr[sel]
        assert isinstance(err.value, MemoryError)
    assert arr[0:4, 0].tolist() == [0, 0, 0, 0]


def test_an_empty_dimension_is_an_array_like_any_other(tmp_path):
    """A zero-length dimension (domain [lo, lo - 1]): schema, reads of nothing, writes of
    nothing, fragments, time travel and consolidation, fixed or growable."""
    url = (tmp_path / "e").as_uri()
    schema = tessera.ArraySchema([tessera.Dim("t", (0, -1), 4), tessera.Dim("x", (0, 2), 3)],
                                 [tessera.Attr("v", "i4")])
    arr = tessera.create_array(url, schema)
    assert arr.shape == (0, 3) and arr[:].shape == (0, 3) and arr[:, 1].shape == (0,)
    arr[:] = np.zeros((0, 3), np.int32)           # nothing to write: no fragment
    assert arr.fragments == [] and np.asarray(arr).shape == (0, 3) and list(arr) == []
    with pytest.raises(tessera.errors.SelectionError):
        arr[0]
    assert arr.consolidate() is None and arr.vacuum() == 0
    again = tessera.open_array(url, at=2**62)
    assert again.shape == (0, 3) and again[...].shape == (0, 3)
    assert tessera.from_numpy((tmp_path / "n").as_uri(), np.zeros((0,), np.int8))[:].shape == (0,)
    with pytest.raises(tessera.errors.SchemaError, match="hi is below lo"):
        tessera.ArraySchema([tessera.Dim("t", (0, -2), 4)], [tessera.Attr("v", "i4")])
