"""The compiled decode of image columns, and the choice between it and the numpy decode.

:mod:`tessera.images.decode` turns stored diagonals into pixels with numpy: one pass over a
chunk of images per step (gather, colour, two matrix products, rounding, the interleaved
write). The compiled decode (``tessera.images._kernel``, C built with the package) makes
all of them per block, in cache: the block's coefficients read in place from each
diagonal's array, gathered into the kept corner, dequantized, colour-converted,
inverse-transformed with even/odd butterflies (a third of the matrix products'
multiply-adds at a 32-point block), rounded, clipped and written, with the GIL released so
that the compute threads run it side by side.

Pixels equal the numpy decode's except where the float arithmetic's order rounds a value
that lies within a hair of a half the other way: those differ by one level (a few pixels
in a million, measured by the tests and reported in the image guide). Float outputs
(``output_dtype`` not uint8) always take the numpy decode.

Which decode runs is :class:`~tessera.config.ImageConfig`'s ``decoder``
(``TESSERA_IMAGES_DECODER``): ``"auto"`` (the compiled one when it was built, else numpy),
``"compiled"`` (an error when it was not built) or ``"numpy"``.

>>> import numpy as np
>>> from tessera.images import FrequencyFormat
>>> fmt = FrequencyFormat()
>>> img = np.random.default_rng(1).integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
>>> cols = fmt.encode(img)
>>> if available():
...     fast = np.empty((2, 64, 64, 3), np.uint8)
...     decode_into(fmt, cols, 63, 32, fast, 0, 2)
...     reference = fmt.decode_reference(cols)
...     assert np.abs(fast.astype(int) - reference).max() <= 1
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Literal, Protocol

import numpy as np

from tessera.config import ImageConfig
from tessera.errors import ConfigError, InvalidArgumentError
from tessera.images.subsampling import plane_index
from tessera.images.transform import _ycbcr_to_rgb32, dct_matrix, gather_index

Decoder = Literal["compiled", "numpy"]


@functools.cache
def _module() -> ModuleType | str:
    """The compiled module, or why it cannot be imported."""
    try:
        import tessera.images._kernel as _kernel  # the compiled module, not the package
    except ImportError as err:
        return (f"the compiled decode was not built ({err}); reinstall Tessera where a C "
                "compiler is found (`pip install -e .` or `make install` in a clone)")
    module: ModuleType = _kernel
    return module


def available() -> bool:
    """Whether the compiled decode was built and imports."""
    return not isinstance(_module(), str)


def why_unavailable() -> str | None:
    """Why the compiled decode is not available (``None`` when it is)."""
    found = _module()
    return found if isinstance(found, str) else None


@functools.cache
def configured() -> Decoder:
    """The decode reads use, from :class:`~tessera.config.ImageConfig`'s ``decoder`` (read
    once per process; :func:`reset` reads it again)."""
    wanted = ImageConfig.from_env().decoder
    if wanted == "numpy":
        return "numpy"
    if available():
        return "compiled"
    if wanted == "compiled":
        raise ConfigError(f"TESSERA_IMAGES_DECODER=compiled, but {why_unavailable()}")
    return "numpy"


def reset() -> None:
    """Forget the configured decode (the next decode reads the configuration again)."""
    configured.cache_clear()


def uses_compiled(output_dtype: Any, decoder: str | None = None,
                  source_dtype: Any = np.int8) -> bool:
    """Whether a decode of ``source_dtype`` coefficients to ``output_dtype`` runs compiled:
    ``decoder`` (``"compiled"``, ``"numpy"``, or ``None`` for :func:`configured`), uint8
    pixels and the format's int8 or int16 coefficients (others, such as coefficients a
    caller changed into floats, take the numpy decode)."""
    chosen = configured() if decoder is None else decoder
    if chosen not in ("compiled", "numpy"):
        raise InvalidArgumentError(f"decoder must be 'compiled' or 'numpy', got {chosen!r}")
    if chosen == "compiled" and not available():
        raise ConfigError(f"the compiled decode was asked for, but {why_unavailable()}")
    return (chosen == "compiled" and np.dtype(output_dtype) == np.uint8
            and np.dtype(source_dtype) in (np.dtype(np.int8), np.dtype(np.int16)))


class Format(Protocol):
    """What the compiled decode uses of a
    :class:`~tessera.images.frequency.FrequencyFormat`."""

    @property
    def block(self) -> int: ...
    @property
    def q(self) -> float: ...
    @property
    def colour(self) -> str: ...
    @property
    def level_shift(self) -> int: ...
    @property
    def subsampled(self) -> bool: ...
    def stored(self, k: int) -> int: ...
    def width(self, d: int) -> int: ...


@functools.lru_cache(maxsize=256)
def _tables(block: int, subsampled: bool, rgb: bool, channels: int, k: int, m: int,
            total: int, widths: tuple[int, ...],
            ) -> tuple[tuple[int, ...], tuple[int, ...], np.ndarray, np.ndarray, int]:
    """Per output plane its stored channel and corner edge; every plane's gather (int32,
    column-major, one plane after another) as the part of ``widths`` and the coefficient
    of the block in it each entry reads (:func:`_sources`; ``total``, the coefficients per
    block of diagonals ``0..k-1``, is the zero slot); and the colour mode (0 none, 1 on
    coefficients, 2 on pixels)."""
    r = min(k, m)
    chans: tuple[int, ...]
    rs: tuple[int, ...]
    if subsampled:
        luma, chroma = plane_index(block, r, k)
        rc = min(r, block // 2)
        index = np.concatenate([luma, chroma.reshape(-1)])
        chans, rs = (0, 0, 0), (r, rc, rc)
        mix = (1 if rc == r else 2) if rgb else 0
    else:
        chans, rs = tuple(range(channels)), (r,) * channels
        index = np.concatenate([gather_index(block, r, k)] * channels)
        mix = 1 if rgb else 0
    if int(index.max(initial=0)) > total or total > 3 * block * block:
        raise AssertionError("a gather reaches past the block's coefficients")  # pragma: no cover
    # each plane's corner column-major: the kernel gathers it transposed, row by row
    table = np.concatenate([np.asarray(plane).reshape(edge, edge).T.reshape(-1)
                            for plane, edge in zip(np.split(index, np.cumsum(
                                [e * e for e in rs])[:-1]), rs, strict=True)])
    part_of, offset = _sources(table, widths)
    return chans, rs, part_of, offset, mix


@functools.lru_cache(maxsize=8)
def _dct32(m: int) -> np.ndarray:
    matrix = np.ascontiguousarray(dct_matrix(m).astype(np.float32))
    matrix.setflags(write=False)
    return matrix


def _sources(at: np.ndarray, widths: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Where each entry of a gather into concatenated diagonals (``at``; the sum of
    ``widths`` is the zero slot) lies among parts of ``widths``: the part (``len(widths)``
    for the zero slot) and the coefficient of the block in it, int32."""
    starts = np.concatenate([[0], np.cumsum(widths)])
    part = np.searchsorted(starts, at, side="right").astype(np.int32) - 1
    zero = at >= starts[-1]
    part[zero] = len(widths)
    offset = np.where(zero, 0, at - starts[np.minimum(part, len(widths) - 1)]).astype(np.int32)
    part.setflags(write=False)
    offset.setflags(write=False)
    return part, offset


