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

A box (integers and unit-step slices) of a footprint read before skips the planning too: it
is read by the recipe its first read left (:mod:`tessera.array.read.recipe`), its
``last_read`` made from the recipe when first asked for.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tessera.array.fragment import FragmentMeta
from tessera.array.read import direct
from tessera.array.read.direct import DirectReads, moves_now, runs_now
from tessera.array.read.local import LOCAL_BATCH_BYTES
from tessera.array.read.recipe import (
    Recipe,
    footprint,
    make_recipe,
    newest_cover,
    recipe_report,
    run,
)
from tessera.array.read.report import ReadReport
from tessera.array.read.tiles import TileReads, plan_tile_reads
from tessera.array.read.updates import MergedUpdates, merged_for
from tessera.array.read.whole import WholeTiles, whole_tiles
from tessera.config import PlannerConfig
from tessera.errors import CorruptDataError, ObjectNotFoundError
from tessera.format.layout import Box
from tessera.format.schema import ArraySchema
from tessera.format.selection import Selection, box_of
from tessera.format.tile import CellTileRead, TileRead
from tessera.pushdown.fleet import PushdownServer
from tessera.query.cost import StoreProfile
from tessera.query.need import TileNeed
from tessera.query.plan import Plan, plan_whole, tile_needs, union_needs
from tessera.storage.blocking import Store
from tessera.storage.stats import IOStats

#: Recipes a handle keeps at most (all are dropped when one more would pass this).
MAX_RECIPES = 1024

#: A union's plan: the tile reads of every selection, which distinct tile each read is, the
#: distinct tiles and one plan over them.
UnionPlan = tuple[list[TileReads], list[list[int]], list[TileRead], Plan | None]


@dataclasses.dataclass(frozen=True)
class Planned:
    """What :meth:`CallingThreadReads._read_now` planned for a read it passes on to the
    event loop's path, so that path does not plan it again: the fragments it was planned
    over, the tile reads, sparse tile reads, fragments skipped and the plan (``None``: not
    made, when sparse tiles are involved)."""

    metas: list[FragmentMeta]
    reads: list[TileRead] | WholeTiles
    cell_reads: list[CellTileRead]
    skipped: int
    plan: Plan | None

    def over(self, metas: list[FragmentMeta]) -> Planned | None:
        """This, if it was planned over ``metas`` (the very list), else ``None``."""
        return self if metas is self.metas else None


