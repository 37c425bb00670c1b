"""Read plans: the planner applied to the tile reads of one array read.

:func:`tile_needs` decomposes what each dense tile read needs into byte ranges and
:func:`plan_needs` lets :func:`~tessera.query.refine.plan_tiles` choose a method per tile
under the store's profile and price table. The :class:`Plan` prints as a table
(``arr.explain(sel)``) and the executor follows it (``arr.read(sel, method=..., phi=...)``).

Sparse data tiles (updates, tombstones) are small and fetched whole; tiles kept inline in a
fragment's bookkeeping need no request at all. Both are left out of the plan.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import math
import operator
from collections.abc import Callable, Sequence

import numpy as np
from rich.console import Console
from rich.table import Table

from tessera.config import PlannerConfig
from tessera.format.decompose import box_byte_ranges, merge_ranges, tile_byte_ranges, unique_indices
from tessera.format.layout import tile_nbytes
from tessera.format.schema import ArraySchema, Attr
from tessera.format.selection import Selection
from tessera.format.tile import TileRead, positions, tile_cells
from tessera.query.cost import DEFAULT_PROFILES, CostModel, Estimate, RequestMix, StoreProfile
from tessera.query.methods import read_method
from tessera.query.refine import (
    PlannedRequest,
    TileChoice,
    TileNeed,
    plan_requests,
    plan_tiles,
)
from tessera.query.whole import ChoiceColumns, WholeNeeds, choose_whole
from tessera.storage.url import StoreURL

_PRICING_BY_SCHEME = {"s3": "s3", "gs": "gcs", "az": "azure"}


def default_profile(url: StoreURL) -> StoreProfile:
    """The built-in profile for a store: ``local`` for folders and memory, else ``cloud``."""
    return DEFAULT_PROFILES["cloud" if url.is_cloud else "local"]


def default_pricing(url: StoreURL) -> str:
    """The price table matching a store's URL scheme (``local`` for folders and memory)."""
    return _PRICING_BY_SCHEME.get(url.scheme, "local")


@dataclasses.dataclass(frozen=True)
class Plan:
    """How a read fetches its dense tiles, with the estimates that led there.

    Attributes:
        method: the method asked for (``auto`` or a forced one).
        phi: the price sensitivity used.
        profile: name of the store profile; ``pricing``: the price table.
        choices: one :class:`~tessera.query.refine.TileChoice` per dense tile read, in the
            order of the read's tile list (of a read of whole tiles planned in columns, a
            :class:`~tessera.query.whole.ChoiceColumns` that makes each when asked for).
        requests: the requests to issue (neighbouring tiles may share one).
        totals: requests and bytes of the whole plan; ``estimate``: its seconds, dollars
            and cost.
        subject: what is read, when not an array's tiles (a tensor of a table).

    >>> import numpy as np, tessera
    >>> arr = tessera.from_numpy("memory://doc-plan", np.zeros((8, 8)), tile=(4, 4))
    >>> plan = arr.explain((slice(0, 8), 1), method="get")
    >>> plan.methods, len(plan.requests), plan.totals.nbytes
    ({'get': 2}, 2, 256)
    """

    method: str
    phi: float
    profile: str
    pricing: str
    choices: Sequence[TileChoice]
    requests: list[PlannedRequest]
    totals: RequestMix
    estimate: Estimate
    subject: str = ""

    @property
    def methods(self) -> dict[str, int]:
        """Tiles per chosen method."""
        if isinstance(self.choices, ChoiceColumns):
            return self.choices.method_counts()
        out: dict[str, int] = {}
        for c in self.choices:
            out[c.method] = out.get(c.method, 0) + 1
        return out

    @functools.cached_property
    def shared_tiles(self) -> frozenset[int]:
        """Positions of tiles whose bytes come in a request shared with other tiles."""
        return frozenset(t for r in self.requests if len(r.tiles) > 1 for t in r.tiles)

    @functools.cached_property
    def _by_tile(self) -> dict[int, list[PlannedRequest]]:
        out: dict[int, list[PlannedRequest]] = {}
        for r in self.requests:
            for t in r.tiles:
                out.setdefault(t, []).append(r)
        return out

    def requests_for(self, position: int) -> list[PlannedRequest]:
        """The requests that carry the bytes of tile read ``position``."""
        return self._by_tile.get(position, [])

    def table(self, max_rows: int = 40) -> Table:
        """The plan as a rich table: one row per tile (up to ``max_rows``), then the totals
        and, in the caption, the estimated seconds and dollars of the whole read."""
        t = Table(title=f"{self.subject + ': ' if self.subject else ''}read plan: "
                        f"method={self.method}, phi={self.phi:g}, "
                        f"profile={self.profile}, pricing={self.pricing}",
                  caption=f"estimated {self.estimate.seconds:.4g} s and "
                          f"${self.estimate.dollars:.3g} for {len(self.requests)} requests, "
                          f"{self.totals.nbytes:,} bytes")
        for col in ("tile", "method", "requests", "bytes", "selected"):
            t.add_column(col, justify="left" if col in ("tile", "method") else "right",
                         no_wrap=True)
        for c in self.choices[:max_rows]:
            t.add_row(c.need.tile, c.method, str(c.mix.requests), f"{c.mix.nbytes:,}",
                      f"{c.need.selected_bytes:,}")
        if len(self.choices) > max_rows:
            t.add_row(f"... {len(self.choices) - max_rows} more tiles", "", "", "", "")
        mix = ", ".join(f"{n} {m}" for m, n in sorted(self.methods.items()))
        t.add_row("total", mix, str(len(self.requests)), f"{self.totals.nbytes:,}",
                  f"{self.selected_bytes:,}", style="bold")
        return t

    @property
    def selected_bytes(self) -> int:
        """Bytes of the selected cells of every tile."""
        if isinstance(self.choices, ChoiceColumns):
            return self.choices.selected_bytes()
        return sum(c.need.selected_bytes for c in self.choices)

    def __str__(self) -> str:
        out = io.StringIO()
        Console(file=out, width=120, highlight=False).print(self.table())
        return out.getvalue()

    def _repr_html_(self) -> str:
        """The plan's table as HTML (notebooks)."""
        console = Console(record=True, file=io.StringIO(), width=120, highlight=False)
        console.print(self.table())
        return console.export_html(inline_styles=True, code_format="<pre>{code}</pre>")

    def to_dict(self) -> dict[str, object]:
        """The plan's summary as JSON-ready values: method asked for, profile and price
        table, tiles per chosen method, requests, bytes and the estimate.

        >>> import numpy as np, tessera
        >>> arr = tessera.from_numpy("memory://doc-plan-dict", np.zeros((4, 4)), tile=(2, 2))
        >>> d = arr.explain((slice(0, 2), slice(None))).to_dict()
        >>> d["requests"], d["bytes"], d["methods"]
        (1, 64, {'get': 2})
        """
        return {"method": self.method, "phi": self.phi, "profile": self.profile,
                "pricing": self.pricing, "methods": self.methods,
                "tiles": len(self.choices), "requests": len(self.requests),
                "bytes": self.totals.nbytes, "seconds": self.estimate.seconds,
                "dollars": self.estimate.dollars}


