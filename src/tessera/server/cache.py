"""A bounded LRU cache of decoded tiles, so repeated pushdowns on hot tiles do not read the
store again.

>>> cache = TileCache(100)
>>> cache.put(("k", 0, 10), b"0123456789")
>>> cache.get(("k", 0, 10))
b'0123456789'
>>> cache.put(("k", 10, 95), b"x" * 95)   # over budget: the oldest entry leaves
>>> cache.get(("k", 0, 10)) is None, cache.nbytes
(True, 95)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from tessera.errors import ConfigError


class TileCache:
    """Decoded tiles by key, at most ``budget_bytes`` in all (0 disables the cache).

    Not thread-safe: the server touches it from its event loop only. ``hits`` and
    ``misses`` count lookups.
    """

    def __init__(self, budget_bytes: int) -> None:
        if budget_bytes < 0:
            raise ConfigError(f"cache budget must be >= 0 bytes, got {budget_bytes}")
        self.budget = budget_bytes
        self.nbytes = 0
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[Hashable, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        """Whether ``key`` is cached (not counted as a lookup)."""
        return key in self._items

    def get(self, key: Hashable) -> Any:
        """The cached value, or ``None``; a hit becomes the most recently used."""
        value = self._items.get(key)
        if value is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return value

    def put(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` (bytes-like), evicting the least recently used entries to stay
        within budget; a value larger than the whole budget is not kept."""
        size = len(memoryview(value).cast("B")) if not isinstance(value, bytes) else len(value)
        if size > self.budget:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self.nbytes -= _size(old)
        while self._items and self.nbytes + size > self.budget:
            _, evicted = self._items.popitem(last=False)
            self.nbytes -= _size(evicted)
        self._items[key] = value
        self.nbytes += size


def _size(value: Any) -> int:
    return len(value) if isinstance(value, bytes) else len(memoryview(value).cast("B"))
