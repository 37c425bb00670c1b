"""The executor: every tile read of a plan fetched (get, ranges, or pushed down), verified,
decoded and placed into full-shape outputs, newest fragment winning per cell."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any

import numpy as np

from tessera.array.read import local
from tessera.array.read.batched import read_batch, request_batches
from tessera.array.read.fetch import TileFetcher, fetch_cells
from tessera.array.read.pushdown import PushdownReader, tile_item
from tessera.array.read.scatter import (
    FoundCells,
    covers_selection,
    merge_cells,
    region_bytes,
    scatter,
    scatter_cells,
)
from tessera.array.read.updates import MergedUpdates
from tessera.format.schema import ArraySchema
from tessera.format.selection import Selection
from tessera.format.tile import (
    CellTileRead,
    TileRead,
)
from tessera.pushdown.read_items import TileItem
from tessera.query.methods import read_method
from tessera.query.plan import Plan
from tessera.storage.store import AsyncStore
from tessera.storage.window import ByteWindow

Outputs = dict[str, np.ndarray]
Ranks = dict[str, np.ndarray | None]


def allocate_outputs(schema: ArraySchema, sel: Selection, reads: list[TileRead],
                     attrs: list[str], cell_ranks: set[int]) -> tuple[Outputs, Ranks, bool]:
    """Full-shape outputs for a read, its per-cell rank arrays and whether it is *layered*.

    Layered: the dense tiles all come from one fragment and every sparse fragment
    (``cell_ranks``) is newer, so no cell needs arbitrating (no rank arrays); its outputs
    start empty when the dense tiles cover the selection, else filled with the fill value.
    """
    dense_ranks = {r.rank for r in reads}
    layered = len(dense_ranks) <= 1 and (not dense_ranks or not cell_ranks
                                         or min(cell_ranks) > max(dense_ranks))
    full = layered and covers_selection(reads, attrs, sel)
    outputs: Outputs = {}
    ranks: Ranks = {}
    for name in attrs:
        attr = schema.attr(name)
        shape = sel.full_shape + attr.cell_shape
        outputs[name] = (np.empty(shape, dtype=attr.np_dtype) if full
                         else np.full(shape, attr.fill_value, dtype=attr.np_dtype))
        ranks[name] = None if layered else np.full(sel.full_shape, -1, dtype=np.int32)
    return outputs, ranks, layered


async def execute_tile_reads(store: AsyncStore, schema: ArraySchema, sel: Selection,
                             reads: list[TileRead], attrs: list[str], array_url: str,
                             cell_reads: list[CellTileRead] | None = None,
                             plan: Plan | None = None, *, fetcher: TileFetcher | None = None,
                             positions: list[int] | None = None,
                             pushdown: PushdownReader | None = None,
                             merged: MergedUpdates | None = None,
                             window: ByteWindow | None = None,
                             ) -> dict[str, np.ndarray]:
    """Fetch, verify, decode and scatter every tile read; returns full-shape outputs.

    Without a ``plan`` every tile is fetched whole and checked against its crc32. With a
    :class:`~tessera.query.plan.Plan`, tiles follow their chosen method: ``get`` as above,
    ``range`` fetches only the planned byte ranges (shared with a neighbouring tile where
    the plan merged them) into a tile buffer; the selected cells all lie in those ranges.
    Partial fetches cannot be checked against the whole tile's checksum.

    ``fetcher`` and ``positions`` let several selections (a union of hyperslabs) share one
    plan and its fetches: tile read ``i`` here is tile ``positions[i]`` of the fetcher.

    With a :class:`~tessera.array.read.pushdown.PushdownReader`, tiles the plan assigned to
    ``pushdown`` are sent to the server in batches and only their selected cells come back;
    tiles the server fails are fetched whole instead.

    ``window`` (a :class:`~tessera.storage.window.ByteWindow`, unless ``fetcher`` brings
    its own) bounds the bytes of tiles fetched and not yet placed: each tile is decoded and
    placed as soon as its bytes arrive, and a tile's request waits for room in the window.

    ``merged`` (a :class:`~tessera.array.read.updates.MergedUpdates`) holds the cells of the
    newest fragments, already merged: its cells inside the selection land last.

    Newest wins per cell. In the common *layered* case (the dense tiles all come from one
    fragment and every sparse fragment is newer) the dense tiles land as they arrive, large
    ones decoded and copied on worker threads, and the sparse cells are merged in one
    vectorised pass afterwards; otherwise a per-cell rank array arbitrates.
    """
    cell_reads = cell_reads or []
    cell_ranks = {c.rank for c in cell_reads} | ({merged.rank} if merged is not None else set())
    outputs, ranks, layered = allocate_outputs(schema, sel, reads, attrs, cell_ranks)
    if fetcher is None:
        fetcher = TileFetcher(store, schema, reads, plan, array_url, window=window)
    elif plan is None:
        plan = fetcher.plan  # a union's shared plan decides which tiles are pushed down
    limit = fetcher.limit  # one bound on requests in flight, shared by every selection
    where_in = list(range(len(reads))) if positions is None else positions

    async def one(i: int, read: TileRead) -> None:
        # Worker threads for what is large (a thread hop costs ~0.1-0.3 ms, which a small
        # read through a 20 ms link notices): decoding by the bytes it makes, placing by the
        # cells it copies. Only the layered case places from threads (no rank arbitration).
        position = where_in[i]
        try:
            tile = await fetcher.tile(position, threaded=layered and
                                      fetcher.decoded_bytes(position) >= local.THREAD_BYTES)
            if layered and region_bytes(schema, read) >= local.THREAD_BYTES:
                await asyncio.to_thread(scatter, outputs[read.attr], None, tile, read, sel)
            else:
                scatter(outputs[read.attr], ranks[read.attr], tile, read, sel)
        finally:
            fetcher.release(position)

    found: list[FoundCells] = []

    async def cells(read: CellTileRead) -> None:
        async with limit:
            coords, values = await fetch_cells(store, schema, read, array_url)
        if layered:
            found.append((read, coords, values))
            return
        for name in attrs:
            fill = schema.attr(name).fill_value
            scatter_cells(outputs[name], ranks[name], coords,
                           values[name] if read.kind != "delete" else fill, read.rank, sel)

    pushed = [] if pushdown is None or plan is None else [
        i for i in range(len(reads)) if read_method(plan.choices[where_in[i]].method).on_server]

    async def push(server: PushdownReader, batch: list[int], items: list[TileItem]) -> None:
        landing: list[asyncio.Future[None]] = []

        def place(j: int, res: dict[str, np.ndarray]) -> None:
            """Place a tile's cells as they arrive (large ones on a worker thread while the
            rest of the answer streams in)."""
            read, block = reads[batch[j]], res["cells"]
            if layered and block.nbytes >= local.THREAD_BYTES:
                landing.append(asyncio.ensure_future(asyncio.to_thread(
                    scatter, outputs[read.attr], None, None, read, sel, block)))
            else:
                scatter(outputs[read.attr], ranks[read.attr], None, read, sel, block)

        try:
            async with limit:
                results = await server.read(items, place)
            await asyncio.gather(*landing)
        finally:
            for task in landing:
                task.cancel()
        for i, res in zip(batch, results, strict=True):
            if res is None:  # not placed: fetched directly
                await one(i, reads[i])

    direct = set(range(len(reads))) - set(pushed)
    batched = (local.local_batch(store, reads, plan, direct) if layered and positions is None
               else [])
    direct -= set(batched)
    shared = (request_batches(plan, schema, reads, direct, fetcher.window)
              if layered and positions is None else [])
    for _, tiles in shared:
        direct -= set(tiles)
    stop = threading.Event() if batched or shared else None  # tells worker batches to stop
    work: list[Coroutine[Any, Any, Any]] = [one(i, r) for i, r in enumerate(reads)
                                            if i in direct]
    if stop is not None:
        work += [asyncio.to_thread(local.read_local_tiles, store, schema,
                                   [reads[i] for i in group],
                                   sel, outputs, array_url, stop)
                 for group in local.split_runs(batched, os.cpu_count() or 1)]
        work += [read_batch(store, schema, reads, batch, sel, outputs, array_url, limit,
                            fetcher.window, stop) for batch in shared]
    if pushed and pushdown is not None:
        items = [tile_item(schema, reads[i], sel, pushdown.array_path) for i in pushed]
        work += [push(pushdown, [pushed[j] for j in batch], [items[j] for j in batch])
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
                scatter_cells(outputs[name], None, coords, values[name], 0, sel)
        elif len(coords) and layered:
            found.append((merged, coords, values))
        elif len(coords):
            for name in attrs:
                scatter_cells(outputs[name], ranks[name], coords, values[name], merged.rank,
                               sel)
    if found:
        merge_cells(schema, outputs, found, attrs, sel)
    return outputs
