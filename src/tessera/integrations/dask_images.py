"""Dask arrays over image columns (import :func:`from_images` from :mod:`tessera.dask`):
pixels ``(N, H*scale, W*scale, 3)`` uint8 or coefficients ``(N, C, BY, BX, T(k))`` int8 of
every image of a set, read at ``k`` diagonals, chunked by the set's groups (a chunk's images
come in one request per group), each task a read in whichever process runs it (the source
is picklable and pinned to the set as it was when the dask array was made).

>>> import numpy as np, tempfile
>>> from tessera.images import ImageColumns
>>> url = "file://" + tempfile.mkdtemp() + "/im"
>>> cols = ImageColumns.create(url, size=(32, 32), group=2)
>>> _ = cols.append(np.full((5, 32, 32, 3), 100, np.uint8))
>>> d = from_images(url, k=1)
>>> d.shape, d.chunks[0], int(d[1:4].mean().compute())
((5, 32, 32, 3), (2, 2, 1), 100)
"""

from __future__ import annotations

import functools
import time
from typing import Any

import dask.array as da
import numpy as np

from tessera.errors import InvalidArgumentError
from tessera.images import ImageColumns
from tessera.integrations.handle import PerProcess
from tessera.when import At, at_ns, renamed


class ImageSource:
    """What ``dask.array.from_array`` slices: every image of a set at one ``k``.

    >>> import numpy as np, tessera
    >>> cols = tessera.create_images("memory://doc-image-source", size=(32, 32))
    >>> _ = cols.append(np.zeros((2, 32, 32, 3), np.uint8))
    >>> at = int(cols.history()[-1].marker)
    >>> ImageSource("memory://doc-image-source", 4, "pixels", 1.0, at, {}).shape
    (2, 32, 32, 3)
    """

    def __init__(self, url: str, k: int | str, output: str, scale: float, timestamp: int,
                 storage_options: dict[str, Any]) -> None:
        self.url, self.k, self.output, self.scale = url, k, output, scale
        self.timestamp, self.storage_options = timestamp, storage_options
        self._cols = PerProcess(functools.partial(  # reopened where a task runs
            ImageColumns.open, url, at=timestamp, storage_options=storage_options))
        cols = self._columns()
        self.ids = np.asarray(cols.ids(), dtype=np.int64)
        first = cols.read(self.ids[:1], k=k, output=output, scale=scale) if len(self.ids) \
            else None
        if first is None:
            raise InvalidArgumentError(f"image set {url} holds no images")
        self.shape = (len(self.ids), *first.shape[1:])
        self.ndim, self.dtype = len(self.shape), first.dtype
        self.group = cols.group

    def _columns(self) -> ImageColumns:
        return self._cols.get()

    def __getitem__(self, key: Any) -> np.ndarray:
        items = key if isinstance(key, tuple) else (key,)
        first, rest = items[0], items[1:]
        one = not isinstance(first, slice)  # an int: that image, its axis dropped
        ids = self.ids[first] if not one else self.ids[[int(first)]]
        if not len(ids):  # dask asks for empty blocks (meta)
            empty: np.ndarray = np.zeros((0, *self.shape[1:]), self.dtype)
            return empty[(slice(None), *rest)]
        out = self._columns().read(ids, k=self.k, output=self.output, scale=self.scale)
        picked: np.ndarray = out[(slice(None), *rest)]
        return picked[0] if one else picked


def from_images(url: str, k: int | str = 8, *, output: str = "pixels", scale: float = 1.0,
                at: At = None, chunks: int | None = None,
                storage_options: dict[str, Any] | None = None,
                timestamp: int | None = None) -> da.Array:
    """A dask array of every image of the set at ``url`` (in id order) at ``k`` diagonals:
    ``output="pixels"`` (uint8 ``(N, H*scale, W*scale, 3)``) or ``"coefficients"`` (int8
    ``(N, C, BY, BX, T(k))``); ``chunks`` images per chunk along the first axis (default:
    the set's group, so each task reads whole groups); pinned to the set as it is now (or
    as it was ``at``: a datetime, an ISO-8601 string or a commit time in ns; ``timestamp=``
    is its older name).

    >>> import numpy as np, tessera
    >>> cols = tessera.create_images("memory://doc-dask-images", size=(32, 32))
    >>> _ = cols.append(np.full((3, 32, 32, 3), 128, np.uint8))
    >>> x = from_images("memory://doc-dask-images", k=4)
    >>> x.shape, x.dtype
    ((3, 32, 32, 3), dtype('uint8'))
    """
    when = at_ns(renamed("timestamp", "at", timestamp, at))
    source = ImageSource(url, k, output, scale, time.time_ns() if when is None else when,
                         dict(storage_options or {}))
    lead = source.group if chunks is None else int(chunks)
    if lead < 1:
        raise InvalidArgumentError(f"chunks must be a positive number of images, got {chunks}")
    out: da.Array = da.from_array(  # type: ignore[no-untyped-call]
        source, chunks=(lead, *source.shape[1:]), asarray=False, fancy=False,
        name=f"tessera-images-{url}-{k}-{output}-{scale}-{source.timestamp}")
    return out
