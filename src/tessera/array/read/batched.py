"""Tiles that arrive in one planned request, placed as a batch.

A plan merges the requests of neighbouring tiles of one object (:mod:`tessera.query.refine`);
a read of many small tiles (the diagonals of a group of images, a slab of small tiles) then
gets a few requests carrying tens or hundreds of whole tiles each. Placing such tiles one by
one costs the event loop a task, a window charge and a trip through the fetcher per tile;
here each such request is fetched once and a worker thread checks, decodes and places all
its tiles in a row (each against its own checksum, as a get of the tile would), while the
event loop goes on with the other requests.

Only a *layered* read of a single box does this (no rank arbitration: threads never write
the same cells), and only for a request that carries at least :data:`BATCH_MIN_TILES`
tiles (or two or three large ones, :data:`BATCH_MIN_BYTES`), each whole and from that
request alone.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np

from tessera.array.read.fetch import annotate, fetch_span, tile_where, verified_tile
from tessera.array.read.local import THREAD_BYTES
from tessera.array.read.scatter import scatter
from tessera.errors import CorruptDataError
from tessera.format.checksum import checksum
from tessera.format.layout import tile_nbytes
from tessera.format.schema import ArraySchema, Attr
from tessera.format.selection import Selection
from tessera.format.tile import TileRead
from tessera.query.plan import Plan
from tessera.query.refine import PlannedRequest
from tessera.storage.store import AsyncStore
from tessera.storage.window import ByteWindow

#: A request is placed as a batch when it carries at least this many whole tiles, or at
#: least two that decode to :data:`BATCH_MIN_BYTES` (otherwise the tiles go through the
#: fetcher one by one: a small read keeps its work on the event loop, where a thread hop's
#: 0.1-0.3 ms would show).
BATCH_MIN_TILES = 4

#: ... or at least two tiles decoding to this many bytes in all (a whole zstd array's
#: requests carry 2-3 tiles of 1 MiB: batched, 0.201 -> 0.187 s for 64 MiB on loopback,
#: medians of 9 interleaved runs).
BATCH_MIN_BYTES = THREAD_BYTES

Batch = tuple[PlannedRequest, list[int]]
"""A planned request and the positions of the tile reads it carries."""


def request_batches(plan: Plan | None, schema: ArraySchema, reads: list[TileRead],
                    candidates: set[int], window: ByteWindow | None) -> list[Batch]:
    """The requests of ``plan`` to place as batches: each carries at least
    :data:`BATCH_MIN_TILES` tiles (or two or three decoding to :data:`BATCH_MIN_BYTES`),
    every one of them among ``candidates``, held whole by the request and fetched by no
    other request, with no bytes between them (no gap to hold that no tile needs), and holds
    no more than the read's ``window`` (:func:`batch_bytes`; a larger one goes tile by tile,
    so the window's bound holds)."""
    if plan is None:
        return []
    out = []
    for request in plan.requests:
        tiles = list(request.tiles)
        if len(tiles) < 2 or (len(tiles) < BATCH_MIN_TILES and sum(
                tile_nbytes(schema, schema.attr(reads[t].attr)) for t in tiles)
                              < BATCH_MIN_BYTES):
            continue
        if all(t in candidates and len(plan.requests_for(t)) == 1
               and request.start <= reads[t].offset
               and reads[t].offset + reads[t].length <= request.stop for t in tiles) and (
                sum(reads[t].length for t in tiles) == request.stop - request.start) and (
                window is None
                or batch_bytes(schema, reads, (request, tiles)) <= window.capacity):
            out.append((request, tiles))
    return out


def batch_bytes(schema: ArraySchema, reads: list[TileRead], batch: Batch) -> int:
    """The bytes a batch holds at most: its request's, and the largest of its tiles decoded
    (they are decoded and placed one at a time)."""
    request, positions = batch
    return request.stop - request.start + max(
        tile_nbytes(schema, schema.attr(reads[p].attr)) for p in positions)


async def read_batch(store: AsyncStore, schema: ArraySchema, reads: list[TileRead],
                     batch: Batch, sel: Selection, outputs: dict[str, np.ndarray],
                     array_url: str, limit: asyncio.Semaphore, window: ByteWindow | None,
                     stop: threading.Event) -> None:
    """Fetch ``batch``'s request (charging the window :func:`batch_bytes`), then check,
    decode and place its tiles on a worker thread."""
    request, positions = batch
    need = batch_bytes(schema, reads, batch)
    if window is not None:
        await window.acquire(need)
    try:
        where = tile_where(array_url, reads[positions[0]])
        async with limit:
            data = await fetch_span(store, request.key, request.start, request.stop, where)
        await asyncio.to_thread(place_batch, schema, reads, batch, data, sel, outputs,
                                array_url, stop)
    finally:
        if window is not None:
            window.release(need)


