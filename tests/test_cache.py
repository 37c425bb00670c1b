"""The one cache (tessera.cache.LRUCache): bounded in bytes, least recently used out first,
counters, clear, and consistent under 8 threads; and every cache of the engines is one."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tessera.cache import LRUCache, nbytes_of
from tessera.errors import ConfigError


def test_bounds_order_and_counters() -> None:
    cache: LRUCache[str, bytes] = LRUCache("test", 10)
    cache.put("a", b"1234")
    cache.put("b", b"1234")
    assert cache.get("a") == b"1234"  # "a" is now the most recently used
    cache.put("c", b"1234")  # 12 bytes > 10: "b" leaves
    assert cache.keys() == ["a", "c"] and cache.nbytes == 8
    assert (cache.hits, cache.misses, cache.evictions) == (1, 0, 1)
    assert cache.get("b") is None and cache.misses == 1
    cache.put("big", b"x" * 11)  # larger than the budget: not kept
    assert "big" not in cache and cache.nbytes == 8
    cache.put("a", b"12")  # replacing an entry re-counts its size
    assert cache.nbytes == 6 and cache.peek("a") == b"12" and cache.hits == 1
    assert cache.pop("a") == b"12" and cache.pop("a") is None and cache.nbytes == 4
    stats = cache.stats()
    assert stats["name"] == "test" and stats["entries"] == 1 and stats["nbytes"] == 4
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0 and cache.hits == 1  # counters stay
    none: LRUCache[str, bytes] = LRUCache("off", 0)
    none.put("a", b"1")
    assert len(none) == 0


def test_sizes_and_bad_budgets() -> None:
    assert nbytes_of(np.zeros(10, np.int32)) == 40
    assert nbytes_of((b"ab", np.zeros(2, np.uint8))) == 4
    with pytest.raises(TypeError, match="size function"):
        nbytes_of(object())
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="the x cache's budget"):
            LRUCache("x", bad)  # type: ignore[arg-type]
    sized: LRUCache[str, list[int]] = LRUCache("rows", 10, size=len)
    sized.put("r", [1, 2, 3])
    assert sized.nbytes == 3


def test_eight_threads_keep_the_bounds_and_the_books() -> None:
    cache: LRUCache[int, np.ndarray] = LRUCache("threads", 64 << 10)
    errors: list[BaseException] = []
    gets = [0] * 8

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(3000):
                key = int(rng.integers(0, 200))
                if rng.random() < 0.5:
                    cache.put(key, np.full(int(rng.integers(1, 2048)), key, np.uint8))
                else:
                    value = cache.get(key)
                    gets[seed] += 1
                    if value is not None and not (value == key).all():
                        raise AssertionError("a value came back under another key")
                if rng.random() < 0.01:
                    cache.pop(key)
        except BaseException as err:  # reported to the main thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.nbytes <= cache.capacity_bytes
    held = cache.keys()
    assert cache.nbytes == sum(cache.peek(k).nbytes for k in held)  # type: ignore[union-attr]
    assert cache.hits + cache.misses == sum(gets)


def test_every_engine_cache_is_the_one_cache() -> None:
    from tessera.array.commits import META_CACHE
    from tessera.images.cache import ColumnCache
    from tessera.server.cache import TileCache
    from tessera.tables.catalog import HEADER_ROWS as _HEADER_ROWS
    from tessera.tables.reader import FOOTERS

    for cache in (META_CACHE(), ColumnCache(1), TileCache(1), FOOTERS(), _HEADER_ROWS()):
        assert isinstance(cache, LRUCache), cache


def test_process_caches_take_their_budget_from_the_configuration_at_first_use(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tessera.cache import ProcessCache
    from tessera.config import CacheConfig

    monkeypatch.setenv("TESSERA_FOOTERS_CACHE_BYTES", "1234")
    cache: ProcessCache[str, bytes] = ProcessCache(
        lambda: LRUCache("footers", CacheConfig.from_env().footers_cache_bytes))
    assert cache().capacity_bytes == 1234 and cache() is cache()  # made once
    monkeypatch.setenv("TESSERA_FOOTERS_CACHE_BYTES", "-1")
    with pytest.raises(ConfigError, match="footers_cache_bytes"):
        CacheConfig.from_env()
