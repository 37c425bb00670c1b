"""Image columns on the array engine: a set of same-size 8-bit images stored by frequency
(:mod:`tessera.images.frequency`), so that a reader fetches only the diagonals ``Sf_k`` it
asks for, one request per group of images.

Layout below the root::

    __images.json   create-only header: version, size, channels, the frequency format,
                    group, codec, fit
    coeffs/         a tile-major dense array: dims n (images; grows, tile = group), c, by, bx
                    (one tile each); attributes d00..d62, cell = the n_d coefficients of that
                    diagonal of one block (int8, or int16 below q = 33)
    meta/           a dense array over n (tile 4096): height, width (0: no image, a hole
                    left by padding an append to whole groups) and label (-1: none)

An append claims whole groups at the end of ``coeffs`` (the engine's create-only claims, so
appenders in many processes never collide), writes the coefficients there as one fragment
and the images' sizes and labels into ``meta`` at the same ids. ``Sf_k`` of a group is k
adjacent tiles in one object (tile-major): one request.

>>> import numpy as np
>>> cols = ImageColumns.create("memory://doc-images", size=(64, 64), group=4)
>>> images = np.random.default_rng(0).integers(0, 256, (6, 64, 64, 3), dtype=np.uint8)
>>> cols.append(images, labels=[0, 1, 0, 1, 0, 1]).tolist()
[0, 1, 2, 3, 4, 5]
>>> len(cols), cols.read([5, 0], k=8).shape, cols.labels([5, 0]).tolist()
(6, (2, 64, 64, 3), [1, 0])
"""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from tessera.array.array import Array, create_array, open_array
from tessera.errors import (
    ArrayExistsError,
    ArrayNotFoundError,
    InvalidArgumentError,
    ObjectExistsError,
    ObjectNotFoundError,
    SchemaError,
    SelectionError,
)
from tessera.format.schema import ArraySchema, Attr, Dim
from tessera.images.frequency import FrequencyFormat, check_images, psnr
from tessera.query.plan import Plan
from tessera.storage.blocking import Store, open_store

HEADER_KEY = "__images.json"
HEADER_VERSION = 1
META_TILE = 4096
META_CAPACITY = 2**40  # image ids the meta array can address (its domain; never scanned)
FITS = ("error", "resize")


