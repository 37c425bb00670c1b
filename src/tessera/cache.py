"""The one in-memory cache: thread-safe, bounded in bytes, least recently used out first, with
a name, hit and miss counters and :meth:`~LRUCache.clear`. Every cache of decoded data in
Tessera is one of these (or wraps one), with its budget in the typed configuration.

An entry's size is what ``size(value)`` says (default: its ``nbytes``, or ``len`` of bytes);
an entry larger than the whole budget is not kept; a budget of 0 keeps nothing.

>>> cache: LRUCache[str, bytes] = LRUCache("doc", capacity_bytes=10)
>>> cache.put("a", b"12345"); cache.put("b", b"12345")
>>> cache.get("a") is not None, cache.nbytes
(True, 10)
>>> cache.put("c", b"1")          # "b" is the least recently used: it goes
>>> sorted(cache.keys()), cache.hits, cache.misses
(['a', 'c'], 1, 0)
>>> cache.get("b"), cache.misses
(None, 1)
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from tessera.errors import ConfigError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def nbytes_of(value: Any) -> int:
    """A value's size in bytes: its ``nbytes`` (numpy arrays, memoryviews) or its ``len``
    (bytes); a tuple or list adds up its items."""
    if isinstance(value, (tuple, list)):
        return sum(nbytes_of(v) for v in value)
    size = getattr(value, "nbytes", None)
    if size is not None:
        return int(size)
    if isinstance(value, (bytes, bytearray, str)):
        return len(value)
    raise TypeError(f"cannot size a {type(value).__name__}: give the cache a size function")


class LRUCache(Generic[K, V]):
    """A thread-safe LRU bounded in bytes (see the module docstring).

    Attributes:
        name: what it holds (for reports and errors).
        capacity_bytes: the budget.
        hits, misses: :meth:`get` calls that found / did not find their key.
        hit_bytes: bytes of the values :meth:`get` returned.
        evictions: entries dropped to stay within the budget.
    """

    def __init__(self, name: str, capacity_bytes: int,
                 size: Callable[[V], int] = nbytes_of) -> None:
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int) \
                or capacity_bytes < 0:
            raise ConfigError(f"the {name} cache's budget must be a number of bytes >= 0, "
                              f"got {capacity_bytes!r}")
        self.name = name
        self.capacity_bytes = capacity_bytes
        self._size = size
        self._entries: collections.OrderedDict[K, tuple[V, int]] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.hit_bytes = self.evictions = 0

    @property
    def nbytes(self) -> int:
        """Bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def keys(self) -> list[K]:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._entries)

    def get(self, key: K) -> V | None:
        """The value at ``key`` (marked recently used), or ``None``; counted."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            self.hit_bytes += entry[1]
            return entry[0]

    def peek(self, key: K) -> V | None:
        """The value at ``key`` without marking or counting it."""
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else entry[0]

    def put(self, key: K, value: V, nbytes: int | None = None) -> None:
        """Keep ``value`` at ``key`` (replacing what was there), evicting the least recently
        used entries beyond the budget; a value larger than the budget is not kept (and the
        old value at ``key`` is dropped)."""
        size = self._size(value) if nbytes is None else nbytes
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self.capacity_bytes:
                return
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self.capacity_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped
                self.evictions += 1

    def pop(self, key: K) -> V | None:
        """Remove and return the value at ``key`` (``None`` when absent)."""
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is None:
                return None
            self._bytes -= entry[1]
            return entry[0]

    def clear(self) -> None:
        """Drop every entry (the counters stay)."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def stats(self) -> dict[str, int | str]:
        """Name, budget, bytes and entries held, and the counters."""
        with self._lock:
            return {"name": self.name, "capacity_bytes": self.capacity_bytes,
                    "nbytes": self._bytes, "entries": len(self._entries), "hits": self.hits,
                    "misses": self.misses, "hit_bytes": self.hit_bytes,
                    "evictions": self.evictions}


class ProcessCache(Generic[K, V]):
    """A process-wide :class:`LRUCache`, made on first use by ``make()`` (which reads its
    budget from the configuration then, never at import), and made anew in a forked child.
    Call it for the cache: ``META_CACHE().get(key)``.

    >>> cache: ProcessCache[str, bytes] = ProcessCache(lambda: LRUCache("doc", 8))
    >>> cache().put("a", b"1234"); cache().capacity_bytes, len(cache())
    (8, 1)
    """

    def __init__(self, make: Callable[[], LRUCache[K, V]]) -> None:
        self._make = make
        self._cache: LRUCache[K, V] | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def __call__(self) -> LRUCache[K, V]:
        with self._lock:
            if self._cache is None or self._pid != os.getpid():
                self._cache = self._make()
                self._pid = os.getpid()
            return self._cache
