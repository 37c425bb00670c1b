"""Store conformance: the same behaviour on memory://, file:// and S3 (moto, own process)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera.storage.store import AsyncStore


def run(coro):  # helper for the async API in sync tests
    return asyncio.run(coro)


# -- round trips ---------------------------------------------------------------------------

@pytest.mark.parametrize("payload", [b"", b"hello", bytes(range(256)) * 7, os.urandom(3 << 20)])
def test_round_trip(store: tessera.Store, payload: bytes) -> None:
    store.put("obj", payload)
    assert bytes(store.get("obj")) == payload
    assert store.head("obj").size == len(payload)


def test_put_numpy_and_memoryview(store: tessera.Store) -> None:
    arr = np.arange(1000, dtype="<i4").reshape(10, 100)
    store.put("arr", arr)
    got = np.frombuffer(store.get("arr"), dtype="<i4").reshape(10, 100)
    np.testing.assert_array_equal(got, arr)
    store.put("mv", memoryview(b"abcdef")[2:])
    assert bytes(store.get("mv")) == b"cdef"


def test_overwrite_replaces(store: tessera.Store) -> None:
    store.put("k", b"first")
    store.put("k", b"second, longer")
    assert bytes(store.get("k")) == b"second, longer"


def test_nested_keys_and_unicode(store: tessera.Store) -> None:
    store.put("a/b/c/d.bin", b"1")
    store.put("ünï/çødé.bin", b"2")
    assert bytes(store.get("a/b/c/d.bin")) == b"1"
    assert bytes(store.get("ünï/çødé.bin")) == b"2"


def test_async_core_matches_facade(store: tessera.Store) -> None:
    async def go(aio: AsyncStore) -> bytes:
        await aio.put("x", b"async")
        return bytes(await aio.get("x"))

    # A fresh event loop in this thread, separate from the facade's loop thread.
    assert run(go(store.aio)) == b"async"
    assert bytes(store.get("x")) == b"async"


# -- ranges --------------------------------------------------------------------------------

def test_ranges(store: tessera.Store) -> None:
    data = bytes(range(256)) * 40  # 10240 bytes
    store.put("r", data)
    assert bytes(store.get_range("r", 0, 10)) == data[:10]
    assert bytes(store.get_range("r", 5000, 1234)) == data[5000:6234]
    assert bytes(store.get_range("r", 10230, 10)) == data[10230:]
    # Past the end: truncated to what exists.
    assert bytes(store.get_range("r", 10230, 100)) == data[10230:]
    assert bytes(store.get_range("r", 0, 1 << 30)) == data
    # Zero length: empty, no request sent.
    before = store.stats.requests
    assert bytes(store.get_range("r", 99, 0)) == b""
    assert store.stats.requests == before


@pytest.mark.parametrize("offset", [10240, 10241, 1 << 40])
def test_range_starting_past_the_end(store: tessera.Store, offset: int) -> None:
    store.put("r", b"x" * 10240)
    with pytest.raises(tessera.InvalidRangeError) as info:
        store.get_range("r", offset, 10)
    assert "r" in str(info.value) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("bad", [(-1, 5), (0, -5), (1.5, 2)])
def test_range_arguments_checked(store: tessera.Store, bad: tuple[int, int]) -> None:
    store.put("r", b"abc")
    before = store.stats.requests
    with pytest.raises(tessera.InvalidRangeError):
        store.get_range("r", *bad)
    assert store.stats.requests == before


def test_get_ranges_one_request_each_never_coalesced(store: tessera.Store) -> None:
    data = os.urandom(1 << 20)
    store.put("big", data)
    ranges = [(i * 40_000, 1024) for i in range(20)]  # close together: obstore would merge
    with store.collect() as stats:
        parts = store.get_ranges("big", ranges)
    assert [bytes(p) for p in parts] == [data[o:o + n] for o, n in ranges]
    assert stats.by_method["range"].requests == 20
    assert stats.bytes_received == 20 * 1024


# -- create-only and conditional puts ------------------------------------------------------

def test_create_only(store: tessera.Store) -> None:
    store.put("c", b"one", mode="create")
    with pytest.raises(tessera.ObjectExistsError) as info:
        store.put("c", b"two", mode="create")
    assert isinstance(info.value, FileExistsError) and "c" in str(info.value)
    assert bytes(store.get("c")) == b"one"


def test_create_only_race(store_url) -> None:
    url, options = store_url
    payloads = [f"writer-{i}".encode() * 100 for i in range(8)]

    def attempt(payload: bytes) -> bool:
        own = tessera.open_store(url, **options)  # each writer its own store handle
        try:
            own.put("marker", payload, mode="create")
            return True
        except tessera.ObjectExistsError:
            return False

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        wins = list(pool.map(attempt, payloads))
    assert sum(wins) == 1
    winner = payloads[wins.index(True)]
    assert bytes(tessera.open_store(url, **options).get("marker")) == winner


def test_if_match(store: tessera.Store) -> None:
    etag = store.put("m", b"v1").etag
    if store.url.scheme == "file":  # object_store's local backend has no compare-and-swap
        with pytest.raises(tessera.PermanentStorageError, match="not supported"):
            store.put("m", b"v2", if_match=etag)
        return
    store.put("m", b"v2", if_match=etag)
    with pytest.raises(tessera.PreconditionFailedError):
        store.put("m", b"v3", if_match=etag)
    assert bytes(store.get("m")) == b"v2"


def test_put_argument_errors(store: tessera.Store) -> None:
    with pytest.raises(ValueError, match="mode"):
        store.put("k", b"x", mode="append")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exclude"):
        store.put("k", b"x", mode="create", if_match="abc")
    assert not store.exists("k")


# -- listing -------------------------------------------------------------------------------

def test_listing_many_keys(store: tessera.Store) -> None:
    n = 2345
    keys = [f"many/{i:05d}" for i in range(n)]

    async def fill() -> None:
        sem = asyncio.Semaphore(32)

        async def one(k: str) -> None:
            async with sem:
                await store.aio.put(k, k.encode())

        await asyncio.gather(*(one(k) for k in keys))

    run(fill())
    store.put("many-not/x", b"")  # shares a string prefix, not a path segment
    with store.collect() as stats:
        listed = store.list("many")
    assert [o.key for o in listed] == keys
    assert all(o.size == len(o.key) for o in listed)
    if store.url.scheme == "s3":
        assert stats.by_method["list"].requests == 3  # pages of 1000 keys
    pages = list(store.iter_list("many/"))
    assert sum(len(p) for p in pages) == n


def test_list_dir_and_prefixes(store: tessera.Store) -> None:
    for k in ["a/1", "a/2", "a/sub/3", "b/4", "top"]:
        store.put(k, b"x")
    root = store.list_dir()
    assert root.prefixes == ["a", "b"]
    assert [o.key for o in root.objects] == ["top"]
    a = store.list_dir("a/")
    assert a.prefixes == ["a/sub"]
    assert [o.key for o in a.objects] == ["a/1", "a/2"]
    assert store.list("nothing-here") == []
    assert [o.key for o in store.list()] == ["a/1", "a/2", "a/sub/3", "b/4", "top"]


def test_list_names(store: tessera.Store) -> None:
    for k in ["a/2", "a/1", "a/sub/3", "ab/4", "top"]:
        store.put(k, b"x")
    with tessera.collect_stats() as stats:
        assert run(store.aio.list_names("a")) == ["1", "2"]
        assert run(store.aio.list_names("a/")) == ["1", "2"]
        assert run(store.aio.list_names("a/sub")) == ["3"]
        assert run(store.aio.list_names("nothing-here")) == []
    assert stats.by_method["list"].requests == 4
    assert run(store.aio.list_names("")) == ["top"]


def test_list_names_hides_local_staging_files(tmp_path: Path) -> None:
    store = tessera.open_store(tmp_path.as_uri())
    store.put("c/f1", b"x")
    (tmp_path / "c" / "f2#17").write_bytes(b"half written")  # an upload in flight
    (tmp_path / "c" / "f3#x").write_bytes(b"a real object")
    (tmp_path / "c" / "folder").mkdir()
    assert run(store.aio.list_names("c")) == ["f1", "f3#x"]
    assert [o.key for o in store.list_dir("c").objects] == ["c/f1", "c/f3#x"]  # as obstore


# -- deletes and not-found -----------------------------------------------------------------

def test_delete(store: tessera.Store) -> None:
    store.put("d", b"x")
    assert store.exists("d")
    store.delete("d")
    assert not store.exists("d")
    store.delete("d")  # idempotent, as on S3
    with pytest.raises(tessera.ObjectNotFoundError):
        store.get("d")


@pytest.mark.parametrize("op", ["get", "head", "range"])
def test_not_found(store: tessera.Store, op: str) -> None:
    call = {"get": lambda: store.get("missing/obj"), "head": lambda: store.head("missing/obj"),
            "range": lambda: store.get_range("missing/obj", 0, 10)}[op]
    with pytest.raises(FileNotFoundError) as info:
        call()
    err = info.value
    assert isinstance(err, tessera.ObjectNotFoundError)
    assert err.key == "missing/obj" and "missing/obj" in str(err)
    assert str(store.url).rstrip("/") in str(err)
    assert store.stats.failures == 1  # not retried


# -- confinement ---------------------------------------------------------------------------

BAD_KEYS = ["", "/abs", "../up", "a/../../b", "a/./b", "a//b", "a/", ".", "..", "a\\b",
            "nul\x00byte", "x" * 1100]


@pytest.mark.parametrize("key", BAD_KEYS)
def test_confinement_rejects_bad_keys(store: tessera.Store, key: str) -> None:
    for call in (lambda: store.get(key), lambda: store.put(key, b"x"),
                 lambda: store.delete(key), lambda: store.head(key)):
        with pytest.raises(tessera.InvalidKeyError):
            call()
    assert store.stats.requests == 0


def test_sibling_prefixes_are_isolated(store_url) -> None:
    url, options = store_url
    left = tessera.open_store(url.rstrip("/") + "/left", **options)
    right = tessera.open_store(url.rstrip("/") + "/right", **options)
    left.put("secret", b"L")
    assert right.list() == []
    assert not right.exists("secret")
    with pytest.raises(tessera.InvalidKeyError):
        right.get("../left/secret")
    assert [o.key for o in left.list()] == ["secret"]


def test_file_store_writes_only_below_its_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = tessera.open_store(root.as_uri())
    store.put("a/b", b"x")
    assert (root / "a" / "b").read_bytes() == b"x"
    with pytest.raises(tessera.InvalidKeyError):
        store.put("../escaped", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]


def test_memory_urls_share_one_process_store() -> None:
    a = tessera.open_store("memory://shared-check/x")
    b = tessera.open_store("memory://shared-check")
    a.put("k", b"v")
    assert bytes(b.get("x/k")) == b"v"


def test_file_store_on_a_missing_folder_creates_it_only_on_write(tmp_path: Path) -> None:
    root = tmp_path / "not" / "yet"
    store = tessera.open_store(root.as_uri())
    assert store.list() == [] and store.list_dir().prefixes == []
    assert not store.exists("k")
    with pytest.raises(tessera.ObjectNotFoundError):
        store.get("k")
    store.delete("k")
    assert not root.exists()
    store.put("k", b"v")
    assert (root / "k").read_bytes() == b"v"


def test_put_non_contiguous_array_and_bad_data(store: tessera.Store) -> None:
    arr = np.arange(100, dtype="<i2").reshape(10, 10)[:, ::2]  # a strided view
    store.put("strided", arr)
    np.testing.assert_array_equal(
        np.frombuffer(store.get("strided"), "<i2").reshape(10, 5), arr)
    with pytest.raises(tessera.PermanentStorageError, match="bytes-like"):
        store.put("text", "not bytes")  # type: ignore[arg-type]
    assert not store.exists("text")


def test_iter_list_streams_pages(store_url) -> None:
    url, options = store_url
    cfg = tessera.StoreConfig(list_page_size=10)
    store = tessera.open_store(url, config=cfg, **options)
    for i in range(25):
        store.put(f"p/{i:02d}", b"")
    pages = store.iter_list("p")
    first = next(pages)
    assert len(first) == 10
    rest = [len(p) for p in pages]
    assert sorted([10, *rest]) == [5, 10, 10]


class _FlakyCalls:
    """Makes the first ``n`` calls of an obstore function fail as a 503 would."""

    def __init__(self, real, n: int) -> None:
        self.real, self.left, self.calls = real, n, 0

    async def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            from obstore.exceptions import GenericError

            raise GenericError("Server returned non-2xx status code: 503 Slow Down")
        return await self.real(*args, **kwargs)


@pytest.mark.parametrize("func", ["get_async", "get_range_async", "put_async", "head_async"])
def test_retries_on_every_backend(store: tessera.Store, monkeypatch, func: str) -> None:
    # The retry policy sits above the backend: inject transient failures at the obstore call
    # (memory and file stores cannot fail like a network). S3 through a real faulty link is
    # covered in test_retries.py.
    import tessera.storage.store as store_module

    store.put("k", b"value")
    flaky = _FlakyCalls(getattr(store_module.obstore, func), 2)
    monkeypatch.setattr(store_module.obstore, func, flaky)
    op = {"get_async": lambda: bytes(store.get("k")),
          "get_range_async": lambda: bytes(store.get_range("k", 0, 5)),
          "put_async": lambda: store.put("k", b"value"),
          "head_async": lambda: store.head("k")}[func]
    with store.collect() as stats:
        op()
    assert flaky.calls == 3
    assert stats.requests == 3 and stats.failures == 2


def test_get_ranges_failure_names_the_object(store: tessera.Store) -> None:
    store.put("r", b"x" * 100)
    with pytest.raises(tessera.InvalidRangeError, match="r"):
        store.get_ranges("r", [(0, 10), (500, 10), (20, 10)])


# -- streamed puts -------------------------------------------------------------------------

def test_put_stream_round_trip_and_accounting(store: tessera.Store) -> None:
    parts = [os.urandom(3 << 20), b"", np.arange(1 << 20, dtype="<i4"), os.urandom(100)]
    expected = b"".join(bytes(memoryview(p).cast("B")) for p in parts)  # 7 MiB: two parts

    async def chunks():
        for p in parts:
            await asyncio.sleep(0)
            yield p

    async def go():
        with store.aio.collect() as stats:
            await store.aio.put_stream("streamed", chunks(), part_bytes=5 << 20)
        return stats

    stats = asyncio.run_coroutine_threadsafe(go(), _loop()).result()
    assert bytes(store.get("streamed")) == expected
    assert (stats.requests, stats.bytes_sent) == (1, len(expected))


def test_put_stream_failing_producer_leaves_nothing(store: tessera.Store) -> None:
    async def chunks():
        yield os.urandom(6 << 20)
        raise RuntimeError("producer broke")

    with pytest.raises(Exception, match="producer broke"):
        asyncio.run_coroutine_threadsafe(store.aio.put_stream("half", chunks()),
                                         _loop()).result()
    assert not store.exists("half")


def _loop() -> asyncio.AbstractEventLoop:
    from tessera._sync import _get_runner

    return _get_runner().loop
