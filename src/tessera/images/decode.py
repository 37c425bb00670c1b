"""Columns to pixels at the speed of memory: :meth:`FrequencyFormat.decode
<tessera.images.frequency.FrequencyFormat.decode>`'s engine.

The arithmetic is the reference decode's (:meth:`~tessera.images.frequency.FrequencyFormat
.decode_reference`), element for element, so the pixels are bit-identical to it; what
changes is how the work is laid out:

- one precomputed gather (:func:`gather_index`) from the concatenated diagonal columns to the
  kept ``r x r`` corner of every block (a zero slot for positions no kept diagonal reaches),
  instead of one scatter per diagonal over the whole batch;
- images in chunks whose float32 work fits in cache (:data:`CHUNK_BYTES`), each chunk
  dequantized, colour-converted, inverse-transformed and written once into its place in
  the output (uint8 rounding and clipping on the way), with no whole-batch intermediates;
- the chunks spread over the process's compute threads (:mod:`tessera._threads`: numpy and
  scipy.fft release the GIL).

>>> import numpy as np
>>> from tessera.images import FrequencyFormat
>>> fmt = FrequencyFormat()
>>> img = np.random.default_rng(1).integers(0, 256, (3, 64, 96, 3), dtype=np.uint8)
>>> cols = fmt.encode(img)
>>> all(np.array_equal(decode(fmt, cols[:k], m, decoder="numpy"),
...                    fmt.decode_reference(cols[:k], m / 32))
...     for k in (1, 2, 8, 40, 63) for m in (32, 8, 1))
True
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from tessera._threads import run_chunks, workers
from tessera.errors import InvalidArgumentError
from tessera.images import kernel
from tessera.images.subsampling import joint_index, plane_index, uses_zero_slot
from tessera.images.transform import (
    dct_matrix,
    diagonals,
    gather_index,
    inverse_dct_raster,
    to_rgb,
)


class FrequencyFormat(kernel.Format, Protocol):
    """What the decoder uses of :class:`tessera.images.frequency.FrequencyFormat`: what the
    compiled decode uses (:class:`tessera.images.kernel.Format`), and these."""

    def kept(self, k: int) -> int: ...
    def check_k(self, k: Any) -> int: ...

#: float32 bytes of one chunk's work (its coefficients or its pixels, whichever is larger):
#: small enough to stay in cache between the steps, large enough that per-chunk overheads
#: vanish (measured on 256x256 images: 1 image per chunk at k = 63).
CHUNK_BYTES = 1 << 20
#: Images per chunk of the compiled decode (its work stays in cache whatever the chunk).
KERNEL_CHUNK_IMAGES = 8


@functools.lru_cache(maxsize=256)
def _uses_zero_slot(block: int, r: int, k: int) -> bool:
    """Whether :func:`gather_index` ``(block, r, k)`` points at the zero slot anywhere."""
    index = gather_index(block, r, k)
    return bool(index.max(initial=0) == sum(len(d) for d in diagonals(block)[:k]))


def check_columns(fmt: FrequencyFormat, columns: Sequence[np.ndarray]) -> tuple[int, ...]:
    """The ``(N, C, BY, BX)`` head the columns share, or an error naming the odd one."""
    if not columns:
        raise InvalidArgumentError("decoding needs at least one diagonal (k >= 1)")
    fmt.check_k(len(columns))
    head: tuple[int, ...] = tuple(columns[0].shape[:4])
    for d, col in enumerate(columns):
        if col.shape != (*head, fmt.width(d)):
            raise InvalidArgumentError(f"column {d} has shape {col.shape}, expected "
                                       f"{(*head, fmt.width(d))}")
    return head


Source = np.ndarray | Sequence[np.ndarray]
"""Diagonals ``0..k-1``: concatenated along the last axis in one array ``(N, C, BY, BX,
>= T(k))``, or one array ``(N, C, BY, BX, n_d)`` per diagonal."""


def _head(source: Source) -> tuple[int, ...]:
    first = source if isinstance(source, np.ndarray) else source[0]
    return tuple(first.shape[:4])


def concatenate(columns: Sequence[np.ndarray]) -> np.ndarray:
    """One array ``(N, C, BY, BX, T(k))`` of diagonals ``0..k-1`` given one per diagonal.
    Each diagonal's run per block is short (1-32 coefficients), so each is copied as one
    opaque item per block (a ``void`` view: 1.6x faster than ``np.concatenate``, measured),
    and images in chunks over the compute threads."""
    head = _head(columns)
    widths = [c.shape[-1] for c in columns]
    total = sum(widths)
    out = np.empty((*head, total), dtype=columns[0].dtype)
    itemsize = out.dtype.itemsize
    rows = int(np.prod(head[1:]))

    def run(lo: int, hi: int) -> None:
        target = out[lo:hi].reshape(-1, total)
        start = 0
        for col, width in zip(columns, widths, strict=True):
            item = np.dtype((np.void, width * itemsize))
            source = np.ascontiguousarray(col[lo:hi]).reshape(-1, width)
            target[:, start:start + width].view(item)[:, 0] = source.view(item)[:, 0]
            start += width

    per_image = max(1, rows * total * itemsize)
    run_chunks(run, head[0], max(1, min((8 * CHUNK_BYTES) // per_image,
                                        -(-head[0] // workers()))))
    return out


def _with_zero_slot(src: np.ndarray, needed: bool) -> np.ndarray:
    """``src`` with one zero coefficient after each block's when a gather needs it (corner
    positions that no kept diagonal reaches point there)."""
    if not needed:
        return src
    return np.concatenate([src, np.zeros((*src.shape[:-1], 1), src.dtype)], axis=-1)


def corners(fmt: FrequencyFormat, source: np.ndarray, k: int, r: int, lo: int,
            hi: int) -> np.ndarray:
    """Dequantized float32 corners ``(hi - lo, C, BY, BX, r, r)`` of images ``lo..hi-1``
    from diagonals ``0..k-1`` of ``source`` (concatenated, ``(N, C, BY, BX, >= T(k))``)."""
    index = gather_index(fmt.block, r, k)
    total = fmt.kept(k)
    src = _with_zero_slot(source[lo:hi, ..., :total], _uses_zero_slot(fmt.block, r, k))
    out = np.take(src, index, axis=-1).astype(np.float32)
    out *= fmt.q  # int8 -> float32 before scaling, as the reference: no overflow
    return out.reshape(hi - lo, *src.shape[1:4], r, r)


def chroma_corners(fmt: FrequencyFormat, source: np.ndarray, k: int, r: int, lo: int,
                   hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Of a 4:2:0 set (:mod:`tessera.images.subsampling`): dequantized float32 corners of
    luma ``(hi - lo, 1, BY, BX, r, r)`` and of the chroma planes ``(hi - lo, 2, BY, BX, rc,
    rc)`` (``rc = min(r, block / 2)``) of images ``lo..hi-1`` from diagonals ``0..k-1`` of
    ``source`` (concatenated, ``(N, 1, BY, BX, >= stored(k))``)."""
    luma, chroma = plane_index(fmt.block, r, k)
    rc = min(r, fmt.block // 2)
    total = fmt.stored(k)
    src = _with_zero_slot(source[lo:hi, 0, ..., :total], uses_zero_slot(fmt.block, r, k))
    n, by, bx = src.shape[:3]
    y = np.take(src, luma, axis=-1).astype(np.float32)
    y *= fmt.q
    c = np.empty((n, 2, by, bx, rc, rc), np.float32)
    c[...] = np.moveaxis(np.take(src, chroma.reshape(-1), axis=-1).reshape(
        n, by, bx, 2, rc, rc), 3, 1)
    c *= fmt.q
    return y.reshape(n, 1, by, bx, r, r), c


def joint_corners(fmt: FrequencyFormat, source: np.ndarray, k: int, r: int, lo: int,
                  hi: int) -> np.ndarray:
    """Of a 4:2:0 set where every plane's corner is the same (``r <= block / 2``): the
    dequantized float32 corners ``(hi - lo, 3, BY, BX, r, r)`` of images ``lo..hi-1``, as
    :func:`corners` gives a 4:4:4 set's (one gather of the three planes)."""
    index = joint_index(fmt.block, r, k)
    total = fmt.stored(k)
    src = _with_zero_slot(source[lo:hi, 0, ..., :total], uses_zero_slot(fmt.block, r, k))
    n, by, bx = src.shape[:3]
    out = np.empty((n, 3, by, bx, r, r), np.float32)
    out[...] = np.moveaxis(np.take(src, index, axis=-1).reshape(n, by, bx, 3, r, r), 3, 1)
    out *= fmt.q
    return out


def planes(luma: np.ndarray, chroma: np.ndarray, m: int) -> np.ndarray:
    """RGB rows of pixels ``(N, 3, BY, m, BX * m)`` (level-shifted, not scaled) of a 4:2:0
    set's luma corners ``(N, 1, BY, BX, r, r)`` and chroma corners ``(N, 2, BY, BX, rc,
    rc)``, ``rc < r``: each plane's inverse DCT from its own corner, the colour conversion
    on the pixels (the planes' corners differ, so not on the coefficients)."""
    n, _, by, bx = luma.shape[:4]
    pixels = np.empty((n, 3, by, m, bx * m), np.float32)
    inverse_dct_raster(luma, m, out=pixels[:, :1])
    inverse_dct_raster(chroma, m, out=pixels[:, 1:])
    return to_rgb(pixels)


def output_channels(fmt: FrequencyFormat, stored: int) -> int:
    """Channels of the pixels decoded from columns with ``stored`` channels (a 4:2:0 set
    stores its three planes in one)."""
    return 3 if fmt.subsampled else stored


def decode(fmt: FrequencyFormat, columns: Sequence[np.ndarray], m: int,
           output_dtype: Any = np.uint8, decoder: str | None = None) -> np.ndarray:
    """Pixels ``(N, BY*m, BX*m, C)`` of the first ``len(columns)`` diagonals at block edge
    ``m`` (see :meth:`FrequencyFormat.decode`)."""
    check_columns(fmt, columns)
    return decode_concatenated(fmt, columns, len(columns), m, output_dtype, decoder=decoder)


def decode_concatenated(fmt: FrequencyFormat, source: Source, k: int, m: int,
                        output_dtype: Any = np.uint8, out: np.ndarray | None = None,
                        decoder: str | None = None) -> np.ndarray:
    """Pixels ``(N, BY*m, BX*m, C)`` at block edge ``m`` from diagonals ``0..k-1`` of
    ``source``: concatenated along the last axis (``(N, C, BY, BX, >= T(k))``, as the column
    cache holds them), or one array per diagonal (as reads return them; concatenated first,
    on the compute threads, for the numpy decode). ``out``: a C-contiguous array of that
    shape and dtype to write them into (returned). ``decoder``: ``"compiled"`` or
    ``"numpy"`` (:mod:`tessera.images.kernel`; ``None``: as configured)."""
    fmt.check_k(k)
    n, ch, by, bx = _head(source)
    kk = min(k, 2 * m - 1)
    held = (source.shape[-1] if isinstance(source, np.ndarray)
            else sum(c.shape[-1] for c in source))
    if held < fmt.stored(kk) or (not isinstance(source, np.ndarray) and len(source) < kk):
        raise InvalidArgumentError(f"{held} coefficients per block cannot hold "
                                   f"diagonals 0..{kk - 1} ({fmt.stored(kk)})")
    r = min(kk, m)
    dtype = np.dtype(output_dtype)
    folded = fmt.subsampled  # three planes in one stored channel
    ch = output_channels(fmt, ch)
    shape = (n, by * m, bx * m, ch)
    if out is None:
        out = np.empty(shape, dtype=dtype)
    elif out.shape != shape or out.dtype != dtype or not out.flags.c_contiguous:
        raise InvalidArgumentError(f"out must be a C-contiguous {dtype} array of shape "
                                   f"{shape}, got {out.dtype} {out.shape}")
    target_all = out
    if not n:
        return out
    parts = source if isinstance(source, np.ndarray) else source[:kk]
    if kernel.uses_compiled(dtype, decoder, (parts if isinstance(parts, np.ndarray)
                                             else parts[0]).dtype):
        run_chunks(lambda lo, hi: kernel.decode_into(fmt, parts, kk, m, target_all, lo, hi),
                   n, max(1, min(KERNEL_CHUNK_IMAGES, -(-n // workers()))))
        return out
    cat = source if isinstance(source, np.ndarray) else concatenate(source[:kk])
    per_image = 4 * ch * by * bx * max(r * r, m * m)
    chunk = max(1, min(CHUNK_BYTES // per_image, -(-n // workers())))
    rgb = fmt.colour == "ycbcr"
    level = np.float32(fmt.level_shift)
    factor = np.float32(m / fmt.block)

    def run(lo: int, hi: int) -> None:
        means = r == 1 and m > 1  # block means: one value per block, broadcast when written
        if folded and r > fmt.block // 2:  # 4:2:0 beyond the chroma corner: planes apart
            pixels = planes(*chroma_corners(fmt, cat, kk, r, lo, hi), m)
        else:
            c = (joint_corners(fmt, cat, kk, r, lo, hi) if folded
                 else corners(fmt, cat, kk, r, lo, hi))
            if rgb:
                c = to_rgb(c)
            pixels = ((_dct_row0(m) * c[..., 0, 0]) * _dct_row0(m) if means  # (n, C, BY, BX)
                      else inverse_dct_raster(c, m))  # rows of pixels: (n, C, BY, m, BX * m)
        if m != fmt.block:  # an m-point IDCT of b-point coefficients (x 1: no change)
            pixels *= factor
        pixels += level
        if dtype == np.uint8:
            np.rint(pixels, out=pixels)
            np.clip(pixels, 0, 255, out=pixels)
        values = pixels.astype(dtype)  # contiguous: the cast is one pass
        if means:
            target = target_all[lo:hi].reshape(hi - lo, by, m, bx, m, ch)
            for channel in range(ch):
                target[..., channel] = values[:, channel, :, None, :, None]
            return
        rows = target_all[lo:hi].reshape(hi - lo, by, m, bx * m, ch)
        for channel in range(ch):  # channel-interleaved writes of whole rows, plane by plane
            rows[..., channel] = values[:, channel]

    run_chunks(run, n, chunk)
    return out


@functools.lru_cache(maxsize=8)
def _dct_row0(m: int) -> np.float32:
    """The first row of the ``m``-point DCT matrix as float32: all its entries are equal
    (``1 / sqrt(m)``), which the block-means path relies on (checked)."""
    row = dct_matrix(m)[0].astype(np.float32)
    if not (row == row[0]).all():  # pragma: no cover - scipy's DCT matrix, checked once
        raise AssertionError("the DCT's first row is not constant in float32")
    return np.float32(row[0])
