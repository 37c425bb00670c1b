"""The frequency format of image columns (the Frequency-Store paper, CIDR 2025, section 4):
8-bit images cut into ``block`` x ``block`` blocks (32 by default), each block's orthonormal
DCT-II of the level-shifted values (``x - 128``) quantized uniformly by ``q`` (50 by default:
every coefficient of an 8-bit image then fits int8, since ``|c| <= 32 * 128 / 50 = 82``), and
the coefficients grouped by **anti-diagonal** ``d = i + j`` (63 of them for 32x32 blocks;
inside a diagonal ``i`` ascends). ``Sf_k``, the format that keeps the ``k`` lowest diagonals,
is the first ``k(k+1)/2`` zig-zag positions for ``k <= block``.

Colour: JFIF (BT.601 full range) YCbCr without subsampling by default; ``"rgb"`` and ``"gray"``
too; ``chroma="4:2:0"`` keeps Cb and Cr at half resolution (:mod:`tessera.images.subsampling`).
Reconstruction is k-aware: the (linear) YCbCr -> RGB matrix is applied to the coefficients
before the inverse DCT (only the DC carries the offsets; in 4:2:0 beyond the chroma corner,
to the pixels of planes transformed apart), a truncated inverse DCT
uses only the kept ``k x k`` corner when that is cheaper, and a reduced-resolution output of
scale ``m / block`` is the ``m x m`` inverse DCT of the ``m x m`` corner (libjpeg's DCT
scaling; at ``m = 1`` the block means).

>>> import numpy as np
>>> fmt = FrequencyFormat()
>>> img = np.random.default_rng(0).integers(0, 256, (1, 64, 64, 3), dtype=np.uint8)
>>> cols = fmt.encode(img)                      # 63 int8 arrays, (N, C, H/32, W/32, n_d)
>>> len(cols), cols[2].shape, fmt.kept(8)
(63, (1, 3, 2, 2, 3), 36)
>>> fmt.decode(cols[:63]).shape, fmt.decode(cols[:4], scale=1/8).shape
((1, 64, 64, 3), (1, 8, 8, 3))
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from tessera.errors import InvalidArgumentError, InvalidTypeError, SchemaError
from tessera.images import subsampling
from tessera.images.decode import decode, planes
from tessera.images.subsampling import CHROMA
from tessera.images.transform import (
    RGB_TO_YCBCR,
    TRUNCATED_UP_TO,
    YCBCR_TO_RGB,
    _diagonal_order,
    dct_matrix,
    diagonals,
    inverse_dct,
    inverse_dct_raster,
    to_rgb,
)

__all__ = ["BLOCKS", "CHROMA", "COLOURS", "RGB_TO_YCBCR", "TRUNCATED_UP_TO", "YCBCR_TO_RGB",
           "FrequencyFormat", "check_images", "dct_matrix", "diagonals", "inverse_dct",
           "psnr"]

COLOURS = ("ycbcr", "rgb", "gray")
BLOCKS = (8, 16, 32, 64)
#: Images encoded at a time: bounds the float64 work arrays (~1.6 MB per 256x256 image) and
#: keeps them in cache (measured per 256x256 image: 4.3 ms at 4, 4.7 at 16, 9.1 at 64, 12.8
#: at 256).
ENCODE_CHUNK = 4


@dataclasses.dataclass(frozen=True)
class FrequencyFormat:
    """How images become frequency columns.

    Attributes:
        block: block edge in pixels (32 as the paper; 8, 16 and 64 also work).
        q: the uniform quantization step (50 as the paper; below 33 coefficients need int16).
        colour: ``"ycbcr"`` (JFIF), ``"rgb"`` or ``"gray"`` (1 channel).
        transform: ``"dct2-ortho"``, the only one (recorded so a header can be checked).
        level_shift: subtracted before the DCT (128: signed coefficients, int8 at q >= 33).
        chroma: ``"4:4:4"`` (every channel at full resolution) or ``"4:2:0"`` (YCbCr only:
            Cb and Cr at half resolution in each direction, as JPEG by default; a block
            stores half the coefficients at full quality, :mod:`tessera.images.subsampling`).

    >>> FrequencyFormat(chroma="4:2:0").stored(63), FrequencyFormat().stored(63)
    (1536, 1024)
    """

    block: int = 32
    q: float = 50
    colour: str = "ycbcr"
    transform: str = "dct2-ortho"
    level_shift: int = 128
    chroma: str = "4:4:4"

    def __post_init__(self) -> None:
        if self.block not in BLOCKS:
            raise SchemaError(f"FrequencyFormat.block must be one of {BLOCKS} (32 as the "
                              f"paper), got {self.block!r}")
        if isinstance(self.q, bool) or not isinstance(self.q, (int, float)) or not self.q > 0:
            raise SchemaError(f"FrequencyFormat.q must be a number > 0 (50 as the paper), got "
                              f"{self.q!r}")
        if self.colour not in COLOURS:
            raise SchemaError(f"FrequencyFormat.colour must be one of {COLOURS}, got "
                              f"{self.colour!r}")
        if self.transform != "dct2-ortho":
            raise SchemaError(f"FrequencyFormat.transform {self.transform!r} is unknown; "
                              "'dct2-ortho' (orthonormal DCT-II) is the only one")
        if self.level_shift != 128:
            raise SchemaError("FrequencyFormat.level_shift is 128 for 8-bit images")
        if self.chroma not in CHROMA:
            raise SchemaError(f"FrequencyFormat.chroma must be one of {CHROMA}, got "
                              f"{self.chroma!r}")
        if self.chroma != "4:4:4" and self.colour != "ycbcr":
            raise SchemaError(f"FrequencyFormat.chroma={self.chroma!r} subsamples Cb and Cr: "
                              f"it needs colour='ycbcr', got colour={self.colour!r}")

    # -- geometry --------------------------------------------------------------------------
    @property
    def k_max(self) -> int:
        """Number of diagonals (``2 * block - 1``): the largest ``k``."""
        return 2 * self.block - 1

    def diagonal_size(self, d: int) -> int:
        """Coefficients on diagonal ``d``."""
        return min(d + 1, 2 * self.block - 1 - d)

    def kept(self, k: int) -> int:
        """Coefficients per block in ``Sf_k`` (``T(k)``; ``k(k+1)/2`` up to ``block``).

        >>> [FrequencyFormat().kept(k) for k in (1, 8, 32, 63)]
        [1, 36, 528, 1024]
        """
        k, b = self.check_k(k), self.block
        # diagonals 0..b-1 hold 1..b; those beyond, b-1 down to 2b-k (a decode asks per chunk)
        return k * (k + 1) // 2 if k <= b else b * (b + 1) // 2 + (3 * b - 1 - k) * (k - b) // 2

    @property
    def subsampled(self) -> bool:
        """Whether Cb and Cr are stored at half resolution (``chroma="4:2:0"``): the three
        planes then share each column (:mod:`tessera.images.subsampling`)."""
        return self.chroma == "4:2:0"

    def width(self, d: int) -> int:
        """Coefficients per block and stored channel of diagonal ``d``'s column: the
        diagonal's (:meth:`diagonal_size`), or in a 4:2:0 set luma's and the chroma
        corner's of all three planes."""
        if self.subsampled:
            return subsampling.column_width(self.block, d)
        return self.diagonal_size(d)

    def stored(self, k: int) -> int:
        """Coefficients per block and stored channel of diagonals ``0..k-1`` (:meth:`kept`
        in 4:4:4; all three planes' in 4:2:0): the last axis of concatenated columns.

        >>> FrequencyFormat(chroma="4:2:0").stored(8), FrequencyFormat().stored(8)
        (108, 36)
        """
        k = self.check_k(k)
        if self.subsampled:
            return subsampling.stored(self.block, k)
        return self.kept(k)

    @property
    def dtype(self) -> np.dtype[Any]:
        """int8 when every quantized coefficient of an 8-bit image fits it, else int16."""
        bound = self.block * 128 / self.q
        return np.dtype(np.int8) if round(bound) <= 127 else np.dtype(np.int16)

    def channels(self, image_channels: int) -> int:
        """The stored columns' channel axis for images of ``image_channels``: gray keeps
        one, 4:2:0 one (its three planes share each column)."""
        return 1 if self.colour == "gray" or self.subsampled else image_channels

    def check_k(self, k: Any) -> int:
        """``k`` as an int in ``1..k_max`` (``"all"`` is ``k_max``), or a clear error."""
        if k == "all":
            return self.k_max
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise InvalidTypeError(f"k must be an int in 1..{self.k_max} (or 'all'), got {k!r}")
        if not 1 <= int(k) <= self.k_max:
            raise InvalidArgumentError(f"k must be 1..{self.k_max} ({self.k_max} diagonals of "
                                       f"{self.block}x{self.block} blocks), got {k}")
        return int(k)

    def check_scale(self, scale: Any) -> int:
        """The output block edge ``m`` for ``scale = m / block`` (a power of two), or an
        error naming the choices."""
        choices = [self.block >> s for s in range(self.block.bit_length())]
        for m in choices:
            if scale == m / self.block:
                return m
        raise InvalidArgumentError(f"scale must be one of "
                                   f"{', '.join(f'{m}/{self.block}' for m in choices)}, got "
                                   f"{scale!r}")

    # -- encoding --------------------------------------------------------------------------
    def to_blocks(self, images: np.ndarray) -> np.ndarray:
        """Level-shifted values of ``(N, H, W, C)`` uint8 images in the format's colour, as
        blocks ``(N, C', H/b, W/b, b, b)`` float64."""
        x = check_images(images, self.block)
        values = x.astype(np.float64)
        if self.colour == "ycbcr":
            values = _colour(values, RGB_TO_YCBCR, shift_in=0.0, shift_out=(0.0, 128.0, 128.0))
        elif self.colour == "gray":
            values = _colour(values, RGB_TO_YCBCR[:1], 0.0, (0.0,))
        n, h, w, c = values.shape
        b = self.block
        blocks = values.reshape(n, h // b, b, w // b, b, c).transpose(0, 5, 1, 3, 2, 4)
        return np.ascontiguousarray(blocks) - self.level_shift

    def encode(self, images: np.ndarray) -> list[np.ndarray]:
        """The columns of ``(N, H, W, C)`` uint8 images: one array per diagonal ``d``,
        shape ``(N, C', H/b, W/b, n_d)`` of :attr:`dtype` (C-order: the layout measured best,
        one block's coefficients together)."""
        import scipy.fft

        x = check_images(images, self.block)
        n, h, w, _ = x.shape
        head = (n, self.channels(x.shape[-1]), h // self.block, w // self.block)
        out = [np.empty((*head, self.width(d)), self.dtype) for d in range(self.k_max)]
        order = (subsampling.stored_order(self.block) if self.subsampled
                 else _diagonal_order(self.block))
        info = np.iinfo(self.dtype)
        # ENCODE_CHUNK images at a time: the float64 work arrays are 16x the pixels' bytes
        for lo in range(0, n, ENCODE_CHUNK):
            coeffs = scipy.fft.dctn(self.to_blocks(x[lo:lo + ENCODE_CHUNK]), type=2,
                                    norm="ortho", axes=(-2, -1), overwrite_x=True)
            flat = coeffs.reshape(*coeffs.shape[:4], self.block * self.block)
            quantized = np.rint(flat / self.q)  # round half to even, as numpy
            if quantized.size and (quantized.min() < info.min or quantized.max() > info.max):
                raise InvalidArgumentError(f"coefficients exceed {self.dtype} at q={self.q}")
            if self.subsampled:  # the three planes of a block side by side, one channel
                quantized = np.moveaxis(quantized, 1, 3).reshape(*quantized.shape[:1], 1,
                                                                 *quantized.shape[2:4], -1)
            ordered = quantized[..., order].astype(self.dtype)
            start = 0
            for column in out:  # diagonal d is the next width(d) entries of the order
                column[lo:lo + ENCODE_CHUNK] = ordered[..., start:start + column.shape[-1]]
                start += column.shape[-1]
        return out

    # -- decoding --------------------------------------------------------------------------
    def coefficients(self, columns: Sequence[np.ndarray], size: int | None = None,
                     dtype: Any = np.float32) -> np.ndarray:
        """Dequantized coefficients ``(N, C', BY, BX, r, r)`` of the corner the first
        ``len(columns)`` diagonals fill inside the ``m x m`` corner (``m = size``, default the
        block; ``r = min(k, m)``: everything beyond it is zero; a 4:2:0 set's three planes,
        ``C' = 3``, the chroma zero beyond its corner)."""
        if not columns:
            raise InvalidArgumentError("decoding needs at least one diagonal (k >= 1)")
        k = self.check_k(len(columns))
        m = self.block if size is None else size
        r = min(k, m)
        head = columns[0].shape[:4]
        kk = min(k, 2 * r - 1)
        for d in range(kk):
            if np.shape(columns[d]) != (*head, self.width(d)):
                raise InvalidArgumentError(f"column {d} has shape {np.shape(columns[d])}, "
                                           f"expected {(*head, self.width(d))}")
        if self.subsampled:  # luma's r x r corner and the chroma planes' inside theirs
            cat = np.concatenate([*(np.asarray(c) for c in columns[:kk]),
                                  np.zeros((*head, 1), self.dtype)], axis=-1)[:, 0]
            luma, chroma = subsampling.plane_index(self.block, r, kk)
            rc = min(r, self.block // 2)
            planes3 = np.zeros((head[0], 3, *head[2:], r, r), dtype=dtype)
            planes3[:, 0] = cat[..., luma].reshape(*cat.shape[:3], r, r)
            planes3[:, 1:, ..., :rc, :rc] = np.moveaxis(
                cat[..., chroma].reshape(*cat.shape[:3], 2, rc, rc), 3, 1)
            planes3 *= self.q
            return planes3
        out = np.zeros((*head, r * r), dtype=dtype)
        for d in range(kk):
            col = np.asarray(columns[d])
            slots, targets = _corner_slots(self.block, r, d)
            out[..., targets] = col[..., slots]  # int8 -> float before scaling: no overflow
        out *= self.q
        return out.reshape(*head, r, r)

    def decode(self, columns: Sequence[np.ndarray], scale: float = 1.0,
               output_dtype: Any = np.uint8, decoder: str | None = None) -> np.ndarray:
        """Pixels ``(N, H*scale, W*scale, C)`` from the first ``len(columns)`` diagonals.

        ``scale = m / block`` reconstructs each block at ``m x m`` from its ``m x m`` corner
        (diagonals beyond ``2m - 1`` add nothing there). ``output_dtype`` uint8 (rounded,
        clipped) or a float dtype (values 0..255, not rounded). Work is float32, in chunks
        of images spread over the compute threads. ``decoder``: ``"compiled"`` (uint8
        pixels decoded block by block in compiled code, :mod:`tessera.images.kernel`: a
        few pixels in a million one level from :meth:`decode_reference`'s), ``"numpy"``
        (:mod:`tessera.images.decode`: bit-identical to :meth:`decode_reference`'s) or
        ``None``, as :class:`~tessera.config.ImageConfig` says (compiled when built).

        >>> import numpy as np
        >>> fmt = FrequencyFormat()
        >>> cols = fmt.encode(np.full((1, 32, 32, 3), 200, np.uint8))
        >>> fmt.decode(cols[:1], decoder="numpy")[0, 0, 0].tolist()
        [200, 200, 200]
        """
        return decode(self, columns, self.check_scale(scale), output_dtype, decoder)

    def decode_reference(self, columns: Sequence[np.ndarray], scale: float = 1.0,
                         output_dtype: Any = np.uint8) -> np.ndarray:
        """:meth:`decode` written plainly, over the whole batch at once (the reference
        the fast decode is checked against, bit for bit)."""
        m = self.check_scale(scale)
        k = self.check_k(len(columns))
        c = self.coefficients(columns[:min(k, 2 * m - 1)], size=m)  # (N, C', BY, BX, r, r)
        h = self.block // 2
        if self.subsampled and c.shape[-1] > h:  # planes transformed apart, colour after
            pixels = planes(np.ascontiguousarray(c[:, :1]),
                            np.ascontiguousarray(c[:, 1:, :, :, :h, :h]), m)
        else:
            if self.colour == "ycbcr":
                # YCbCr -> RGB on the few coefficients kept (linear; the blocks hold M (rgb -
                # 128): M's luma row sums to 1 and its chroma rows to 0, so no offset is left).
                c = to_rgb(c)
            pixels = inverse_dct_raster(c, m)  # (N, C, BY, m, BX * m)
        if m != self.block:  # an m-point IDCT of b-point coefficients (x 1 changes nothing)
            pixels *= np.float32(m / self.block)
        pixels += np.float32(self.level_shift)
        n, ch, by = pixels.shape[:3]
        img = pixels.transpose(0, 2, 3, 4, 1).reshape(n, by * m, -1, ch)
        if np.dtype(output_dtype) != np.uint8:
            out: np.ndarray = img.astype(output_dtype)
            return out
        np.rint(img, out=img)
        np.clip(img, 0, 255, out=img)
        return img.astype(np.uint8)


@functools.lru_cache(maxsize=512)
def _corner_slots(block: int, r: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Of diagonal ``d``'s entries (``i`` ascending), which lie in the ``r x r`` corner, and
    their flat positions there."""
    rows = range(max(0, d - block + 1), min(d, block - 1) + 1)
    pairs = [(s, i * r + (d - i)) for s, i in enumerate(rows) if i < r and d - i < r]
    slots = np.array([p[0] for p in pairs], dtype=np.intp)
    targets = np.array([p[1] for p in pairs], dtype=np.intp)
    return slots, targets


def check_images(images: Any, block: int) -> np.ndarray:
    """``images`` as an ``(N, H, W, 3)`` uint8 array with H and W multiples of ``block``, or
    a ``ValueError`` that says how to get there."""
    x = np.asarray(images)
    if x.dtype != np.uint8:
        raise InvalidArgumentError(f"image columns store 8-bit images; got {x.dtype}: "
                                   "convert with (x * 255).round().astype(np.uint8)")
    if x.ndim != 4 or x.shape[-1] != 3:
        raise InvalidArgumentError(f"images must be (N, H, W, 3) uint8 RGB, got shape "
                                   f"{x.shape} (CHW? transpose to HWC; RGBA or palette "
                                   "images: .convert('RGB'))")
    if x.shape[1] % block or x.shape[2] % block:
        raise InvalidArgumentError(f"image height and width must be multiples of {block}, got "
                                   f"{x.shape[1]}x{x.shape[2]}")
    return x


def _colour(values: np.ndarray, matrix: np.ndarray, shift_in: float,
            shift_out: Sequence[float]) -> np.ndarray:
    out: np.ndarray = (values - shift_in) @ matrix.T + np.asarray(shift_out)
    return out


def psnr(reference: np.ndarray, image: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB of 8-bit ``image`` against ``reference``."""
    a = np.asarray(reference, dtype=np.float64)
    b = np.asarray(image, dtype=np.float64)
    mse = float(np.mean((a - b) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)
