"""The read path of the array engine: selection x fragments -> a list of :class:`TileRead`,
then an executor that fetches whole tiles concurrently, verifies, decodes and scatters them
into the output, newest fragment winning per cell.

The list of tile reads is the seam the read planner replaces the executor's choices at: each
entry names the object, the tile's byte offset and length, its codec and shape, the cells it
contributes and where they land in the output.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import os
import threading
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tessera.array.fragment import FragmentMeta
from tessera.errors import CorruptDataError, InvalidRangeError, ObjectNotFoundError
from tessera.format.blocks import decode_blocked
from tessera.format.checksum import byte_checksum
from tessera.format.codecs import get_codec
from tessera.format.layout import (
    Box,
    covered,
    intersect,
    tile_box,
    tile_from_bytes,
    tile_nbytes,
    tile_position,
    tile_view,
)
from tessera.format.schema import ArraySchema, Attr
from tessera.format.selection import Selection
from tessera.format.tile import (
    Piece,
    TileRead,
    check_length,
    damaged,
    positions,
    tile_cells,
    truncated,
    verify_piece,
)
from tessera.storage.store import AsyncStore

if TYPE_CHECKING:  # update_index builds on this module
    from tessera.array.update_index import MergedUpdates

#: Cells found for a read: their source (a data tile, or merged updates; each has ``rank``
#: and ``kind``), coordinates ``(n, ndim)`` and values per attribute.
FoundCells = tuple["CellTileRead | MergedUpdates", np.ndarray, dict[str, np.ndarray]]


@dataclasses.dataclass(frozen=True)
class CellTileRead:
    """One data tile of a sparse (or delete) fragment that may hold selected cells: its
    coordinates and, unless it holds tombstones, its attribute values."""

    fragment: str
    rank: int
    kind: str
    tile: int
    mbr: Box
    coords: Piece
    attrs: dict[str, Piece]
    #: The fragment's cache of decoded inline tiles (fragments are immutable, so an open
    #: handle decodes each small update once).
    cache: dict[Any, Any] | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def inline(self) -> bool:
        """True if every piece lives in the fragment's bookkeeping (no request needed)."""
        return self.coords.inline is not None and all(
            p.inline is not None for p in self.attrs.values())


@dataclasses.dataclass
class ReadReport:
    """What the latest read did: the tile reads, fragments consulted and skipped, the plan
    it followed (:class:`~tessera.query.plan.Plan`, with its estimates) and the measured
    I/O stats."""

    tile_reads: list[TileRead]
    fragments_used: int
    fragments_skipped: int
    stats: Any = None
    cell_reads: list[CellTileRead] = dataclasses.field(default_factory=list)
    plan: Any = None
    #: Tiles the pushdown server failed (or could not be asked for) and that were fetched
    #: directly instead, the last message, and the tiles by reason (a short phrase such as
    #: ``"tile failed on the server (HTTP 500)"``).
    pushdown_fallbacks: int = 0
    pushdown_error: str | None = None
    pushdown_fallback_reasons: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The first full message for each reason.
    pushdown_fallback_details: dict[str, str] = dataclasses.field(default_factory=dict)

    def table(self) -> Any:
        """The plan's estimates beside what the read measured (a rich ``Table``): requests
        and bytes of the data requests (gets, ranges, pushdowns; on a handle's first read
        this includes getting the fragments' bookkeeping), seconds and dollars. Measured
        dollars use the plan's price table; listings are shown apart.

        >>> import numpy as np, tessera
        >>> arr = tessera.from_numpy("memory://doc-report", np.zeros((8, 8)), tile=(4, 4))
        >>> _ = arr.read((slice(0, 8), 1), method="get")
        >>> print(arr.last_read)  # doctest: +ELLIPSIS
        read: estimated vs measured...
        """
        from rich.table import Table

        t = Table(title="read: estimated vs measured", title_justify="left")
        for col in ("", "estimated", "measured"):
            t.add_column(col, justify="left" if not col else "right")
        stats = self.stats
        data_kinds = ("get", "range", "pushdown")
        by = stats.by_method if stats is not None else {}
        measured_req = sum(by[k].requests for k in data_kinds if k in by)
        measured_bytes = sum(by[k].bytes_received for k in data_kinds if k in by)
        other = (stats.requests - measured_req) if stats is not None else 0
        plan = self.plan
        est = plan.estimate if plan is not None else None
        t.add_row("data requests", str(len(plan.requests)) if plan is not None else "-",
                  str(measured_req))
        t.add_row("data bytes", f"{plan.totals.nbytes:,}" if plan is not None else "-",
                  f"{measured_bytes:,}")
        t.add_row("seconds", f"{est.seconds:.4g}" if est is not None else "-",
                  f"{stats.elapsed_s:.4g}" if stats is not None else "-")
        pricing = plan.pricing if plan is not None else "s3"
        t.add_row(f"dollars ({pricing})", f"{est.dollars:.3g}" if est is not None else "-",
                  f"{stats.cost_usd(pricing):.3g}" if stats is not None else "-")
        t.add_row("other requests (listings)", "", str(other))
        if self.pushdown_fallbacks:
            t.add_row("pushdown fallbacks", "", f"{self.pushdown_fallbacks} tiles: "
                                                f"{self.pushdown_error}")
            for reason, tiles in self.pushdown_fallback_reasons.items():
                t.add_row(f"  {reason}", "", f"{tiles} tiles")
        return t

    def __str__(self) -> str:
        import io

        from rich.console import Console

        out = io.StringIO()
        Console(file=out, width=110, highlight=False).print(self.table())
        return out.getvalue()


