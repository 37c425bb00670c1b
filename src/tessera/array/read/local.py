"""Reads of a local folder store on worker threads: whole tiles read, checked, decoded and
placed one after another without returning to the event loop, raw tiles streamed in slabs."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import numpy as np

from tessera.array.read.fetch import tile_where, unread, verified_tile
from tessera.array.read.scatter import scatter
from tessera.errors import InvalidRangeError, ObjectNotFoundError
from tessera.format.checksum import byte_checksum
from tessera.format.layout import (
    tile_nbytes,
    tile_view,
)
from tessera.format.schema import ArraySchema
from tessera.format.selection import Selection
from tessera.format.tile import (
    TileRead,
    damaged,
    tile_cells,
    truncated,
)
from tessera.query.methods import read_method
from tessera.query.plan import Plan
from tessera.storage.store import AsyncStore

#: Tiles at least this large are verified, decoded and copied on a worker thread.
THREAD_BYTES = 1 << 20


#: Whole tiles of a local folder store are read in batches on worker threads once the tiles
#: fetched whole add up to this many bytes (smaller reads stay on the event loop).
LOCAL_BATCH_BYTES = THREAD_BYTES


def local_batch(store: AsyncStore, reads: list[TileRead], plan: Plan | None,
                candidates: set[int]) -> list[int]:
    """Positions of the tile reads (among ``candidates``) to read in batches on worker
    threads: on a local folder store, the tiles fetched whole by a get of their own (not
    sharing a request with a neighbour), when they add up to at least
    ``LOCAL_BATCH_BYTES``; otherwise none.

    A worker then reads, checks, decodes and places tile after tile without returning to
    the event loop; the tiles of a full read are split into one contiguous run per core, so
    each thread reads its part of the data object front to back.
    """
    if not store.is_local:
        return []
    shared = plan.shared_tiles if plan is not None else set()
    chosen = [i for i in sorted(candidates)
              if (plan is None or _whole_get(plan.choices[i].method)) and i not in shared]
    return chosen if sum(reads[i].length for i in chosen) >= LOCAL_BATCH_BYTES else []


def split_runs(items: list[int], parts: int) -> list[list[int]]:
    """``items`` in at most ``parts`` contiguous runs of nearly equal length."""
    parts = max(1, min(parts, len(items)))
    bounds = [len(items) * k // parts for k in range(parts + 1)]
    return [items[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def read_local_tiles(store: AsyncStore, schema: ArraySchema, reads: list[TileRead],
                     sel: Selection, outputs: dict[str, np.ndarray], array_url: str,
                     stop: threading.Event) -> None:
    """Read whole tiles of a local folder store one after another on this (worker) thread:
    each is read (a raw tile in slabs, see :func:`_stream_raw_tile`; others with one
    ``pread``), checked against its checksum, decoded and scattered into ``outputs`` (a
    layered read: no rank arrays, tiles of one fragment, disjoint regions, so threads never
    write the same cells). Stops early once ``stop`` is set."""
    scratch = _Scratch()
    for read in reads:
        if stop.is_set():
            return
        where = tile_where(array_url, read)
        if _stream_raw_tile(store, schema, read, sel, outputs[read.attr], scratch, where):
            continue
        try:
            data: Any = store.read_file_range(read.key, read.offset, read.length)
        except (ObjectNotFoundError, InvalidRangeError) as err:
            data = unread(err, read.key, where)
        scatter(outputs[read.attr], None, verified_tile(schema, read, data, where), read, sel)


STREAM_SLAB_BYTES = 4 << 20
"""A raw tile in a local batch is read, checked and placed in slabs of at most this many
bytes (but at least one slice across its slowest axis) through one buffer per thread,
reused from tile to tile (a fresh buffer per tile costs page faults on every read).
Measured on this project's 2-core machine, two threads reading the 256 tiles of 4 MiB of a
1 GiB array from the page cache, best of 9: 0.115 s in 4 MiB slabs, 0.120 s in 2 MiB,
0.124 s in 1 MiB, 0.145 s in 512 KiB (more trips through Python per tile); a raw read of
the file: 0.095 s."""


class _Scratch:
    """One worker thread's reused slab buffer."""

    def __init__(self) -> None:
        self._data = bytearray()

    def view(self, nbytes: int) -> memoryview:
        """A buffer of ``nbytes`` (reused when the last one was as large)."""
        if len(self._data) < nbytes:
            self._data = bytearray(nbytes)
        return memoryview(self._data)[:nbytes]


def _stream_raw_tile(store: AsyncStore, schema: ArraySchema, read: TileRead, sel: Selection,
                     out: np.ndarray, scratch: _Scratch, where: str) -> bool:
    """Read a raw tile of a folder store in slabs along its slowest axis in storage order
    (whole slices of that axis, up to ``STREAM_SLAB_BYTES`` each), checking each slab's
    bytes into the tile's checksum and placing its selected cells before the next slab is
    read; one request in all. Raises as a whole-tile read would (missing, truncated,
    damaged), once cells may already be placed.

    Returns False, having read nothing, unless the tile is raw, stored at its full size,
    and the cells taken from it form a box of step 1 in both tile and output (the caller
    then reads it whole).
    """
    attr = schema.attr(read.attr)
    shape = schema.tile_shape
    if (read.codec is not None or read.blocks is not None
            or read.length != tile_nbytes(schema, attr)):
        return False
    found = tile_cells(read, sel)
    if found is None:
        return False
    src = [i for i in found[0] if isinstance(i, slice)]
    dst = [i for i in found[1] if isinstance(i, slice)]
    if len(src) + len(dst) != 2 * len(shape):
        return False
    axis = 0 if schema.cell_order == "row-major" else len(shape) - 1
    unit = read.length // shape[axis]  # bytes of one slice across the slowest axis
    step = min(max(1, STREAM_SLAB_BYTES // unit), shape[axis])
    buffer = scratch.view(step * unit)
    # One view of the buffer as a full slab of cells; a shorter last slab leaves stale cells
    # at its end, which no index below reaches.
    cells = tile_view(buffer, attr.np_dtype, (*shape[:axis], step, *shape[axis + 1:]),
                      attr.cell_shape, schema.cell_order)
    s_pre, s_post = tuple(src[:axis]), tuple(src[axis + 1:])
    d_pre, d_post = tuple(dst[:axis]), tuple(dst[axis + 1:])
    first, last, shift = src[axis].start, src[axis].stop, dst[axis].start - src[axis].start
    update = byte_checksum(read.checksum)
    value, done = 0, 0
    try:
        for slab in store.read_file_chunks(read.key, read.offset, read.length, buffer):
            a = done // unit
            done += len(slab)
            value = update(slab, value)
            lo, hi = max(a, first), min(done // unit, last)
            if lo < hi:
                out[(*d_pre, slice(lo + shift, hi + shift), *d_post)] = \
                    cells[(*s_pre, slice(lo - a, hi - a), *s_post)]
    except (ObjectNotFoundError, InvalidRangeError) as err:
        unread(err, read.key, where)
    if done != read.length:
        raise truncated(read.piece, done, where)
    if value != read.crc32:
        raise damaged(read.piece, where)
    return True


def _whole_get(method: str) -> bool:
    """True if ``method`` fetches the whole stored tile from the store (a get)."""
    m = read_method(method)
    return m.store_bytes and m.whole_tile
