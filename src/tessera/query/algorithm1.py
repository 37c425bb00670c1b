"""Algorithm 1 of the ArrayMorph paper (section 4.2): group a tile's needed byte ranges into
range requests by splitting at the widest gap while that lowers the estimated cost.

>>> import numpy as np
>>> refine_ranges(np.array([[0, 10], [1000, 1010]]), lambda reqs: len(reqs) + sum(
...     b - a for a, b in reqs) / 100)
[(0, 10), (1000, 1010)]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from tessera.format import decompose

#: Least fraction of the cost a split must save (see :func:`refine_ranges`).
SPLIT_GAIN = 0.05


def refine_ranges(ranges: np.ndarray, cost: Callable[[list[tuple[int, int]]], float],
                  min_split_bytes: int = 1, min_gain: float = SPLIT_GAIN,
                  ) -> list[tuple[int, int]]:
    """Algorithm 1: group sorted, disjoint ranges into range requests.

    Start with one request covering everything; take a group and split it at its largest gap
    (ties: the most even split), or a single range in half; keep the split if it lowers the
    cost, else assign the group as it is. Costs are always of the tile's whole current set
    of requests (the other groups, assigned or pending, included), so that the model sees
    how many requests share the link.

    Args:
        ranges: ``(n, 2)`` sorted, disjoint ``[start, stop)`` ranges.
        cost: estimated cost of issuing a list of ``(start, stop)`` requests.
        min_split_bytes: a single range is only halved into pieces of at least this many
            bytes, at multiples of it (pass the larger of the cell size and the profile's
            :attr:`~tessera.query.cost.StoreProfile.min_range_bytes`).
        min_gain: a split is kept only if it lowers the cost by at least this fraction
            (every extra request has costs the model does not see: connection set-up,
            client work), so that splits are made for real savings only.
    """
    r = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    if not len(r):
        return []
    # A few ranges (a small box's) are split in plain Python (see PLAIN_PYTHON_MAX).
    small = r.tolist() if len(r) <= decompose.PLAIN_PYTHON_MAX else None
    assigned: list[tuple[int, int]] = []
    pending: deque[tuple[int, int, int, int]] = deque([(0, len(r) - 1, int(r[0, 0]),
                                                        int(r[-1, 1]))])
    while pending:
        i, j, start, stop = pending.popleft()
        if i == j:
            size = stop - start
            half = (size // 2 // min_split_bytes) * min_split_bytes
            if half < min_split_bytes or half <= 0:
                assigned.append((start, stop))
                continue
            sg1 = (i, i, start, start + half)
            sg2 = (i, i, start + half, stop)
        else:
            k = _widest_gap(small, i, j) if small is not None else _widest_gap_np(r, i, j)
            sg1 = (i, k - 1, start, int(r[k - 1, 1]))
            sg2 = (k, j, int(r[k, 0]), stop)
        others = assigned + [(p[2], p[3]) for p in pending]
        if cost([*others, (sg1[2], sg1[3]), (sg2[2], sg2[3])]) < (1 - min_gain) * cost(
                [*others, (start, stop)]):
            pending.extend([sg1, sg2])
        else:
            assigned.append((start, stop))
    return sorted(assigned)


def _widest_gap(r: list[list[int]], i: int, j: int) -> int:
    """Where Algorithm 1 splits ranges ``i..j``: the first range after the widest gap
    (ties: the gap nearest the middle, the earlier one on an equal distance)."""
    middle = (i + j + 1) / 2
    best, best_gap, best_off = i + 1, -1, 0.0
    for k in range(i + 1, j + 1):
        gap = r[k][0] - r[k - 1][1]
        off = abs(k - middle)
        if gap > best_gap or (gap == best_gap and off < best_off):
            best, best_gap, best_off = k, gap, off
    return best


def _widest_gap_np(r: np.ndarray, i: int, j: int) -> int:
    """:func:`_widest_gap` on an ``(n, 2)`` array, vectorised for many ranges."""
    gaps = r[i + 1:j + 1, 0] - r[i:j, 1]
    widest = np.flatnonzero(gaps == gaps.max()) + i + 1  # candidates: first of sg2
    middle = (i + j + 1) / 2
    return int(widest[np.argmin(np.abs(widest - middle))])