def decode_into(fmt: Format, source: np.ndarray | Sequence[np.ndarray], k: int, m: int,
                out: np.ndarray, lo: int, hi: int) -> None:
    """Pixels of images ``lo..hi-1`` at block edge ``m`` from diagonals ``0..k-1`` of
    ``source`` (one array ``(N, C, BY, BX, >= T(k))`` of them concatenated, or one array
    per diagonal, at least ``k``) into ``out[lo:hi]`` (uint8 ``(N, BY*m, BX*m, 3 or C)``,
    C-contiguous), compiled; ``k`` at most ``2m - 1``. Shapes are checked here, so the
    compiled code only reads and writes inside the arrays it is given."""
    module = _module()
    if isinstance(module, str):
        raise ConfigError(module)
    listed = not isinstance(source, np.ndarray)
    parts: list[np.ndarray] = [source] if isinstance(source, np.ndarray) else list(source[:k])
    head = tuple(parts[0].shape[:4])
    n, ch, by, bx = head
    total = fmt.stored(k)
    widths = tuple(int(p.shape[-1]) for p in parts)
    if ((widths != tuple(fmt.width(d) for d in range(k)) if listed else widths[0] < total)
            or any(p.shape[:4] != head or p.ndim != 5 for p in parts)
            or any(p.dtype != parts[0].dtype for p in parts)
            or parts[0].dtype not in (np.dtype(np.int8), np.dtype(np.int16))):
        raise InvalidArgumentError(f"columns of shapes {[p.shape for p in parts]} cannot hold "
                                   f"diagonals 0..{k - 1} ({total} coefficients per block)")
    chans, rs, part_of, offset, mix = _tables(fmt.block, fmt.subsampled,
                                              fmt.colour == "ycbcr", ch, k, m, total, widths)
    planes = len(chans)
    if (out.dtype != np.uint8 or not out.flags.c_contiguous
            or out.shape != (n, by * m, bx * m, planes) or not 0 <= lo <= hi <= n):
        raise InvalidArgumentError(f"out must be a C-contiguous uint8 array of shape "
                                   f"{(n, by * m, bx * m, planes)}, got {out.dtype} "
                                   f"{out.shape}")
    module.decode_u8([np.ascontiguousarray(p) for p in parts], widths, parts[0].dtype.itemsize,
                     ch, by, bx, chans, rs, part_of, offset, float(np.float32(fmt.q)), mix,
                     _ycbcr_to_rgb32(), _dct32(m), m, int(m != fmt.block),
                     float(np.float32(m / fmt.block)), float(fmt.level_shift), out, lo, hi)
