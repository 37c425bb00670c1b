"""Streaming appends to an image set (:class:`ImageWriter`, from
:meth:`~tessera.images.columns.ImageColumns.writer`) and the checks of what an append is
given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from tessera.errors import InvalidArgumentError
from tessera.images.header import SetHeader
from tessera.images.inputs import Batch, prepare


class Appendable(Protocol):
    """What a writer needs of its image set (:class:`~tessera.images.ImageColumns`)."""

    size: tuple[int, int]
    header: SetHeader

    def _write(self, batch: Batch, labels: np.ndarray | None) -> np.ndarray: ...


class ImageWriter:
    """Streaming appends to an image set (:meth:`ImageColumns.writer`)."""

    def __init__(self, cols: Appendable, flush_images: int) -> None:
        if isinstance(flush_images, bool) or not isinstance(flush_images, int) \
                or flush_images < 1:
            raise InvalidArgumentError(f"flush_images must be a positive number of images, "
                                       f"got {flush_images!r}")
        self.cols, self.flush_images = cols, flush_images
        self._waiting: list[tuple[Batch, np.ndarray | None]] = []
        self._count = 0
        self._ids: list[np.ndarray] = []

    @property
    def ids(self) -> np.ndarray:
        """Ids of the images stored so far (waiting images have none yet)."""
        return np.concatenate(self._ids) if self._ids else np.zeros(0, np.int64)

    def append(self, images: Any, labels: Sequence[int] | np.ndarray | None = None) -> None:
        """Queue ``images`` (checked and fitted now, so a bad image fails here) and store
        the queue once ``flush_images`` are waiting."""
        batch = prepare(images, self.cols.size, self.cols.header.fit)
        self._waiting.append((batch, checked_labels(labels, len(batch))))
        self._count += len(batch)
        if self._count >= self.flush_images:
            self.flush()

    def flush(self) -> None:
        """Store the waiting images as one append."""
        if not self._waiting:
            return
        waiting, self._waiting, self._count = self._waiting, [], 0
        batch = Batch.concat([b for b, _ in waiting])
        labels = None
        if any(lab is not None for _, lab in waiting):
            labels = np.concatenate([np.full(len(b), -1, np.int32) if lab is None else lab
                                     for b, lab in waiting])
        self._ids.append(self.cols._write(batch, labels))

    def __enter__(self) -> ImageWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()  # images given before an error are stored too: nothing given is lost


def checked_labels(labels: Sequence[int] | np.ndarray | None, n: int) -> np.ndarray | None:
    """``labels`` as int32 (one per image; -1: none), or an error naming what is wrong."""
    if labels is None:
        return None
    arr = np.asarray(labels)
    if arr.shape != (n,) or (arr.size and arr.dtype.kind not in "iu"):
        raise InvalidArgumentError(f"labels must be {n} integers (one per image), got shape "
                                   f"{arr.shape} of {arr.dtype}")
    if arr.size and (arr.min() < -1 or arr.max() > np.iinfo(np.int32).max):
        raise InvalidArgumentError("labels must be in -1 (none) .. 2**31-1")
    return arr.astype(np.int32)