def ranged_plan(url: StoreURL, parts: list[tuple[str, str, np.ndarray]],
                subject: str = "") -> Plan:
    """The plan of reads whose byte ranges are already fixed (a tensor table's row groups:
    ``parts`` holds per part its label, the object's key and its ``[start, stop)`` ranges,
    each one request), estimated under the store's default profile and price table;
    ``subject`` names what is read in the printed plan."""
    prof = default_profile(url)
    model = CostModel(prof, default_pricing(url))
    choices, requests = [], []
    for label, key, spans in parts:
        spans = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        nbytes = int((spans[:, 1] - spans[:, 0]).sum())
        lo, hi = (int(spans[:, 0].min()), int(spans[:, 1].max())) if len(spans) else (0, 0)
        need = TileNeed(label, key, lo, hi - lo, True, spans - lo, nbytes)
        mix = RequestMix(range_requests=len(spans), range_bytes=nbytes)
        choices.append(TileChoice(need, "range", spans, mix))
        requests += [PlannedRequest("range", key, int(a), int(b), (len(choices) - 1,))
                     for a, b in spans]
    totals = sum((c.mix for c in choices), RequestMix())
    return dataclasses.replace(_plan("auto", 0.0, prof, model, choices, requests, totals),
                               subject=subject)


def tile_label(read: TileRead) -> str:
    """How a plan names a tile read: attribute, tile index and the fragment's short id."""
    return label_of(read.attr, read.tile_index, read.fragment)


def label_of(attr: str, tile_index: Sequence[int], fragment: str) -> str:
    """:func:`tile_label` of the read of ``attr`` in tile ``tile_index`` of ``fragment``.

    >>> label_of("v", (2, 0), "0000000000000001-00000000000000ab")
    'v[2,0] @000000ab'
    """
    return f"{attr}[{','.join(map(str, tile_index))}] @{fragment[-8:]}"