def plan_tile_reads(schema: ArraySchema, sel: Selection, metas: list[FragmentMeta],
                    attrs: list[str]) -> tuple[list[TileRead], list[CellTileRead], int]:
    """Tile reads for ``sel`` over ``metas`` (oldest first). Tiles whose contribution is fully
    covered by newer dense fragments are left out. Returns the dense tile reads, the sparse
    data-tile reads and the number of fragments skipped."""
    if sel.empty:
        return [], [], len(metas)
    plain = all(d.contiguous for d in sel.dims)  # every cell inside the bounds is selected
    bbox = sel.bounds()
    boxes: list[Box | None] = [intersect(_meta_box(m), bbox) for m in metas]
    reads: list[TileRead] = []
    cell_reads: list[CellTileRead] = []
    skipped = 0
    # Only dense fragments hide what lies under them; sparse ones hold scattered cells.
    newer_dense: list[list[Box]] = [[] for _ in metas]
    acc: list[Box] = []
    for rank in range(len(metas) - 1, -1, -1):
        newer_dense[rank] = acc
        fb = boxes[rank]
        if fb is not None and metas[rank].is_dense:
            acc = [fb, *acc]
    for rank, (meta, fbox) in enumerate(zip(metas, boxes, strict=True)):
        if fbox is None:
            skipped += 1
            continue
        newer = newer_dense[rank]
        if newer and covered(fbox, newer):
            skipped += 1
            continue
        if not meta.is_dense:
            found = _plan_cells(meta, rank, fbox, newer, attrs)
            cell_reads.extend(found)
            skipped += 0 if found else 1
            continue
        # Plain Python on these few numbers: a read of one small box should not pay for
        # numpy calls (each costs tens of microseconds when its code is out of the cache,
        # as it is between the steps of a training loop).
        ext = schema.tile_shape
        low = schema.lower
        spans = [range((int(a) - lw) // e, (int(b) - lw) // e + 1)
                 for a, b, lw, e in zip(fbox[0], fbox[1], low, ext, strict=True)]
        used = False
        for index in itertools.product(*spans):
            tb = tile_box(schema, index)
            region = intersect(tb, fbox)
            if region is None or (not plain and not _selects_any(sel, region)):
                continue
            if newer and covered(region, newer):
                continue
            pos = tile_position(schema, meta.tile_lo, meta.tile_hi, index)
            used = True
            for name in attrs:
                at = meta.attrs[name]
                reads.append(TileRead(meta.name, rank, name, at.key, int(at.offsets[pos]),
                                      int(at.sizes[pos]), at.tile_codec(pos),
                                      int(at.crc32[pos]), index, tb[0], region,
                                      at.blocks(pos), at.checksum))
        skipped += 0 if used else 1
    return reads, cell_reads, skipped


def _meta_box(meta: FragmentMeta) -> Box:
    """A fragment's subarray on the integer grid, computed once per handle."""
    box = meta.decoded.get("int_box")
    if box is None:
        box = meta.decoded["int_box"] = _int_box(meta.subarray)
    return box


def _int_box(box: Box) -> Box:
    """A sparse fragment's MBR on an integer grid (bounds of an empty fragment stay empty)."""
    return (tuple(int(np.floor(v)) for v in box[0]), tuple(int(np.ceil(v)) for v in box[1]))


def _plan_cells(meta: FragmentMeta, rank: int, fbox: Box, newer: list[Box],
                attrs: list[str]) -> list[CellTileRead]:
    assert meta.mbrs is not None and meta.coords is not None
    lo = np.asarray(fbox[0])
    hi = np.asarray(fbox[1])
    hit = np.all(meta.mbrs[:, 0] <= hi, axis=1) & np.all(meta.mbrs[:, 1] >= lo, axis=1)
    out = []
    names = [] if meta.kind == "delete" else attrs
    for t in np.nonzero(hit)[0]:
        # The static part of a data tile's read, built once per handle (fragments are
        # immutable); only the rank changes from read to read.
        key = ("cell_read", int(t), tuple(names))
        static = meta.decoded.get(key)
        if static is None:
            mbr = _int_box((tuple(meta.mbrs[t, 0]), tuple(meta.mbrs[t, 1])))
            static = meta.decoded[key] = (mbr, tile_piece(meta.coords, int(t)),
                                          {n: tile_piece(meta.attrs[n], int(t))
                                           for n in names})
        mbr, coords_piece, attr_pieces = static
        if newer:
            region = intersect(mbr, fbox)
            if region is None or covered(region, newer):
                continue
        out.append(CellTileRead(meta.name, rank, meta.kind, int(t), mbr, coords_piece,
                                attr_pieces, meta.decoded))
    return out


def tile_piece(tiles: Any, t: int) -> Piece:
    """Tile ``t`` of a fragment's :class:`~tessera.array.fragment.AttrTiles` as a piece."""
    off, size = int(tiles.offsets[t]), int(tiles.sizes[t])
    inline = None if tiles.inline is None else tiles.inline[off:off + size]
    return Piece(tiles.key, off, size, tiles.tile_codec(t), int(tiles.crc32[t]), inline,
                 checksum=tiles.checksum)


def _selects_any(sel: Selection, region: Box) -> bool:
    return all(len(d.within(lo, hi)[0]) > 0
               for d, lo, hi in zip(sel.dims, region[0], region[1], strict=True))


async def execute_tile_reads(store: AsyncStore, schema: ArraySchema, sel: Selection,
                             reads: list[TileRead], attrs: list[str], array_url: str,
                             cell_reads: list[CellTileRead] | None = None,
                             plan: Any = None, *, fetcher: TileFetcher | None = None,
                             positions: list[int] | None = None,
                             pushdown: Any = None, merged: MergedUpdates | None = None,
                             ) -> dict[str, np.ndarray]:
    """Fetch, verify, decode and scatter every tile read; returns full-shape outputs.

    Without a ``plan`` every tile is fetched whole and checked against its crc32. With a
    :class:`~tessera.query.plan.Plan`, tiles follow their chosen method: ``get`` as above,
    ``range`` fetches only the planned byte ranges (shared with a neighbouring tile where
    the plan merged them) into a tile buffer; the selected cells all lie in those ranges.
    Partial fetches cannot be checked against the whole tile's checksum.

    ``fetcher`` and ``positions`` let several selections (a union of hyperslabs) share one
    plan and its fetches: tile read ``i`` here is tile ``positions[i]`` of the fetcher.

    With a :class:`~tessera.array.pushdown_read.PushdownReader`, tiles the plan assigned to
    ``pushdown`` are sent to the server in batches and only their selected cells come back;
    tiles the server fails are fetched whole instead.

    ``merged`` (a :class:`~tessera.array.update_index.MergedUpdates`) holds the cells of the
    newest fragments, already merged: its cells inside the selection land last.

    Newest wins per cell. In the common *layered* case (the dense tiles all come from one
    fragment and every sparse fragment is newer) the dense tiles land as they arrive, large
    ones decoded and copied on worker threads, and the sparse cells are merged in one
    vectorised pass afterwards; otherwise a per-cell rank array arbitrates.
    """
    cell_reads = cell_reads or []
    dense_ranks = {r.rank for r in reads}
    cell_ranks = {c.rank for c in cell_reads} | ({merged.rank} if merged is not None else set())
    layered = len(dense_ranks) <= 1 and (not dense_ranks or not cell_ranks
                                         or min(cell_ranks) > max(dense_ranks))
    full = layered and _covers_selection(reads, attrs, sel)
    outputs: dict[str, np.ndarray] = {}
    ranks: dict[str, np.ndarray | None] = {}
    for name in attrs:
        attr = schema.attr(name)
        shape = sel.full_shape + attr.cell_shape
        outputs[name] = (np.empty(shape, dtype=attr.np_dtype) if full
                         else np.full(shape, attr.fill_value, dtype=attr.np_dtype))
        ranks[name] = None if layered else np.full(sel.full_shape, -1, dtype=np.int32)
    if fetcher is None:
        fetcher = TileFetcher(store, schema, reads, plan, array_url)
    elif plan is None:
        plan = fetcher.plan  # a union's shared plan decides which tiles are pushed down
    limit = fetcher.limit  # one bound on requests in flight, shared by every selection
    where_in = list(range(len(reads))) if positions is None else positions

    async def one(i: int, read: TileRead) -> None:
        # Worker threads for what is large (a thread hop costs ~0.1-0.3 ms, which a small
        # read through a 20 ms link notices): decoding by the bytes it makes, placing by the
        # cells it copies. Only the layered case places from threads (no rank arbitration).
        tile = await fetcher.tile(where_in[i],
                                  threaded=layered and
                                  fetcher.decoded_bytes(where_in[i]) >= THREAD_BYTES)
        if layered and _region_bytes(schema, read) >= THREAD_BYTES:
            await asyncio.to_thread(_scatter, outputs[read.attr], None, tile, read, sel)
        else:
            _scatter(outputs[read.attr], ranks[read.attr], tile, read, sel)

    found: list[FoundCells] = []

    async def cells(read: CellTileRead) -> None:
        async with limit:
            coords, values = await fetch_cells(store, schema, read, array_url)
        if layered:
            found.append((read, coords, values))
            return
        for name in attrs:
            fill = schema.attr(name).fill_value
            _scatter_cells(outputs[name], ranks[name], coords,
                           values[name] if read.kind != "delete" else fill, read.rank, sel)

    pushed = [] if pushdown is None or plan is None else [
        i for i in range(len(reads)) if plan.choices[where_in[i]].method == "pushdown"]

    async def push(batch: list[int], items: list[Any]) -> None:
        async with limit:
            results = await pushdown.read(items)
        for i, res in zip(batch, results, strict=True):
            read = reads[i]
            if res is None:
                await one(i, read)
                continue
            block = res["cells"]
            if layered and block.nbytes >= THREAD_BYTES:
                await asyncio.to_thread(_scatter, outputs[read.attr], None, None, read, sel,
                                        block)
            else:
                _scatter(outputs[read.attr], ranks[read.attr], None, read, sel, block)

    direct = set(range(len(reads))) - set(pushed)
    batched = (local_batch(store, reads, plan, direct) if layered and positions is None
               else [])
    stop = threading.Event() if batched else None  # tells worker batches to give up
    direct -= set(batched)
    work: list[Coroutine[Any, Any, Any]] = [one(i, r) for i, r in enumerate(reads)
                                            if i in direct]
    if stop is not None:
        work += [asyncio.to_thread(read_local_tiles, store, schema, [reads[i] for i in group],
                                   sel, outputs, array_url, stop)
                 for group in _split(batched, os.cpu_count() or 1)]
    if pushed:
        from tessera.array.pushdown_read import tile_item

        items = [tile_item(schema, reads[i], sel, pushdown.array_path) for i in pushed]
        work += [push([pushed[j] for j in batch], [items[j] for j in batch])
                 for batch in pushdown.batches([it.out_bytes for it in items])]
    work += [cells(c) for c in cell_reads if not c.inline]
    inline = [c for c in cell_reads if c.inline]
    # One piece of work and nothing to do beside it (a small box): awaited here, with no
    # task to schedule and wait for; otherwise each runs as a task.
    tasks = [] if len(work) == 1 and not inline else [asyncio.ensure_future(w) for w in work]
    try:
        for c in inline:  # no request: decoded (once per handle) right here
            await cells(c)
        if tasks:
            await asyncio.gather(*tasks)
        elif work:
            await work[0]
    except BaseException:
        if stop is not None:
            stop.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await fetcher.cancel()
        raise
    if merged is not None and not sel.empty:
        lo, hi = sel.bounds()
        coords, values = merged.within(lo, hi)
        if len(coords) and layered and not found:
            # Unique and newest-wins already, and above everything else: no merge needed.
            for name in attrs:
                _scatter_cells(outputs[name], None, coords, values[name], 0, sel)
        elif len(coords) and layered:
            found.append((merged, coords, values))
        elif len(coords):
            for name in attrs:
                _scatter_cells(outputs[name], ranks[name], coords, values[name], merged.rank,
                               sel)
    if found:
        _merge_cells(schema, outputs, found, attrs, sel)
    return outputs


class TileFetcher:
    """Fetches and decodes the tiles of a read as its plan says, each once.

    ``reads[i]`` is fetched whole (a get, checked against its crc32) or, when the plan says
    ``range`` or shares a request with neighbouring tiles, assembled from the planned
    requests (each issued once). A decoded tile is kept only until its last consumer (see
    :meth:`expect`) has it, so memory stays bounded by the tiles in flight.
    """

    def __init__(self, store: AsyncStore, schema: ArraySchema, reads: list[TileRead],
                 plan: Any, array_url: str, limit: asyncio.Semaphore | None = None) -> None:
        self.store, self.schema, self.reads, self.plan = store, schema, reads, plan
        self.array_url = array_url
        self.limit = limit or asyncio.Semaphore(store.config.max_concurrency)
        self._tiles: dict[int, asyncio.Task[np.ndarray]] = {}
        self._uses: dict[int, int] = {}
        self._requests: dict[tuple[str, int, int], asyncio.Task[Any]] = {}

    def expect(self, position: int, uses: int = 1) -> None:
        """Announce ``uses`` more consumers of tile ``position`` (default: one each)."""
        self._uses[position] = self._uses.get(position, 0) + uses

    def decoded_bytes(self, position: int) -> int:
        """About how many bytes decoding tile ``position`` makes as its plan fetches it:
        the whole decoded tile for a get, the fetched part of it for planned ranges."""
        read = self.reads[position]
        whole = tile_nbytes(self.schema, self.schema.attr(read.attr))
        plan = self.plan
        if plan is None or not (plan.choices[position].method == "range"
                                or position in plan.shared_tiles):
            return max(whole, read.length)
        end = read.offset + read.length
        fetched: int = sum(max(0, min(r.stop, end) - max(r.start, read.offset))
                           for r in plan.requests_for(position))
        return fetched if read.length >= whole else fetched * whole // max(1, read.length)

    async def tile(self, position: int, threaded: bool = False) -> np.ndarray:
        """The decoded tile ``position`` (shape ``tile_shape + cell_shape``)."""
        task = self._tiles.get(position)
        if task is None:
            task = asyncio.ensure_future(self._fetch(position, threaded))
            self._tiles[position] = task
        try:
            return await task
        finally:
            left = self._uses.get(position, 1) - 1
            self._uses[position] = left
            if left <= 0:
                self._tiles.pop(position, None)

    async def cancel(self) -> None:
        """Cancel every fetch still running."""
        pending = [*self._tiles.values(), *self._requests.values()]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _fetch(self, position: int, threaded: bool) -> np.ndarray:
        read = self.reads[position]
        where = _where(self.array_url, read)
        attr = self.schema.attr(read.attr)
        plan = self.plan
        data: Any
        if plan is not None and (plan.choices[position].method == "range"
                                 or position in plan.shared_tiles):
            requests = plan.requests_for(position)
            end = read.offset + read.length
            for req in requests:  # issue them all before waiting for any
                ident = (req.key, req.start, req.stop)
                if ident not in self._requests:
                    self._requests[ident] = asyncio.ensure_future(
                        self._fetch_request(req.key, req.start, req.stop, where))
            within = [r for r in requests if r.start <= read.offset and r.stop >= end]
            if within:
                # The whole tile came in one request (maybe shared with neighbours): its
                # bytes are a view of that request's buffer, checked and decoded like a get.
                req = within[0]
                got = memoryview(await self._requests[(req.key, req.start, req.stop)])
                data = got[read.offset - req.start:end - req.start]
            else:
                # Pieces of a raw or blocked tile: the selected cells all lie in the fetched
                # ranges (of a blocked tile: in the blocks they cover, each checked against
                # its own checksum and decoded alone).
                buf = np.empty(read.length, dtype=np.uint8)
                spans = []
                for req in requests:
                    ident = (req.key, req.start, req.stop)
                    got_arr = np.frombuffer(memoryview(await self._requests[ident]), np.uint8)
                    lo, hi = max(req.start, read.offset), min(req.stop, end)
                    buf[lo - read.offset:hi - read.offset] = \
                        got_arr[lo - req.start:hi - req.start]
                    spans.append((lo - read.offset, hi - read.offset))
                if read.blocks is None:
                    return _decode_tile(self.schema, attr, buf.data, where)
                blocks = read.blocks

                def decode_blocks() -> np.ndarray:
                    raw = decode_blocked(get_codec(read.codec), buf, blocks,
                                         blocks.covered(spans), check=True, where=where)
                    return _decode_tile(self.schema, attr, raw.data, where)

                return await asyncio.to_thread(decode_blocks) if threaded else decode_blocks()
        else:
            async with self.limit:
                data = await fetch_bytes(self.store, read.piece, where)

        def decode() -> np.ndarray:
            return _verified_tile(self.schema, read, data, where)

        return await asyncio.to_thread(decode) if threaded else decode()

    async def _fetch_request(self, key: str, start: int, stop: int, where: str) -> Any:
        piece = Piece(key, start, stop - start, None, 0)
        async with self.limit:
            data = await fetch_bytes(self.store, piece, where)
        check_length(data, piece, where)
        return data


#: Tiles at least this large are verified, decoded and copied on a worker thread.
THREAD_BYTES = 1 << 20
#: Whole tiles of a local folder store are read in batches on worker threads once the tiles
#: fetched whole add up to this many bytes (smaller reads stay on the event loop).
LOCAL_BATCH_BYTES = THREAD_BYTES


def local_batch(store: AsyncStore, reads: list[TileRead], plan: Any,
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
              if (plan is None or plan.choices[i].method == "get") and i not in shared]
    return chosen if sum(reads[i].length for i in chosen) >= LOCAL_BATCH_BYTES else []


def _split(items: list[int], parts: int) -> list[list[int]]:
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
        where = _where(array_url, read)
        if _stream_raw_tile(store, schema, read, sel, outputs[read.attr], scratch, where):
            continue
        try:
            data: Any = store.read_file_range(read.key, read.offset, read.length)
        except (ObjectNotFoundError, InvalidRangeError) as err:
            data = _unread(err, read.key, where)
        _scatter(outputs[read.attr], None, _verified_tile(schema, read, data, where), read, sel)


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
        _unread(err, read.key, where)
    if done != read.length:
        raise truncated(read.piece, done, where)
    if value != read.crc32:
        raise damaged(read.piece, where)
    return True


def _covers_selection(reads: list[TileRead], attrs: list[str], sel: Selection) -> bool:
    """True if one fragment's tile reads reach every selected cell (so the output needs no
    fill). Regions of one fragment's tiles are disjoint and inside the selection's bounds,
    so comparing volumes decides it."""
    if not reads or sel.empty:
        return False
    lo, hi = sel.bounds()
    want = math.prod(b - a + 1 for a, b in zip(lo, hi, strict=True))
    for name in attrs:
        got = sum(math.prod(b - a + 1 for a, b in zip(*r.region, strict=True))
                  for r in reads if r.attr == name)
        if got != want:
            return False
    return True


def _where(array_url: str, read: TileRead) -> str:
    return (f"array {array_url}, fragment {read.fragment}, attribute {read.attr!r}, "
            f"tile {read.tile_index}")


def _merge_cells(schema: ArraySchema, outputs: dict[str, np.ndarray],
                 found: list[FoundCells],
                 attrs: list[str], sel: Selection) -> None:
    """Scatter the cells of every sparse data tile at once, the newest fragment winning."""
    found.sort(key=lambda f: f[0].rank)
    lo, hi = (np.asarray(b) for b in sel.bounds())
    coords = np.concatenate([c for _, c, _ in found])
    inside = np.all((coords >= lo) & (coords <= hi), axis=1)
    coords = coords[inside]
    if not len(coords):
        return
    keep = newest_per_coordinate(coords)
    for name in attrs:
        values = found_values(schema.attr(name), found)[inside]
        _scatter_cells(outputs[name], None, coords[keep], values[keep], 0, sel)


def newest_per_coordinate(coords: np.ndarray) -> np.ndarray:
    """Positions in ``coords`` (``(n, ndim)``, in arrival order) of the last cell of each
    distinct coordinate, in lexicographic coordinate order."""
    seq = np.arange(len(coords))
    # Sort by coordinate, then by arrival; keep the last of each coordinate.
    order = np.lexsort((seq, *[coords[:, d] for d in reversed(range(coords.shape[1]))]))
    ordered = coords[order]
    last = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        last[:-1] = np.any(ordered[1:] != ordered[:-1], axis=1)
    return order[last]


def found_values(attr: Attr, found: Sequence[FoundCells]) -> np.ndarray:
    """One attribute's values of found data tiles ``(read, coords, values)``, end to end;
    a delete fragment's tombstones read as the fill value."""
    fill = np.full((1, *attr.cell_shape), attr.fill_value, dtype=attr.np_dtype)
    return np.concatenate([
        v[attr.name] if read.kind != "delete"
        else np.broadcast_to(fill, (len(c), *attr.cell_shape))
        for read, c, v in found])


async def fetch_bytes(store: AsyncStore, piece: Piece, where: str) -> Any:
    """One encoded tile's stored bytes (not yet verified); inline pieces need no request."""
    if piece.inline is not None:
        return piece.inline
    try:
        return (await store.get_range(piece.key, piece.offset, piece.length)
                if piece.length else b"")
    except (ObjectNotFoundError, InvalidRangeError) as err:
        return _unread(err, piece.key, where)


def _unread(err: Exception, key: str, where: str) -> bytes:
    """What a tile's read that failed with ``err`` yields: a missing data object raises
    ``CorruptDataError``; an object ending before the tile starts gives no bytes (the length
    check then names it truncated)."""
    if isinstance(err, ObjectNotFoundError):
        raise CorruptDataError(f"{where}: data object {key} is missing") from None
    return b""


async def fetch_piece(store: AsyncStore, piece: Piece, where: str) -> Any:
    """One encoded tile's bytes, verified against its checksum and decoded."""
    return verify_piece(await fetch_bytes(store, piece, where), piece, where)


def _verified_tile(schema: ArraySchema, read: TileRead, data: Any, where: str) -> np.ndarray:
    """A whole tile's stored bytes, checked against its checksum and decoded."""
    return _decode_tile(schema, schema.attr(read.attr), verify_piece(data, read.piece, where),
                        where)


def _decode_tile(schema: ArraySchema, attr: Attr, raw: Any, where: str) -> np.ndarray:
    try:
        return tile_from_bytes(raw, schema, attr)
    except ValueError as err:
        raise CorruptDataError(f"{where}: decoded tile has the wrong size: {err}") from None


async def fetch_cells(store: AsyncStore, schema: ArraySchema, read: CellTileRead,
                      array_url: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The coordinates ``(n, ndim)`` and attribute values of one sparse data tile."""
    if read.inline:
        return inline_cells(schema, read, array_url)
    where = f"array {array_url}, fragment {read.fragment}, data tile {read.tile}"
    pieces = [fetch_piece(store, read.coords, f"{where}, coordinates")]
    pieces += [fetch_piece(store, p, f"{where}, attribute {n!r}") for n, p in read.attrs.items()]
    return _parse_cells(schema, read, await asyncio.gather(*pieces), where)


def inline_cells(schema: ArraySchema, read: CellTileRead, array_url: str,
                 ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """:func:`fetch_cells` for a data tile kept inline: verified and decoded once per handle,
    then served from the fragment's cache."""
    key = (read.tile, tuple(read.attrs))
    if read.cache is not None and key in read.cache:
        coords, values = read.cache[key]
        return coords, dict(values)
    where = f"array {array_url}, fragment {read.fragment}, data tile {read.tile}"
    raw = [verify_piece(read.coords.inline, read.coords, f"{where}, coordinates")]
    raw += [verify_piece(p.inline, p, f"{where}, attribute {n!r}")
            for n, p in read.attrs.items()]
    coords, values = _parse_cells(schema, read, raw, where)
    if read.cache is not None:
        read.cache[key] = (coords, values)
    return coords, dict(values)


def _parse_cells(schema: ArraySchema, read: CellTileRead, raw: list[Any], where: str,
                 ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    from tessera.array.sparse import coords_dtype

    try:
        coords = np.frombuffer(memoryview(raw[0]), coords_dtype(schema)).reshape(-1, schema.ndim)
        values = {}
        for (name, _), data in zip(read.attrs.items(), raw[1:], strict=True):
            if name.startswith("__"):  # internal per-cell flags, e.g. tombstones
                values[name] = np.frombuffer(memoryview(data), np.uint8)
                continue
            attr = schema.attr(name)
            values[name] = np.frombuffer(memoryview(data), attr.np_dtype).reshape(
                (len(coords), *attr.cell_shape))
    except ValueError as err:
        raise CorruptDataError(f"{where}: decoded tile has the wrong size: {err}") from None
    return coords, values


def _scatter_cells(out: np.ndarray, rank_arr: np.ndarray | None, coords: np.ndarray,
                   values: Any, rank: int, sel: Selection) -> None:
    """Write cells given by coordinates into the output where they are selected (a
    coordinate selected twice lands twice), newest fragment winning."""
    keep = np.arange(len(coords))
    lefts, counts = [], []
    for d, dim in enumerate(sel.dims):
        c = coords[:, d]
        if dim.ascending_run:  # a plain slice: coordinate lo + k is entry k, no search
            lefts.append(c - dim.lo)
            counts.append(((c >= dim.lo) & (c <= dim.hi)).astype(np.intp))
            continue
        left = np.searchsorted(dim.sorted_coords, c, side="left")
        right = np.searchsorted(dim.sorted_coords, c, side="right")
        lefts.append(left)
        counts.append(right - left)
    hit = np.all(np.stack(counts) > 0, axis=0) if counts else np.ones(0, bool)
    keep = keep[hit]
    if not len(keep):
        return
    positions: list[np.ndarray] = []
    rows = keep
    for d, dim in enumerate(sel.dims):
        cnt = counts[d][rows]
        if np.all(cnt == 1):
            positions.append(dim.out_pos[lefts[d][rows]])
            continue
        starts = np.repeat(lefts[d][rows], cnt)
        within = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        positions = [np.repeat(p, cnt) for p in positions]
        positions.append(dim.out_pos[starts + within])
        rows = np.repeat(rows, cnt)
    idx = tuple(positions)
    vals = values[rows] if isinstance(values, np.ndarray) else values
    if rank_arr is not None:
        newer = rank_arr[idx] < rank
        idx = tuple(p[newer] for p in positions)
        vals = vals[newer] if isinstance(vals, np.ndarray) else vals
        rank_arr[idx] = rank
    out[idx] = vals


def _scatter(out: np.ndarray, rank_arr: np.ndarray | None, tile: np.ndarray | None,
             read: TileRead, sel: Selection, block: np.ndarray | None = None) -> None:
    """Write the cells ``sel`` takes from a tile into the output: from the decoded ``tile``,
    or from ``block``, those cells already cut out (a pushdown answer)."""
    found = tile_cells(read, sel)
    if found is None:
        return
    src, dst = found
    if all(isinstance(i, slice) for i in src + dst):
        s_idx: Any = tuple(src)
        d_idx: Any = tuple(dst)
    else:
        s_idx = np.ix_(*[positions(i) for i in src])
        d_idx = np.ix_(*[positions(i) for i in dst])
    if block is not None:
        values = block
    else:
        assert tile is not None
        values = tile[s_idx]
    if rank_arr is None:
        out[d_idx] = values
        return
    current = rank_arr[d_idx]
    newer = current < read.rank
    if newer.all():
        out[d_idx] = values
        rank_arr[d_idx] = read.rank
    elif newer.any():
        block = out[d_idx]
        block[newer] = values[newer]
        out[d_idx] = block
        rank_arr[d_idx] = np.where(newer, read.rank, current)


def _region_bytes(schema: ArraySchema, read: TileRead) -> int:
    """Bytes of the cells in ``read``'s region (at least what placing it copies)."""
    cells = math.prod(hi - lo + 1 for lo, hi in zip(*read.region, strict=True))
    return cells * schema.attr(read.attr).cell_nbytes