class CallingThreadReads:
    """Reads made on the calling thread. The handle's state is
    :class:`~tessera.array.array.Array`'s; this base names what it uses of it."""

    schema: ArraySchema
    timestamp: int | None
    #: The latest read's report, or what makes it when first asked for (a read by recipe
    #: leaves its tile list and plan to be made then: see :attr:`last_read`).
    _last_read: ReadReport | Callable[[], ReadReport] | None = None
    _last_stats: IOStats | None = None
    _store: Store
    _pushdown: PushdownServer | None
    _snapshot: list[FragmentMeta] | None
    _updates: dict[Any, tuple[int, MergedUpdates | None]]
    _last_visible: list[FragmentMeta] | None
    #: Recipes of small box reads by footprint (see :meth:`_read_box_now`), and the
    #: fragments, profile and planner settings they were made under.
    _recipes: dict[Any, Recipe]
    _recipes_made_for: tuple[Any, ...] | None = None
    planner: PlannerConfig

    if TYPE_CHECKING:
        @property
        def uri(self) -> str:
            """The array's URI."""

        @property
        def profile(self) -> StoreProfile:
            """The store profile plans use."""

        def _cached_listing(self) -> list[FragmentMeta] | None:
            """The latest list of fragments, while it is current."""

        def _pending_meeting(self, metas: list[FragmentMeta],
                             boxes: Sequence[Box] | None = None) -> list[FragmentMeta]:
            """The fragments of ``metas`` meeting ``boxes`` whose bookkeeping is not loaded."""

        def _refresh_extent(self, force: bool = False) -> None:
            """Bring a growable array's shape up to date."""

        def _plan_needs(self, reads: list[TileRead], needs: list[TileNeed], method: str,
                        phi: float, pushdown_ok: bool = True) -> Plan | None:
            """One plan over tiles whose needs are known."""

    @property
    def last_read(self) -> ReadReport | None:
        """What the latest read did (:class:`~tessera.array.read.report.ReadReport`: its
        tile reads, plan and measured I/O); ``None`` before the first read."""
        got = self._last_read
        if callable(got):
            got = self._last_read = got()
        return got

    @last_read.setter
    def last_read(self, report: ReadReport | None) -> None:
        self._last_read = report
        self._last_stats = None if report is None else report.stats

    @property
    def last_read_stats(self) -> IOStats | None:
        """The requests and bytes the latest read made (``last_read.stats``) without making
        the rest of its report (a read by recipe makes its tile list and plan only when
        ``last_read`` is asked for); ``None`` before the first read."""
        return self._last_stats

    def current_fragments(self) -> list[FragmentMeta] | None:
        """The fragments a read made now would use without listing them again (the
        handle's list while ``reads.refresh_s`` covers it and no handle of this process
        changed the array since; a handle opened at a timestamp keeps its own once made),
        the shape brought up to date first; ``None`` when the next read lists them again.
        The same list object while it holds: a cache of what reads answer (the
        :mod:`tessera.h5` chunk cache) checks it per read by identity.

        >>> import numpy as np, tessera
        >>> arr = tessera.from_numpy("memory://doc-current", np.zeros(4, np.int32))
        >>> _ = arr[:]
        >>> [f.name for f in arr.current_fragments()] == [f.name for f in arr.fragments]
        True
        """
        self._refresh_extent()
        return self._cached_listing() if self.timestamp is None else self._snapshot

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
                  phi: float) -> dict[str, np.ndarray] | Planned | None:
        """One selection's full-shape outputs read on this thread; else what was planned
        here for the loop's path to go on with (:class:`Planned`), or ``None`` when
        nothing was (the loop's path plans it)."""
        metas = self._now_metas(names)
        if metas is None or (not selection.empty
                             and self._pending_meeting(metas, [selection.bounds()])):
            return None  # (the loop's path loads the bookkeeping it meets first)
        whole = self._whole_read(selection, metas, names, method, phi,
                                 least=direct.NOW_BYTES + 1)
        if whole is not None:  # a read in columns: made by the loop's path
            return Planned(metas, whole[0], [], len(metas) - 1, whole[1])
        reads, cell_reads, skipped = plan_tile_reads(self.schema, selection, metas, names)
        if cell_reads:
            return Planned(metas, reads, cell_reads, skipped, None)
        needs = tile_needs(self.schema, selection, reads)
        plan = self._plan_needs(reads, needs, method, phi)
        if not runs_now(self._store.aio, plan):
            return Planned(metas, reads, cell_reads, skipped, plan)
        if plan is not None and all(d.contiguous for d in selection.dims):
            self._keep_recipe(selection, names, method, phi, metas, reads, needs, plan)
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

    def _whole_read(self, selection: Selection, metas: list[FragmentMeta], names: list[str],
                    method: str, phi: float, least: int = 0) -> tuple[WholeTiles, Plan] | None:
        """The tile reads of ``selection`` in columns and their plan
        (:mod:`tessera.array.read.whole`), when the read is made so: whole tiles of one
        dense fragment, the planner's choice (``auto``: a forced method reads tile by tile,
        one request a tile), no pushdown server planned, at least ``least`` stored bytes;
        else ``None``."""
        if method != "auto" or (self._pushdown is not None and self._pushdown.available):
            return None  # (a forced method, or pushdown competing)
        tiles = whole_tiles(self.schema, selection, metas, names)
        if tiles is None or int(tiles.sizes.sum()) < least:
            return None
        pricing, most, now = self._plan_settings()
        plan = plan_whole(tiles.needs(), url=self._store.url, method=method, phi=phi,
                          pricing=pricing, profile=self.profile,
                          cell_nbytes=max(1, min(self.schema.attr(n).cell_nbytes
                                                 for n in names)),
                          max_request_bytes=most, now_bytes=now)
        return tiles, plan

    def _plan_settings(self) -> tuple[str | None, int, int | None]:
        """What every plan of this handle is made with: the price table (``None``: the
        store's), the largest request neighbour merging may build, and the bytes a plan
        made on the calling thread may move (``None``: no read is made there: a network
        store, or a pushdown server set)."""
        # (the size below which the read executor takes a read there, direct.NOW_BYTES)
        now = LOCAL_BATCH_BYTES if self._store.aio.reads_now and self._pushdown is None \
            else None
        return self.planner.pricing or None, self.planner.max_request_bytes, now

    def _read_box_now(self, sel: Any, names: list[str], method: str,
                      phi: float) -> dict[str, np.ndarray] | None:
        """A box selection (integers and unit-step slices, :func:`box_of`) that one dense
        fragment holds, of a footprint read before, read on this thread by its recipe
        (:mod:`tessera.array.read.recipe`); the outputs with integer-indexed dimensions
        taken out. ``None``: the caller takes the general path (any other selection or
        store, a new footprint, several fragments under the box, tiles laid out otherwise,
        a failed request or check), which keeps a recipe where it can
        (:meth:`_keep_recipe`)."""
        box = box_of(sel, self.schema)
        if box is None:
            return None
        metas = self._cached_listing() if self.timestamp is None else self._snapshot
        if metas is None or self._pushdown is not None or not self._store.aio.reads_now:
            return None
        lo, hi, drop = box
        sig, first, starts = footprint(self.schema, lo, hi)
        recipe = self._recipes_for(metas).get((sig, tuple(names), method, phi))
        # A recipe made for these fragments: they passed _now_metas then.
        if recipe is None or not moves_now(recipe.template.totals):
            return None
        rank = newest_cover(self.schema, metas, (lo, hi))
        if rank is None or metas[rank].pending:
            return None
        with self._store.collect() as stats:
            outputs = run(recipe, self._store.aio, self.schema, metas[rank], first, starts,
                          drop, names)
        if outputs is None:
            return None
        self._last_visible = metas
        self._last_read = functools.partial(recipe_report, recipe, self.schema, metas[rank],
                                            rank, (lo, hi), first, starts, stats, len(metas))
        self._last_stats = stats
        return outputs

    def _keep_recipe(self, selection: Selection, names: list[str], method: str, phi: float,
                     metas: list[FragmentMeta], reads: list[TileRead], needs: list[TileNeed],
                     plan: Plan) -> None:
        """Keep the recipe of a box read planned the general way on this thread (when one
        dense fragment holds the box and a recipe holds for its tiles), for the next read of
        its footprint."""
        lo, hi = selection.bounds()
        if newest_cover(self.schema, metas, (lo, hi)) is None:
            return
        sig, first, starts = footprint(self.schema, lo, hi)
        made = make_recipe(self.schema, reads, needs, plan, first, starts,
                           tuple(b - a + 1 for a, b in zip(lo, hi, strict=True)))
        if made is None:
            return
        recipes = self._recipes_for(metas)
        if len(recipes) >= MAX_RECIPES:
            recipes.clear()
        recipes[(sig, tuple(names), method, phi)] = made

    def _recipes_for(self, metas: list[FragmentMeta]) -> dict[Any, Recipe]:
        """The handle's recipes, emptied when the fragments, the profile or the planner's
        settings they were made under changed (a list of fragments made again, as every
        ``reads.refresh_s``, with the same fragments keeps them)."""
        made = self._recipes_made_for
        if made is not None and made[0] is metas and made[2] is self.profile \
                and made[3] is self.planner:
            return self._recipes
        names = tuple(m.name for m in metas)
        if made is None or made[1] != names or made[2] is not self.profile \
                or made[3] is not self.planner:
            self._recipes.clear()
        self._recipes_made_for = (metas, names, self.profile, self.planner)
        return self._recipes

    def _read_union_now(self, sels: list[Selection], names: list[str], method: str,
                        phi: float) -> list[dict[str, np.ndarray]] | None:
        """A union's full-shape outputs (one per selection) read on this thread, or
        ``None`` (then the caller takes the loop's path)."""
        metas = self._now_metas(names)
        if metas is None or self._pending_meeting(metas, [s.bounds() for s in sels
                                                          if not s.empty]):
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
