"""Fetching and decoding side by side: a large pixel read of image columns fetched in
batches of whole groups, each batch decoded while the next one is fetched.

A read's fetch is mostly the event loop's work (planning, requests, decompression and
placement of many small tiles) and its decode the compute threads' (numpy and scipy release
the GIL), so the two overlap: the read takes about the longer of the two rather than their
sum. Batches are whole groups (a group's tiles are never fetched twice) of at least
:data:`BATCH_BYTES` of coefficients; a read smaller than two batches runs as one.

>>> import numpy as np
>>> ids = np.array([7, 0, 5, 1, 6])
>>> [b.tolist() for b in group_batches(ids, group=2, per_batch=2)]
[[1, 3, 2], [0, 4]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tessera._threads import submit
from tessera.images.decode import FrequencyFormat, decode_concatenated, output_channels

#: Coefficient bytes a batch holds at least (the fetch of one overlaps the decode of the
#: one before; smaller batches add a read's fixed cost per batch).
BATCH_BYTES = 16 << 20


def group_batches(ids: np.ndarray, group: int, per_batch: int) -> list[np.ndarray]:
    """Positions in ``ids`` of each batch: ``per_batch`` whole groups at a time (groups in
    ascending order, positions in the order of ``ids`` within a group)."""
    groups = ids // group
    order = np.argsort(groups, kind="stable")
    distinct, starts = np.unique(groups[order], return_index=True)
    cuts = list(starts[per_batch::per_batch]) if len(distinct) > per_batch else []
    return [part for part in np.split(order, cuts) if len(part)]


def read_decoded(fmt: FrequencyFormat, read: Callable[[list[int]], Sequence[np.ndarray]],
                 ids: np.ndarray, group: int, k: int, m: int, image_bytes: int,
                 ) -> np.ndarray | None:
    """Pixels of images ``ids`` (``read(ids)``: their diagonals ``0..k-1``, one array per
    diagonal) decoded at block edge ``m``, the next batch fetched while one is decoded; or
    ``None`` when the read is too small for two batches (``image_bytes``: one image's
    coefficient bytes). Errors of a fetch or a decode are raised once both have finished."""
    per_batch = max(1, -(-BATCH_BYTES // max(1, image_bytes * group)))
    batches = group_batches(ids, group, per_batch)
    if len(batches) < 2:
        return None
    out: np.ndarray | None = None
    pending = submit(read, ids[batches[0]].tolist())
    try:
        for i, positions in enumerate(batches):
            columns = pending.result()
            if i + 1 < len(batches):
                pending = submit(read, ids[batches[i + 1]].tolist())
            n, ch, by, bx = columns[0].shape[:4]
            if out is None:
                out = np.empty((len(ids), by * m, bx * m, output_channels(fmt, ch)),
                               dtype=np.uint8)
            contiguous = bool(np.all(np.diff(positions) == 1))
            if contiguous:
                decode_concatenated(fmt, columns, k, m,
                                    out=out[positions[0]:positions[0] + n])
            else:
                out[positions] = decode_concatenated(fmt, columns, k, m)
    except BaseException:
        if not pending.done():  # the fetch under way finishes (or fails) before the raise
            _wait(pending)
        raise
    return out


def _wait(pending: Any) -> None:
    try:
        pending.result()
    except BaseException:  # the first error is the one raised
        return
