"""Sparse fragments: cells with explicit coordinates, in the global cell order, grouped into
data tiles of ``capacity`` cells (the TileDB paper, section 3).

Used for sparse arrays and for sparse updates and deletions (tombstones) on dense arrays.
Each data tile has an MBR (the tightest box around its cells) and bounding coordinates (its
first and last cell in the global order); both live in the fragment's bookkeeping.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import numpy as np

from tessera.array.commits import commit_fragment
from tessera.array.fragment import (
    FRAGMENTS,
    INLINE_BYTES,
    INLINE_RAW_BYTES,
    FragmentMeta,
    encode_tiles,
)
from tessera.array.names import new_fragment_id
from tessera.errors import SelectionError
from tessera.format.schema import ArraySchema
from tessera.storage.store import AsyncStore


def coords_dtype(schema: ArraySchema) -> np.dtype[Any]:
    """int64 coordinates for integer domains, float64 otherwise."""
    return np.dtype(np.int64) if all(d.is_integer for d in schema.dims) else np.dtype(np.float64)


def check_coords(schema: ArraySchema, coords: Any) -> np.ndarray:
    """Coordinates as an ``(n, ndim)`` array, each inside its dimension's domain (NaN is
    refused with :class:`~tessera.errors.SelectionError`)."""
    if not isinstance(coords, (tuple, list)) or len(coords) != schema.ndim:
        raise SelectionError(f"coordinates must be a tuple of {schema.ndim} 1-D arrays (one per "
                             "dimension, as numpy's fancy indexing takes them)")
    cols = [np.asarray(c) for c in coords]
    if any(c.ndim != 1 for c in cols) or len({len(c) for c in cols}) != 1:
        raise SelectionError("coordinate arrays must be 1-D and of equal length")
    dtype = coords_dtype(schema)
    for c, d in zip(cols, schema.dims, strict=True):
        if c.size and c.dtype.kind not in ("iu" if dtype.kind == "i" else "iuf"):
            raise SelectionError(f"coordinates for dimension {d.name!r} must be "
                                 f"{'integers' if dtype.kind == 'i' else 'numbers'}, "
                                 f"got {c.dtype}")
        if c.size and c.dtype.kind == "f" and np.isnan(c).any():
            at = int(np.flatnonzero(np.isnan(c))[0])
            raise SelectionError(f"coordinate {at} for dimension {d.name!r} is NaN; a cell "
                                 "needs a number inside the domain (nothing was written)")
        if c.size and (c.min() < d.domain[0] or c.max() > d.domain[1]):
            bad = c[(c < d.domain[0]) | (c > d.domain[1])][0]
            raise SelectionError(f"coordinate {bad} is outside dimension {d.name!r}'s domain "
                                 f"[{d.domain[0]}, {d.domain[1]}]")
    return np.stack([c.astype(dtype) for c in cols], axis=1) if cols[0].size else \
        np.zeros((0, schema.ndim), dtype)


def global_order(schema: ArraySchema, coords: np.ndarray) -> np.ndarray:
    """The permutation that sorts ``(n, ndim)`` coordinates into the global cell order
    (space tiles in tile order, cells inside a tile in cell order). Stable."""
    n = schema.ndim
    tile_keys, cell_keys = [], []
    for i, d in enumerate(schema.dims):
        c = coords[:, i]
        lo = d.domain[0]
        if d.tile is None:
            t = np.zeros(len(c), dtype=np.int64)
        else:
            t = np.floor((c - lo) / d.tile).astype(np.int64)
        tile_keys.append(t)
        cell_keys.append(c)
    dims_least_first = {"row-major": list(reversed(range(n))), "col-major": list(range(n))}
    keys = [cell_keys[i] for i in dims_least_first[schema.cell_order]]
    keys += [tile_keys[i] for i in dims_least_first[schema.tile_order]]
    return np.lexsort(keys)


def sorted_unique_cells(schema: ArraySchema, coords: np.ndarray,
                        values: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Sort cells into the global order; of repeated coordinates keep the last given."""
    order = global_order(schema, coords)
    c = coords[order]
    if len(c) > 1:
        last = np.ones(len(c), dtype=bool)
        last[:-1] = np.any(c[1:] != c[:-1], axis=1)  # the last of each run of equal coords
        order = order[last]
        c = coords[order]
    return c, {k: v[order] for k, v in values.items()}


async def write_sparse_fragment(store: AsyncStore, schema: ArraySchema, coords: np.ndarray,
                                values: dict[str, np.ndarray], *, kind: str = "sparse",
                                replaces: tuple[str, ...] = (),
                                covers: tuple[str, ...] | None = None,
                                timestamp: int | None = None) -> FragmentMeta:
    """Write cells (already checked) as one sparse fragment, or tombstones when ``kind`` is
    ``delete`` (no values), and commit it."""
    coords, values = sorted_unique_cells(schema, coords, values)
    n = len(coords)
    cap = schema.capacity
    bounds_idx = [(i, min(i + cap, n)) for i in range(0, n, cap)]
    fid = new_fragment_id(replacing=bool(replaces))
    coord_key = f"{FRAGMENTS}/{fid}/__coords.data"
    coord_tiles, coord_blob = encode_tiles(
        coord_key, "zstd", [np.ascontiguousarray(coords[a:b]).astype(
            coords.dtype.newbyteorder("<")).tobytes() for a, b in bounds_idx])
    blobs = {coord_key: coord_blob}
    attrs = {}
    for name, vals in values.items():
        internal = name.startswith("__")
        dtype = np.dtype(np.uint8) if internal else schema.attr(name).np_dtype
        key = f"{FRAGMENTS}/{fid}/{name}.data"
        raw = [np.ascontiguousarray(vals[a:b]).astype(dtype).tobytes() for a, b in bounds_idx]
        attrs[name], blobs[key] = encode_tiles(
            key, "zstd" if internal else schema.attr(name).codec, raw)
    raw_bytes = coords.nbytes + sum(v.nbytes for v in values.values())
    if sum(len(b) for b in blobs.values()) <= INLINE_BYTES and raw_bytes <= INLINE_RAW_BYTES:
        coord_tiles = dataclasses.replace(coord_tiles, inline=coord_blob)
        attrs = {n: dataclasses.replace(t, inline=blobs[t.key]) for n, t in attrs.items()}
    else:
        await asyncio.gather(*(store.put(k, b) for k, b in blobs.items()))
    mbrs = np.array([[coords[a:b].min(axis=0), coords[a:b].max(axis=0)] for a, b in bounds_idx]
                    ).reshape(len(bounds_idx), 2, schema.ndim)
    first_last = np.array([[coords[a], coords[b - 1]] for a, b in bounds_idx]
                          ).reshape(len(bounds_idx), 2, schema.ndim)
    sub = ((tuple(mbrs[:, 0].min(axis=0).tolist()), tuple(mbrs[:, 1].max(axis=0).tolist()))
           if n else (tuple(d.domain[0] for d in schema.dims),
                      tuple(d.domain[0] - 1 for d in schema.dims)))
    meta = FragmentMeta(
        "", 0, kind, sub, np.zeros(schema.ndim, np.int64), np.zeros(schema.ndim, np.int64),
        attrs, n, coords=coord_tiles, mbrs=mbrs, bounds=first_last,
        tile_cells=np.array([b - a for a, b in bounds_idx], dtype=np.int64), replaces=replaces)
    return await commit_fragment(store, fid, meta, timestamp, covers=covers)


