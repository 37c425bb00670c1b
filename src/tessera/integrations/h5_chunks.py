"""What an open :mod:`tessera.h5` file keeps per dataset (:class:`OpenDatasets`: its array
handle and its chunk cache). The chunk cache, as HDF5's (h5py's ``rdcc_nbytes``): whole
chunks (the array's tiles, decoded) kept per dataset, least recently used out first, so a
loop of small reads in the same chunks (a PyTorch ``Dataset.__getitem__`` over a dataset)
copies from memory instead of asking the store on every call.

A read of a box (integers and unit-step slices: ``d[i]``, ``d[r:r + 20, c:c + 20]``) whose
chunks all fit the budget takes the chunks it misses with one read of the array (the box of
whole chunks around them), keeps them, and copies the selection out of them; any other
selection, a dataset of several attributes, and every read when the budget is 0 go to
:meth:`tessera.Array.read` as they are. The chunks kept belong to one list of the array's
fragments and one shape: a write through any handle of this process, a resize, or a list
made again that holds other fragments (another process's writes, seen within
``TESSERA_READ_REFRESH_S``, or at once after :meth:`~tessera.h5.Dataset.refresh`) drops them,
so a read answers what :meth:`tessera.Array.read` answers at that moment.

The budget: ``File(..., rdcc_nbytes=N)``, else ``TESSERA_H5_CHUNK_CACHE_BYTES`` for stores
whose reads never wait on a network (memory, a local folder; 8 MiB by default, HDF5 2.0's
default) and 0 for the others, where the planner's ranges move far fewer bytes than whole
chunks (set ``rdcc_nbytes`` to have one there too).

>>> import numpy as np, tessera
>>> arr = tessera.from_numpy("memory://doc-h5-chunks", np.arange(64).reshape(8, 8),
...                          tile=(4, 4))
>>> cache = ChunkCache("x", 1 << 20)
>>> cache.read(arr, 0) is None           # no list of fragments yet: the array's read makes it
True
>>> _ = arr[0]
>>> cache.read(arr, (slice(1, 3), 5)).tolist(), cache.misses, cache.nbytes
([13, 21], 1, 128)
>>> cache.read(arr, (2, slice(4, 6))).tolist(), cache.hits
([20, 21], 1)
>>> cache.read(arr, [0, 2]) is None      # not a box: the caller reads the array
True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tessera.array.array import Array
from tessera.array.fragment import SCHEMA_KEY
from tessera.cache import LRUCache
from tessera.config import CacheConfig
from tessera.errors import InvalidArgumentError, InvalidRangeError, ObjectNotFoundError
from tessera.format.schema import ArraySchema
from tessera.format.selection import box_of
from tessera.storage.blocking import Store

#: A chunk's key: the generation of the fragments it was read from, its tile index.
ChunkKey = tuple[int, tuple[int, ...]]


class ChunkCache:
    """One dataset's chunk cache (see the module docs).

    Attributes:
        capacity_bytes: the budget (``rdcc_nbytes``).
    """

    def __init__(self, name: str, capacity_bytes: int) -> None:
        self._chunks: LRUCache[ChunkKey, np.ndarray] = LRUCache(
            f"tessera.h5 chunks of {name}", capacity_bytes)
        self.capacity_bytes = capacity_bytes
        #: The list of fragments seen last (by identity), and what the chunks kept belong to:
        #: the fragments' names and the array's shape, under a generation number.
        self._listing: object = None
        self._schema: ArraySchema | None = None
        self._belongs: tuple[tuple[str, ...], tuple[int, ...]] | None = None
        self._generation = 0
        self._tile_bytes = 0  # of a whole chunk, under the schema seen last

    @property
    def hits(self) -> int:
        """Chunks found kept."""
        return self._chunks.hits

    @property
    def misses(self) -> int:
        """Chunks looked for and not kept (then read)."""
        return self._chunks.misses

    @property
    def nbytes(self) -> int:
        """Bytes of the chunks kept now."""
        return self._chunks.nbytes

    def clear(self) -> None:
        """Drop every chunk kept."""
        self._chunks.clear()
        self._belongs = None
        self._listing = self._schema = None

    def read(self, array: Array, sel: Any) -> Any:
        """``array[sel]`` answered from the chunks kept (the missing ones read with one
        read of the array and kept), or ``None`` when the cache does not take this read
        (then the caller reads the array)."""
        if self.capacity_bytes == 0:
            return None
        metas = array.current_fragments()
        schema = array.schema
        if metas is None or schema.sparse or len(schema.attrs) != 1:
            return None  # (no current list: the array's own read lists the fragments again)
        box = box_of(sel, schema)
        if box is None:
            return None
        lo, hi, drop = box
        if metas is not self._listing or schema is not self._schema:
            self._check_generation(metas, schema)
        first, last, at = [], [], []  # per dimension: first and last chunk, place in it
        count = 1
        for a, b, low, t, d in zip(lo, hi, schema.lower, schema.tile_shape, drop,
                                   strict=True):
            f, g = (a - low) // t, (b - low) // t
            first.append(f)
            last.append(g)
            count *= g - f + 1
            # in one chunk, integers stay integers (numpy drops their dimension, as the
            # array's read does) and slices become the chunk's
            x = a - low - f * t
            at.append(x if d else slice(x, x + b - a + 1))
        if count * self._tile_bytes > self.capacity_bytes:
            return None  # HDF5 too reads chunks that do not fit around its cache
        generation = self._generation
        if count == 1:
            index = tuple(first)
            tile = self._chunks.get((generation, index))
            if tile is None:
                tile = self._fill(array, [index], generation)[index]
            got = tile[tuple(at)]
            return got.copy() if isinstance(got, np.ndarray) else got
        return self._gather(array, lo, hi, drop, first, last, generation)

    def _check_generation(self, metas: list[Any], schema: ArraySchema) -> None:
        """A new list of fragments or schema (made again as time passes): the chunks kept
        stay only if it holds the same fragments and the array kept its shape."""
        belongs = (tuple(m.name for m in metas), schema.shape)
        self._tile_bytes = math.prod(schema.tile_shape) * schema.attrs[0].cell_nbytes
        if belongs != self._belongs:
            self._chunks.clear()
            self._generation += 1
            self._belongs = belongs
        self._listing, self._schema = metas, schema

    def _gather(self, array: Array, lo: tuple[int, ...], hi: tuple[int, ...],
                drop: tuple[bool, ...], first: list[int], last: list[int],
                generation: int) -> Any:
        """A box over several chunks: each one's part copied into a new output."""
        schema = array.schema
        # per dimension, each chunk the box meets: its index, the part's place in the
        # output and in the chunk
        along = []
        for a, b, low, f, g, t in zip(lo, hi, schema.lower, first, last, schema.tile_shape,
                                      strict=True):
            row = []
            for i in range(f, g + 1):
                start = low + i * t  # the chunk's first cell
                x, y = max(a, start), min(b, start + t - 1)
                row.append((i, slice(x - a, y - a + 1), slice(x - start, y - start + 1)))
            along.append(row)
        parts = [tuple(zip(*combo, strict=True)) for combo in itertools.product(*along)]
        found: dict[tuple[int, ...], np.ndarray] = {}
        missing = []
        for index, _, _ in parts:
            tile = self._chunks.get((generation, index))
            if tile is None:
                missing.append(index)
            else:
                found[index] = tile
        if missing:
            found.update(self._fill(array, missing, generation))
        attr = schema.attrs[0]
        out = np.empty(tuple(b - a + 1 for a, b in zip(lo, hi, strict=True))
                       + attr.cell_shape, attr.np_dtype)
        for index, dst, src in parts:
            out[dst] = found[index][src]
        if not any(drop):
            return out
        return out[tuple(0 if d else slice(None) for d in drop)]

    def _fill(self, array: Array, missing: list[tuple[int, ...]],
              generation: int) -> dict[tuple[int, ...], np.ndarray]:
        """Read the chunks ``missing`` with one read of the array (the box of whole chunks
        around them, clipped to the domain), keep each and return them by tile index."""
        schema = array.schema
        tiles, lows = schema.tile_shape, schema.lower
        highs = tuple(low + n - 1 for low, n in zip(lows, schema.shape, strict=True))
        tlo = [min(ix[d] for ix in missing) for d in range(len(tiles))]
        thi = [max(ix[d] for ix in missing) for d in range(len(tiles))]
        origin = [low + i * t for low, i, t in zip(lows, tlo, tiles, strict=True)]
        block = np.asarray(array.read(tuple(
            slice(o, min(low + (j + 1) * t - 1, high) + 1)
            for o, low, j, t, high in zip(origin, lows, thi, tiles, highs, strict=True))))
        out = {}
        for index in missing:
            # a chunk of its own (not a view keeping the whole block alive), never written
            tile = block if len(missing) == 1 else block[tuple(
                slice(low + i * t - o, low + (i + 1) * t - o)
                for low, i, t, o in zip(lows, index, tiles, origin, strict=True))].copy()
            tile.flags.writeable = False
            self._chunks.put((generation, index), tile)
            out[index] = tile
        return out


