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
from tessera.query.cost import RequestMix
from tessera.query.plan import Plan
from tessera.storage.store import AsyncStore

#: A read runs on the calling thread when its plan moves at most this many bytes: the size
#: from which the general executor decodes and places on worker threads.
NOW_BYTES = LOCAL_BATCH_BYTES


def runs_now(store: AsyncStore, plan: Plan | None) -> bool:
    """True if a read with ``plan`` runs on the calling thread: the store never waits on a
    network, nothing goes to a pushdown server, and the plan moves at most
    :data:`NOW_BYTES`."""
    return store.reads_now and (plan is None or moves_now(plan.totals))


def moves_now(totals: RequestMix) -> bool:
    """True if a plan with these ``totals`` is small enough for the calling thread (at most
    :data:`NOW_BYTES`, nothing sent to a pushdown server)."""
    return totals.nbytes <= NOW_BYTES and totals.pushdowns == 0


class DirectReads:
    """The tiles of one plan, fetched on this thread as it says, each request made once and
    each tile decoded once (several selections of a union may share them): the calling
    thread's :class:`~tessera.array.read.fetch.TileFetcher`."""

    def __init__(self, store: AsyncStore, schema: ArraySchema, reads: list[TileRead],
                 plan: Plan | None, array_url: str) -> None:
        self.store, self.schema, self.reads, self.plan = store, schema, reads, plan
        self.array_url = array_url
        self._fetched: dict[RequestId, Any] = {}
        self._tiles: dict[int, np.ndarray] = {}

    def place(self, sel: Selection, reads: list[TileRead], attrs: list[str],
              positions: list[int] | None = None) -> dict[str, np.ndarray]:
        """Full-shape outputs of ``sel`` from its tile ``reads`` (read ``i`` is tile
        ``positions[i]`` of the plan; default: the same position)."""
        outputs, ranks, _ = allocate_outputs(self.schema, sel, reads, attrs, set())
        for i, read in enumerate(reads):
            tile = self.tile(i if positions is None else positions[i])
            scatter(outputs[read.attr], ranks[read.attr], tile, read, sel)
        return outputs

    def tile(self, position: int) -> np.ndarray:
        """The decoded tile ``position`` of the plan."""
        tile = self._tiles.get(position)
        if tile is None:
            read = self.reads[position]
            try:
                tile = self._tile(read, position, tile_where(self.array_url, read))
            except CorruptDataError as err:
                annotate(err, self.array_url, read)
                raise
            self._tiles[position] = tile
        return tile

    def _tile(self, read: TileRead, position: int, where: str) -> np.ndarray:
        plan = self.plan
        if plan is not None and from_requests(plan, position):
            requests = plan.requests_for(position)
            for ident in request_idents(read, requests):
                if ident not in self._fetched:  # a request shared with a neighbour: once
                    key, start, stop = ident
                    piece = Piece(key, start, stop - start, None, 0)
                    self._fetched[ident] = data = _bytes(self.store, piece, where)
                    check_length(data, piece, where)
            return tile_from_requests(self.schema, read, requests, self._fetched, where)
        return verified_tile(self.schema, read, _bytes(self.store, read.piece, where), where)


def _bytes(store: AsyncStore, piece: Piece, where: str) -> Any:
    """:func:`~tessera.array.read.fetch.fetch_bytes` on this thread."""
    if piece.inline is not None:
        return piece.inline
    try:
        return store.read_range_now(piece.key, piece.offset, piece.length) if piece.length \
            else b""
    except (ObjectNotFoundError, InvalidRangeError) as err:
        return unread(err, piece.key, where)
