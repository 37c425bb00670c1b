"""Tile arithmetic: space tiles, the global tile order, and tile <-> bytes in cell order.

Tiles are the schema's space tiles, padded to full extent at the domain's edges so that every
tile of an attribute has the same shape and byte size before compression: the byte offset of
a cell inside a raw tile is a closed formula (what range reads need).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from tessera.format.schema import ArraySchema, Attr

Box = tuple[tuple[int, ...], tuple[int, ...]]  # inclusive (lo, hi) per dimension


def tile_range(schema: ArraySchema, box: Box) -> tuple[np.ndarray, np.ndarray]:
    """Inclusive index range of the space tiles an integer box touches, per dimension
    (plain Python on these few numbers: a listing makes one per fragment it lists).

    >>> from tessera.format.schema import Dim
    >>> schema = ArraySchema([Dim("y", (0, 99), 10), Dim("x", (5, 104), 25)],
    ...                      [Attr("v", "int8")])
    >>> [a.tolist() for a in tile_range(schema, ((12, 5), (39, 104)))]
    [[1, 0], [3, 3]]
    """
    def tiles(corner: tuple[int, ...]) -> np.ndarray:
        return np.array([(v - lw) // e for v, lw, e in zip(corner, schema.lower,
                                                           schema.tile_shape, strict=True)],
                        dtype=np.int64)

    return tiles(box[0]), tiles(box[1])


def tile_spans(lower: tuple[int, ...], tile_shape: tuple[int, ...], box: Box) -> list[range]:
    """The space tiles a box touches, per dimension, as ranges of tile indices (plain
    Python: per-tile planning calls it for small boxes).

    >>> tile_spans((0, 0), (10, 10), ((5, 0), (25, 9)))
    [range(0, 3), range(0, 1)]
    """
    return [range((a - lw) // e, (b - lw) // e + 1)
            for a, b, lw, e in zip(box[0], box[1], lower, tile_shape, strict=True)]


def tile_box(schema: ArraySchema, index: tuple[int, ...]) -> Box:
    """Inclusive coordinate box of space tile ``index`` (padded: may pass the domain end)."""
    lo = tuple(int(lw + i * e) for lw, i, e in zip(schema.lower, index, schema.tile_shape,
                                                    strict=True))
    hi = tuple(int(a + e - 1) for a, e in zip(lo, schema.tile_shape, strict=True))
    return lo, hi


def tiles_in_order(schema: ArraySchema, tlo: np.ndarray, thi: np.ndarray) -> np.ndarray:
    """All tile indices of the tile box [tlo, thi], as rows, in the global tile order."""
    counts = (thi - tlo + 1).astype(np.int64)
    if not len(counts):  # a 0-d array: its one tile
        return np.zeros((1, 0), dtype=np.int64)
    order: Literal["C", "F"] = "C" if schema.tile_order == "row-major" else "F"
    flat = np.arange(int(np.prod(counts)), dtype=np.int64)
    idx = np.stack(np.unravel_index(flat, tuple(int(c) for c in counts), order=order), axis=1)
    return np.asarray(idx + tlo, dtype=np.int64)


def tile_position(schema: ArraySchema, tlo: np.ndarray, thi: np.ndarray,
                  index: tuple[int, ...]) -> int:
    """Position of tile ``index`` within the global order of the tile box [tlo, thi]."""
    counts = [int(h) - int(lo) + 1 for lo, h in zip(tlo, thi, strict=True)]
    rel = [int(i) - int(lo) for i, lo in zip(index, tlo, strict=True)]
    if schema.tile_order != "row-major":
        counts, rel = counts[::-1], rel[::-1]
    pos = 0
    for r, c in zip(rel, counts, strict=True):
        if not 0 <= r < c:
            raise ValueError(f"tile {tuple(index)} lies outside the tile box "
                             f"{tuple(int(v) for v in tlo)}..{tuple(int(v) for v in thi)}")
        pos = pos * c + r
    return pos


def intersect(a: Box, b: Box) -> Box | None:
    """The intersection of two boxes, or None.

    >>> intersect(((0, 0), (3, 3)), ((2, 1), (5, 2)))
    ((2, 1), (3, 2))
    """
    lo = []
    hi = []
    # A plain loop: this runs per tile and fragment on a read's planning path.
    for x0, x1, y0, y1 in zip(a[0], a[1], b[0], b[1], strict=True):
        low = x0 if x0 > y0 else y0
        high = x1 if x1 < y1 else y1
        if low > high:
            return None
        lo.append(low)
        hi.append(high)
    return tuple(lo), tuple(hi)


def covered(box: Box, others: list[Box], limit: int = 2048) -> bool:
    """True if ``box`` lies entirely inside the union of ``others`` (box subtraction; gives up
    and answers False past ``limit`` pieces, which is always safe)."""
    remaining = [box]
    for other in others:
        nxt: list[Box] = []
        for r in remaining:
            nxt.extend(subtract(r, other))
        remaining = nxt
        if not remaining:
            return True
        if len(remaining) > limit:
            return False
    return not remaining


def subtract(a: Box, b: Box) -> list[Box]:
    """``a`` without ``b``: at most two pieces per dimension, disjoint.

    >>> subtract(((0, 0), (3, 3)), ((0, 2), (3, 5)))
    [((0, 0), (3, 1))]
    """
    lo, hi = list(a[0]), list(a[1])
    b0, b1 = b
    for d in range(len(lo)):
        if lo[d] > b1[d] or hi[d] < b0[d]:
            return [a]  # disjoint
    pieces: list[Box] = []
    for d in range(len(lo)):
        if lo[d] < b0[d]:
            p_hi = list(hi)
            p_hi[d] = b0[d] - 1
            pieces.append((tuple(lo), tuple(p_hi)))
            lo[d] = b0[d]
        if hi[d] > b1[d]:
            p_lo = list(lo)
            p_lo[d] = b1[d] + 1
            pieces.append((tuple(p_lo), tuple(hi)))
            hi[d] = b1[d]
    return pieces


def tile_nbytes(schema: ArraySchema, attr: Attr) -> int:
    """Raw bytes of one tile of ``attr``."""
    return math.prod(schema.tile_shape) * attr.cell_nbytes


def tile_to_bytes(tile: np.ndarray, schema: ArraySchema) -> memoryview:
    """Serialise a tile (shape ``tile_shape + cell_shape``) in the schema's cell order, as a
    flat little-endian byte view (copied only if the layout requires it)."""
    if schema.cell_order == "col-major":
        n = schema.ndim
        axes = tuple(reversed(range(n))) + tuple(range(n, tile.ndim))
        tile = tile.transpose(axes)
    flat = np.ascontiguousarray(tile).astype(tile.dtype.newbyteorder("<"), copy=False)
    return memoryview(flat.reshape(-1).view(np.uint8).data)


def tile_from_bytes(data: Any, schema: ArraySchema, attr: Attr) -> np.ndarray:
    """Inverse of :func:`tile_to_bytes` (zero-copy view where possible)."""
    return tile_view(data, attr.np_dtype, schema.tile_shape, attr.cell_shape,
                     schema.cell_order)


def tile_view(data: Any, dtype: Any, tile_shape: tuple[int, ...],
              cell_shape: tuple[int, ...], cell_order: str) -> np.ndarray:
    """A tile's bytes as an array of shape ``tile_shape + cell_shape`` (no copy), for
    callers that know the layout without a schema (the pushdown server)."""
    flat = np.frombuffer(memoryview(data), dtype=dtype)
    if cell_order == "col-major":
        n = len(tile_shape)
        arr = flat.reshape(tuple(reversed(tile_shape)) + cell_shape)
        return arr.transpose(tuple(reversed(range(n))) + tuple(range(n, arr.ndim)))
    return flat.reshape(tile_shape + cell_shape)


def default_tile(shape: tuple[int, ...], itemsize: int, target: int = 1 << 20,
                 ) -> tuple[int, ...]:
    """A tile shape for an array of ``shape`` and ``itemsize``: the whole array, its
    largest extent halved until a tile holds at most ``target`` bytes.

    >>> default_tile((4096, 4096), 4)
    (512, 512)
    """
    tile = list(shape)
    while math.prod(tile) * itemsize > target and max(tile) > 1:
        i = tile.index(max(tile))
        tile[i] = -(-tile[i] // 2)
    return tuple(tile)
