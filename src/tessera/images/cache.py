"""The column cache of image sets: the decoded leading diagonals of whole groups, kept per
process so that several readers of one set (several models, datasets or handles) and a rising
``k`` share what was fetched: a read at ``k'`` after ``k`` fetches only diagonals ``k..k'-1``
of the groups it touches, and a second model reading the same groups at ``k`` fetches
nothing.

An entry is one group's diagonals ``0..k-1`` concatenated along the last axis (the layout
reads and decoding use: ``(group, C, BY, BX, T(k))``, ``T(k)`` coefficients per block), so a
read at any ``k`` up to the one held is a slice, with no per-diagonal copies. Entries are
keyed by the set's identity (the ``uid`` its header was created with, so a set deleted and
made again at the same URL never sees the old one's columns) and the group. Groups are
written once (appends claim whole new groups), so an entry never goes stale. The cache is a
:class:`tessera.cache.LRUCache` (bounded in bytes, thread-safe); :func:`shared_cache` is the
process's (``TESSERA_IMAGES_CACHE_BYTES``, default 256 MiB; 0 turns it off); worker
processes each have their own.

>>> import numpy as np
>>> cache = ColumnCache(1 << 20)
>>> cache.put_group(("set", 0), 2, np.zeros((32, 3, 8, 8, 3), np.int8))
>>> cache.leading(("set", 0), 63), cache.group(("set", 0)).data.shape, cache.hits
(2, (32, 3, 8, 8, 3), 1)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tessera.cache import LRUCache, ProcessCache
from tessera.config import ImageConfig

#: (set identity, group)
GroupKey = tuple[str, int]


@dataclasses.dataclass(frozen=True)
class GroupColumns:
    """One group's diagonals ``0..k-1``, concatenated: ``data`` is ``(group, C, BY, BX,
    T(k))`` (read-only)."""

    k: int
    data: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes held."""
        return int(self.data.nbytes)


class ColumnCache(LRUCache[GroupKey, GroupColumns]):
    """A bounded, thread-safe LRU of groups' leading diagonals (see the module docstring).

    Counters (of :class:`~tessera.cache.LRUCache`): ``hits`` / ``misses`` (groups found / not
    found), ``hit_bytes`` (bytes of the groups served from the cache, not decoded again; the
    compressed bytes not fetched are smaller).
    """

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__("image columns", capacity_bytes)

    def group(self, key: GroupKey) -> GroupColumns | None:
        """The diagonals held for group ``key`` (marked recently used), or ``None``."""
        return self.get(key)

    def leading(self, key: GroupKey, k_max: int) -> int:
        """How many leading diagonals (0, 1, ...) of group ``key`` are held, at most
        ``k_max`` (not counted as a hit or a miss)."""
        held = self.peek(key)
        return 0 if held is None else min(held.k, k_max)

    def put_group(self, key: GroupKey, k: int, data: np.ndarray) -> None:
        """Keep diagonals ``0..k-1`` of group ``key`` (``data``, read-only from now on),
        replacing fewer ones held before."""
        data.setflags(write=False)
        self.put(key, GroupColumns(k, data))


#: The process's column cache, made on first use (``TESSERA_IMAGES_CACHE_BYTES``).
_SHARED: ProcessCache[GroupKey, GroupColumns] = ProcessCache(
    lambda: ColumnCache(ImageConfig.from_env().cache_bytes))


def shared_cache() -> ColumnCache:
    """The process's column cache (made on first use with ``TESSERA_IMAGES_CACHE_BYTES``;
    a child process gets a new, empty one)."""
    cache = _SHARED()
    assert isinstance(cache, ColumnCache)
    return cache
