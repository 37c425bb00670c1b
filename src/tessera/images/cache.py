"""The column cache of image sets: decoded diagonals of whole groups, kept per process so that
several readers of one set (several models, datasets or handles) and a rising ``k`` share
what was fetched: a read at ``k'`` after ``k`` fetches only diagonals ``k..k'-1`` of the
groups it touches, and a second model reading the same groups at ``k`` fetches nothing.

Entries are keyed by the set's identity (the ``uid`` its header was created with, so a set
deleted and made again at the same URL never sees the old one's columns), the group and the
diagonal. Groups are written once (appends claim whole new groups), so an entry never goes
stale. The cache is bounded in bytes and evicts the least recently used entries; it is
thread-safe. :func:`shared_cache` is the process's cache (``TESSERA_IMAGES_CACHE_BYTES``,
default 256 MiB; 0 turns it off); worker processes each have their own.

>>> import numpy as np
>>> cache = ColumnCache(1 << 20)
>>> cache.put(("set", 0, 0), np.zeros((32, 3, 8, 8, 1), np.int8))
>>> cache.leading(("set", 0), 63), cache.get(("set", 0, 0)).shape, cache.hits
(1, (32, 3, 8, 8, 1), 1)
"""

from __future__ import annotations

import collections
import os
import threading

import numpy as np

from tessera.config import ImageConfig
from tessera.errors import ConfigError

#: (set identity, group, diagonal)
Key = tuple[str, int, int]


class ColumnCache:
    """A bounded, thread-safe LRU of decoded group columns (see the module docstring).

    Counters: ``hits`` / ``misses`` (columns found / not found by :meth:`get`),
    ``hit_bytes`` (bytes of columns served from the cache, i.e. not decoded again; the
    compressed bytes not fetched are smaller).
    """

    def __init__(self, capacity_bytes: int) -> None:
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int) \
                or capacity_bytes < 0:
            raise ConfigError(f"ColumnCache capacity must be a number of bytes >= 0, got "
                              f"{capacity_bytes!r}")
        self.capacity_bytes = capacity_bytes
        self._entries: collections.OrderedDict[Key, np.ndarray] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.hit_bytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Key) -> np.ndarray | None:
        """The column at ``key`` (marked recently used), or None."""
        with self._lock:
            column = self._entries.get(key)
            if column is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            self.hit_bytes += column.nbytes
            return column

    def leading(self, group: tuple[str, int], k_max: int) -> int:
        """How many leading diagonals (0, 1, ...) of ``group`` ((identity, group)) are
        held."""
        with self._lock:
            d = 0
            while d < k_max and (*group, d) in self._entries:
                d += 1
            return d

    def put(self, key: Key, column: np.ndarray) -> None:
        """Keep ``column`` (read-only from now on), evicting the least recently used
        entries beyond the capacity. A column larger than the capacity is not kept."""
        if column.nbytes > self.capacity_bytes:
            return
        column.setflags(write=False)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._entries[key] = column
            self._bytes += column.nbytes
            while self._bytes > self.capacity_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.nbytes

    def clear(self) -> None:
        """Drop every entry (the counters stay)."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0


_shared: ColumnCache | None = None
_shared_pid: int | None = None
_shared_lock = threading.Lock()


def shared_cache() -> ColumnCache:
    """The process's column cache (made on first use with ``TESSERA_IMAGES_CACHE_BYTES``;
    a child process gets a new, empty one)."""
    global _shared, _shared_pid
    with _shared_lock:
        if _shared is None or _shared_pid != os.getpid():
            _shared = ColumnCache(ImageConfig.from_env().cache_bytes)
            _shared_pid = os.getpid()
        return _shared
