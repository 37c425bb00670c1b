"""A per-handle index of many small updates on top of a dense array.

Sparse updates and deletions of a dense array are small fragments whose tiles live inline
in their bookkeeping. A read over many of them used to match every fragment's cells against
its box again: with 100 fragments of 1,000 cells, ~5 ms of planning and merging per read on
top of a ~4 ms 1K x 1K box. The cells of the newest run of such fragments (newer than every
dense fragment) are merged here once per handle and fragment list, newest winning per
coordinate, and kept sorted, so a read picks the cells inside its box with two binary
searches and a mask over one band of rows.

>>> import numpy as np, tessera
>>> arr = tessera.from_numpy("memory://doc-updates", np.zeros((4, 4), np.int32), tile=(2, 2))
>>> for v in range(1, 10):
...     _ = arr.write_cells(([1, 2], [1, 3]), np.array([v, -v], np.int32))
>>> arr[:, :][1:3, 1:]
array([[ 9,  0,  0],
       [ 0,  0, -9]], dtype=int32)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tessera.array.fragment import FragmentMeta
from tessera.array.read.fetch import inline_cells
from tessera.array.read.scatter import found_values, newest_per_coordinate
from tessera.array.read.tiles import meta_box, plan_cells
from tessera.format.schema import ArraySchema

#: A run needs at least this many fragments before an index is built for it.
MIN_FRAGMENTS = 8


@dataclasses.dataclass(frozen=True)
class MergedUpdates:
    """The cells of fragments ``fragments`` (ranks ``first_rank`` up to ``rank``), one per
    coordinate (the newest), in lexicographic coordinate order. Tombstones carry each
    attribute's fill value, which is what a dense read shows for a deleted cell."""

    fragments: tuple[str, ...]
    boxes: np.ndarray  # (fragments, 2, ndim): each fragment's bounding box
    first_rank: int
    rank: int
    coords: np.ndarray
    values: dict[str, np.ndarray]
    kind: str = "sparse"

    def within(self, lo: tuple[int, ...], hi: tuple[int, ...],
               ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The cells inside the box ``[lo, hi]`` (inclusive) and their values."""
        first = self.coords[:, 0]
        a = int(np.searchsorted(first, lo[0], side="left"))
        b = int(np.searchsorted(first, hi[0], side="right"))
        band = self.coords[a:b]
        if band.shape[1] > 1:
            inside = np.all((band[:, 1:] >= np.asarray(lo[1:]))
                            & (band[:, 1:] <= np.asarray(hi[1:])), axis=1)
        else:
            inside = np.ones(len(band), dtype=bool)
        return band[inside], {n: v[a:b][inside] for n, v in self.values.items()}

    def touching(self, box: tuple[tuple[int, ...], tuple[int, ...]]) -> int:
        """How many of the merged fragments' bounding boxes meet ``box``."""
        b = self.boxes
        meet = np.all((b[:, 0] <= np.asarray(box[1])) & (b[:, 1] >= np.asarray(box[0])),
                      axis=1)
        return int(np.count_nonzero(meet))


def update_run_start(metas: list[FragmentMeta]) -> int:
    """Where the newest run of inline sparse/delete fragments begins in ``metas`` (oldest
    first); ``len(metas)`` when the newest fragment is dense or not inline."""
    start = len(metas)
    while start > 0 and _inline_update(metas[start - 1]):
        start -= 1
    return start


def _inline_update(meta: FragmentMeta) -> bool:
    return (not meta.is_dense and meta.coords is not None and meta.coords.inline is not None
            and all(a.inline is not None for a in meta.attrs.values()))


def merge_updates(schema: ArraySchema, run: list[FragmentMeta], first_rank: int,
                  attrs: list[str], array_url: str) -> MergedUpdates:
    """Merge the cells of ``run`` (ranks ``first_rank``...), the newest winning."""
    found = [(read, *inline_cells(schema, read, array_url))
             for i, meta in enumerate(run)
             for read in plan_cells(meta, first_rank + i, meta_box(meta), [], attrs)]
    names = tuple(m.name for m in run)
    boxes = np.array([meta_box(m) for m in run], dtype=np.int64).reshape(
        len(run), 2, schema.ndim)
    last = first_rank + len(run) - 1
    if not found:
        return MergedUpdates(names, boxes, first_rank, last,
                             np.empty((0, schema.ndim), np.int64),
                             {n: np.empty((0, *schema.attr(n).cell_shape),
                                          schema.attr(n).np_dtype) for n in attrs})
    coords = np.concatenate([np.asarray(c, dtype=np.int64).reshape(-1, schema.ndim)
                             for _, c, _ in found])
    keep = newest_per_coordinate(coords)  # in lexicographic order, as within() needs
    return MergedUpdates(names, boxes, first_rank, last, coords[keep],
                         {n: found_values(schema.attr(n), found)[keep] for n in attrs})


def merged_for(cache: dict[Any, tuple[int, MergedUpdates | None]], schema: ArraySchema,
               metas: list[FragmentMeta], attrs: list[str], array_url: str,
               ) -> tuple[int, MergedUpdates | None]:
    """``(start, index)`` for the newest run of small updates in ``metas``: the index is
    ``None`` (and ``start == len(metas)``) when the run is shorter than
    :data:`MIN_FRAGMENTS`. ``cache`` (one per handle) keeps the answer for the latest
    fragment list, so a read on an unchanged list only compares names."""
    key = (tuple(m.name for m in metas), tuple(attrs))
    hit = cache.get(key)
    if hit is not None:
        return hit
    start = update_run_start(metas)
    found = (None if len(metas) - start < MIN_FRAGMENTS
             else merge_updates(schema, metas[start:], start, attrs, array_url))
    cache.clear()  # one entry per handle: the newest fragment list's
    cache[key] = (start, found) if found is not None else (len(metas), None)
    return cache[key]