class OpenDatasets:
    """What an open :class:`tessera.h5.File` keeps per dataset, as HDF5 keeps its open
    datasets: the array handle (so ``f["x"][i]`` in a loop neither opens the array nor
    lists its fragments on every call) and the chunk cache. A kept handle is used while
    the dataset's schema object holds the bytes it had when the handle was opened (one read
    per ``f[name]``); a dataset deleted or made again there is opened afresh."""

    def __init__(self, store: Store, rdcc_nbytes: int,
                 opener: Callable[[str], Array]) -> None:
        self._store, self._rdcc_nbytes, self._opener = store, rdcc_nbytes, opener
        self._arrays: dict[str, tuple[bytes, Array]] = {}
        self._chunks: dict[str, ChunkCache] = {}

    def kept(self, path: str) -> Array | None:
        """The handle kept for the dataset at ``path`` when its schema is unchanged, else
        ``None`` (then the caller looks at what ``path`` holds)."""
        got = self._arrays.get(path)
        if got is None:
            return None
        raw, key = got[0], f"{path}/{SCHEMA_KEY}"
        try:
            if self._store.aio.reads_now and raw.endswith(b"}"):
                # on this thread, as many bytes as it had: a JSON object ends at its last
                # "}", so a schema written since (never followed by whitespace) either
                # differs within them or is shorter
                now = bytes(self._store.aio.read_range_now(key, 0, len(raw)))
            else:
                now = bytes(self._store.get(key))
        except (ObjectNotFoundError, InvalidRangeError):
            now = b""
        if now != raw:
            self.forget(path)
            return None
        return got[1]

    def open(self, path: str, array: Array | None = None) -> Array:
        """The dataset at ``path`` opened (or ``array``, just created there), kept."""
        raw = bytes(self._store.get(f"{path}/{SCHEMA_KEY}"))
        array = array if array is not None else self._opener(path)
        self._arrays[path] = (raw, array)
        return array

    def chunks(self, path: str) -> ChunkCache:
        """The chunk cache of the dataset at ``path``."""
        got = self._chunks.get(path)
        if got is None:
            got = self._chunks[path] = ChunkCache(path, self._rdcc_nbytes)
        return got

    def forget(self, path: str) -> None:
        """Drop what is kept for ``path`` and below it (deleted)."""
        for kept in [p for p in {*self._arrays, *self._chunks}
                     if p == path or p.startswith(path + "/")]:
            self._arrays.pop(kept, None)
            cache = self._chunks.pop(kept, None)
            if cache is not None:
                cache.clear()


