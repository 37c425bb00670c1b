"""Chroma subsampling of the frequency format: where each coefficient of a ``"4:2:0"`` set
lies in its stored columns.

A ``4:2:0`` set keeps Cb and Cr at half the resolution in each direction, in the frequency
domain: of each channel's ``block x block`` coefficients, only the ``h x h`` corner
(``h = block / 2``) of the two chroma channels is stored: the coefficients of the same block
downsampled by two and transformed by an ``h``-point DCT, up to the factor ``2`` (the
ideal low-pass, where JPEG's 4:2:0 averages 2 x 2 pixels). Decoding takes the corner back
to full resolution with the block's ``block``-point inverse DCT (zero beyond the corner).

The three planes of a block share each diagonal's column (the stored channel axis is 1):
column ``d`` holds, per block, luma's ``n_d`` coefficients of diagonal ``d`` (``i``
ascending), then Cb's that lie inside the chroma corner, then Cr's (both ``i`` ascending).
Diagonals ``2h - 1`` and beyond hold luma only. So a block's stored coefficients at full
quality are ``block^2 + 2 h^2`` (half of 4:4:4's ``3 block^2``), and so are the bytes the
codec compresses, the cache holds and the decode gathers.

>>> [column_width(8, d) for d in (0, 1, 6, 7, 14)]
[3, 6, 9, 8, 1]
>>> stored(8, 15) == 8 * 8 + 2 * 4 * 4
True
>>> plane_index(8, 2, 2)[0].tolist(), plane_index(8, 2, 2)[1].tolist()
([0, 3, 4, 9], [[1, 5, 6, 9], [2, 7, 8, 9]])
"""

from __future__ import annotations

import functools

import numpy as np

from tessera.errors import InvalidArgumentError

#: The chroma modes of the frequency format.
CHROMA = ("4:4:4", "4:2:0")


def _diagonal_rows(edge: int, d: int) -> range:
    """The rows ``i`` of diagonal ``d`` inside an ``edge x edge`` corner (``j = d - i``)."""
    return range(max(0, d - edge + 1), min(d, edge - 1) + 1)


def column_width(block: int, d: int) -> int:
    """Stored coefficients per block of diagonal ``d`` in a 4:2:0 set: luma's, and the two
    chroma planes' inside the ``block / 2`` corner."""
    return len(_diagonal_rows(block, d)) + 2 * len(_diagonal_rows(block // 2, d))


@functools.lru_cache(maxsize=512)
def stored(block: int, k: int) -> int:
    """Stored coefficients per block of diagonals ``0..k-1`` in a 4:2:0 set."""
    return sum(column_width(block, d) for d in range(k))


@functools.lru_cache(maxsize=8)
def stored_order(block: int) -> np.ndarray:
    """For each stored position of a 4:2:0 block (all columns one after the other), its
    index in the channel-major flattening ``c * block^2 + i * block + j`` of the block's
    three planes: what :meth:`~tessera.images.frequency.FrequencyFormat.encode` takes."""
    h = block // 2
    order: list[int] = []
    for d in range(2 * block - 1):
        order += [i * block + d - i for i in _diagonal_rows(block, d)]
        for channel in (1, 2):
            order += [channel * block * block + i * block + d - i
                      for i in _diagonal_rows(h, d)]
    out = np.array(order, dtype=np.intp)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=8)
def _positions(block: int) -> np.ndarray:
    """The inverse of :func:`stored_order`: for each ``(c, i, j)`` of a block, its stored
    position, or -1 outside the chroma corner."""
    position = np.full(3 * block * block, -1, dtype=np.intp)
    order = stored_order(block)
    position[order] = np.arange(len(order))
    position.setflags(write=False)  # cached: shared by every caller
    return position.reshape(3, block, block)


@functools.lru_cache(maxsize=256)
def plane_index(block: int, r: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Gathers from a 4:2:0 block's stored diagonals ``0..k-1`` (concatenated) to luma's
    ``r x r`` corner and to the chroma planes' ``rc x rc`` corners (``rc = min(r, block /
    2)``), row by row: two arrays of indices, ``(r * r,)`` and ``(2, rc * rc)``, where
    ``stored(block, k)`` (one past the end: a zero slot) marks the positions that no kept
    diagonal reaches."""
    rc = min(r, block // 2)
    total = stored(block, k)
    position = _positions(block)
    i, j = np.divmod(np.arange(r * r), r)
    luma = np.where(i + j < k, position[0, i, j], total).astype(np.intp)
    i, j = np.divmod(np.arange(rc * rc), rc)
    chroma = np.where(i + j < k, position[1:, i, j], total).astype(np.intp)
    luma.setflags(write=False)
    chroma.setflags(write=False)
    return luma, chroma


@functools.lru_cache(maxsize=256)
def joint_index(block: int, r: int, k: int) -> np.ndarray:
    """:func:`plane_index` of a corner no larger than the chroma's (``r <= block / 2``) as
    one gather, ``(3 * r * r,)``: luma's corner, then Cb's, then Cr's."""
    if r > block // 2:
        raise InvalidArgumentError(f"r = {r} exceeds the chroma corner ({block // 2})")
    luma, chroma = plane_index(block, r, k)
    joint = np.concatenate([luma, chroma.reshape(-1)])
    joint.setflags(write=False)
    return joint


@functools.lru_cache(maxsize=256)
def uses_zero_slot(block: int, r: int, k: int) -> bool:
    """Whether :func:`plane_index` ``(block, r, k)`` points at the zero slot anywhere (a
    corner position that no kept diagonal reaches)."""
    luma, chroma = plane_index(block, r, k)
    return max(int(luma.max(initial=0)), int(chroma.max(initial=0))) == stored(block, k)
