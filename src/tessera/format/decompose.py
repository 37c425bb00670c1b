"""Decomposition (the ArrayMorph paper, section 4.2): the cells a selection needs from one raw
tile become sorted, merged byte ranges of that tile, vectorised with numpy.

A tile holds ``prod(tile_shape)`` cells of ``cell_nbytes`` bytes in row- or column-major
order. The selection inside the tile is one array of in-tile indices per dimension (an
orthogonal selection, as hyperslabs and per-dimension lists give); a union of several is
decomposed one by one and merged with :func:`merge_ranges`.

>>> import numpy as np
>>> tile_byte_ranges((4, 4), 1, "row-major", [np.array([1, 2]), np.array([1, 2])]).tolist()
[[5, 7], [9, 11]]
>>> tile_byte_ranges((4, 4), 1, "row-major", [np.array([1, 2]), np.arange(4)]).tolist()
[[4, 12]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def tile_byte_ranges(tile_shape: Sequence[int], cell_nbytes: int, cell_order: str,
                     index_sets: Sequence[np.ndarray]) -> np.ndarray:
    """Byte ranges ``[start, stop)`` (an ``(n, 2)`` int64 array, sorted, disjoint, and
    merged where they touch) covering the selected cells of one tile.

    Args:
        tile_shape: cells per dimension of the tile.
        cell_nbytes: bytes per cell (itemsize times the cell shape).
        cell_order: ``"row-major"`` or ``"col-major"``.
        index_sets: per dimension, the selected in-tile indices (any order, repeats allowed).
    """
    shape = [int(s) for s in tile_shape]
    sets = [unique_indices(ix) for ix in index_sets]
    if len(sets) != len(shape):
        raise ValueError(f"{len(sets)} index sets for a {len(shape)}-dimensional tile")
    for d, (ix, n) in enumerate(zip(sets, shape, strict=True)):
        if len(ix) and (ix[0] < 0 or ix[-1] >= n):
            raise ValueError(f"in-tile indices of dimension {d} leave [0, {n})")
    if any(len(ix) == 0 for ix in sets):
        return np.empty((0, 2), dtype=np.int64)
    if all(len(ix) == n for ix, n in zip(sets, shape, strict=True)):  # every cell
        return np.array([[0, math.prod(shape) * cell_nbytes]], dtype=np.int64)
    if cell_order == "col-major":
        shape, sets = shape[::-1], sets[::-1]
    elif cell_order != "row-major":
        raise ValueError(f"cell_order must be 'row-major' or 'col-major', got {cell_order!r}")
    # Runs of consecutive indices along the fastest dimension.
    last = sets[-1]
    breaks = np.flatnonzero(np.diff(last) != 1) + 1
    run_start = last[np.concatenate(([0], breaks))]
    run_len = np.diff(np.concatenate(([0], breaks, [len(last)])))
    # Offsets (in cells) of every combination of the slower dimensions, in ascending order.
    strides = np.cumprod([1, *shape[:0:-1]])[::-1]  # cells per step of each dimension
    outer = np.zeros(1, dtype=np.int64)
    for ix, stride in zip(sets[:-1], strides[:-1], strict=True):
        outer = np.add.outer(outer, ix * stride).ravel()
    starts = (outer[:, None] + run_start[None, :]).ravel()
    stops = starts + np.broadcast_to(run_len, (len(outer), len(run_len))).ravel()
    return _merge_sorted(starts * cell_nbytes, stops * cell_nbytes)


#: Up to this many ranges (or blocks), the steps of a read that see only a few of them run
#: in plain Python: :func:`box_byte_ranges`, Algorithm 1's split search
#: (:func:`tessera.query.refine.refine_ranges`) and block lookups
#: (:class:`tessera.format.blocks.TileBlocks`). Each numpy call costs tens of microseconds
#: when its code is out of the CPU cache, as between the steps of a training loop; past
#: this size numpy's vectorised work wins.
PLAIN_PYTHON_MAX = 64


def box_byte_ranges(tile_shape: Sequence[int], cell_nbytes: int, cell_order: str,
                    runs: Sequence[tuple[int, int]]) -> np.ndarray:
    """:func:`tile_byte_ranges` for a box: per dimension one run ``[start, stop)`` of in-tile
    indices. Arithmetic instead of index sets: a small box (the common read of a training
    step) gets its ranges without a dozen numpy calls, each of which costs tens of
    microseconds when its code is out of the CPU cache between steps.

    >>> box_byte_ranges((4, 4), 1, "row-major", [(1, 3), (1, 3)]).tolist()
    [[5, 7], [9, 11]]
    >>> box_byte_ranges((4, 4), 1, "row-major", [(1, 3), (0, 4)]).tolist()
    [[4, 12]]
    """
    shape = [int(n) for n in tile_shape]
    spans = [(int(a), int(b)) for a, b in runs]
    if len(spans) != len(shape):
        raise ValueError(f"{len(spans)} runs for a {len(shape)}-dimensional tile")
    for d, ((a, b), n) in enumerate(zip(spans, shape, strict=True)):
        if a < b and (a < 0 or b > n):
            raise ValueError(f"in-tile run {a}..{b} of dimension {d} leaves [0, {n})")
    if any(a >= b for a, b in spans):
        return np.empty((0, 2), dtype=np.int64)
    if cell_order == "col-major":
        shape, spans = shape[::-1], spans[::-1]
    elif cell_order != "row-major":
        raise ValueError(f"cell_order must be 'row-major' or 'col-major', got {cell_order!r}")
    # The slowest-varying dimension after which the box takes every cell: each range covers
    # its run times the whole of the faster dimensions; the slower ones enumerate ranges.
    j = len(shape) - 1
    while j >= 0 and spans[j] == (0, shape[j]):
        j -= 1
    if j < 0:
        return np.array([[0, math.prod(shape) * cell_nbytes]], dtype=np.int64)
    inner = math.prod(shape[j + 1:])
    first = spans[j][0] * inner * cell_nbytes
    length = (spans[j][1] - spans[j][0]) * inner * cell_nbytes
    strides = [math.prod(shape[i + 1:]) * cell_nbytes for i in range(j)]
    count = math.prod(b - a for a, b in spans[:j])
    if count <= PLAIN_PYTHON_MAX:
        starts = [first]
        for (a, b), stride in zip(spans[:j], strides, strict=True):
            starts = [s + k * stride for s in starts for k in range(a, b)]
        return np.array([[s, s + length] for s in starts], dtype=np.int64).reshape(-1, 2)
    offsets = np.full(1, first, dtype=np.int64)
    for (a, b), stride in zip(spans[:j], strides, strict=True):
        offsets = np.add.outer(offsets, np.arange(a, b, dtype=np.int64) * stride).ravel()
    return np.stack((offsets, offsets + length), axis=1)


def unique_indices(indices: np.ndarray) -> np.ndarray:
    """The distinct values of ``indices`` in ascending order (``int64``), as ``np.unique``
    gives them, but in one linear pass when they are sorted already (a selection's
    coordinates usually are; ``np.unique`` hashes every value, about 45 us for 1,024).

    >>> unique_indices(np.array([1, 2, 2, 5])).tolist()
    [1, 2, 5]
    >>> unique_indices(np.array([3, 1, 3])).tolist()
    [1, 3]
    """
    a = np.asarray(indices, dtype=np.int64).ravel()
    if len(a) < 2:
        return a
    step = a[1:] - a[:-1]
    least = step.min()
    if least < 0:
        return np.unique(a)
    return a if least > 0 else a[np.concatenate(([True], step > 0))]


def merge_ranges(ranges: np.ndarray, gap: int = 0) -> np.ndarray:
    """Sort ``[start, stop)`` ranges and merge those that overlap, touch, or lie at most
    ``gap`` bytes apart (the bytes between are then read too: one request instead of two).

    >>> merge_ranges(np.array([[8, 10], [0, 4], [2, 6], [6, 7]])).tolist()
    [[0, 7], [8, 10]]
    >>> merge_ranges(np.array([[8, 10], [0, 4], [2, 6], [6, 7]]), gap=1).tolist()
    [[0, 10]]
    """
    r = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    if not len(r):
        return np.empty((0, 2), dtype=np.int64)
    r = r[np.argsort(r[:, 0], kind="stable")]
    reach = np.maximum.accumulate(r[:, 1])
    new = np.ones(len(r), dtype=bool)
    new[1:] = r[1:, 0] > reach[:-1] + gap
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:], [len(r)])) - 1
    return np.stack((r[first, 0], reach[last]), axis=1)


def _merge_sorted(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Merge sorted, disjoint ranges where one ends exactly where the next begins."""
    if not len(starts):
        return np.empty((0, 2), dtype=np.int64)
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] != stops[:-1]
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:], [len(starts)])) - 1
    return np.stack((starts[first], stops[last]), axis=1).astype(np.int64)