def tile_needs(schema: ArraySchema, sel: Selection, reads: list[TileRead]) -> list[TileNeed]:
    """What each dense tile read needs: its stored bytes and, for raw and blocked tiles, the
    byte ranges holding the selected cells (decomposition, then
    :meth:`~tessera.format.tile.TileRead.stored_ranges`)."""
    needs = []
    plain = all(d.contiguous for d in sel.dims)
    extent = schema.tile_shape
    last = tuple(e - 1 for e in extent)  # a whole tile's last cell, from its origin
    # Tiles a box cuts alike (the 8 tiles of a full-height column) decompose alike.
    decomposed: dict[tuple[object, ...], np.ndarray] = {}
    # Per attribute: its schema entry and, read-only, the range of a whole raw tile (shared
    # by every whole raw tile of the read: a read of 10^5 tiles makes no array per tile).
    attrs: dict[str, tuple[Attr, int, np.ndarray]] = {}
    for read in reads:
        known = attrs.get(read.attr)
        if known is None:
            attr = schema.attr(read.attr)
            whole = tile_nbytes(schema, attr)
            every = np.array([[0, whole]], dtype=np.int64)
            every.setflags(write=False)
            known = attrs[read.attr] = (attr, whole, every)
        attr, whole, every = known
        cell = attr.cell_nbytes
        if plain:
            # Every cell between the bounds is selected: the tile's part is one box.
            region, origin = read.region, read.tile_origin
            if region[0] == origin and tuple(map(operator.sub, region[1], origin)) == last:
                # Every cell of the tile is selected: no decomposition needed.
                ranges = every if read.codec is None else read.stored_ranges(every)
                needs.append(tile_need(read, ranges, whole))
                continue
            runs = tuple((int(lo) - o, int(hi) - o + 1) for lo, hi, o in
                         zip(*region, origin, strict=True))
            selected = math.prod(b - a for a, b in runs) * cell
            key: tuple[object, ...] = (cell, runs)
        else:
            found = tile_cells(read, sel)
            sets = ([unique_indices(positions(i)) for i in found[0]] if found is not None
                    else [_NO_CELLS] * len(sel.dims))
            selected = math.prod(len(s) for s in sets) * cell
            key = (cell, *(s.tobytes() for s in sets))
        if not read.range_readable:
            needs.append(tile_need(read, read.stored_ranges(_NO_RANGES), selected))
            continue
        cells = decomposed.get(key)
        if cells is None:
            cells = decomposed[key] = (
                box_byte_ranges(extent, cell, schema.cell_order, runs) if plain
                else tile_byte_ranges(extent, cell, schema.cell_order, sets))
        needs.append(tile_need(read, read.stored_ranges(cells), selected))
    return needs


_NO_RANGES = np.empty((0, 2), dtype=np.int64)
_NO_RANGES.setflags(write=False)
_NO_CELLS = np.empty(0, dtype=np.int64)
_NO_CELLS.setflags(write=False)


def tile_need(read: TileRead, ranges: np.ndarray, selected: int) -> TileNeed:
    """What ``read`` needs: the stored byte ranges ``ranges`` (relative to the tile) holding
    ``selected`` bytes of selected cells."""
    # A pushdown server reads only the needed blocks of a blocked tile.
    pushed = int((ranges[:, 1] - ranges[:, 0]).sum()) if read.blocks is not None else None
    return TileNeed(tile_label(read), read.key, read.offset, read.length, read.range_readable,
                    ranges, selected, pushed)


def union_needs(a: TileNeed, b: TileNeed) -> TileNeed:
    """One tile needed by two selections: the union of their byte ranges."""
    ranges = merge_ranges(np.concatenate([a.ranges, b.ranges]))
    pushed = (None if a.pushdown_read_bytes is None
              else int((ranges[:, 1] - ranges[:, 0]).sum()))
    return dataclasses.replace(a, ranges=ranges, pushdown_read_bytes=pushed,
                               selected_bytes=a.selected_bytes + b.selected_bytes)


def plan_needs(needs: list[TileNeed], *, url: StoreURL, method: str = "auto", phi: float = 0.0,
               pricing: str | None = None, profile: StoreProfile | None = None,
               cell_nbytes: int = 1, allow_pushdown: bool | None = None,
               max_request_bytes: int = PlannerConfig.max_request_bytes,
               now_bytes: int | None = None) -> Plan:
    """Plan tiles whose needs are already known (one read, or a union of selections).
    ``allow_pushdown``: whether pushdown may compete (default: the profile has figures);
    ``max_request_bytes``: the largest request neighbour merging may build; ``now_bytes``:
    a plan moving at most this many bytes, with no pushdown, is made on the calling
    thread (a small read of a memory or folder store), one request after another. Such a
    read is planned first under the profile as that thread sees it
    (:meth:`~tessera.query.cost.StoreProfile.calling_thread`, no pushdown) and estimated
    under it; only when that plan moves more than ``now_bytes`` is it planned for the
    event loop (and estimated for the calling thread still if that plan is small). The
    estimate adds the client's own work per call and per tile
    (:meth:`StoreProfile.client_s`) to the requests'."""
    return _planned(lambda model, push: _choose(needs, model, method, cell_nbytes, push,
                                                max_request_bytes),
                    least_bytes(needs), url, method, phi, pricing, profile, allow_pushdown,
                    now_bytes)


