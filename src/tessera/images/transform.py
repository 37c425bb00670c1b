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
#: A truncated inverse DCT (matmuls with the kept k rows of the DCT matrix) is used up to
#: this fraction of the block; beyond it scipy's full inverse DCT is faster (measured: k = 8
#: 0.41 ms, k = 16 0.70 ms, full 1.11 ms per 256x256x3 image; k = 32 3.2 ms).
TRUNCATED_UP_TO = 0.5


@functools.lru_cache(maxsize=8)
def dct_matrix(n: int) -> np.ndarray:
    """The orthonormal DCT-II matrix ``D`` (``D @ x`` is ``scipy.fft.dct(x, norm="ortho")``)."""
    import scipy.fft

    return np.asarray(scipy.fft.dct(np.eye(n), axis=0, norm="ortho"), dtype=np.float64)


def inverse_dct(c: np.ndarray, m: int) -> np.ndarray:
    """The ``m x m`` inverse DCT of corners ``(..., r, r)`` (zero beyond ``r``): two
    matmuls with the first ``r`` rows of the DCT matrix when the corner is small, scipy's
    inverse DCT of the zero-padded block otherwise."""
    r = c.shape[-1]
    if r <= TRUNCATED_UP_TO * m:
        dm = dct_matrix(m)[:r].astype(np.float32)  # X = D[:r]^T Y D[:r]
        result: np.ndarray = np.matmul(np.matmul(dm.T, c), dm)
        return result
    import scipy.fft

    full = np.zeros((*c.shape[:-2], m, m), dtype=c.dtype)
    full[..., :r, :r] = c
    return np.asarray(scipy.fft.idctn(full, type=2, norm="ortho", axes=(-2, -1),
                                      overwrite_x=True))


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
