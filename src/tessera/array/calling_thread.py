"""Reads on the calling thread: a small read (or union of reads) of a store that never waits
on a network is planned and executed right where it is asked for
(:mod:`tessera.array.read.direct`), without the trip to the background event loop, with the
same plan, requests, report and errors as the loop's path (docs/performance.md, "Per-call
cost").

A read takes this path when the handle's list of fragments is current (see
:class:`~tessera.config.ReadConfig`), no pushdown server is set, no sparse fragment or
merged run of updates is involved, and its plan moves at most
:data:`~tessera.array.read.direct.NOW_BYTES`; otherwise, and after a damaged or missing
tile (the loop's path lists the fragments again and decides), it goes to the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tessera.array.fragment import FragmentMeta
from tessera.array.read.direct import DirectReads, runs_now
from tessera.array.read.report import ReadReport
from tessera.array.read.tiles import TileReads, plan_tile_reads
from tessera.array.read.updates import MergedUpdates, merged_for
from tessera.errors import CorruptDataError, ObjectNotFoundError
from tessera.format.schema import ArraySchema
from tessera.format.selection import Selection
from tessera.format.tile import TileRead
from tessera.pushdown.fleet import PushdownServer
from tessera.query.need import TileNeed
from tessera.query.plan import Plan, tile_needs, union_needs
from tessera.storage.blocking import Store

#: A union's plan: the tile reads of every selection, which distinct tile each read is, the
#: distinct tiles and one plan over them.
UnionPlan = tuple[list[TileReads], list[list[int]], list[TileRead], Plan | None]


class CallingThreadReads:
    """Reads made on the calling thread. The handle's state is
    :class:`~tessera.array.array.Array`'s; this base names what it uses of it."""

    schema: ArraySchema
    timestamp: int | None
    last_read: ReadReport | None
    _store: Store
    _pushdown: PushdownServer | None
    _snapshot: list[FragmentMeta] | None
    _updates: dict[Any, tuple[int, MergedUpdates | None]]
    _last_visible: list[FragmentMeta] | None
    #: What :meth:`_read_now` planned for a read it passed on to the loop (see
    #: :meth:`_hand_over`): selection, fragments, method, phi, then the tile reads, the
    #: sparse tile reads, the fragments skipped and the plan (``None``: not made yet).
    _planned: tuple[Any, ...] | None = None

    if TYPE_CHECKING:
        @property
        def uri(self) -> str:
            """The array's URI."""

        def _cached_listing(self) -> list[FragmentMeta] | None:
            """The latest list of fragments, while it is current."""

        def _plan_needs(self, reads: list[TileRead], needs: list[TileNeed], method: str,
                        phi: float, pushdown_ok: bool = True) -> Plan | None:
            """One plan over tiles whose needs are known."""

    def _now_metas(self, names: list[str]) -> list[FragmentMeta] | None:
        """The fragments a read on the calling thread uses, or ``None`` when the read goes
        to the loop (no current list, a pushdown server, a network store, a merged run of
        updates)."""
        metas = self._cached_listing() if self.timestamp is None else self._snapshot
        if metas is None or self._pushdown is not None or not self._store.aio.reads_now:
            return None
        if merged_for(self._updates, self.schema, metas, names, self.uri)[1] is not None:
            return None
        return metas

    def _read_now(self, selection: Selection, names: list[str], method: str,
                  phi: float) -> dict[str, np.ndarray] | None:
        """One selection's full-shape outputs read on this thread, or ``None`` (then the
        caller takes the loop's path)."""
        metas = self._now_metas(names)
        if metas is None:
            return None
        reads, cell_reads, skipped = plan_tile_reads(self.schema, selection, metas, names)
        if cell_reads:
            self._planned = (selection, metas, method, phi, reads, cell_reads, skipped, None)
            return None
        plan = self._plan_needs(reads, tile_needs(self.schema, selection, reads), method, phi)
        if not runs_now(self._store.aio, plan):
            self._planned = (selection, metas, method, phi, reads, cell_reads, skipped, plan)
            return None
        with self._store.collect() as stats:
            try:
                outputs = DirectReads(self._store.aio, self.schema, reads, plan,
                                      self.uri).place(selection, reads, names)
            except (CorruptDataError, ObjectNotFoundError):
                return None
        self._last_visible = metas
        self.last_read = ReadReport(reads, len({r.fragment for r in reads}), skipped,
                                    stats=stats, plan=plan)
        return outputs

    def _hand_over(self, selection: Selection, metas: list[FragmentMeta], method: str,
                   phi: float) -> tuple[Any, ...] | None:
        """The tile reads, sparse tile reads, fragments skipped and plan (or ``None``) that
        :meth:`_read_now` made for this very read before passing it to the loop, so the loop
        does not make them again (taken once; ``None`` for any other read)."""
        got, self._planned = self._planned, None
        if got is None or got[0] is not selection or got[1] is not metas \
                or got[2:4] != (method, phi):
            return None
        return got[4:]

    def _read_union_now(self, sels: list[Selection], names: list[str], method: str,
                        phi: float) -> list[dict[str, np.ndarray]] | None:
        """A union's full-shape outputs (one per selection) read on this thread, or
        ``None`` (then the caller takes the loop's path)."""
        metas = self._now_metas(names)
        if metas is None:
            return None
        per, positions, distinct, plan = self._union_plan_with(sels, names, method, phi,
                                                               metas)
        if any(cells for _, cells, _ in per) or not runs_now(self._store.aio, plan):
            return None
        with self._store.collect() as stats:
            try:
                tiles = DirectReads(self._store.aio, self.schema, distinct, plan, self.uri)
                outs = [tiles.place(s, reads, names, pos) for s, (reads, _, _), pos in
                        zip(sels, per, positions, strict=True)]
            except (CorruptDataError, ObjectNotFoundError):
                return None
        self._last_visible = metas
        self.last_read = ReadReport(distinct, len({r.fragment for r in distinct}), 0,
                                    stats=stats, plan=plan)
        return outs

    def _union_plan_with(self, sels: list[Selection], names: list[str], method: str,
                         phi: float, metas: list[FragmentMeta]) -> UnionPlan:
        """Tile reads of every selection over ``metas``, the distinct tiles among them,
        which distinct tile each read is, and one plan over the distinct tiles (a tile two
        selections need is planned, and fetched, once for both)."""
        per = [plan_tile_reads(self.schema, s, metas, names) for s in sels]
        index: dict[tuple[Any, ...], int] = {}
        distinct: list[TileRead] = []
        needs: list[TileNeed] = []
        positions: list[list[int]] = []
        for s, (reads, _, _) in zip(sels, per, strict=True):
            pos = []
            for read, need in zip(reads, tile_needs(self.schema, s, reads), strict=True):
                key = (read.fragment, read.attr, read.tile_index)
                if key not in index:
                    index[key] = len(distinct)
                    distinct.append(read)
                    needs.append(need)
                else:
                    needs[index[key]] = union_needs(needs[index[key]], need)
                pos.append(index[key])
            positions.append(pos)
        return per, positions, distinct, self._plan_needs(distinct, needs, method, phi)