def plan_whole(needs: WholeNeeds, *, url: StoreURL, method: str = "auto", phi: float = 0.0,
               pricing: str | None = None, profile: StoreProfile | None = None,
               cell_nbytes: int = 1,
               max_request_bytes: int = PlannerConfig.max_request_bytes,
               now_bytes: int | None = None) -> Plan:
    """:func:`plan_needs` of tiles each needed whole, given as columns
    (:class:`~tessera.query.whole.WholeNeeds`), with no pushdown competing: the same plan,
    made a group of tiles alike at a time (:mod:`tessera.query.whole`); its ``choices``
    are :class:`~tessera.query.whole.ChoiceColumns`."""
    return _planned(lambda model, push: choose_whole(needs, model, method, cell_nbytes,
                                                     max_request_bytes),
                    needs.least_bytes(), url, method, phi, pricing, profile, False, now_bytes)


Chooser = Callable[[CostModel, bool | None],
                   tuple[Sequence[TileChoice], list[PlannedRequest], RequestMix]]


def _planned(choose: Chooser, least: int, url: StoreURL, method: str, phi: float,
             pricing: str | None, profile: StoreProfile | None, allow_pushdown: bool | None,
             now_bytes: int | None) -> Plan:
    """The plan ``choose`` makes under the calling thread's model or the loop's, as
    :func:`plan_needs` says; ``least``: the bytes any plan without pushdown moves."""
    prof = profile or default_profile(url)
    prices = pricing or default_pricing(url)
    if now_bytes is not None:
        thread = CostModel(prof.calling_thread(), prices, phi)
    if now_bytes is not None and least <= now_bytes:
        choices, requests, totals = choose(thread, False)
        if totals.nbytes <= now_bytes:
            return _plan(method, phi, prof, thread, choices, requests, totals)
    model = CostModel(prof, prices, phi)
    choices, requests, totals = choose(model, allow_pushdown)
    if now_bytes is not None and totals.nbytes <= now_bytes and not totals.pushdowns:
        model = thread  # made on the calling thread all the same
    return _plan(method, phi, prof, model, choices, requests, totals)


def least_bytes(needs: list[TileNeed]) -> int:
    """Bytes any plan without pushdown moves for ``needs`` at least: a compressed tile
    whole, the encoded blocks of a blocked one, the selected cells of a raw one (a read
    sure to move more than a calling-thread read may is planned for the event loop only).

    >>> need = TileNeed("t", "k", 0, 100, True, np.array([[0, 40]]), 40)
    >>> least_bytes([need, dataclasses.replace(need, raw=False)])
    140
    """
    return sum(n.length if not n.raw else n.selected_bytes if n.pushdown_read_bytes is None
               else n.pushdown_read_bytes for n in needs)


def _plan(method: str, phi: float, prof: StoreProfile, model: CostModel,
          choices: Sequence[TileChoice], requests: list[PlannedRequest],
          totals: RequestMix) -> Plan:
    """The plan of ``choices``, estimated by ``model`` plus the client's own work."""
    est = model.estimate(totals)
    client = prof.client_s(len(choices)) if choices else 0.0
    return Plan(method, phi, prof.name, model.prices.name, choices, requests, totals,
                Estimate(est.seconds + client, est.dollars, est.cost + client))


def _choose(needs: list[TileNeed], model: CostModel, method: str, cell_nbytes: int,
            allow_pushdown: bool | None, max_request_bytes: int,
            ) -> tuple[list[TileChoice], list[PlannedRequest], RequestMix]:
    """The planner's choices for ``needs`` under ``model``, their requests and totals."""
    choices = plan_tiles(needs, model, method, cell_nbytes=cell_nbytes,
                         allow_pushdown=allow_pushdown)
    requests = plan_requests(choices, model, merge_neighbours=method == "auto",
                             max_request_bytes=max_request_bytes)
    totals = sum((read_method(r.method).mix([(r.start, r.stop)], choices[r.tiles[0]].need)
                  for r in requests if read_method(r.method).store_bytes), RequestMix())
    served = {m: not read_method(m).store_bytes for m in {c.method for c in choices}}
    if any(served.values()):
        totals = sum((c.mix for c in choices if served[c.method]), totals)
    return choices, requests, totals
