"""Point reads: single cells by coordinates, planned and fetched like any dense read.

Points are grouped by the tiles that hold them; each tile's need is the byte range of every
point's cell (merged), so the planner chooses get or ranges per tile as for hyperslabs. Values
land newest fragment first per point: dense tiles by rank, sparse updates matched by
coordinate, tombstones restoring the fill value. All of it is vectorised per tile.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np

from tessera.array.read.fetch import TileFetcher, fetch_cells
from tessera.errors import SelectionError
from tessera.format.decompose import merge_ranges
from tessera.format.schema import ArraySchema
from tessera.format.tile import CellTileRead, TileRead
from tessera.query.plan import tile_label
from tessera.query.refine import TileNeed


def point_needs(schema: ArraySchema, points: np.ndarray, reads: list[TileRead],
                ) -> tuple[list[TileRead], list[np.ndarray], list[TileNeed]]:
    """The tile reads that hold at least one point, the points (row numbers) of each, and
    what each needs: the byte ranges of those points' cells."""
    kept, members, needs = [], [], []
    for read in reads:
        lo, hi = np.asarray(read.region[0]), np.asarray(read.region[1])
        rows = np.flatnonzero(np.all((points >= lo) & (points <= hi), axis=1))
        if not len(rows):
            continue
        cells = _in_tile_cells(schema, points[rows] - np.asarray(read.tile_origin))
        nbytes = schema.attr(read.attr).cell_nbytes
        ranges = merge_ranges(np.stack([cells * nbytes, (cells + 1) * nbytes], axis=1))
        kept.append(read)
        members.append(rows)
        needs.append(TileNeed(tile_label(read), read.key, read.offset, read.length,
                              read.range_readable, read.stored_ranges(ranges),
                              len(np.unique(cells)) * nbytes))
    return kept, members, needs


def _in_tile_cells(schema: ArraySchema, offsets: np.ndarray) -> np.ndarray:
    """Linear cell numbers inside a tile (in its cell order) of in-tile offsets."""
    shape = schema.tile_shape
    index = tuple(np.asarray(col, dtype=np.int64) for col in offsets.T)
    cells: np.ndarray = np.ravel_multi_index(
        index, shape, order="C" if schema.cell_order == "row-major" else "F")
    return cells.astype(np.int64)


async def read_points(schema: ArraySchema, points: np.ndarray, names: list[str],
                      reads: list[TileRead], members: list[np.ndarray],
                      cell_reads: list[CellTileRead], fetcher: TileFetcher, array_url: str,
                      ) -> dict[str, np.ndarray]:
    """Values of ``points`` (``(n, ndim)``) per attribute, newest fragment winning."""
    n = len(points)
    out = {name: np.full((n, *schema.attr(name).cell_shape), schema.attr(name).fill_value,
                         dtype=schema.attr(name).np_dtype) for name in names}
    rank = {name: np.full(n, -1, dtype=np.int64) for name in names}

    def land(name: str, rows: np.ndarray, values: Any, r: int) -> None:
        newer = rank[name][rows] < r
        if np.all(newer):
            out[name][rows] = values
            rank[name][rows] = r
            return
        out[name][rows[newer]] = values[newer] if isinstance(values, np.ndarray) else values
        rank[name][rows[newer]] = r

    async def tile(position: int, read: TileRead, rows: np.ndarray) -> None:
        try:
            data = await fetcher.tile(position)
            offsets = points[rows] - np.asarray(read.tile_origin)
            land(read.attr, rows, data[tuple(offsets.T)], read.rank)
        finally:
            fetcher.release(position)

    async def cells(read: CellTileRead) -> None:
        coords, values = await fetch_cells(fetcher.store, schema, read, array_url)
        found, where = _match(points, coords)
        if not len(found):
            return
        for name in names:
            vals = (values[name][where] if read.kind != "delete"
                    else schema.attr(name).fill_value)
            land(name, found, vals, read.rank)

    await asyncio.gather(*(tile(i, r, m) for i, (r, m) in enumerate(zip(reads, members,
                                                                         strict=True))),
                         *(cells(c) for c in cell_reads))
    return out


def _match(points: np.ndarray, coords: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``points`` found among ``coords`` and the matching row of ``coords`` each."""
    if not len(coords):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    both = np.concatenate([coords, points]).astype(np.int64)
    base = both.min(axis=0)
    extent = both.max(axis=0) - base + 1
    if math.prod(int(e) for e in extent) >= 2**62:
        raise SelectionError("point coordinates span too large a box to match")
    key_c = np.ravel_multi_index(tuple((coords - base).T.astype(np.int64)), tuple(extent))
    key_p = np.ravel_multi_index(tuple((points - base).T.astype(np.int64)), tuple(extent))
    order = np.argsort(key_c, kind="stable")
    pos = np.searchsorted(key_c[order], key_p)
    pos = np.minimum(pos, len(order) - 1)
    hit = key_c[order][pos] == key_p
    return np.flatnonzero(hit), order[pos[hit]]