def place_batch(schema: ArraySchema, reads: list[TileRead], batch: Batch, data: Any,
                sel: Selection, outputs: dict[str, np.ndarray], array_url: str,
                stop: threading.Event) -> None:
    """Check, decode and place the tiles of ``batch`` from its request's bytes ``data``, one
    after another on this thread; stops early once ``stop`` is set (another part of the
    read failed)."""
    request, positions = batch
    view = memoryview(data).cast("B")
    rows = _rows_of_whole_raw_tiles(schema, reads, positions, sel)
    for run in rows:
        if stop.is_set():
            return
        if len(run) > 1 and _checksums_hold(reads, run, view, request.start):
            _place_row(schema, reads, run, view, request.start, sel, outputs)
            continue
        for position in run:
            read = reads[position]
            start = read.offset - request.start
            try:
                tile = verified_tile(schema, read, view[start:start + read.length],
                                     tile_where(array_url, read))
            except CorruptDataError as err:
                annotate(err, array_url, read)
                raise
            scatter(outputs[read.attr], None, tile, read, sel)
            del tile  # one decoded tile at a time, as the window was charged


def _rows_of_whole_raw_tiles(schema: ArraySchema, reads: list[TileRead], positions: list[int],
                             sel: Selection) -> list[list[int]]:
    """``positions`` cut into runs placed together: tiles stored raw, wholly selected by a
    selection of plain slices, of one attribute, each the next tile along the last
    dimension and the next bytes of the object; every other tile is a run of its own."""
    plain = all(d.ascending_run for d in sel.dims) and schema.ndim > 0
    extent = schema.tile_shape
    out: list[list[int]] = []
    prev: TileRead | None = None
    for position in positions:
        read = reads[position]
        whole = (plain and read.codec is None and read.region[0] == read.tile_origin
                 and all(h - o + 1 == e for h, o, e in
                         zip(read.region[1], read.tile_origin, extent, strict=True)))
        if (whole and prev is not None and out and read.attr == prev.attr
                and read.offset == prev.offset + prev.length
                and read.tile_index[:-1] == prev.tile_index[:-1]
                and read.tile_index[-1] == prev.tile_index[-1] + 1):
            out[-1].append(position)
        else:
            out.append([position])
        prev = read if whole else None
    return out


def _checksums_hold(reads: list[TileRead], run: list[int], view: memoryview,
                    base: int) -> bool:
    """True if every tile of ``run`` matches its checksum (else the tiles go one at a time,
    and the damaged one raises as a single tile's read would)."""
    for position in run:
        read = reads[position]
        start = read.offset - base
        if checksum(view[start:start + read.length], read.checksum) != read.crc32:
            return False
    return True


def _place_row(schema: ArraySchema, reads: list[TileRead], run: list[int], view: memoryview,
               base: int, sel: Selection, outputs: dict[str, np.ndarray]) -> None:
    """Place a run of whole raw tiles, neighbours along the last dimension and in the
    object, with one copy (:func:`place_raw_row`)."""
    first, last = reads[run[0]], reads[run[-1]]
    start = first.offset - base
    stop = last.offset + last.length - base
    place_raw_row(schema, schema.attr(first.attr), view[start:stop], len(run),
                  first.region[0], last.region[1], sel, outputs[first.attr])


def place_raw_row(schema: ArraySchema, attr: Attr, data: memoryview, k: int,
                  lo: tuple[int, ...], hi: tuple[int, ...], sel: Selection,
                  out: np.ndarray) -> None:
    """Place ``k`` whole raw tiles stored one after another in ``data``, neighbours along
    the last dimension covering the cells ``lo`` to ``hi`` (a box a selection of plain
    slices takes whole), into ``out`` with one copy: their bytes as ``k`` tiles into the
    output's box, seen as ``k`` tiles side by side."""
    n = schema.ndim
    # k tiles one after another; a col-major tile stores its cells last axis first
    col_major = schema.cell_order == "col-major"
    stored = np.frombuffer(data, dtype=attr.np_dtype).reshape(
        (k, *(reversed(schema.tile_shape) if col_major else schema.tile_shape),
         *attr.cell_shape))
    tiles = (stored.transpose((0, *reversed(range(1, n + 1)), *range(n + 1, stored.ndim)))
             if col_major else stored)
    dst = tuple(slice(a - d.lo, b - d.lo + 1) for d, a, b in zip(sel.dims, lo, hi, strict=True))
    box = out[dst]
    width = schema.tile_shape[-1]
    # The output's box as (..., k, width, cells): the last dimension split into the k tiles.
    # (a strided view by construction: a reshape could copy, and the copy be written to)
    step = box.strides[n - 1]
    split = np.lib.stride_tricks.as_strided(
        box, shape=(*box.shape[:n - 1], k, width, *box.shape[n:]),
        strides=(*box.strides[:n - 1], step * width, step, *box.strides[n:]))
    np.moveaxis(split, n - 1, 0)[...] = tiles
