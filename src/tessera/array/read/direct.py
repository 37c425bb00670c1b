"""Small reads on the calling thread: a plan's tiles fetched, checked, decoded and placed
without the trip to the background event loop, for stores whose reads never wait on a
network (``memory://``, ``file://``).

A sync read otherwise hands its coroutine to the event loop's thread and waits on a future;
for a read of one tile that is most of its time (docs/performance.md, "Per-call cost"). This
executor follows the same plan as :func:`~tessera.array.read.execute.execute_tile_reads`
(the same requests, recorded in the same stats, the same checks and errors) and places the
tiles with the same :func:`~tessera.array.read.scatter.scatter`, one after another.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tessera.array.read.execute import allocate_outputs
from tessera.array.read.fetch import (
    RequestId,
    annotate,
    from_requests,
    request_idents,
    tile_from_requests,
    tile_where,
    unread,
    verified_tile,
)
from tessera.array.read.local import LOCAL_BATCH_BYTES
from tessera.array.read.scatter import scatter
from tessera.errors import CorruptDataError, InvalidRangeError, ObjectNotFoundError
from tessera.format.schema import ArraySchema
from tessera.format.selection import Selection
from tessera.format.tile import Piece, TileRead, check_length
from tessera.query.plan import Plan
from tessera.storage.store import AsyncStore

#: A read runs on the calling thread when its plan moves at most this many bytes: the size
#: from which the general executor decodes and places on worker threads.
NOW_BYTES = LOCAL_BATCH_BYTES


def runs_now(store: AsyncStore, plan: Plan | None) -> bool:
    """True if a read with ``plan`` runs on the calling thread: the store never waits on a
    network, nothing goes to a pushdown server, and the plan moves at most
    :data:`NOW_BYTES`."""
    return store.reads_now and (plan is None or (
        plan.totals.nbytes <= NOW_BYTES and plan.totals.pushdowns == 0))


def read_now(store: AsyncStore, schema: ArraySchema, sel: Selection, reads: list[TileRead],
             attrs: list[str], array_url: str, plan: Plan | None) -> dict[str, np.ndarray]:
    """Fetch, check, decode and place every dense tile read of ``plan`` on this thread;
    full-shape outputs, newest fragment winning per cell."""
    outputs, ranks, _ = allocate_outputs(schema, sel, reads, attrs, set())
    fetched: dict[RequestId, Any] = {}
    for position, read in enumerate(reads):
        where = tile_where(array_url, read)
        try:
            tile = _tile(store, schema, read, position, plan, fetched, where)
        except CorruptDataError as err:
            annotate(err, array_url, read)
            raise
        scatter(outputs[read.attr], ranks[read.attr], tile, read, sel)
    return outputs


def _tile(store: AsyncStore, schema: ArraySchema, read: TileRead, position: int,
          plan: Plan | None, fetched: dict[RequestId, Any], where: str) -> np.ndarray:
    if plan is not None and from_requests(plan, position):
        requests = plan.requests_for(position)
        for ident in request_idents(read, requests):
            if ident not in fetched:  # a request shared with a neighbour is made once
                key, start, stop = ident
                piece = Piece(key, start, stop - start, None, 0)
                fetched[ident] = data = _bytes(store, piece, where)
                check_length(data, piece, where)
        return tile_from_requests(schema, read, requests, fetched, where)
    return verified_tile(schema, read, _bytes(store, read.piece, where), where)


def _bytes(store: AsyncStore, piece: Piece, where: str) -> Any:
    """:func:`~tessera.array.read.fetch.fetch_bytes` on this thread."""
    if piece.inline is not None:
        return piece.inline
    try:
        return store.read_range_now(piece.key, piece.offset, piece.length) if piece.length \
            else b""
    except (ObjectNotFoundError, InvalidRangeError) as err:
        return unread(err, piece.key, where)
