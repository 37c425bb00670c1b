"""tessera.h5's chunk cache (HDF5's ``rdcc_nbytes``): a read answered from kept chunks is
what the array's own read answers at that moment, for every box, after writes (this handle,
another handle, another file object), resizes and deletes; reads in kept chunks make no
request; the budget's settings are checked."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera
import tessera.h5
from tessera.errors import InvalidArgumentError
from tessera.integrations.h5_chunks import ChunkCache

SHAPE, CHUNKS = (23, 17, 3), (8, 5, 2)
REFERENCE = np.random.default_rng(1).integers(-1000, 1000, SHAPE).astype(np.int32)


def _file(url: str, **kwargs):
    d = tessera.h5.File(url, "w", **kwargs).create_dataset(
        "x", shape=SHAPE, dtype="i4", chunks=CHUNKS, fillvalue=-7)
    d[:, :10] = REFERENCE[:, :10]  # the rest is never written: fill values
    return d


def twice(d, sel):
    """``d[sel]``, read twice: the second read answered by the chunks the first kept (or
    by the array, when the first found the list of fragments out of date)."""
    first = d[sel]
    again = d[sel]
    assert np.array_equal(first, again)
    return again


def _bound(draw, n):
    v = draw(st.integers(-n, n))
    return None if draw(st.booleans()) and v % 3 == 0 else v


@st.composite
def boxes(draw):
    """A box selection as users write them: integers (negative too), slices with and
    without bounds, fewer items than dimensions."""
    items = []
    for n in SHAPE[:draw(st.integers(1, 3))]:
        if draw(st.booleans()):
            items.append(draw(st.integers(-n, n - 1)))
        else:
            items.append(slice(_bound(draw, n), _bound(draw, n)))
    return tuple(items) if len(items) > 1 or draw(st.booleans()) else items[0]


def _expected(sel):
    want = np.full(SHAPE, -7, np.int32)
    want[:, :10] = REFERENCE[:, :10]
    return want[sel]


@settings(max_examples=150, deadline=None)
@given(sels=st.lists(boxes(), min_size=1, max_size=6))
def test_reads_through_the_cache_equal_the_arrays(sels):
    d = _file(f"memory://h5-chunks-{np.random.default_rng().integers(1 << 62)}")
    for sel in sels:
        want = _expected(sel)
        if want.size == 0:
            continue  # an empty box is the array's to refuse or answer
        got = d[sel]
        plain = d.array.read(sel)
        assert type(got) is type(plain) and np.shape(got) == np.shape(plain)
        assert np.array_equal(got, want) and np.asarray(got).dtype == want.dtype
        assert np.array_equal(d[sel], want)  # again, from the kept chunks


def test_kept_chunks_answer_without_a_request(tmp_path):
    d = _file((tmp_path / "f").as_uri())
    d[2, 3]  # lists the fragments (the array's own read)
    d[1:4, 0:3]
    with tessera.collect_stats() as stats:
        got = d[2:5, 1:4, 0]
    assert stats.requests == 0 and d._chunks.hits >= 1
    assert np.array_equal(got, REFERENCE[2:5, 1:4, 0])
    got[:] = 0  # a copy: the kept chunk is not changed
    assert np.array_equal(d[2:5, 1:4, 0], REFERENCE[2:5, 1:4, 0])


def test_writes_resizes_and_deletes_are_seen(tmp_path):
    url = (tmp_path / "f").as_uri()
    d = _file(url)
    d[0:3, 0:3]
    d[0:3, 0:3]
    d[1, 1] = [5, 6, 7]  # this dataset
    assert twice(d, (1, 1)).tolist() == [5, 6, 7]
    other = tessera.open_array(d.array.uri, "w")  # another handle of this process
    other[1, 1, 0] = 9
    assert twice(d, (1, 1)).tolist() == [9, 6, 7]
    g = tessera.h5.File(url, "r+")  # another file object: seen after refresh()
    g["x"][0, 0] = [1, 1, 1]
    d.refresh()
    assert twice(d, (0, 0)).tolist() == [1, 1, 1]
    twice(d, (slice(0, 3), slice(0, 3)))
    del d.file["x"]
    e = d.file.create_dataset("x", data=np.ones(SHAPE, np.int32), chunks=CHUNKS)
    assert np.array_equal(twice(e, (slice(0, 3), slice(0, 3))), np.ones((3, 3, 3), np.int32))


def test_a_grown_dataset_reads_its_new_cells(tmp_path):
    f = tessera.h5.File((tmp_path / "g").as_uri(), "w")
    d = f.create_dataset("g", shape=(10, 4), dtype="i4", chunks=(4, 4), maxshape=(None, 4))
    d[:] = np.arange(40).reshape(10, 4)
    assert twice(d, slice(8, 10)).tolist() == np.arange(32, 40).reshape(2, 4).tolist()
    d.resize(12, axis=0)  # the edge chunk (rows 8-11) grows
    assert twice(d, (slice(8, 12), 0)).tolist() == [32, 36, 0, 0]
    d[10:12] = 1
    assert twice(d, (slice(8, 12), 0)).tolist() == [32, 36, 1, 1]


def test_budgets():
    d = _file("memory://h5-chunks-none", rdcc_nbytes=0)
    for _ in range(2):
        assert np.array_equal(d[0:3, 0:3], REFERENCE[0:3, 0:3])
    assert d._chunks.hits == d._chunks.misses == 0
    # a box whose chunks do not fit is read by the array, the cache untouched
    d = _file("memory://h5-chunks-small", rdcc_nbytes=8 * 5 * 2 * 4 * 2)
    d[0, 0]
    assert np.array_equal(d[:, 0:3], REFERENCE[:, 0:3]) and d._chunks.misses == 0
    tessera.h5.File("memory://h5-chunks-ok", "w", rdcc_nbytes=1 << 20, rdcc_nslots=521,
                    rdcc_w0=0.75)
    for bad in ({"rdcc_nbytes": -1}, {"rdcc_nbytes": 1.5}, {"rdcc_nslots": 0},
                {"rdcc_w0": 2}):
        with pytest.raises(InvalidArgumentError, match=next(iter(bad))):
            tessera.h5.File("memory://h5-chunks-bad", "w", **bad)


def test_network_stores_keep_no_chunks_unless_asked(s3_server):
    url, options = s3_server.unique_url(), dict(s3_server.storage_options())
    plain = tessera.h5.File(url, "w", storage_options=options)
    assert plain.create_dataset("y", data=REFERENCE[0])._chunks.capacity_bytes == 0
    f = tessera.h5.File(url, "a", storage_options=options, rdcc_nbytes=1 << 20)
    d = f.create_dataset("x", data=REFERENCE, chunks=CHUNKS)
    d[0, 0]
    assert np.array_equal(d[3:9, 4, 1], REFERENCE[3:9, 4, 1])
    assert np.array_equal(d[3:9, 4, 1], REFERENCE[3:9, 4, 1]) and d._chunks.hits > 0


def test_a_cache_of_its_own():
    arr = tessera.from_numpy("memory://h5-chunks-own", REFERENCE, tile=CHUNKS)
    cache = ChunkCache("own", 1 << 20)
    arr[0]
    got = cache.read(arr, (slice(0, 20), slice(3, 12), 1))  # 3 x 3 chunks, one read
    assert np.array_equal(got, REFERENCE[0:20, 3:12, 1]) and cache.misses == 9
    assert np.array_equal(cache.read(arr, (slice(7, 9), 4, 0)), REFERENCE[7:9, 4, 0])
    # kept whole, the last row of chunks clipped at the domain's end (23 = 8 + 8 + 7)
    assert cache.hits == 2 and cache.nbytes == 23 * 15 * 2 * 4
    assert np.array_equal(cache.read(arr, (slice(7, 9), 4)), REFERENCE[7:9, 4])
    assert (cache.hits, cache.misses) == (4, 11)
    cache.clear()
    assert cache.nbytes == 0


def test_a_file_keeps_its_open_datasets(tmp_path):
    """``f[name]`` reuses the dataset's array handle while its schema holds (one read of
    the schema per lookup, no opening, no listing), so ``f["x"][crop]`` in a loop reads
    from the kept chunks; a dataset made again elsewhere is opened afresh."""
    url = (tmp_path / "f").as_uri()
    d = _file(url)
    f = d.file
    assert f["x"].array is f["x"].array is d.array
    f["x"][0:3, 0:3]
    f["x"][0:3, 0:3]
    with tessera.collect_stats() as stats:
        for r in range(4):
            assert np.array_equal(f["x"][r:r + 3, 0:3], REFERENCE[r:r + 3, 0:3])
    assert stats.requests == 4  # the schema, once per lookup
    other = tessera.h5.File(url, "r+")
    del other["x"]
    other.create_dataset("x", data=np.arange(6, dtype=np.int16))
    assert f["x"].shape == (6,) and twice(f["x"], slice(1, 3)).tolist() == [1, 2]
    del other["x"]
    other.create_group("x")
    assert isinstance(f["x"], tessera.h5.Group)
