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

from collections.abc import Hashable
from typing import Any

from tessera.cache import LRUCache
from tessera.errors import ConfigError


class TileCache(LRUCache[Hashable, Any]):
    """Decoded tiles by key, at most ``budget_bytes`` in all (0 disables the cache): the one
    :class:`~tessera.cache.LRUCache` (thread-safe; ``hits`` and ``misses`` count lookups).
    A value is bytes-like; its size is its length in bytes."""

    def __init__(self, budget_bytes: int) -> None:
        if isinstance(budget_bytes, int) and budget_bytes < 0:
            raise ConfigError(f"cache budget must be >= 0 bytes, got {budget_bytes}")
        super().__init__("pushdown tiles", budget_bytes, size=_size)

    @property
    def budget(self) -> int:
        """The budget in bytes."""
        return self.capacity_bytes


def _size(value: Any) -> int:
    return len(value) if isinstance(value, bytes) else len(memoryview(value).cast("B"))