def chunk_budget(store: Store, nbytes: Any = None, nslots: Any = None, w0: Any = None) -> int:
    """A file's chunk cache budget per dataset from h5py's settings (checked as h5py checks
    them; ``nslots`` and ``w0`` change nothing here): ``nbytes``, else
    ``TESSERA_H5_CHUNK_CACHE_BYTES`` on a store whose reads never wait on a network, else 0.

    >>> from tessera.storage.blocking import open_store
    >>> store = open_store("memory://doc-budget")
    >>> chunk_budget(store), chunk_budget(store, 0)
    (8388608, 0)
    >>> chunk_budget(store, -1)
    Traceback (most recent call last):
    tessera.errors.InvalidArgumentError: File(rdcc_nbytes=...) must be a whole number >= 0, got -1
    """
    for name, value, least in (("rdcc_nbytes", nbytes, 0), ("rdcc_nslots", nslots, 1)):
        if value is not None and (isinstance(value, bool) or not isinstance(
                value, (int, np.integer)) or value < least):
            raise InvalidArgumentError(f"File({name}=...) must be a whole number >= {least}, "
                                       f"got {value!r}")
    if w0 is not None and (isinstance(w0, bool) or not isinstance(w0, (int, float))
                           or not 0 <= w0 <= 1):
        raise InvalidArgumentError(f"File(rdcc_w0=...) must be between 0 and 1, got {w0!r}")
    if nbytes is not None:
        return int(nbytes)
    return CacheConfig.from_env().h5_chunk_cache_bytes if store.aio.reads_now else 0
