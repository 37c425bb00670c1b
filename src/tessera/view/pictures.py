"""Pictures for the viewer: values through a colour map into RGB, PNG bytes, histograms.

Colour maps form a registry (:data:`COLOUR_MAPS`: name -> function of ``t`` in [0, 1]); each
is sampled once into a 256-entry table and a value ``v`` maps to entry
``round((v - vmin) / (vmax - vmin) * 255)`` clipped to [0, 255] (entry 0 when
``vmax == vmin``); values that are not finite are drawn black.

>>> import numpy as np
>>> colour(np.array([[0.0, 5.0, 10.0]]), 0.0, 10.0, "gray")[0, :, 0].tolist()
[0, 128, 255]
>>> png(np.zeros((2, 2, 3), np.uint8))[:8]
b'\\x89PNG\\r\\n\\x1a\\n'
"""

from __future__ import annotations

import base64
import functools
import io
from collections.abc import Callable

import numpy as np

from tessera.errors import InvalidArgumentError


def _gray(t: np.ndarray) -> np.ndarray:
    return np.stack([t, t, t], axis=-1)


def _cubehelix(t: np.ndarray) -> np.ndarray:
    """D. A. Green's cubehelix ("A colour scheme for the display of astronomical intensity
    images", Bulletin of the Astronomical Society of India, 2011): start 0.5, rotations
    -1.5, hue 1.2; brightness rises monotonically, so it reads in gray too."""
    a = 1.2 * t * (1 - t) / 2
    phi = 2 * np.pi * (0.5 / 3 - 1.5 * t)
    cos, sin = np.cos(phi), np.sin(phi)
    rgb = np.stack([t + a * (-0.14861 * cos + 1.78277 * sin),
                    t + a * (-0.29227 * cos - 0.90649 * sin),
                    t + a * (1.97294 * cos)], axis=-1)
    return np.asarray(np.clip(rgb, 0.0, 1.0))


def _diverging(t: np.ndarray) -> np.ndarray:
    """Blue through white to red, linear in each half (for values around a centre)."""
    blue, white, red = np.array([0.23, 0.30, 0.75]), np.ones(3), np.array([0.70, 0.02, 0.15])
    lo = blue + (white - blue) * np.clip(t * 2, 0, 1)[..., None]
    hi = white + (red - white) * np.clip(t * 2 - 1, 0, 1)[..., None]
    out: np.ndarray = np.where((t < 0.5)[..., None], lo, hi)
    return out


#: Colour maps by name: each takes ``t`` in [0, 1] (any shape) to RGB in [0, 1] (a last axis
#: of 3). The first is the default.
COLOUR_MAPS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "gray": _gray,
    "cubehelix": _cubehelix,
    "diverging": _diverging,
}


@functools.cache
def table(name: str) -> np.ndarray:
    """The 256 x 3 uint8 table of colour map ``name``."""
    if name not in COLOUR_MAPS:
        raise InvalidArgumentError(f"no colour map {name!r}: the viewer has "
                                   f"{', '.join(COLOUR_MAPS)}")
    rgb = COLOUR_MAPS[name](np.linspace(0.0, 1.0, 256))
    out: np.ndarray = np.rint(rgb * 255).astype(np.uint8)
    return out


def as_real(values: np.ndarray) -> np.ndarray:
    """``values`` as float64 (complex as magnitude, booleans as 0 and 1)."""
    if np.iscomplexobj(values):
        magnitude: np.ndarray = np.abs(values)
        return magnitude
    if values.dtype.kind not in "biuf":
        raise InvalidArgumentError(f"cannot draw values of dtype {values.dtype}")
    return values.astype(np.float64, copy=False)


def value_range(values: np.ndarray) -> tuple[float, float]:
    """The finite minimum and maximum of ``values`` ((0, 0) when none is finite)."""
    if values.dtype.kind in "biu":
        return (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
    real = as_real(values)
    finite = real[np.isfinite(real)]
    return (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)


def levels(values: np.ndarray, vmin: float, vmax: float,
           ) -> tuple[np.ndarray, np.ndarray | None]:
    """Each value's entry in a colour table (uint8, the module docstring's rule), and the
    mask of values that are not finite (``None`` for integer values, which always are)."""
    real = as_real(values)
    bad = None if values.dtype.kind in "biu" else ~np.isfinite(real)
    span = vmax - vmin
    if span <= 0:
        return np.zeros(real.shape, np.uint8), bad
    scaled = (real - vmin) * (255 / span)  # one temporary, then in place
    if bad is not None:
        scaled[bad] = 0
    np.rint(scaled, out=scaled)
    np.clip(scaled, 0, 255, out=scaled)
    return scaled.astype(np.uint8), bad


def colour(values: np.ndarray, vmin: float, vmax: float, name: str = "gray",
           ) -> np.ndarray:
    """``values`` (any shape) as uint8 RGB (a last axis of 3) through colour map ``name``
    between ``vmin`` and ``vmax``."""
    return paint(*levels(values, vmin, vmax), name)


def paint(level: np.ndarray, bad: np.ndarray | None, name: str) -> np.ndarray:
    """Colour-table entries ``level`` as RGB through colour map ``name``; ``bad`` black."""
    rgb: np.ndarray = table(name)[level]
    if bad is not None:
        rgb[bad] = 0
    return rgb


def png(pixels: np.ndarray) -> bytes:
    """PNG bytes of uint8 ``pixels``: (H, W) gray, (H, W, 3) RGB or (H, W, 4) RGBA."""
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(out, format="PNG", compress_level=1)
    return out.getvalue()


def data_url(pixels: np.ndarray) -> str:
    """``pixels`` as a ``data:image/png;base64,...`` URL for an ``<img>``."""
    return "data:image/png;base64," + base64.b64encode(png(pixels)).decode()


def histogram(level: np.ndarray, bins: int = 64) -> list[int]:
    """Counts of colour-table entries ``level`` (the values drawn, as :func:`levels` gives
    them) in ``bins`` equal bins of the 256 entries: values below the range count in the
    first bin, above it in the last.

    >>> histogram(levels(np.array([0.0, 1.0, 1.0, 7.0]), 0.0, 1.0)[0], bins=2)
    [1, 3]
    """
    counts: np.ndarray = np.bincount(level.reshape(-1) // (256 // bins), minlength=bins)
    return [int(c) for c in counts]
