"""Placing cells into a read's output: dense tiles' cells (:func:`scatter`), sparse cells by
coordinate (:func:`scatter_cells`), and the merge of many sparse tiles at once, newest
fragment winning per cell."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from tessera.format.schema import ArraySchema, Attr
from tessera.format.selection import Selection
from tessera.format.tile import (
    TileRead,
    positions,
    tile_cells,
)


class CellSource(Protocol):
    """Where found cells come from (a sparse data tile, or merged updates): its fragment
    rank (higher = newer, wins) and kind (``"delete"``: tombstones)."""

    @property
    def rank(self) -> int:
        """The fragment's rank."""

    @property
    def kind(self) -> str:
        """``"sparse"`` or ``"delete"``."""


#: Cells found for a read: their source, coordinates ``(n, ndim)`` and values per attribute.
FoundCells = tuple[CellSource, np.ndarray, dict[str, np.ndarray]]


def covers_selection(reads: list[TileRead], attrs: list[str], sel: Selection) -> bool:
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


def merge_cells(schema: ArraySchema, outputs: dict[str, np.ndarray],
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
        scatter_cells(outputs[name], None, coords[keep], values[keep], 0, sel)


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


def scatter_cells(out: np.ndarray, rank_arr: np.ndarray | None, coords: np.ndarray,
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


def scatter(out: np.ndarray, rank_arr: np.ndarray | None, tile: np.ndarray | None,
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


def region_bytes(schema: ArraySchema, read: TileRead) -> int:
    """Bytes of the cells in ``read``'s region (at least what placing it copies)."""
    cells = math.prod(hi - lo + 1 for lo, hi in zip(*read.region, strict=True))
    return cells * schema.attr(read.attr).cell_nbytes
