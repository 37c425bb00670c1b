"""Reads of sparse arrays: data tiles chosen by MBR, cells filtered by the selection, and for
every coordinate the newest fragment's entry kept (a tombstone removes the cell).

Selections on sparse arrays are boxes in coordinate space: an int or float selects that
coordinate, ``start:stop`` selects ``start <= c < stop`` (no step), a list selects those
coordinates, ``...`` and ``:`` select the whole domain.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import numpy as np

from tessera.array.fragment import FragmentMeta
from tessera.array.read.fetch import fetch_cells
from tessera.array.read.pushdown import cells_item
from tessera.array.read.tiles import tile_piece
from tessera.array.sparse import coords_dtype, global_order
from tessera.errors import SelectionError
from tessera.format.schema import ArraySchema
from tessera.format.selection import SparseSelection
from tessera.format.tile import CellTileRead
from tessera.storage.store import AsyncStore

TOMBSTONE_ATTR = "__tombstone"
"""Internal attribute of consolidated sparse fragments: 1 marks a deleted cell."""


@dataclasses.dataclass(frozen=True)
class SparseResult:
    """Cells of a sparse read, in the global cell order.

    Attributes:
        coords: one 1-D array per dimension.
        values: attribute name -> 1-D array (plus cell shape) aligned with ``coords``.

    >>> import numpy as np, tessera
    >>> schema = tessera.ArraySchema([tessera.Dim("x", (0, 99), 10)], [tessera.Attr("v", "i4")],
    ...                              sparse=True)
    >>> arr = tessera.create_array("memory://doc-sparse-result", schema)
    >>> _ = arr.write_cells((np.array([3, 40]),), np.array([7, 8], np.int32))
    >>> cells = arr[0:50]
    >>> cells.coords[0].tolist(), cells.values["v"].tolist()
    ([3, 40], [7, 8])
    """

    coords: tuple[np.ndarray, ...]
    values: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.coords[0]) if self.coords else 0


def normalize_sparse_selection(sel: Any, schema: ArraySchema) -> SparseSelection:
    """Turn a user selection into a :class:`SparseSelection`."""
    items = sel if isinstance(sel, tuple) else (sel,)
    if any(it is Ellipsis for it in items):
        at = next(i for i, it in enumerate(items) if it is Ellipsis)
        items = items[:at] + (slice(None),) * (schema.ndim - len(items) + 1) + items[at + 1:]
    if len(items) > schema.ndim:
        raise SelectionError(f"too many indices: {len(items)} for {schema.ndim} dimensions")
    items = items + (slice(None),) * (schema.ndim - len(items))
    lo: list[Any] = []
    hi: list[Any] = []
    hi_open: list[bool] = []
    members: list[np.ndarray | None] = []
    for it, d in zip(items, schema.dims, strict=True):
        dlo, dhi = d.domain
        if isinstance(it, slice):
            if it.step is not None:
                raise SelectionError(f"slices on sparse arrays take no step (dimension "
                                     f"{d.name!r})")
            lo.append(dlo if it.start is None else _num(it.start, d.name))
            hi.append(dhi if it.stop is None else _num(it.stop, d.name))
            hi_open.append(it.stop is not None)
            members.append(None)
        elif isinstance(it, (list, np.ndarray)):
            arr = np.asarray(it)
            if arr.ndim != 1 or arr.dtype.kind not in "iuf":
                raise SelectionError(f"a coordinate list for dimension {d.name!r} must be 1-D "
                                     "numbers")
            if arr.dtype.kind == "f" and np.isnan(arr).any():
                raise SelectionError(f"a coordinate list for dimension {d.name!r} holds NaN")
            lo.append(arr.min() if arr.size else dhi + 1)
            hi.append(arr.max() if arr.size else dlo - 1)
            hi_open.append(False)
            members.append(arr)
        else:
            v = _num(it, d.name)
            lo.append(v)
            hi.append(v)
            hi_open.append(False)
            members.append(None)
    for v, d in zip(lo, schema.dims, strict=True):
        if v > d.domain[1]:
            raise SelectionError(f"selection starts at {v}, past dimension {d.name!r}'s domain "
                                 f"[{d.domain[0]}, {d.domain[1]}]")
    return SparseSelection(tuple(lo), tuple(hi), tuple(hi_open), tuple(members))


def _num(v: Any, dim: str) -> Any:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                             np.floating)):
        raise SelectionError(f"index for dimension {dim!r} must be a number, got {v!r}")
    if v != v:  # NaN: every comparison with it is false, so it would select nothing
        raise SelectionError(f"index for dimension {dim!r} is NaN; a bound must be a number")
    return v


def plan_cell_reads(sel: SparseSelection, metas: list[FragmentMeta], attrs: list[str],
                    ) -> list[CellTileRead]:
    """The data tiles of every fragment whose MBR meets the selection."""
    reads = []
    for rank, meta in enumerate(metas):
        if meta.mbrs is None or meta.coords is None or not len(meta.mbrs):
            continue
        for t in np.nonzero(sel.touches(meta.mbrs))[0]:
            names = [] if meta.kind == "delete" else list(attrs)
            if TOMBSTONE_ATTR in meta.attrs:
                names.append(TOMBSTONE_ATTR)
            mbr = (tuple(meta.mbrs[t, 0]), tuple(meta.mbrs[t, 1]))
            reads.append(CellTileRead(meta.name, rank, meta.kind, int(t), mbr,
                                      tile_piece(meta.coords, int(t)),
                                      {n: tile_piece(meta.attrs[n], int(t)) for n in names},
                                      meta.decoded))
    return reads


async def read_sparse(store: AsyncStore, schema: ArraySchema, sel: SparseSelection,
                      reads: list[CellTileRead], attrs: list[str], array_url: str,
                      keep_tombstones: bool = False, pushdown: Any = None,
                      ) -> tuple[SparseResult, np.ndarray]:
    """Execute cell reads; returns the live cells and, when ``keep_tombstones``, also the
    deleted ones (second value: the coordinates of deleted cells, ``(n, ndim)``).

    With a :class:`~tessera.array.read.pushdown.PushdownReader`, data tiles not kept inline
    go to the server, which returns only their cells inside the selection's box; tiles it
    fails are fetched directly."""
    limit = asyncio.Semaphore(store.config.max_concurrency)
    Part = tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]

    async def one(read: CellTileRead) -> Part:
        async with limit:
            coords, values = await fetch_cells(store, schema, read, array_url)
        return kept(read, coords, values)

    def kept(read: CellTileRead, coords: np.ndarray, values: dict[str, np.ndarray]) -> Part:
        if read.kind == "delete":
            dead = np.ones(len(coords), dtype=bool)
        elif TOMBSTONE_ATTR in values:
            dead = values.pop(TOMBSTONE_ATTR).astype(bool)
        else:
            dead = np.zeros(len(coords), dtype=bool)
        keep = sel.mask(coords)
        return coords[keep], {k: v[keep] for k, v in values.items()}, dead[keep]

    async def push(batch: list[CellTileRead]) -> list[Part]:
        items = [cells_item(schema, r, sel, pushdown.array_path) for r in batch]
        async with limit:
            results = await pushdown.read(items)
        out = []
        for read, res in zip(batch, results, strict=True):
            if res is None:
                out.append(await one(read))
            else:
                values = {n: res[f"attr:{n}"] for n in read.attrs}
                out.append(kept(read, res["coords"], values))
        return out

    pushed = [] if pushdown is None else [r for r in reads if not r.inline]
    done: dict[int, Part] = {}
    if pushed:
        batches = pushdown.batches([r.coords.length + sum(p.length for p in r.attrs.values())
                                    for r in pushed])
        groups = await asyncio.gather(*(push([pushed[j] for j in batch])
                                        for batch in batches))
        for batch, group in zip(batches, groups, strict=True):
            for j, part in zip(batch, group, strict=True):
                done[id(pushed[j])] = part
    direct = await asyncio.gather(*(one(r) for r in reads if id(r) not in done))
    it = iter(direct)
    parts = [done[id(r)] if id(r) in done else next(it) for r in reads]
    ndim = schema.ndim
    cdt = coords_dtype(schema)
    if not parts:
        empty = np.zeros((0, ndim), cdt)
        return _result(schema, empty, {a: _empty(schema, a) for a in attrs}), empty
    coords = np.concatenate([p[0] for p in parts]).astype(cdt)
    ranks = np.concatenate([np.full(len(p[0]), r.rank) for p, r in zip(parts, reads,
                                                                      strict=True)])
    dead = np.concatenate([p[2] for p in parts])
    values = {}
    for a in attrs:
        cols = [p[1][a] if a in p[1] else np.zeros((len(p[0]), *schema.attr(a).cell_shape),
                                                   schema.attr(a).np_dtype) for p in parts]
        values[a] = np.concatenate(cols)
    if not len(coords):
        return _result(schema, coords, values), coords
    # Per coordinate, the entry of the newest fragment wins.
    order = np.lexsort([ranks] + [coords[:, d] for d in reversed(range(ndim))])
    c = coords[order]
    last = np.ones(len(c), dtype=bool)
    last[:-1] = np.any(c[1:] != c[:-1], axis=1)
    winners = order[last]
    alive = winners[~dead[winners]]
    deleted = coords[winners[dead[winners]]] if keep_tombstones else np.zeros((0, ndim), cdt)
    live_coords = coords[alive]
    g = global_order(schema, live_coords)
    return _result(schema, live_coords[g], {a: v[alive][g] for a, v in values.items()}), deleted


def _empty(schema: ArraySchema, name: str) -> np.ndarray:
    attr = schema.attr(name)
    return np.zeros((0, *attr.cell_shape), attr.np_dtype)


def _result(schema: ArraySchema, coords: np.ndarray, values: dict[str, np.ndarray],
            ) -> SparseResult:
    return SparseResult(tuple(coords[:, d].copy() for d in range(schema.ndim)), values)
