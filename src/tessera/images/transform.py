"""The linear pieces of the frequency format: the colour matrices, the DCT matrix, the
inverse DCT of kept corners and the diagonal order of a block's coefficients (shared by the
format, :mod:`tessera.images.frequency`, and its decoder, :mod:`tessera.images.decode`).

>>> import numpy as np
>>> d = dct_matrix(8)
>>> bool(np.allclose(d @ d.T, np.eye(8)))
True
"""

from __future__ import annotations

import functools

import numpy as np

#: JFIF (BT.601, full range) RGB -> YCbCr, on values and (being linear) on coefficients.
RGB_TO_YCBCR = np.array([[0.299, 0.587, 0.114],
                         [-0.168736, -0.331264, 0.5],
                         [0.5, -0.418688, -0.081312]])
#: Its inverse (YCbCr -> RGB), computed so that the round trip is exact in floating point.
YCBCR_TO_RGB = np.linalg.inv(RGB_TO_YCBCR)
#: The inverse DCT is two matmuls with the kept rows of the DCT matrix up to this fraction of
#: the block, scipy's inverse DCT of the zero-padded block beyond it. Measured per
#: 256x256x3 image, one thread, float32 (numpy 2 + OpenBLAS): matmuls 0.24 / 0.36 / 0.44 /
#: 0.53 ms for a corner of 8 / 16 / 24 / 32, scipy 1.24 / 0.97 / 0.87 / 1.13 ms: matmuls
#: always (the scipy path stays for comparison; an older measurement had it faster beyond
#: half the block).
TRUNCATED_UP_TO = 1.0


@functools.lru_cache(maxsize=8)
def dct_matrix(n: int) -> np.ndarray:
    """The orthonormal DCT-II matrix ``D`` (``D @ x`` is ``scipy.fft.dct(x, norm="ortho")``)."""
    import scipy.fft

    return np.asarray(scipy.fft.dct(np.eye(n), axis=0, norm="ortho"), dtype=np.float64)


@functools.lru_cache(maxsize=64)
def _kept_rows(m: int, r: int) -> np.ndarray:
    """The first ``r`` rows of the ``m``-point DCT matrix, float32."""
    rows = dct_matrix(m)[:r].astype(np.float32)
    rows.setflags(write=False)
    return rows


def inverse_dct(c: np.ndarray, m: int) -> np.ndarray:
    """The ``m x m`` inverse DCT of corners ``(..., r, r)`` (zero beyond ``r``), block by
    block: two matmuls with the first ``r`` rows of the DCT matrix (``X = D[:r]^T Y D[:r]``),
    or scipy's inverse DCT of the zero-padded block when :data:`TRUNCATED_UP_TO` says so.
    (Decoding takes :func:`inverse_dct_raster`, which lays the pixels out in rows.)

    Each block's arithmetic does not depend on how many blocks are stacked, so a decode in
    chunks is bit-identical to one over the whole batch."""
    r = c.shape[-1]
    if r <= TRUNCATED_UP_TO * m:
        dm = _kept_rows(m, r)
        result: np.ndarray = np.matmul(np.matmul(dm.T, c), dm)
        return result
    import scipy.fft

    full = np.zeros((*c.shape[:-2], m, m), dtype=c.dtype)
    full[..., :r, :r] = c
    return np.asarray(scipy.fft.idctn(full, type=2, norm="ortho", axes=(-2, -1),
                                      overwrite_x=True))


def inverse_dct_raster(c: np.ndarray, m: int, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`inverse_dct` of corners ``(N, C, BY, BX, r, r)`` laid out as rows of pixels,
    ``(N, C, BY, m, BX * m)`` (each channel's image, row by row: what is written out; into
    ``out``, a float32 array or view of that shape, when given).

    A small corner (``r`` at most half the block) is transformed straight into that layout:
    each block's ``r`` rows first (``Y D[:r]``, small), moved beside their neighbours', then
    one matmul per row of blocks (``D[:r]^T`` times ``r x BX*m``) instead of one per block
    (1.4x faster at ``r = 8``, measured); a larger one is transformed per block and moved.
    Chunks of images give the same bits as the whole batch (the matmuls are per image)."""
    n, ch, by, bx, r = c.shape[:5]
    if r <= TRUNCATED_UP_TO * m and 2 * r <= m:
        dm = _kept_rows(m, r)
        moved = np.ascontiguousarray(np.matmul(c, dm).transpose(0, 1, 2, 4, 3, 5))
        rows: np.ndarray = np.matmul(dm.T, moved.reshape(n, ch, by, r, bx * m), out=out)
        return rows
    blocks = inverse_dct(c, m).transpose(0, 1, 2, 4, 3, 5)
    if out is None:
        return np.ascontiguousarray(blocks).reshape(n, ch, by, m, bx * m)
    target = out.reshape(n, ch, by, m, bx, m)  # splits the last axis only: a view of out
    assert np.may_share_memory(target, out), "out's last axis must be contiguous"
    target[...] = blocks
    return out


def to_rgb(c: np.ndarray) -> np.ndarray:
    """YCbCr -> RGB of float32 coefficients or values ``(N, 3, ...)`` (linear, so it applies
    to DCT coefficients as to pixels) with :data:`YCBCR_TO_RGB` in float32: an einsum, not
    a matmul over the channels (OpenBLAS would spread one that large over its own threads
    inside the compute pool's: 2x slower on 2 cores, measured)."""
    out: np.ndarray = np.einsum("rc,nc...->nr...", _ycbcr_to_rgb32(), c)
    return out


@functools.lru_cache(maxsize=1)
def _ycbcr_to_rgb32() -> np.ndarray:
    matrix = YCBCR_TO_RGB.astype(np.float32)
    matrix.setflags(write=False)
    return matrix


@functools.lru_cache(maxsize=8)
def diagonals(block: int) -> tuple[np.ndarray, ...]:
    """Flat indices (``i * block + j``) of each anti-diagonal ``d = i + j``, ``i`` ascending.

    >>> [d.tolist() for d in diagonals(4)[:3]]
    [[0], [1, 4], [2, 5, 8]]
    """
    out = []
    for d in range(2 * block - 1):
        rows = range(max(0, d - block + 1), min(d, block - 1) + 1)
        idx = np.array([i * block + (d - i) for i in rows], dtype=np.intp)
        idx.setflags(write=False)
        out.append(idx)
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _diagonal_order(block: int) -> np.ndarray:
    """All flat indices in d-major order (the diagonals of :func:`diagonals` one after the
    other)."""
    return np.concatenate(diagonals(block))


@functools.lru_cache(maxsize=256)
def gather_index(block: int, r: int, k: int) -> np.ndarray:
    """For each position ``i * r + j`` of the ``r x r`` corner, its index in the
    concatenation of diagonals ``0..k-1`` (``d``-major, ``i`` ascending inside a diagonal),
    or ``T(k)`` (one past the end: the zero slot) where no kept diagonal reaches it.

    >>> gather_index(32, 2, 2).tolist(), gather_index(32, 2, 3).tolist()
    ([0, 1, 2, 3], [0, 1, 2, 4])
    """
    flat = _diagonal_order(block)  # flat (i * block + j) in d-major order
    position = np.empty(block * block, dtype=np.intp)
    position[flat] = np.arange(block * block)  # where each flat index lies in that order
    total = sum(len(d) for d in diagonals(block)[:k])
    i, j = np.divmod(np.arange(r * r), r)
    idx = np.where(i + j < k, position[i * block + j], total).astype(np.intp)
    idx.setflags(write=False)
    return idx
