"""A synthetic camera-trap dataset: RGB images with one animal each, its species, and
MegaDetector-style detections (nothing is downloaded; everything comes from a seed).

Each image (``3 x H x W`` uint8) is a textured, vignetted background of grass and shade
with one animal drawn as a filled ellipse whose colour, pattern and proportions depend on its
species. Box sizes follow a log-normal distribution of the box width around a quarter of the
image (as MegaDetector boxes on camera-trap images do: most animals are small, a few fill
the frame); birds are smaller. About one image in eight also gets a spurious low-confidence
detection, as real detector output has.

>>> ds = make_camera_trap_set(4, height=48, width=64, seed=1)
>>> ds.images.shape, ds.images.dtype, len(ds.megadetector()["images"])
((4, 3, 48, 64), dtype('uint8'), 4)
>>> ds.species_names[ds.labels[0]] in SPECIES
True
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tessera.errors import InvalidArgumentError

#: Species and how they look: mean RGB colour, width/height ratio, relative size.
SPECIES: dict[str, tuple[tuple[int, int, int], float, float]] = {
    "deer": ((150, 105, 60), 1.3, 1.0),
    "fox": ((205, 95, 30), 1.8, 0.8),
    "bird": ((70, 80, 150), 0.9, 0.45),
}


@dataclasses.dataclass
class CameraTrapSet:
    """Images, labels and boxes of a synthetic camera-trap set.

    Attributes:
        images: ``(N, 3, H, W)`` uint8.
        labels: ``(N,)`` species index per image (into :attr:`species_names`).
        boxes: ``(N, 4)`` normalised ``[x_min, y_min, width, height]`` of each animal.
        confidences: ``(N,)`` detector confidence of each animal's box.
        spurious: per image, an extra low-confidence box or ``None``.
    """

    images: np.ndarray
    labels: np.ndarray
    boxes: np.ndarray
    confidences: np.ndarray
    spurious: list[tuple[float, float, float, float] | None]
    species_names: tuple[str, ...] = tuple(SPECIES)

    def megadetector(self) -> dict[str, Any]:
        """The detections as MegaDetector's batch output format (category ``1``: animal)."""
        images = []
        for i in range(len(self.images)):
            dets = [{"category": "1", "conf": round(float(self.confidences[i]), 3),
                     "bbox": [round(float(v), 4) for v in self.boxes[i]]}]
            extra = self.spurious[i]
            if extra is not None:
                dets.append({"category": "1", "conf": 0.12,
                             "bbox": [round(float(v), 4) for v in extra]})
            images.append({"file": f"cam{i % 7:02d}/IMG_{i:05d}.JPG", "detections": dets})
        return {"info": {"detector": "synthetic", "format_version": "1.4"},
                "detection_categories": {"1": "animal", "2": "person", "3": "vehicle"},
                "images": images}


def make_camera_trap_set(n: int, *, height: int = 192, width: int = 256,
                         seed: int = 0) -> CameraTrapSet:
    """``n`` seeded synthetic camera-trap images with their boxes and species."""
    if n < 1 or height < 16 or width < 16:
        raise InvalidArgumentError(f"need n >= 1 and images of at least 16x16, got n={n}, "
                                   f"{height}x{width}")
    rng = np.random.default_rng(seed)
    names = tuple(SPECIES)
    labels = rng.integers(0, len(names), n)
    images = np.empty((n, 3, height, width), np.uint8)
    boxes = np.empty((n, 4))
    spurious: list[tuple[float, float, float, float] | None] = []
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    vignette = 1.0 - 0.35 * (((yy / height - 0.5) ** 2 + (xx / width - 0.5) ** 2) * 2)
    for i in range(n):
        colour, aspect, scale = SPECIES[names[labels[i]]]
        w = float(np.clip(rng.lognormal(np.log(0.25 * scale), 0.35), 0.05, 0.8))
        h = float(np.clip(w * width / height / aspect * rng.uniform(0.85, 1.15), 0.05, 0.9))
        x0, y0 = rng.uniform(0, 1 - w), rng.uniform(0, 1 - h)
        boxes[i] = (x0, y0, w, h)
        images[i] = _draw(rng, yy, xx, vignette, colour, (x0, y0, w, h), height, width)
        if rng.random() < 0.125:
            sx, sy = (float(v) for v in rng.uniform(0, 0.7, 2))
            sw, sh = (float(v) for v in rng.uniform(0.1, 0.3, 2))
            spurious.append((sx, sy, sw, sh))
        else:
            spurious.append(None)
    conf = rng.uniform(0.6, 0.99, n)
    return CameraTrapSet(images, labels, boxes, conf, spurious, names)


def _draw(rng: np.random.Generator, yy: np.ndarray, xx: np.ndarray, vignette: np.ndarray,
          colour: tuple[int, int, int], box: tuple[float, float, float, float],
          height: int, width: int) -> np.ndarray:
    """One image: grass and shade, then the animal's ellipse with a stripe pattern."""
    phase = rng.uniform(0, 2 * np.pi, 3)
    grass = np.stack([
        70 + 25 * np.sin(xx / 9 + phase[0]) * np.cos(yy / 13 + phase[1]),
        110 + 30 * np.sin(yy / 7 + phase[2]),
        55 + 20 * np.cos((xx + yy) / 11 + phase[0]),
    ])
    img = grass * vignette + rng.normal(0, 12, (3, height, width))
    x0, y0, w, h = box
    cx, cy = (x0 + w / 2) * width, (y0 + h / 2) * height
    rx, ry = max(w * width / 2, 1.0), max(h * height / 2, 1.0)
    inside = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1.0
    stripes = 1.0 + 0.15 * np.sin(xx / max(rx / 3, 1.0))
    for c in range(3):
        img[c][inside] = (colour[c] * stripes[inside]
                          + rng.normal(0, 10, int(inside.sum())))
    out: np.ndarray = np.clip(img, 0, 255).astype(np.uint8)
    return out
