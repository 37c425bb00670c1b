"""A small store holding one of everything the viewer shows, for its tests, its screenshots
and its benchmark: a dense 3-D array written in two commits, a sparse array, a tensor table
(dense and sparse tensors), an image set of synthetic pictures and a tessera.h5 file.

>>> import tempfile
>>> sample_store(tempfile.mkdtemp()).images.shape
(12, 64, 64, 3)
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

import tessera


@dataclasses.dataclass
class SampleStore:
    """What :func:`sample_store` wrote: the values, to compare pages against."""

    url: str
    #: The dense array ``volume`` (int32, 3 x 300 x 400, tiles 1 x 64 x 64) as it is now,
    #: and as it was after its first commit (``first_marker``).
    volume: np.ndarray
    volume_before: np.ndarray
    first_marker: int
    #: The image set's original pictures (N, 64, 64, 3) uint8.
    images: np.ndarray


def pictures(n: int, size: int = 64, seed: int = 0) -> np.ndarray:
    """``n`` synthetic RGB pictures: smooth gradients, a disc and a bar (so that detail
    lost at low k shows)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size] / size
    out = np.empty((n, size, size, 3), np.uint8)
    for i in range(n):
        cy, cx, r = rng.uniform(0.3, 0.7), rng.uniform(0.3, 0.7), rng.uniform(0.1, 0.25)
        disc = ((y - cy) ** 2 + (x - cx) ** 2) < r ** 2
        bar = (np.abs(x - rng.uniform(0.2, 0.8)) < 0.03)
        base = np.stack([y, x, 1 - y * x], axis=-1) * rng.uniform(120, 220)
        base[disc] = rng.uniform(0, 255, 3)
        base[bar] = 250
        out[i] = np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8)
    return out


def sample_store(url: str) -> SampleStore:
    """Write the sample store at ``url`` (a folder or a store URL that holds nothing yet)."""
    root = url.rstrip("/")
    z, y, x = np.mgrid[0:3, 0:300, 0:400]
    first = ((x + 2 * y + 100 * z) % 997).astype(np.int32)
    arr = tessera.from_numpy(f"{root}/volume", first, tile=(1, 64, 64))
    marker = int(arr.history()[-1].marker)
    time.sleep(0.002)  # the second commit's time differs from the first's
    patch = np.full((3, 100, 150), -50, np.int32)
    arr.write(patch, origin=(0, 100, 120))
    now = first.copy()
    now[:, 100:200, 120:270] = -50

    schema = tessera.ArraySchema([tessera.Dim("y", (0, 999), 100), tessera.Dim("x", (0, 999), 100)],
                                 [tessera.Attr("v", "f4")], sparse=True)
    sparse = tessera.create_array(f"{root}/points", schema)
    rng = np.random.default_rng(1)
    ys, xs = rng.integers(0, 1000, 400), rng.integers(0, 1000, 400)
    sparse.write_cells((ys, xs), rng.uniform(0, 1, 400).astype(np.float32))

    table = tessera.create_table(f"{root}/tensors")
    table.write("weights/dense", np.sin(np.arange(64 * 80).reshape(64, 80) / 50).astype(
        np.float32))
    table.write("weights/vector", np.arange(10, dtype=np.float64))
    mask = rng.uniform(size=(40, 50)) < 0.05
    table.write("weights/sparse", np.where(mask, 1.5, 0).astype(np.float32), format="coo")

    images = pictures(12)
    cols = tessera.create_images(f"{root}/photos", size=(64, 64), group=4)
    cols.append(images, labels=list(range(12)))

    from tessera.h5 import File

    with File(f"{root}/legacy.h5", "w") as f:
        f.create_dataset("scans/first", data=np.arange(48 * 48, dtype=np.float64).reshape(48, 48))
    return SampleStore(url, now, first, marker, images)
