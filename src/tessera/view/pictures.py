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
from typing import Any

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
    real = as_real(values)
    finite = real[np.isfinite(real)]
    return (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)


def colour(values: np.ndarray, vmin: float, vmax: float, name: str = "gray") -> np.ndarray:
    """``values`` (any shape) as uint8 RGB (a last axis of 3) through colour map ``name``
    between ``vmin`` and ``vmax``."""
    real = as_real(values)
    finite = np.isfinite(real)
    span = vmax - vmin
    scaled = np.zeros(real.shape) if span <= 0 else (np.where(finite, real, vmin) - vmin) / span
    index = np.clip(np.rint(scaled * 255), 0, 255).astype(np.intp)
    rgb: np.ndarray = table(name)[index]
    rgb[~finite] = 0
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


def histogram(values: np.ndarray, vmin: float, vmax: float, bins: int = 64) -> dict[str, Any]:
    """Counts of the finite ``values`` in ``bins`` equal bins between ``vmin`` and ``vmax``.

    >>> histogram(np.array([0.0, 1.0, 1.0]), 0.0, 1.0, bins=2)["counts"]
    [1, 2]
    """
    real = as_real(values)
    finite = real[np.isfinite(real)]
    hi = vmax if vmax > vmin else vmin + 1.0
    counts, edges = np.histogram(finite, bins=bins, range=(vmin, hi))
    return {"counts": counts.tolist(), "edges": [float(edges[0]), float(edges[-1])]}