class ImageColumns:
    """A set of images stored by frequency. Make one with :meth:`create`, open it with
    :meth:`open`."""

    def __init__(self, store: Store, header: dict[str, Any], coeffs: Array, meta: Array) -> None:
        self._store, self.header, self.coeffs, self.meta = store, header, coeffs, meta
        self.fmt = FrequencyFormat(block=header["block"], q=header["q"],
                                   colour=header["colour"])
        self.size: tuple[int, int] = (int(header["size"][0]), int(header["size"][1]))
        self.channels = int(header["channels"])
        self.group = int(header["group"])
        #: Bytes of whole groups' decoded columns this handle keeps (0: no cache), so that
        #: several readers of this handle, or a rising k, share fetched diagonals: a read at
        #: k' after k fetches only diagonals k..k'-1 of the groups it touches. Groups are
        #: written once, so cached columns never go stale.
        self.cache_bytes = 0
        self._cache: collections.OrderedDict[tuple[int, int], np.ndarray] = \
            collections.OrderedDict()
        self._cached_bytes = 0
        self._heights: np.ndarray | None = None  # of a handle at a timestamp, read once

    # -- create / open ---------------------------------------------------------------------
    @classmethod
    def create(cls, url: str, *, size: tuple[int, int], channels: int = 3,
               fmt: FrequencyFormat | None = None, group: int = 32, codec: str = "zstd:9",
               fit: str = "error", storage_options: dict[str, Any] | None = None,
               ) -> ImageColumns:
        """A new, empty image set at ``url`` for images of ``size`` (height, width; multiples
        of the block) with ``channels`` (3: RGB), stored in groups of ``group`` images."""
        fmt = fmt or FrequencyFormat()
        h, w = _size(size, fmt.block)
        if channels != 3:
            raise SchemaError(f"channels must be 3 (RGB images; colour='gray' stores one), "
                              f"got {channels!r}")
        if isinstance(group, bool) or not isinstance(group, int) or group < 1:
            raise SchemaError(f"group must be a positive number of images, got {group!r}")
        if fit not in FITS:
            raise SchemaError(f"fit must be one of {FITS} ('pad' is not in this version), got "
                              f"{fit!r}")
        store = open_store(url, **(storage_options or {}))
        header = {"format": "tessera.images", "version": HEADER_VERSION, "size": [h, w],
                  "channels": channels, "colour": fmt.colour, "block": fmt.block, "q": fmt.q,
                  "transform": fmt.transform, "level_shift": fmt.level_shift,
                  "rounding": "half-even", "diagonal_order": "d-major, i ascending",
                  "group": group, "codec": codec, "fit": fit}
        try:
            store.put(HEADER_KEY, json.dumps(header, indent=1).encode(), mode="create")
        except ObjectExistsError:
            raise ArrayExistsError(f"an image set already exists at {url}; open it with "
                                   "ImageColumns.open") from None
        c = fmt.channels(channels)
        by, bx = h // fmt.block, w // fmt.block
        coeffs = ArraySchema(
            [Dim("n", (0, -1), group), Dim("c", (0, c - 1), c), Dim("by", (0, by - 1), by),
             Dim("bx", (0, bx - 1), bx)],
            [Attr(f"d{d:02d}", f"({fmt.diagonal_size(d)},){fmt.dtype.str[1:]}", codec=codec)
             for d in range(fmt.k_max)],
            maxshape=(None, c, by, bx), attr_layout="tile-major")
        meta = ArraySchema([Dim("n", (0, META_CAPACITY - 1), META_TILE)],
                           [Attr("height", "u2", codec="zstd"), Attr("width", "u2", codec="zstd"),
                            Attr("label", "i4", fill=-1, codec="zstd")])
        options = storage_options or {}
        return cls(store, header, create_array(_child(url, "coeffs"), coeffs,
                                               storage_options=options),
                   create_array(_child(url, "meta"), meta, storage_options=options))

    @classmethod
    def open(cls, url: str, *, mode: str = "r", timestamp: int | None = None,
             storage_options: dict[str, Any] | None = None) -> ImageColumns:
        """The image set at ``url`` (``mode="w"`` to append; ``timestamp`` to travel back)."""
        store = open_store(url, **(storage_options or {}))
        try:
            header = json.loads(bytes(store.get(HEADER_KEY)))
        except ObjectNotFoundError:
            raise ArrayNotFoundError(f"no image set at {url} (no {HEADER_KEY}); make one with "
                                     "ImageColumns.create") from None
        except ValueError as err:
            raise SchemaError(f"{url}/{HEADER_KEY} is not valid JSON: {err}") from None
        if header.get("format") != "tessera.images":
            raise SchemaError(f"{url}/{HEADER_KEY} is not an image-set header")
        if int(header.get("version", 0)) > HEADER_VERSION:
            raise SchemaError(f"image set {url} has header version {header['version']}, newer "
                              f"than this Tessera understands ({HEADER_VERSION}); upgrade")
        options = storage_options or {}
        return cls(store, header,
                   open_array(_child(url, "coeffs"), mode, timestamp, storage_options=options),
                   open_array(_child(url, "meta"), mode, timestamp, storage_options=options))

    # -- writing ---------------------------------------------------------------------------
    def append(self, images: Any, labels: Sequence[int] | None = None) -> np.ndarray:
        """Store ``images`` ((N, H, W, 3) uint8, or a list of (H, W, 3) arrays) at the end;
        returns their ids. The append is padded to whole groups (the padding is holes:
        height 0, never returned by :meth:`ids`)."""
        batch = _batch(images, self.size, self.header["fit"])
        n = len(batch)
        if labels is not None:
            labels_arr = np.asarray(labels)
            if labels_arr.shape != (n,) or labels_arr.dtype.kind not in "iu":
                raise InvalidArgumentError(f"labels must be {n} integers (one per image), got "
                                           f"shape {labels_arr.shape} of {labels_arr.dtype}")
        g = self.group
        padded = -(-n // g) * g
        if padded != n:
            batch = np.concatenate([batch, np.zeros((padded - n, *batch.shape[1:]), np.uint8)])
        columns = self.fmt.encode(batch)
        info = self.coeffs.append({f"d{d:02d}": col for d, col in enumerate(columns)})
        start = int(info.nonempty_domain[0][0])
        ids = np.arange(start, start + n, dtype=np.int64)
        heights = np.zeros(padded, np.uint16)
        heights[:n] = self.size[0]
        widths = np.zeros(padded, np.uint16)
        widths[:n] = self.size[1]
        label_col = np.full(padded, -1, np.int32)
        if labels is not None:
            label_col[:n] = labels_arr
        self.meta.write({"height": heights, "width": widths, "label": label_col},
                        origin=(start,))
        return ids

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.ids())

    def ids(self) -> np.ndarray:
        """The ids of the stored images, ascending (holes left out)."""
        if not self.coeffs.shape[0]:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self._all_heights()).astype(np.int64)

    def _all_heights(self) -> np.ndarray:
        """Every id's height (0: a hole). A handle at a timestamp sees a set that cannot
        change, so it reads them once; others read them each time."""
        if self._heights is not None:
            return self._heights
        end = self.coeffs.shape[0]
        heights: np.ndarray = self.meta.read(slice(0, end), attrs=["height"])["height"]
        if self.coeffs.timestamp is not None:
            self._heights = heights
        return heights

    def labels(self, ids: Any) -> np.ndarray:
        """The labels of ``ids`` (-1: none given)."""
        chosen = self._in_range(ids)
        if self._heights is not None:  # the holes are known: one read of the labels
            self._refuse_holes(chosen, self._heights[chosen])
            out: np.ndarray = self.meta.read(chosen.tolist(), attrs=["label"])["label"]
            return out
        got = self.meta.read(chosen.tolist(), attrs=["height", "label"])
        self._refuse_holes(chosen, got["height"])
        labels: np.ndarray = got["label"]
        return labels

    def read(self, ids: Any, k: Any = "all", *, output: str = "pixels", scale: float = 1.0,
             ) -> np.ndarray:
        """Images ``ids`` from their ``k`` lowest diagonals: ``output="pixels"`` (uint8
        ``(N, H*scale, W*scale, 3)``; ``scale`` in 1, 1/2, ..., 1/32) or
        ``"coefficients"`` (the quantized diagonals concatenated, ``(N, C, BY, BX, T(k))``)."""
        k = self.fmt.check_k(k)
        if output not in ("pixels", "coefficients"):
            raise InvalidArgumentError(f"output must be 'pixels' or 'coefficients', got "
                                       f"{output!r}")
        if output == "pixels":
            self.fmt.check_scale(scale)
        chosen = self._check_ids(ids)
        columns = (self._cached_columns(chosen, k) if self.cache_bytes > 0
                   else self.read_columns(chosen.tolist(), 0, k))
        if output == "coefficients":
            return np.concatenate(columns, axis=-1)
        return self.fmt.decode(columns, scale=scale)

    def read_columns(self, ids: list[int], first: int, k: int) -> list[np.ndarray]:
        """The quantized diagonals ``first..k-1`` of images ``ids`` (no checks, no cache),
        read in one call: one array ``(N, C, BY, BX, n_d)`` per diagonal."""
        names = [f"d{d:02d}" for d in range(first, k)]
        got = self.coeffs.read((ids, slice(None), slice(None), slice(None)), attrs=names)
        return [got[n] for n in names]

    def _cached_columns(self, chosen: np.ndarray, k: int) -> list[np.ndarray]:
        """Diagonals ``0..k-1`` of ``chosen`` through the cache of whole groups' columns:
        the groups touched are read whole, and only the diagonals some of them lack (one
        call for the lowest missing diagonal up to ``k - 1``), so a rising k fetches only
        the new diagonals."""
        g = self.group
        groups = [int(grp) for grp in np.unique(chosen // g)]
        local = {(grp, d): self._cache[(grp, d)] for grp in groups for d in range(k)
                 if (grp, d) in self._cache}
        start = min(self._cached_k(grp) for grp in groups)
        if start < k:
            members = np.concatenate([np.arange(grp * g, (grp + 1) * g) for grp in groups])
            fresh = self.read_columns(members.tolist(), start, k)
            for i, grp in enumerate(groups):
                for d, col in zip(range(start, k), fresh, strict=True):
                    local.setdefault((grp, d), np.ascontiguousarray(col[i * g:(i + 1) * g]))
        for key, column in local.items():
            self._remember(key, column)
        position = {grp: i for i, grp in enumerate(groups)}
        rows = np.array([position[int(grp)] for grp in chosen // g])
        offsets = chosen % g
        return [np.stack([local[(grp, d)] for grp in groups])[rows, offsets]
                for d in range(k)]

    def _cached_k(self, group: int) -> int:
        """How many leading diagonals of ``group`` the cache holds."""
        d = 0
        while (group, d) in self._cache:
            d += 1
        return d

    def _remember(self, key: tuple[int, int], column: np.ndarray) -> None:
        if key in self._cache:
            self._cache.move_to_end(key)
            return
        self._cache[key] = column
        self._cached_bytes += column.nbytes
        while self._cached_bytes > self.cache_bytes and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._cached_bytes -= old.nbytes

    def choose_k(self, *, min_psnr: float | None = None,
                 budget_bytes_per_image: float | None = None, sample: int = 64) -> int:
        """The k a consumer needs: the largest whose stored bytes per image fit
        ``budget_bytes_per_image`` (exact, from the bookkeeping; nothing read), or the
        smallest whose reconstruction reaches ``min_psnr`` dB against the stored full
        quality (``k_max``) on ``sample`` images spread over the set (one read of them).

        The PSNR is relative to what the set stores (quantized by ``q``), not to the
        original images, which it does not keep."""
        if (min_psnr is None) == (budget_bytes_per_image is None):
            raise InvalidArgumentError("choose_k needs exactly one of min_psnr= or "
                                       "budget_bytes_per_image=")
        count = len(self)
        if not count:
            raise InvalidArgumentError("choose_k needs a set with images")
        if budget_bytes_per_image is not None:
            per_image = self.bytes_per_k() / count
            fits = np.flatnonzero(per_image <= budget_bytes_per_image)
            if not len(fits):
                raise InvalidArgumentError(
                    f"no k fits {budget_bytes_per_image} bytes per image: k = 1 takes "
                    f"{per_image[0]:.0f}")
            return int(fits[-1]) + 1
        assert min_psnr is not None
        target = float(min_psnr)
        ids = self.ids()
        chosen = ids[np.linspace(0, len(ids) - 1, min(sample, len(ids))).astype(int)]
        columns = self.read_columns(chosen.tolist(), 0, self.fmt.k_max)
        best = self.fmt.decode(columns)
        lo, hi = 1, self.fmt.k_max  # PSNR rises with k: the smallest k reaching the target
        while lo < hi:
            mid = (lo + hi) // 2
            if psnr(best, self.fmt.decode(columns[:mid])) >= target:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def explain(self, ids: Any, k: Any = "all") -> Plan:
        """The plan a read of ``ids`` at ``k`` would follow (requests, bytes, seconds,
        dollars), without reading any data."""
        k = self.fmt.check_k(k)
        chosen = self._check_ids(ids)
        return self.coeffs.explain((chosen.tolist(), slice(None), slice(None), slice(None)),
                                   attrs=[f"d{d:02d}" for d in range(k)])

    @property
    def last_read(self) -> Any:
        """What the latest :meth:`read` did (the coefficient array's report)."""
        return self.coeffs.last_read

    def bytes_per_k(self) -> np.ndarray:
        """Stored bytes of ``Sf_1 .. Sf_kmax`` over every image, exactly, from the fragments'
        bookkeeping (no data read): entry ``k - 1`` is what reading everything at ``k``
        moves."""
        stored = self.coeffs.stored_bytes()
        return np.cumsum([stored[f"d{d:02d}"] for d in range(self.fmt.k_max)])

    def _check_ids(self, ids: Any) -> np.ndarray:
        """``ids`` as int64 ids of stored images (``SelectionError`` naming a bad one)."""
        chosen = self._in_range(ids)
        heights = (self._all_heights()[chosen] if self.coeffs.timestamp is not None
                   else self.meta.read(chosen.tolist(), attrs=["height"])["height"])
        self._refuse_holes(chosen, heights)
        return chosen

    def _in_range(self, ids: Any) -> np.ndarray:
        arr = np.atleast_1d(np.asarray(ids))
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise SelectionError(f"ids must be integers, got {ids!r:.80}")
        if not arr.size:
            raise SelectionError("no ids given")
        end = self.coeffs.shape[0]
        bad = (arr < 0) | (arr >= end)
        if bad.any():
            raise SelectionError(f"image id {int(arr[bad][0])} does not exist (ids are 0.."
                                 f"{end - 1})")
        return arr.astype(np.int64)

    @staticmethod
    def _refuse_holes(chosen: np.ndarray, heights: np.ndarray) -> None:
        if not heights.all():
            raise SelectionError(f"image id {int(chosen[heights == 0][0])} is a hole (padding "
                                 "of an append to whole groups), not an image")

    def __repr__(self) -> str:
        return (f"<tessera.ImageColumns {self.coeffs.uri.rsplit('/coeffs', 1)[0]} "
                f"{self.size[0]}x{self.size[1]}, group {self.group}>")


def _child(url: str, name: str) -> str:
    return url.rstrip("/") + "/" + name


def _size(size: Any, block: int) -> tuple[int, int]:
    try:
        h, w = (int(v) for v in size)
    except (TypeError, ValueError):
        raise SchemaError(f"size must be (height, width), got {size!r}") from None
    for v in (h, w):
        if v < block or v % block:
            up = max(block, -(-v // block) * block)
            raise SchemaError(f"size {size!r}: height and width must be positive multiples of "
                              f"{block} (the block); try {up}")
    return h, w


def _batch(images: Any, size: tuple[int, int], fit: str) -> np.ndarray:
    """``images`` as one ``(N, H, W, 3)`` uint8 batch of ``size``: an array, or a list of
    arrays, PIL images or paths of image files (opened with Pillow, converted to RGB).
    ``fit="resize"`` scales each image's short side to the size and centre-crops it;
    ``"error"`` refuses any other size."""
    if isinstance(images, (list, tuple)):
        if not images:
            raise InvalidArgumentError("append got no images")
        arrays = [_one_image(item, i, size, fit) for i, item in enumerate(images)]
        batch = np.stack(arrays)
    else:
        batch = np.asarray(images)
        if fit == "resize" and batch.ndim == 4 and batch.shape[1:3] != size:
            batch = np.stack([_resized(img, size) for img in check_images(batch, 1)])
    batch = check_images(batch, 1)
    if not len(batch):
        raise InvalidArgumentError("append got no images")
    if batch.shape[1:3] != size:
        raise InvalidArgumentError(f"images are {batch.shape[1]}x{batch.shape[2]}, the set "
                                   f"holds {size[0]}x{size[1]} (fit='error'; create the set "
                                   "with fit='resize' to scale and centre-crop them)")
    return batch


def _one_image(item: Any, index: int, size: tuple[int, int], fit: str) -> np.ndarray:
    from pathlib import Path

    if isinstance(item, (str, Path)):
        from PIL import Image

        try:
            with Image.open(item) as opened:
                item = opened.convert("RGB")
        except OSError as err:
            raise InvalidArgumentError(f"image {index} ({item}) cannot be read: {err}"
                                       ) from None
    if type(item).__module__.startswith("PIL."):
        item = item.convert("RGB")
    array = np.asarray(item)
    if array.ndim != 3 or array.shape[-1] != 3 or array.dtype != np.uint8:
        raise InvalidArgumentError(f"image {index} must be (H, W, 3) uint8 RGB, got shape "
                                   f"{array.shape} of {array.dtype} (RGBA or palette images: "
                                   ".convert('RGB'))")
    if array.shape[:2] == size:
        return array
    if fit == "resize":
        return _resized(array, size)
    raise InvalidArgumentError(f"image {index} is {array.shape[0]}x{array.shape[1]}, the set "
                               f"holds {size[0]}x{size[1]} (fit='error'; create the set with "
                               "fit='resize' to scale and centre-crop them)")


def _resized(array: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The image scaled (bicubic) so that it covers ``size``, then centre-cropped to it."""
    from PIL import Image

    h, w = array.shape[:2]
    scale = max(size[0] / h, size[1] / w)
    nh, nw = max(size[0], round(h * scale)), max(size[1], round(w * scale))
    img = Image.fromarray(array).resize((nw, nh), Image.Resampling.BICUBIC)
    top, left = (nh - size[0]) // 2, (nw - size[1]) // 2
    return np.asarray(img.crop((left, top, left + size[1], top + size[0])))
