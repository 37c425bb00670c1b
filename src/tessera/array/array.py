"""Dense arrays in tiles and immutable fragments (the TileDB model) on any Tessera store.

>>> import numpy as np, tessera
>>> arr = tessera.from_numpy("memory://doc-array", np.arange(12).reshape(3, 4), tile=(2, 2))
>>> arr[1:, ::2]
array([[ 4,  6],
       [ 8, 10]])
>>> arr[0:2, 0:2] = np.zeros((2, 2), dtype=int)      # a new fragment; older cells stay
>>> arr[:2]
array([[0, 0, 2, 3],
       [0, 0, 6, 7]])
>>> len(arr.fragments)
2
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import numpy as np

from tessera._gc import collector_paused
from tessera._sync import run_sync
from tessera.array.calling_thread import CallingThreadReads, Planned, UnionPlan
from tessera.array.face import ArrayFace
from tessera.array.fragment import FragmentMeta
from tessera.array.growth import load_extent
from tessera.array.listing import FragmentListing
from tessera.array.maintenance import (
    TimestampLike,
    check_history,
    same_fragments,
)
from tessera.array.metadata import ArrayMetadata
from tessera.array.numpy_face import NumpyConventions
from tessera.array.read.execute import execute_tile_reads
from tessera.array.read.fetch import TileFetcher
from tessera.array.read.points import point_needs, read_points
from tessera.array.read.pushdown import PushdownReader
from tessera.array.read.report import ReadReport, warn_fallbacks, with_fallbacks
from tessera.array.read.sparse import (
    SparseResult,
    plan_cell_reads,
    read_sparse,
)
from tessera.array.read.tiles import plan_tile_reads
from tessera.array.read.updates import MergedUpdates, merged_for
from tessera.array.read.whole import WholeTiles, execute_whole, fragments_of
from tessera.array.route import route
from tessera.array.writes import LOCAL_CHANGES, ArrayWrites
from tessera.config import Config, PlannerConfig, ReadConfig, WriteConfig
from tessera.errors import (
    CorruptDataError,
    InvalidArgumentError,
    ObjectNotFoundError,
    SchemaError,
)
from tessera.format.layout import tile_spans
from tessera.format.schema import ArraySchema
from tessera.format.selection import (
    Selection,
    SparseSelection,
    check_memory,
    is_ellipsis,
    normalize_selection,
)
from tessera.format.tile import CellTileRead, TileRead
from tessera.pushdown.fleet import PushdownServer, as_pushdown_server
from tessera.query.cost import StoreProfile
from tessera.query.methods import read_method, read_mode
from tessera.query.need import TileNeed
from tessera.query.plan import (
    Plan,
    default_profile,
    plan_needs,
    tile_needs,
)
from tessera.query.plan_cache import PlanCache
from tessera.query.profiler import load_profile
from tessera.storage.blocking import Store
from tessera.storage.window import ByteWindow
from tessera.when import at_ns

T = TypeVar("T")



class Array(ArrayFace, NumpyConventions, ArrayWrites, CallingThreadReads, FragmentListing):
    """An open array. Get one with :func:`open_array`, :func:`create_array` or
    :func:`from_numpy`.

    A handle opened without ``at`` sees the fragments committed when it last listed
    the commit markers: it lists again at a read once ``reads.refresh_s`` (1 s by default)
    has passed since, and at once after any handle of this process wrote to or vacuumed the
    array (:meth:`refresh` asks for it too). With ``refresh_s=0`` every read lists and sees
    every fragment committed before it began. A handle opened with ``at=t`` sees
    exactly the fragments committed at or before ``t`` (``t`` before the first commit:
    :class:`~tessera.errors.BeforeFirstCommitError`).

    ``planner`` (:class:`~tessera.config.PlannerConfig`), ``reads``
    (:class:`~tessera.config.ReadConfig`) and ``writes`` (:class:`~tessera.config.WriteConfig`)
    hold the handle's settings, taken from ``TESSERA_PLANNER_*``, ``TESSERA_READ_*`` and
    ``TESSERA_WRITE_*`` when it opens; replace them to change one handle
    (``arr.writes = tessera.WriteConfig(block_bytes=0)``).

    >>> import numpy as np, tempfile, tessera
    >>> url = tempfile.mkdtemp() + "/frames"
    >>> arr = tessera.from_numpy(url, np.arange(12).reshape(3, 4), tile=(2, 2))
    >>> arr.shape, arr[1:3, 2].tolist()
    ((3, 4), [6, 10])
    """

    def __init__(self, store: Store, schema: ArraySchema, *, mode: str = "r",
                 timestamp: TimestampLike = None, pushdown: Any = None,
                 config: Config | None = None) -> None:
        if mode not in ("r", "w"):
            raise InvalidArgumentError(f"mode must be 'r' or 'w', got {mode!r}")
        self._store = store
        self._uri = str(store.url)  # asked for by every read (its local changes)
        self.schema = schema
        self._created = schema  # as created: a growable array's shape lives apart
        self.mode = mode
        self.timestamp = at_ns(timestamp, "timestamp")
        self._extent_at: tuple[float, int] | None = None  # (monotonic time, change number)
        settings = config or Config.from_env()  # one reading of the environment
        self.config = settings
        self.planner: PlannerConfig = settings.planner
        read_mode(self.planner.method)  # a method no one registered: ConfigError now
        self.reads: ReadConfig = settings.reads
        self.writes: WriteConfig = settings.writes
        self._profile: StoreProfile | None = None
        self._plans = PlanCache(self.planner.plan_cache_bytes)  # see tessera.query.plan_cache
        self._recipes = {}  # see tessera.array.read.recipe
        self._last_visible: list[FragmentMeta] | None = None  # what the latest read used
        self._metas: dict[str, FragmentMeta] = {}
        self._void: set[str] = set()  # see FragmentListing
        self._loaded_state: tuple[list[FragmentMeta] | None, bool] = (None, False)
        # The newest run of many small updates, merged once (see tessera.array.read.updates).
        self._updates: dict[Any, tuple[int, MergedUpdates | None]] = {}
        self._snapshot: list[FragmentMeta] | None = None  # timestamped handles list once
        # The latest listing of a handle without a timestamp: (time.monotonic(), this
        # process's change number of the array then, fragments).
        self._listed: tuple[float, int, list[FragmentMeta]] | None = None
        self.last_read = None
        self._fallback_reasons_seen: set[str] = set()  # pushdown fallbacks warned about
        self.pushdown = pushdown
        self._metadata: ArrayMetadata | None = None
        self._refresh_extent()

    @property
    def pushdown(self) -> PushdownServer | None:
        """The pushdown server reads may use (``None``: none). Set it to a URL, a list of
        URLs (a :class:`~tessera.pushdown.fleet.PushdownFleet`), a
        :class:`~tessera.pushdown.client.PushdownClient` or ``None``; the token comes from
        ``TESSERA_PUSHDOWN_TOKEN`` unless a client carries its own."""
        return self._pushdown

    @pushdown.setter
    def pushdown(self, server: Any) -> None:
        self._pushdown = as_pushdown_server(server)

    # -- description -----------------------------------------------------------------------
    @property
    def uri(self) -> str:
        """The array's URI."""
        return self._uri

    @property
    def store(self) -> Store:
        """The store the array lives in."""
        return self._store

    @property
    def shape(self) -> tuple[int, ...]:
        """Cells per dimension (of a growable array: as of its latest look, see
        :meth:`resize`)."""
        self._refresh_extent()
        return self.schema.shape

    def _refresh_extent(self, force: bool = False) -> None:
        """Bring a growable array's shape up to date: at open, then (without a timestamp)
        when ``reads.refresh_s`` has passed or a handle of this process changed the array
        since the last look, or when ``force``. Sync entry points call it (never the loop)."""
        if self._created.maxshape is None:  # a fixed shape: nothing to look at
            return
        change = LOCAL_CHANGES.get(self.uri, 0)
        if self._extent_at is not None and not force and (
                self.timestamp is not None or (
                    change == self._extent_at[1]
                    and time.monotonic() - self._extent_at[0] < self.reads.refresh_s)):
            return
        at = (time.monotonic(), change)
        extent = run_sync(load_extent(self._store.aio, self._created, self.timestamp,
                                      self.uri))
        self.schema = self._created.with_shape(extent.shape)
        self._extent_at = at

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self.schema.ndim

    @property
    def dtype(self) -> np.dtype[Any]:
        """dtype of the first attribute (a vector dtype keeps its shape, as numpy's)."""
        dtype: np.dtype[Any] = np.dtype(self.schema.attrs[0].dtype)
        return dtype

    @property
    def metadata(self) -> ArrayMetadata:
        """User metadata: a mutable mapping of JSON values kept beside the array, seen as of
        the handle's timestamp (see :mod:`tessera.array.metadata`).

        >>> import numpy as np, tessera
        >>> arr = tessera.from_numpy("memory://doc-arr-metadata", np.zeros(3), tile=(3,))
        >>> arr.metadata["source"] = "sensor 7"
        >>> arr.metadata["source"]
        'sensor 7'
        """
        if self._metadata is None:
            self._metadata = ArrayMetadata(self._store, self.uri, self.timestamp,
                                           self._check_writable)
        return self._metadata

    # -- reads -----------------------------------------------------------------------------
    def __getitem__(self, sel: Any) -> Any:
        out = self.read(sel)
        # numpy: x[...] of a 0-d array is a 0-d array, x[()] a scalar
        return np.asarray(out) if not self.schema.dims and is_ellipsis(sel) else out

    def read(self, sel: Any = ..., *, attrs: list[str] | None = None,
             method: str | None = None, phi: float | None = None) -> Any:
        """Read a selection; one attribute gives an ndarray, several a dict name -> ndarray.

        Unwritten cells read as the attribute's fill value; where fragments overlap, the
        newest wins. ``attrs`` picks a subset of attributes (default: all).

        ``method`` (``auto``, ``get``, ``merge``, ``fetch``, ``pushdown``) and ``phi``
        (seconds worth one dollar) steer the read planner for dense tiles; defaults come
        from :class:`~tessera.config.PlannerConfig` (``TESSERA_PLANNER_*``).
        ``arr.last_read`` then holds the plan beside the measured I/O.

        >>> import numpy as np, tessera
        >>> arr = tessera.from_numpy("memory://doc-read", np.arange(64).reshape(8, 8),
        ...                          tile=(4, 4))
        >>> arr.read((slice(1, 3), slice(0, 8)), method="fetch").tolist()[0]
        [8, 9, 10, 11, 12, 13, 14, 15]
        >>> arr.last_read.plan.methods
        {'range': 2}
        """
        self._refresh_extent()
        method, phi = self._planner_choice(method, phi)
        names = self._attr_names(attrs)
        way = route(self.schema, sel)
        if way.way == "sparse":
            return self._run_read(self._read_sparse_async(way.selection, names, method))
        if way.way == "points":
            values = self._run_read(self._read_points_async(way.selection, names, method,
                                                            phi))
            return values if attrs is not None or len(names) > 1 else values[names[0]]
        if way.way == "union":
            sels = way.selection
            with collector_paused(self._many_tiles(sels)):
                boxes = self._read_union_now(sels, names, method, phi)
                if boxes is None:
                    boxes = self._run_read(self._read_union_async(sels, names, method, phi))
            return [self._shape_result(s, out, names, attrs) for s, out in
                    zip(sels, boxes, strict=True)]
        sel = way.selection
        boxed = self._read_box_now(sel, names, method, phi)
        if boxed is not None:
            return boxed if attrs is not None or len(names) > 1 else boxed[names[0]]
        selection = normalize_selection(sel, self.schema)
        check_memory(math.prod(selection.shape) * sum(self.schema.attr(n).cell_nbytes
                                                      for n in names),
                     f"a read of {selection.shape} cells of {self.uri}")
        with collector_paused(self._many_tiles([selection])):
            outputs = self._read_now(selection, names, method, phi)
            if not isinstance(outputs, dict):
                outputs = self._run_read(self._read_async(selection, names, method, phi,
                                                          outputs))
        return self._shape_result(selection, outputs, names, attrs)

    def _many_tiles(self, selections: list[Selection]) -> bool:
        """Whether ``selections`` span at least ``reads.gc_pause_tiles`` tiles (their
        reads then run with the garbage collector paused: :mod:`tessera._gc`)."""
        least = self.reads.gc_pause_tiles
        if not least:
            return False
        lower, extent = self.schema.lower, self.schema.tile_shape
        total = 0
        for s in selections:
            if not s.empty:
                total += math.prod(len(span) for span in tile_spans(lower, extent,
                                                                     s.bounds()))
                if total >= least:
                    return True
        return False

    def _attr_names(self, attrs: list[str] | None) -> list[str]:
        """The attributes a read asks for (default: all), each checked to exist."""
        if attrs is None:
            return [a.name for a in self.schema.attrs]
        names = list(attrs)
        for n in names:
            self.schema.attr(n)
        return names

    def _run_read(self, coro: Coroutine[Any, Any, tuple[Any, ReadReport]]) -> Any:
        """Run a read, keep its report with the I/O it made as ``last_read``, return its
        result."""
        with self._store.collect() as stats:
            try:
                result, report = run_sync(coro)
            except (ObjectNotFoundError, CorruptDataError):
                if self._snapshot is not None:  # were the snapshot's fragments vacuumed?
                    self._snapshot = None
                    run_sync(check_history(self._store.aio, self.timestamp or 0, self.uri))
                raise
        report.stats = stats
        self.last_read = report
        if report.pushdown_fallbacks:
            # warn_fallbacks <- _run_read <- read <- the caller
            warn_fallbacks(report, self._fallback_reasons_seen, self.uri, stacklevel=4)
        return result

    @staticmethod
    def _shape_result(selection: Any, outputs: dict[str, np.ndarray], names: list[str],
                      attrs: list[str] | None) -> Any:
        keep = tuple(0 if d.drop else slice(None) for d in selection.dims)
        dense = {n: out[keep] for n, out in outputs.items()}
        return dense if attrs is not None or len(names) > 1 else dense[names[0]]

    async def _union_plan(self, sels: list[Any], names: list[str], method: str, phi: float,
                          metas: list[FragmentMeta] | None = None) -> UnionPlan:
        """:meth:`_union_plan_with` the fragments a read sees (``metas``, else listed)."""
        if metas is None:
            metas = await self._visible_metas(lazy=True)
        await self._load_for_read(metas, [s.bounds() for s in sels if not s.empty])
        return self._union_plan_with(sels, names, method, phi, metas)

    def _plan_needs(self, reads: list[TileRead], needs: list[TileNeed], method: str, phi: float,
                    pushdown_ok: bool = True) -> Plan | None:
        """One plan over tiles whose needs are known (``None`` when there are none).
        Pushdown competes when the handle has a server (and ``pushdown_ok``)."""
        if not reads:
            return None
        cell = max(1, min(self.schema.attr(r.attr).cell_nbytes for r in reads))
        # A server found unreachable moments ago stays out of auto plans for a while; a
        # forced pushdown still plans it (and falls back to fetching).
        push = pushdown_ok and self._pushdown is not None and (
            self._pushdown.available or _forces_server(method))
        profile = self.profile.with_pushdown_defaults() if push else self.profile
        pricing, most, now = self._plan_settings()
        return self._plans.plan(needs, (method, phi, pricing, profile, cell, push, most, now),
                                lambda n: plan_needs(n, url=self._store.url, method=method,
                                                     phi=phi, pricing=pricing, profile=profile,
                                                     cell_nbytes=cell, allow_pushdown=push,
                                                     max_request_bytes=most, now_bytes=now))

    def _pushdown_reader(self) -> PushdownReader | None:
        """The pushdown server as this read uses it (``None`` without one). The server is
        asked where the array lies only when a batch is sent; one that cannot be reached or
        does not serve this array makes those tiles fall back to direct fetches, and the
        read's report says why."""
        client = self._pushdown
        if client is None:
            return None
        return PushdownReader(client, None, self._store.aio.record,
                              self.profile.pushdown_memory_gb, array_url=self._store.url)

    async def _points_plan(self, pts: np.ndarray, names: list[str], method: str,
                           phi: float, metas: list[FragmentMeta] | None = None,
                           ) -> tuple[list[TileRead], list[np.ndarray],
                                      list[CellTileRead], Plan | None, int]:
        """Tile reads holding the points, the points of each, the sparse tiles that may
        hold some, and one plan over the tiles."""
        if metas is None:
            metas = await self._visible_metas(lazy=True)
        if not len(pts):
            return [], [], [], None, 0
        box = normalize_selection(tuple(np.unique(pts[:, d]).tolist()
                                        for d in range(self.ndim)), self.schema)
        await self._load_for_read(metas, [box.bounds()])
        reads, cell_reads, skipped = plan_tile_reads(self.schema, box, metas, names)
        kept, members, needs = point_needs(self.schema, pts, reads)
        # Points fetch tiles, never push them down (each point is a cell of its own).
        plan = self._plan_needs(kept, needs, "auto" if _forces_server(method) else method, phi,
                                pushdown_ok=False)
        return kept, members, cell_reads, plan, skipped

    async def _read_points_async(self, pts: np.ndarray, names: list[str], method: str,
                                 phi: float) -> tuple[dict[str, np.ndarray], ReadReport]:
        return await self._speculate(
            lambda metas: self._read_points_with(pts, names, method, phi, metas))

    async def _read_points_with(self, pts: np.ndarray, names: list[str], method: str,
                                phi: float, metas: list[FragmentMeta],
                                ) -> tuple[dict[str, np.ndarray], ReadReport]:
        kept, members, cell_reads, plan, skipped = await self._points_plan(pts, names,
                                                                           method, phi, metas)
        window = ByteWindow(self.reads.window_bytes)
        fetcher = TileFetcher(self._store.aio, self.schema, kept, plan, self.uri, window=window)
        values = await read_points(self.schema, pts, names, kept, members, cell_reads,
                                   fetcher, self.uri)
        used = len({r.fragment for r in kept} | {c.fragment for c in cell_reads})
        return values, ReadReport(kept, used, skipped, cell_reads=cell_reads, plan=plan,
                                  window_peak_bytes=window.peak)

    async def _read_union_async(self, sels: list[Any], names: list[str], method: str,
                                phi: float) -> tuple[list[dict[str, np.ndarray]], ReadReport]:
        return await self._speculate(
            lambda metas: self._read_union_with(sels, names, method, phi, metas))

    async def _read_union_with(self, sels: list[Any], names: list[str], method: str,
                               phi: float, metas: list[FragmentMeta],
                               ) -> tuple[list[dict[str, np.ndarray]], ReadReport]:
        per, positions, distinct, plan = await self._union_plan(sels, names, method, phi,
                                                                metas)
        window = ByteWindow(self.reads.window_bytes)
        fetcher = TileFetcher(self._store.aio, self.schema, distinct, plan, self.uri,
                              window=window)
        for pos in positions:
            for p in pos:
                fetcher.expect(p)
        pushdown = self._pushdown_reader()
        outs = await asyncio.gather(*(
            execute_tile_reads(self._store.aio, self.schema, s, reads, names, self.uri, cells,
                               fetcher=fetcher, positions=pos, pushdown=pushdown)
            for s, (reads, cells, _), pos in zip(sels, per, positions, strict=True)))
        used = len({r.fragment for r in distinct}
                   | {c.fragment for _, cells, _ in per for c in cells})
        cell_reads = [c for _, cells, _ in per for c in cells]
        self._last_visible = metas
        return list(outs), with_fallbacks(ReadReport(distinct, used, 0, cell_reads=cell_reads,
                                                   plan=plan, window_peak_bytes=window.peak),
                                        pushdown)

    def _planner_choice(self, method: str | None, phi: float | None) -> tuple[str, float]:
        chosen = self.planner.overridden(method, phi)
        return chosen.method, chosen.phi

    @property
    def profile(self) -> StoreProfile:
        """The store profile plans use: the one :func:`tessera.profile_store` saved for this
        endpoint, else a built-in default (loaded once per handle)."""
        if self._profile is None:
            self._profile = load_profile(self._store) or default_profile(self._store.url)
        return self._profile

    @profile.setter
    def profile(self, profile: StoreProfile) -> None:
        self._profile = profile

    def explain(self, sel: Any = ..., *, attrs: list[str] | None = None,
                method: str | None = None, phi: float | None = None) -> Plan:
        """The plan a read of ``sel`` would follow, without reading any data: per tile the
        method, requests and bytes, and the estimated seconds and dollars (``print`` it).

        >>> import numpy as np, tessera
        >>> arr = tessera.from_numpy("memory://doc-explain", np.zeros((8, 8)), tile=(4, 4))
        >>> arr.explain((slice(0, 8), 1), method="get").methods
        {'get': 2}
        """
        self._refresh_extent()
        if self.schema.sparse:
            raise SchemaError("explain() plans dense reads; sparse arrays fetch their data "
                              "tiles whole")
        method, phi = self._planner_choice(method, phi)
        names = self._attr_names(attrs)
        way = route(self.schema, sel)
        if way.way == "points":
            plan = run_sync(self._points_plan(way.selection, names, method, phi))[3]
        elif way.way == "union":
            with collector_paused(self._many_tiles(way.selection)):
                plan = run_sync(self._union_plan(way.selection, names, method, phi))[3]
        else:
            selection = normalize_selection(way.selection, self.schema)
            metas = run_sync(self._visible_metas(lazy=True))
            if not selection.empty:
                run_sync(self._load_for_read(metas, [selection.bounds()]))
            with collector_paused(self._many_tiles([selection])):
                whole = self._whole_read(selection, metas, names, method, phi)
                if whole is not None:
                    plan = whole[1]
                else:
                    reads, _, _ = plan_tile_reads(self.schema, selection, metas, names)
                    plan = self._plan_needs(reads, tile_needs(self.schema, selection, reads),
                                            method, phi)
        return plan if plan is not None else plan_needs([], url=self._store.url,
                                                         method=method, phi=phi)

    async def _read_async(self, selection: Any, names: list[str], method: str = "auto",
                          phi: float = 0.0, planned: Planned | None = None,
                          ) -> tuple[dict[str, np.ndarray], ReadReport]:
        """Read on the event loop; ``planned``: what the calling thread planned for this
        read (used if the read goes ahead over the same fragments)."""
        return await self._speculate(
            lambda metas: self._read_with(selection, names, method, phi, metas,
                                          retry=metas is not self._last_visible,
                                          planned=planned and planned.over(metas)))

    async def _speculate(self, read: Callable[[list[FragmentMeta]], Awaitable[T]]) -> T:
        """Run ``read(fragments)``. A handle whose list of fragments is younger than
        ``reads.refresh_s`` (and still current for this process's own changes) reads with it,
        listing again only if a fragment turns out to be gone. Otherwise a handle that has
        read before speculates: it reads with the fragments the previous read saw while
        listing the commit markers at the same time (one round trip saved); the answer
        stands if the listing shows the same fragments, otherwise it reads again."""
        cached = self._cached_listing()
        if cached is not None:
            return await self._read_relisting(read, cached)
        last = self._last_visible
        if last is not None and self.timestamp is None:
            listing = asyncio.ensure_future(self._visible_metas(lazy=True))
            try:
                guess: T | None = await read(last)
            except CorruptDataError:
                guess = None  # e.g. vacuumed meanwhile: the listing decides below
            except BaseException:
                listing.cancel()
                await asyncio.gather(listing, return_exceptions=True)
                raise
            metas = await listing
            if guess is not None and same_fragments(metas, last):
                return guess
        else:
            metas = await self._visible_metas(lazy=True)
        # (relisting if a fragment listed is gone: e.g. one whose writer took it back, found
        # when its bookkeeping was loaded)
        return await self._read_relisting(read, metas)

    async def _read_relisting(self, read: Callable[[list[FragmentMeta]], Awaitable[T]],
                              metas: list[FragmentMeta]) -> T:
        """``read(metas)``; if a fragment turns out to be gone (another process consolidated
        and vacuumed what was listed), list again (at the handle's timestamp, if any; or
        learn that its history is gone) and read again if the list changed."""
        try:
            return await read(metas)
        except CorruptDataError:
            fresh = await self._visible_metas(cached_ok=False, lazy=True)
            if same_fragments(fresh, metas):
                raise
            return await read(fresh)

    async def _read_with(self, selection: Any, names: list[str], method: str, phi: float,
                         metas: list[FragmentMeta], retry: bool = False,
                         planned: Planned | None = None,
                         ) -> tuple[dict[str, np.ndarray], ReadReport]:
        pushdown = self._pushdown_reader()
        window = ByteWindow(self.reads.window_bytes)
        while True:
            try:
                if planned is None and not selection.empty:  # (the calling thread's plan
                    await self._load_for_read(metas, [selection.bounds()])  # had them)
                start, merged = merged_for(self._updates, self.schema, metas, names, self.uri)
                plan: Plan | None
                reads: list[TileRead] | WholeTiles
                whole = (None if planned is not None or merged is not None
                         else self._whole_read(selection, metas[:start], names, method, phi))
                if planned is not None:  # planned on the calling thread (no merged run there)
                    reads, cell_reads, skipped, plan = (planned.reads, planned.cell_reads,
                                                        planned.skipped, planned.plan)
                    planned = None
                elif whole is not None:
                    (reads, plan), cell_reads, skipped = whole, [], start - 1
                else:
                    reads, cell_reads, skipped = plan_tile_reads(self.schema, selection,
                                                                 metas[:start], names)
                    plan = None
                if isinstance(reads, WholeTiles) and plan is not None:
                    outputs = await execute_whole(self._store.aio, self.schema, selection,
                                                  reads, plan, self.uri, window)
                    break
                assert isinstance(reads, list)
                if plan is None:
                    plan = self._plan_needs(reads, tile_needs(self.schema, selection, reads),
                                            method, phi)
                outputs = await execute_tile_reads(self._store.aio, self.schema, selection,
                                                   reads, names, self.uri, cell_reads, plan,
                                                   pushdown=pushdown, merged=merged,
                                                   window=window)
                break
            except CorruptDataError:
                # A vacuum may have removed fragments this read listed a moment ago: read
                # again with a fresh list; if the list did not change, the damage is real.
                if not retry:
                    raise
                fresh = await self._visible_metas(cached_ok=False, lazy=True)
                if same_fragments(fresh, metas):
                    raise
                metas = fresh
        self._last_visible = metas
        used = len(fragments_of(reads) | {c.fragment for c in cell_reads})
        if merged is not None:  # the run's fragments count as read, as without the index
            touched = 0 if selection.empty else merged.touching(selection.bounds())
            used, skipped = used + touched, skipped + len(merged.fragments) - touched
        return outputs, with_fallbacks(ReadReport(reads, used, skipped, cell_reads=cell_reads,
                                                plan=plan, window_peak_bytes=window.peak),
                                       pushdown)

    async def _read_sparse_async(self, ssel: SparseSelection, names: list[str],
                                 method: str = "auto") -> tuple[SparseResult, ReadReport]:
        metas = await self._visible_metas()
        # Sparse data tiles go to the pushdown server when a read asks for method="pushdown".
        pushdown = self._pushdown_reader() if _forces_server(method) else None
        while True:
            reads = plan_cell_reads(ssel, metas, names)
            try:
                result, _ = await read_sparse(self._store.aio, self.schema, ssel, reads, names,
                                              self.uri, pushdown=pushdown)
                break
            except CorruptDataError:  # see _read_async
                fresh = await self._visible_metas(cached_ok=False)
                if same_fragments(fresh, metas):
                    raise
                metas = fresh
        used = len({r.fragment for r in reads})
        return result, with_fallbacks(
            ReadReport([], used, len(metas) - used, cell_reads=reads), pushdown)

    def refresh(self) -> None:
        """Make the next read list the commit markers, even within ``reads.refresh_s`` of
        the last listing, and so see what other processes committed since (a handle opened
        at a timestamp keeps its fragments).

        >>> import numpy as np, tessera
        >>> arr = tessera.from_numpy("memory://doc-refresh", np.zeros(4, np.int32))
        >>> arr.reads = tessera.ReadConfig(refresh_s=float("inf"))
        >>> _ = arr[:]
        >>> with tessera.collect_stats() as stats:
        ...     _ = arr[:]  # the list of fragments of the read before
        >>> "list" in stats.by_method
        False
        >>> arr.refresh()
        >>> with tessera.collect_stats() as stats:
        ...     _ = arr[:]
        >>> stats.by_method["list"].requests
        1
        """
        self._listed = None
        self._extent_at = None  # a growable array looks at its shape again

    def _at(self, timestamp: int) -> Array:
        """A read-only handle on this array at ``timestamp`` sharing this handle's
        fragment bookkeeping (consolidation reads through it)."""
        return Array(self._store, self._created, mode="r", timestamp=timestamp,
                     config=self.config)


def _forces_server(mode: str) -> bool:
    """True if read mode ``mode`` forces a method that runs on a pushdown server."""
    forced = read_mode(mode).method
    return forced is not None and read_method(forced).on_server
