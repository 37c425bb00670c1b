"""Reads of many whole tiles of one fragment, in columns.

A read of a box lying on tile boundaries that one dense fragment holds (a whole array, a
slab of whole tiles) needs every tile it meets whole. Made tile by tile, such a read
describes each tile three times (its read, its need, its choice), microseconds a tile: the
planning of a read of 10^6 tiles took seconds before any byte moved. Here the tiles are
columns of the fragment's own tables (:class:`WholeTiles`), planned a group of tiles alike
at a time (:func:`~tessera.query.plan.plan_whole`), and executed a request at a time
(:func:`execute_whole`): each planned request is fetched once, and a worker thread checks
every tile against its checksum, then places runs of raw tiles with one copy each and
decodes compressed ones one by one. The plan, the bytes fetched, the checks and the values
are those of the tile-by-tile read (the tests compare both ways); only the Python objects
per tile are gone. :class:`WholeTiles` is also a sequence of
:class:`~tessera.format.tile.TileRead`, made one at a time when asked for (a read's report
lists them).

>>> import numpy as np, tessera
>>> from tessera._sync import run_sync
>>> from tessera.format.selection import normalize_selection
>>> arr = tessera.from_numpy("memory://doc-whole", np.zeros((64, 64), np.int8), tile=(2, 2))
>>> sel = normalize_selection((slice(0, 64), slice(0, 64)), arr.schema)
>>> tiles = whole_tiles(arr.schema, sel, run_sync(arr._visible_metas()), ["data"])
>>> len(tiles), tiles[1].tile_index, tiles[1].region
(1024, (0, 1), ((0, 2), (1, 3)))
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from tessera._lazy import MadeOnDemand
from tessera.array.fragment import FragmentMeta
from tessera.array.read.batched import BATCH_MIN_TILES, place_raw_row
from tessera.array.read.execute import execute_tile_reads
from tessera.array.read.fetch import annotate, decode_tile, fetch_span, tile_where
from tessera.array.read.fragment_index import fragment_index
from tessera.array.read.tiles import tile_grid, tile_read
from tessera.errors import CorruptDataError
from tessera.format.blocks import decode_blocked
from tessera.format.checksum import byte_checksum
from tessera.format.codecs import get_codec
from tessera.format.layout import tile_from_bytes, tile_nbytes, tile_spans
from tessera.format.schema import ArraySchema
from tessera.format.selection import Selection
from tessera.format.tile import TileRead, damaged
from tessera.query.plan import Plan, label_of
from tessera.query.whole import WholeNeeds, columns_pay
from tessera.storage.store import AsyncStore
from tessera.storage.window import ByteWindow

__all__ = ["BULK_WHOLE_READS", "WholeTiles", "execute_whole", "fragments_of", "whole_tiles"]

#: A read of whole tiles is made in columns from this many tile reads (tiles x attributes):
#: as few as the planner plans in groups (:func:`~tessera.query.whole.columns_pay`). At 256
#: tiles it measured as fast or faster than tile by tile on a folder (raw 16 KiB tiles 9.6
#: against 10.4 ms, zstd 20 against 25 ms) and on S3 (256-byte tiles 3.5 against 5.6 ms);
#: a small read of a folder or memory store (up to ``direct.NOW_BYTES``) stays on the
#: calling thread all the same, with its recipes.
BULK_WHOLE_READS = 256


class WholeTiles(MadeOnDemand[TileRead]):
    """The whole tiles of fragment ``meta`` (of ``rank``) a read needs, for ``attrs``, in
    the order the tile-by-tile planner lists them (the tiles in the order of their spans,
    a tile's attributes together): read ``i`` is attribute ``attrs[i % len(attrs)]`` of
    the tile ``indices[i // len(attrs)]``, at position ``pos[i // len(attrs)]`` of the
    fragment. Indexing makes a :class:`~tessera.format.tile.TileRead`."""

    def __init__(self, schema: ArraySchema, meta: FragmentMeta, rank: int, attrs: list[str],
                 index: np.ndarray, pos: np.ndarray) -> None:
        self.schema, self.meta, self.rank, self.attrs = schema, meta, rank, list(attrs)
        self.indices, self.pos = index, pos
        tables = [meta.attrs[name] for name in attrs]
        na = len(attrs)

        def column(values: list[np.ndarray], dtype: Any) -> np.ndarray:
            return np.stack(values, axis=1).astype(dtype).reshape(-1)

        self.offsets = column([t.offsets[pos] for t in tables], np.int64)
        self.sizes = column([t.sizes[pos] for t in tables], np.int64)
        self.crc32 = column([t.crc32[pos] for t in tables], np.int64)
        # stored as raw bytes; compressed in blocks (a tile stored raw has no blocks)
        self.raw = column([np.ones(len(pos), bool) if t.codec is None
                           else np.zeros(len(pos), bool) if t.stored_raw is None
                           else np.asarray(t.stored_raw, bool)[pos] for t in tables], bool)
        self.blocked = column([np.full(len(pos), bool(t.block_bytes) and t.codec is not None)
                               for t in tables], bool) & ~self.raw
        self.attr_of = np.tile(np.arange(na, dtype=np.int64), len(pos))
        self.keys = tuple(dict.fromkeys(t.key for t in tables))
        self.key_of_attr = np.asarray([self.keys.index(t.key) for t in tables], np.int64)
        self.codecs = [t.codec for t in tables]
        self.checksums = [t.checksum for t in tables]
        self.decoded = [tile_nbytes(schema, schema.attr(name)) for name in attrs]

    @property
    def fragments(self) -> set[str]:
        """The fragments these reads come from (one)."""
        return {self.meta.name}

    def __len__(self) -> int:
        return len(self.offsets)

    def _item(self, i: int) -> TileRead:
        tile, a = divmod(i, len(self.attrs))
        index = tuple(int(v) for v in self.indices[tile])
        origin = self._origin(index)
        last = tuple(o + e - 1 for o, e in zip(origin, self.schema.tile_shape, strict=True))
        return tile_read(self.meta, self.rank, self.attrs[a], int(self.pos[tile]), index,
                         origin, (origin, last))

    def label(self, i: int) -> str:
        """How a plan names read ``i`` (as :func:`~tessera.query.plan.tile_label` names the
        :class:`~tessera.format.tile.TileRead` indexing makes, without making it)."""
        tile, a = divmod(i, len(self.attrs))
        return label_of(self.attrs[a], self.indices[tile].tolist(), self.meta.name)

    def _origin(self, index: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(lw + i * e for lw, i, e in zip(self.schema.lower, index,
                                                    self.schema.tile_shape, strict=True))

    def needs(self) -> WholeNeeds:
        """What the planner needs of every tile read: each is needed whole."""
        return WholeNeeds(self.keys, self.key_of_attr[self.attr_of], self.offsets, self.sizes,
                          self.raw | self.blocked,
                          np.asarray(self.decoded, np.int64)[self.attr_of],
                          self.label,
                          np.where(self.blocked, self.sizes, -1))


def whole_tiles(schema: ArraySchema, sel: Selection, metas: list[FragmentMeta],
                attrs: list[str], least: int | None = None) -> WholeTiles | None:
    """The reads of ``sel`` in columns when they can be (else ``None``: the tile-by-tile
    path reads it): a selection of plain slices whose box lies on tile boundaries, meets
    one fragment only, a dense one holding all of it, with tiles not kept inline, and at
    least ``least`` tile reads (default :data:`BULK_WHOLE_READS`; never fewer than the
    planner plans in groups, :func:`~tessera.query.whole.columns_pay`)."""
    if sel.empty or schema.ndim == 0 or not all(d.ascending_run for d in sel.dims):
        return None
    lo, hi = sel.bounds()
    extent, lower = schema.tile_shape, schema.lower
    if any((a - lw) % e or (b + 1 - lw) % e
           for a, b, lw, e in zip(lo, hi, lower, extent, strict=True)):
        return None
    counts = [(b + 1 - a) // e for a, b, e in zip(lo, hi, extent, strict=True)]
    reads = math.prod(counts) * len(attrs)
    if reads < (BULK_WHOLE_READS if least is None else least) or not columns_pay(reads):
        return None
    index = fragment_index(metas, schema)
    ranks = index.meeting((lo, hi))
    if len(ranks) != 1 or not metas[ranks[0]].is_dense:
        return None
    rank = ranks[0]
    meta = metas[rank]
    flo, fhi = index.boxes[rank]
    if any(a < f0 or b > f1 for a, b, f0, f1 in zip(lo, hi, flo, fhi, strict=True)):
        return None
    if any(meta.attrs[name].inline is not None for name in attrs):
        return None
    idx, pos = tile_grid(schema, meta, tile_spans(lower, extent, (lo, hi)))
    return WholeTiles(schema, meta, rank, attrs, idx, pos)


async def execute_whole(store: AsyncStore, schema: ArraySchema, sel: Selection,
                        tiles: WholeTiles, plan: Plan, array_url: str,
                        window: ByteWindow) -> dict[str, np.ndarray]:
    """Fetch every request of ``plan`` once, and on worker threads check each of its tiles
    against its checksum and place it (runs of raw tiles with one copy, compressed tiles
    decoded one by one) into full-shape outputs; returns them. ``window`` bounds the
    bytes fetched and not yet placed (a request takes its bytes and its largest tile
    decoded). A plan whose requests do not each hold whole tiles of their own (parts of a
    tile in several requests), or that carries fewer than :data:`BATCH_MIN_TILES` tiles a
    request (large tiles whose gets were not merged: the tile-by-tile executor takes them
    without a thread hop per request; a forced get of 4,096 small tiles on a folder took
    1.4 s here against 0.18 s), is read tile by tile instead."""
    served = np.zeros(len(tiles), np.int64)
    for r in plan.requests:
        t = np.asarray(r.tiles, np.int64)
        if (tiles.offsets[t] < r.start).any() or (
                tiles.offsets[t] + tiles.sizes[t] > r.stop).any():
            served[:] = 0
            break
        served[t] += 1
    if not (served == 1).all() or len(plan.requests) * BATCH_MIN_TILES > len(tiles):
        listed = dataclasses.replace(plan, choices=list(plan.choices))  # each made once
        return await execute_tile_reads(store, schema, sel, list(tiles), tiles.attrs,
                                        array_url, None, listed, window=window)
    outputs = {name: np.empty(sel.full_shape + schema.attr(name).cell_shape,
                              schema.attr(name).np_dtype) for name in tiles.attrs}
    limit = asyncio.Semaphore(store.config.max_concurrency)
    stop = threading.Event()
    largest = max(tiles.decoded)

    async def one(key: str, start: int, end: int, positions: tuple[int, ...]) -> None:
        need = end - start + largest
        await window.acquire(need)
        try:
            where = tile_where(array_url, tiles[positions[0]])
            async with limit:
                data = await fetch_span(store, key, start, end, where)
            await asyncio.to_thread(place_request, schema, sel, tiles, positions, data, start,
                                    outputs, array_url, stop)
        finally:
            window.release(need)

    tasks = [asyncio.ensure_future(one(r.key, r.start, r.stop, r.tiles))
             for r in plan.requests]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return outputs


def place_request(schema: ArraySchema, sel: Selection, tiles: WholeTiles,
                  positions: tuple[int, ...], data: Any, base: int,
                  outputs: dict[str, np.ndarray], array_url: str,
                  stop: threading.Event) -> None:
    """Check the tile reads ``positions`` (held by one request starting at ``base``,
    fetched as ``data``) against their checksums, then place them into ``outputs``;
    returns early once ``stop`` is set (another part of the read failed)."""
    if stop.is_set():
        return
    view = memoryview(data).cast("B")
    t = np.asarray(positions, np.int64)
    offs = (tiles.offsets[t] - base).tolist()
    sizes = tiles.sizes[t].tolist()
    attr_of = tiles.attr_of[t]
    checks = [byte_checksum(name) for name in tiles.checksums]
    for i, o, n, c, a in zip(positions, offs, sizes, tiles.crc32[t].tolist(),
                             attr_of.tolist(), strict=True):
        if checks[a](view[o:o + n], 0) != c:
            read = tiles[i]
            err = damaged(read.piece, tile_where(array_url, read))
            annotate(err, array_url, read)
            raise err
    for a, name in enumerate(tiles.attrs):
        mine = t[attr_of == a]
        if not len(mine):
            continue
        if stop.is_set():
            return
        _place_attr(schema, sel, tiles, a, mine, view, base, outputs[name], array_url)


def _place_attr(schema: ArraySchema, sel: Selection, tiles: WholeTiles, a: int,
                mine: np.ndarray, view: memoryview, base: int, out: np.ndarray,
                array_url: str) -> None:
    """Place attribute ``a``'s tile reads ``mine`` (ascending) from one request's bytes:
    runs of raw tiles that follow along the last dimension and in the object with one copy
    each, every other tile decoded alone."""
    attr = schema.attr(tiles.attrs[a])
    idx = tiles.indices[mine // len(tiles.attrs)]
    offs = tiles.offsets[mine] - base
    ends = offs + tiles.sizes[mine]
    raw = tiles.raw[mine]
    joins = np.zeros(len(mine), bool)  # read j continues the run of read j - 1
    if len(mine) > 1:
        joins[1:] = (raw[1:] & raw[:-1] & (offs[1:] == ends[:-1])
                     & (idx[1:, -1] == idx[:-1, -1] + 1)
                     & (idx[1:, :-1] == idx[:-1, :-1]).all(axis=1))
    starts = [*np.flatnonzero(~joins).tolist(), len(mine)]
    extent = np.asarray(schema.tile_shape, np.int64)
    origin = np.asarray(schema.lower, np.int64) + idx * extent
    spec = tiles.codecs[a]
    codec = get_codec(spec)
    at = tiles.meta.attrs[tiles.attrs[a]]
    # A tile of one block (as zstd tiles up to the block size are stored) decodes like a
    # tile of none; its whole-tile checksum was checked.
    decode_one = (codec.decode_into if spec is not None and at.block_bytes
                  and tiles.decoded[a] <= at.block_bytes else None)
    buffer = np.empty(tiles.decoded[a] if decode_one is not None else 0, np.uint8)
    decoded_tile = tile_from_bytes(buffer, schema, attr) if decode_one is not None else None
    for j, k in itertools.pairwise(starts):
        lo = tuple(origin[j].tolist())
        hi = tuple((origin[k - 1] + extent - 1).tolist())
        if raw[j]:
            place_raw_row(schema, attr, view[int(offs[j]):int(ends[k - 1])], k - j, lo, hi,
                          sel, out)
            continue
        stored = view[int(offs[j]):int(ends[j])]
        box = tuple(slice(x - d.lo, y - d.lo + 1) for d, x, y in zip(sel.dims, lo, hi,
                                                                      strict=True))
        if decode_one is not None:  # one block a tile: decoded into one buffer, reused
            try:
                decode_one(stored, buffer)
            except Exception as err:  # the codec's own error for bytes it cannot decode
                read = tiles[int(mine[j])]
                failed = CorruptDataError(f"{tile_where(array_url, read)}: block 0 does not "
                                          f"decode with {tiles.codecs[a]}: {err}")
                annotate(failed, array_url, read)
                raise failed from None
            out[box] = decoded_tile
            continue
        read = tiles[int(mine[j])]
        where = tile_where(array_url, read)
        decoded: Any
        try:
            if read.blocks is not None:
                decoded = decode_blocked(codec, stored, read.blocks, where=where).data
            else:
                decoded = codec.decode(stored)
            tile = decode_tile(schema, attr, decoded, where)
        except CorruptDataError as err:
            annotate(err, array_url, read)
            raise
        out[box] = tile


def fragments_of(reads: Sequence[TileRead]) -> set[str]:
    """The fragments tile reads come from (of :class:`WholeTiles`, without making them)."""
    return reads.fragments if isinstance(reads, WholeTiles) else {r.fragment for r in reads}
