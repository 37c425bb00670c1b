"""What an image set accepts: arrays, lists of arrays, PIL images and paths, brought to the
set's size by its ``fit``:

- ``"error"``: any other size is refused, naming the image and both sizes;
- ``"pad"``: images no larger than the size are padded at the bottom and right by
  replicating their edge (libjpeg's choice: zero padding would put a hard edge, i.e. high
  frequencies, into the last blocks); the true size is kept, and reads can cut it back;
- ``"resize"``: the short side is scaled to the size (bicubic) and the image centre-cropped.

>>> import numpy as np
>>> batch = prepare(np.zeros((2, 20, 30, 3), np.uint8), (32, 32), "pad")
>>> batch.pixels.shape, batch.heights.tolist(), batch.widths.tolist()
((2, 32, 32, 3), [20, 20], [30, 30])
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from tessera.errors import InvalidArgumentError
from tessera.images.frequency import check_images

FITS = ("error", "pad", "resize")


@dataclasses.dataclass(frozen=True)
class Batch:
    """Images at the set's size and their true sizes (smaller than it only with ``pad``)."""

    pixels: np.ndarray  # (N, H, W, 3) uint8
    heights: np.ndarray  # (N,) uint16
    widths: np.ndarray  # (N,) uint16

    def __len__(self) -> int:
        return len(self.pixels)

    @classmethod
    def concat(cls, batches: list[Batch]) -> Batch:
        """One batch of the images of ``batches``, in order."""
        return cls(np.concatenate([b.pixels for b in batches]),
                   np.concatenate([b.heights for b in batches]),
                   np.concatenate([b.widths for b in batches]))


def prepare(images: Any, size: tuple[int, int], fit: str) -> Batch:
    """``images`` as one :class:`Batch` of ``size``: an ``(N, h, w, 3)`` uint8 array, or a
    list of ``(h, w, 3)`` arrays, PIL images or paths of image files (opened with Pillow,
    converted to RGB); a :class:`Batch` already fitted to ``size`` passes as is."""
    if isinstance(images, Batch) and images.pixels.shape[1:3] == size:
        return images
    if isinstance(images, (list, tuple)):
        if not images:
            raise InvalidArgumentError("append got no images")
        fitted = [_fitted(_as_array(item, i), i, size, fit) for i, item in enumerate(images)]
        pixels = np.stack([f[0] for f in fitted])
        heights = np.array([f[1] for f in fitted], np.uint16)
        widths = np.array([f[2] for f in fitted], np.uint16)
        return Batch(pixels, heights, widths)
    batch = check_images(images, 1)
    if not len(batch):
        raise InvalidArgumentError("append got no images")
    if batch.shape[1:3] == size:
        n = len(batch)
        return Batch(batch, np.full(n, size[0], np.uint16), np.full(n, size[1], np.uint16))
    fitted = [_fitted(img, i, size, fit) for i, img in enumerate(batch)]
    return Batch(np.stack([f[0] for f in fitted]), np.array([f[1] for f in fitted], np.uint16),
                 np.array([f[2] for f in fitted], np.uint16))


def _as_array(item: Any, index: int) -> np.ndarray:
    """One image as ``(h, w, 3)`` uint8 (paths and PIL images converted to RGB)."""
    if isinstance(item, (str, Path)):
        from PIL import Image

        try:
            with Image.open(item) as opened:
                item = opened.convert("RGB")
        except OSError as err:
            raise UnreadableImageError(f"image {index} ({item}) cannot be read: {err}",
                                       str(err)) from None
    if type(item).__module__.startswith("PIL."):
        item = item.convert("RGB")
    array = np.asarray(item)
    if array.dtype != np.uint8:
        raise InvalidArgumentError(f"image {index}: image columns store 8-bit images; got "
                                   f"{array.dtype}: convert with "
                                   "(x * 255).round().astype(np.uint8)")
    if array.ndim != 3 or array.shape[-1] != 3:
        raise InvalidArgumentError(f"image {index} must be (H, W, 3) uint8 RGB, got shape "
                                   f"{array.shape} (CHW? transpose to HWC; RGBA or palette "
                                   "images: .convert('RGB'))")
    return array


class UnreadableImageError(InvalidArgumentError):
    """An image file Pillow cannot read; ``reason`` is Pillow's word."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class SizeMismatchError(InvalidArgumentError):
    """An image's size does not fit the set's by its ``fit`` rule: ``found`` and ``size``
    are (height, width)."""

    def __init__(self, message: str, found: tuple[int, int], size: tuple[int, int],
                 fit: str) -> None:
        super().__init__(message)
        self.found, self.size, self.fit = found, size, fit


def _fitted(array: np.ndarray, index: int, size: tuple[int, int], fit: str,
            ) -> tuple[np.ndarray, int, int]:
    """The image at ``size`` by ``fit``, and its true height and width."""
    h, w = array.shape[:2]
    if (h, w) == size:
        return array, h, w
    if fit == "resize":
        return resized(array, size), size[0], size[1]
    if fit == "pad":
        if h > size[0] or w > size[1]:
            raise SizeMismatchError(f"image {index} is {h}x{w}, larger than the set's "
                                    f"{size[0]}x{size[1]}: fit='pad' only pads (make the "
                                    "set with fit='resize' to scale images down)",
                                    (h, w), size, fit)
        return np.pad(array, ((0, size[0] - h), (0, size[1] - w), (0, 0)), mode="edge"), h, w
    raise SizeMismatchError(f"image {index} is {h}x{w}, the set holds {size[0]}x{size[1]} "
                            "(fit='error'; make the set with fit='resize' to scale and "
                            "centre-crop images, or fit='pad' to pad smaller ones)",
                            (h, w), size, fit)


def resized(array: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The image scaled (bicubic) so that it covers ``size``, then centre-cropped to it."""
    from PIL import Image

    h, w = array.shape[:2]
    scale = max(size[0] / h, size[1] / w)
    nh, nw = max(size[0], round(h * scale)), max(size[1], round(w * scale))
    img = Image.fromarray(array).resize((nw, nh), Image.Resampling.BICUBIC)
    top, left = (nh - size[0]) // 2, (nw - size[1]) // 2
    return np.asarray(img.crop((left, top, left + size[1], top + size[0])))
