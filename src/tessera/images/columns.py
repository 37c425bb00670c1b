"""Image columns on the array engine: a set of same-size 8-bit images stored by frequency
(:mod:`tessera.images.frequency`), so that a reader fetches only the diagonals ``Sf_k`` it
asks for, one request per group of images.

Layout below the root::

    __images.json   create-only header: version, uid, size, channels, the frequency
                    format, group, codec, fit, crop_tile
    __classes.json  optional: the names of the labels (``set_classes``)
    coeffs/         a tile-major dense array: dims n (images; grows, tile = group), c, by, bx
                    (one tile each, or ``crop_tile`` blocks); attributes d00..d62, cell = the
                    n_d coefficients of that diagonal of one block (int8, or int16 below
                    q = 33); with chroma 4:2:0, c is 1 and a cell holds the diagonal's
                    luma, then its Cb and Cr inside the chroma corner
                    (:mod:`tessera.images.subsampling`)
    meta/           a dense array over n (tile 4096): true height and width (smaller than
                    the size only with ``fit="pad"``; 0: no image, a hole left by padding an
                    append to whole groups) and label (-1: none)

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

import concurrent.futures
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from tessera._threads import submit
from tessera.array.array import Array
from tessera.array.factories import create_array, open_array
from tessera.array.read.report import ReadReport, combined
from tessera.config import Config
from tessera.errors import (
    ArrayExistsError,
    ArrayNotFoundError,
    BeforeFirstCommitError,
    CorruptDataError,
    InvalidArgumentError,
    ObjectExistsError,
    ObjectNotFoundError,
    SchemaError,
    SelectionError,
)
from tessera.format.schema import ArraySchema, Attr, Dim
from tessera.images.cache import ColumnCache, shared_cache
from tessera.images.decode import concatenate, decode_concatenated
from tessera.images.face import ImageFace
from tessera.images.frequency import FrequencyFormat, psnr
from tessera.images.header import HEADER_KEY, SetHeader
from tessera.images.inputs import FITS, Batch, prepare
from tessera.images.pipeline import read_decoded
from tessera.images.writer import ImageWriter, checked_labels
from tessera.query.plan import Plan
from tessera.storage.blocking import Store, open_store
from tessera.when import At, at_ns, first_commit_error, renamed

META_TILE = 4096
META_CAPACITY = 2**40  # image ids the meta array can address (its domain; never scanned)
CLASSES_KEY = "__classes.json"
#: ``cache=`` of :meth:`ImageColumns.open`: the process's shared cache.
SHARED = "shared"


class ImageColumns(ImageFace):
    """A set of images stored by frequency. Make one with :meth:`create`, open it with
    :meth:`open`.

    >>> import numpy as np, tessera
    >>> cols = tessera.create_images("memory://doc-image-columns", size=(32, 32))
    >>> cols.append(np.zeros((2, 32, 32, 3), np.uint8)).tolist()
    [0, 1]
    >>> cols.read([1], k=4).shape
    (1, 32, 32, 3)
    """

    def __init__(self, store: Store, header: SetHeader, coeffs: Array, meta: Array,
                 cache: ColumnCache | str | None = SHARED) -> None:
        self._store, self.header, self.coeffs, self.meta = store, header, coeffs, meta
        self.fmt = FrequencyFormat(block=header.block, q=header.q, colour=header.colour,
                                   chroma=header.chroma)
        self.size: tuple[int, int] = header.size
        self.channels = header.channels
        self.group = header.group
        crop_tile = header.crop_tile
        self.crop_tile: tuple[int, int] | None = (None if crop_tile is None else
                                                  (int(crop_tile[0]), int(crop_tile[1])))
        #: The column cache reads go through (:mod:`tessera.images.cache`; None: none):
        #: whole groups' decoded diagonals, shared by every handle of the process on the
        #: same set, so a rising k or a second model fetches only what is not held yet.
        self.cache: ColumnCache | None = _cache(cache)
        self._identity = header.uid or coeffs.uri
        self._heights: np.ndarray | None = None  # of a handle at a timestamp, read once
        #: The last batch's report and the one of the whole read fetched in batches.
        self._batched_read: tuple[ReadReport, ReadReport] | None = None

    # -- create / open ---------------------------------------------------------------------
    @classmethod
    def create(cls, url: str, *, size: tuple[int, int], channels: int = 3,
               fmt: FrequencyFormat | None = None, group: int = 32, codec: str = "zstd:9",
               fit: str = "error", crop_tile: tuple[int, int] | None = None,
               storage_options: dict[str, Any] | None = None, config: Config | None = None,
               cache: ColumnCache | str | None = SHARED) -> ImageColumns:
        """A new, empty image set at ``url`` for images of ``size`` (height, width; multiples
        of the block) with ``channels`` (3: RGB), stored in groups of ``group`` images.

        ``fit`` says what :meth:`append` does with images of another size (``"error"``,
        ``"pad"``, ``"resize"``; :mod:`tessera.images.inputs`). ``crop_tile`` (blocks
        ``(ty, tx)``) splits each image into tiles, so that a ``crop=`` read fetches only
        the tiles under the crop (more, smaller requests for whole images). ``cache``: see
        :meth:`open`; ``config``: as :meth:`open`'s."""
        fmt = fmt or FrequencyFormat()
        settings = config or Config.from_env()
        h, w = _size(size, fmt.block)
        if channels != 3:
            raise SchemaError(f"channels must be 3 (RGB images; colour='gray' stores one), "
                              f"got {channels!r}")
        if isinstance(group, bool) or not isinstance(group, int) or group < 1:
            raise SchemaError(f"group must be a positive number of images, got {group!r}")
        if fit not in FITS:
            raise SchemaError(f"fit must be one of {FITS}, got {fit!r}")
        by, bx = h // fmt.block, w // fmt.block
        tiles = _crop_tile(crop_tile, (by, bx))
        store = open_store(url, config=settings.store, **(storage_options or {}))
        header = SetHeader.new(size=(h, w), channels=channels, colour=fmt.colour,
                               block=fmt.block, q=fmt.q, group=group, codec=codec, fit=fit,
                               crop_tile=None if crop_tile is None else tiles,
                               transform=fmt.transform, level_shift=fmt.level_shift,
                               chroma=fmt.chroma)
        try:
            store.put(HEADER_KEY, header.to_json(), mode="create")
        except ObjectExistsError:
            raise ArrayExistsError(f"an image set already exists at {url}; open it with "
                                   "ImageColumns.open") from None
        c = fmt.channels(channels)
        coeffs = ArraySchema(
            [Dim("n", (0, -1), group), Dim("c", (0, c - 1), c),
             Dim("by", (0, by - 1), tiles[0]), Dim("bx", (0, bx - 1), tiles[1])],
            [Attr(f"d{d:02d}", f"({fmt.width(d)},){fmt.dtype.str[1:]}", codec=codec)
             for d in range(fmt.k_max)],
            maxshape=(None, c, by, bx), attr_layout="tile-major")
        meta = ArraySchema([Dim("n", (0, META_CAPACITY - 1), META_TILE)],
                           [Attr("height", "u2", codec="zstd"), Attr("width", "u2", codec="zstd"),
                            Attr("label", "i4", fill=-1, codec="zstd")])
        options = storage_options or {}
        return cls(store, header, create_array(store.url.child("coeffs"), coeffs,
                                               storage_options=options, config=settings),
                   create_array(store.url.child("meta"), meta, storage_options=options,
                                config=settings), cache)

    @classmethod
    def open(cls, url: str, mode: str = "r", *, storage_options: dict[str, Any] | None = None,
             config: Config | None = None, at: At = None, fmt: FrequencyFormat | None = None,
             cache: ColumnCache | str | None = SHARED, timestamp: int | None = None,
             ) -> ImageColumns:
        """The image set at ``url`` (``mode="w"`` to append).

        ``at``: open the set as it was then (a datetime, an ISO-8601 string or a commit
        time in ns; ``history()`` lists them; ``timestamp=`` is its older name); a point
        before the first append raises :class:`~tessera.errors.BeforeFirstCommitError`.
        ``config``: a :class:`~tessera.config.Config` snapshot (default: read now).
        ``fmt``: the format the caller expects; a set stored otherwise is refused (a
        ``SchemaError`` naming the field). ``cache``: ``"shared"`` (the process's
        :func:`~tessera.images.cache.shared_cache`), a
        :class:`~tessera.images.cache.ColumnCache` of your own, or None (every read
        fetches)."""
        when = at_ns(renamed("timestamp", "at", timestamp, at))
        settings = config or Config.from_env()
        options = storage_options or {}
        store = open_store(url, config=settings.store, **options)
        # The header and both arrays are fetched at once (three round trips become one); the
        # header's verdict comes first, so a missing set is reported as such.
        # (on the process's pool: the waits are short and the pool is made once)
        arrays = [submit(open_array, store.url.child(name), mode, at=when,
                         storage_options=options, config=settings)
                  for name in ("coeffs", "meta")]
        try:
            header = _header(store, url)
            if fmt is not None:
                for field in ("block", "q", "colour", "transform", "level_shift", "chroma"):
                    if getattr(header, field) != getattr(fmt, field):
                        raise SchemaError(f"image set {url} stores {field}="
                                          f"{getattr(header, field)!r}, the format given has "
                                          f"{getattr(fmt, field)!r}; open it without fmt= to "
                                          "read it as stored")
            concurrent.futures.wait(arrays)
            early = [e for f in arrays if isinstance(e := f.exception(), BeforeFirstCommitError)]
            if early:  # the set's first append is complete when both arrays have it
                raise first_commit_error(f"image set {url}",
                                         max(e.first_commit for e in early), when)
        except BaseException:
            for future in arrays:
                future.cancel()
            concurrent.futures.wait(arrays)
            raise
        coeffs, meta = (future.result() for future in arrays)
        return cls(store, header, coeffs, meta, cache)

    # -- writing ---------------------------------------------------------------------------
    def append(self, images: Any, labels: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Store ``images`` ((N, H, W, 3) uint8, or a list of (H, W, 3) arrays, PIL images or
        paths; other sizes as the set's ``fit`` says) at the end; returns their ids. The
        append is padded to whole groups (the padding is holes: height 0, never returned by
        :meth:`ids`)."""
        batch = prepare(images, self.size, self.header.fit)
        return self._write(batch, checked_labels(labels, len(batch)))

    def writer(self, flush_images: int = 4096) -> ImageWriter:
        """A streaming appender: ``with cols.writer() as w: w.append(batch, labels)`` keeps
        images until ``flush_images`` are waiting, then stores them as one append (one
        fragment; fewer, larger fragments than one append per small batch). Leaving the
        block stores the rest; ``w.ids`` are the ids given so far."""
        return ImageWriter(self, flush_images)

    def _write(self, batch: Batch, labels: np.ndarray | None) -> np.ndarray:
        n, g = len(batch), self.group
        padded = -(-n // g) * g
        pixels = batch.pixels
        if padded != n:
            pixels = np.concatenate([pixels, np.zeros((padded - n, *pixels.shape[1:]),
                                                      np.uint8)])
        columns = self.fmt.encode(pixels)
        info = self.coeffs.append({f"d{d:02d}": col for d, col in enumerate(columns)})
        start = int(info.nonempty_domain[0][0])
        heights = np.zeros(padded, np.uint16)
        heights[:n] = batch.heights
        widths = np.zeros(padded, np.uint16)
        widths[:n] = batch.widths
        label_col = np.full(padded, -1, np.int32)
        if labels is not None:
            label_col[:n] = labels
        self.meta.write({"height": heights, "width": widths, "label": label_col},
                        origin=(start,))
        return np.arange(start, start + n, dtype=np.int64)

    def consolidate(self) -> None:
        """Fold the set's appends into one fragment per column array (as an array's
        :meth:`~tessera.Array.consolidate`), so that an open loads one fragment's
        bookkeeping instead of every append's. Readers go on meanwhile and read the same
        images; what was folded stays on storage until :meth:`vacuum`.

        >>> import numpy as np
        >>> from tessera.images import ImageColumns
        >>> cols = ImageColumns.create("memory://doc-img-cons", size=(32, 32))
        >>> for _ in range(3):
        ...     _ = cols.append(np.zeros((2, 32, 32, 3), np.uint8))
        >>> cols.consolidate()
        >>> len(cols.coeffs.fragments), len(cols)
        (1, 6)
        """
        self.coeffs.consolidate()
        self.meta.consolidate()

    def vacuum(self, orphan_grace_s: float = 3600, *, force: bool = False) -> int:
        """Remove what :meth:`consolidate` folded (and stale objects of writers that died),
        as an array's :meth:`~tessera.Array.vacuum`; returns the objects removed."""
        return (self.coeffs.vacuum(orphan_grace_s=orphan_grace_s, force=force)
                + self.meta.vacuum(orphan_grace_s=orphan_grace_s, force=force))

    def set_classes(self, names: Sequence[str]) -> None:
        """Record the names of the labels (label ``i`` is ``names[i]``)."""
        if isinstance(names, str) or not all(isinstance(x, str) for x in names):
            raise InvalidArgumentError(f"class names must be a list of strings, got {names!r:.80}")
        self._store.put(CLASSES_KEY, json.dumps(list(names)).encode())

    def classes(self) -> list[str] | None:
        """The names of the labels (:meth:`set_classes`; ``tessera import images`` records
        the folder names), or None."""
        try:
            names = json.loads(bytes(self._store.get(CLASSES_KEY)))
        except ObjectNotFoundError:
            return None
        except ValueError as err:
            raise SchemaError(f"{CLASSES_KEY} of {self!r} is not valid JSON: {err}") from None
        if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
            raise SchemaError(f"{CLASSES_KEY} of {self!r} is not a list of names")
        return names

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

    def sizes(self, ids: Any) -> np.ndarray:
        """True ``(height, width)`` of ``ids``, ``(N, 2)`` (smaller than :attr:`size` only in
        sets made with ``fit="pad"``)."""
        chosen = self._in_range(ids)
        got = self.meta.read(chosen.tolist(), attrs=["height", "width"])
        self._refuse_holes(chosen, got["height"])
        return np.stack([got["height"], got["width"]], axis=1).astype(np.int64)

    def read(self, ids: Any, k: Any = "all", *, output: str = "pixels", scale: float = 1.0,
             crop: tuple[int, int, int, int] | None = None, trim: bool = False) -> Any:
        """Images ``ids`` from their ``k`` lowest diagonals.

        ``output="pixels"``: uint8 ``(N, H*scale, W*scale, 3)`` (``scale`` in 1, 1/2, ...,
        1/32); ``"coefficients"``: the quantized diagonals concatenated,
        ``(N, C, BY, BX, T(k))`` (4:2:0 sets: ``(N, 1, BY, BX, fmt.stored(k))``, the three
        planes of each diagonal side by side, as :mod:`tessera.images.subsampling` says).
        ``crop=(y0, y1, x0, x1)`` (full-resolution pixels of the
        canvas) decodes only the blocks under it and returns exactly its pixels (scaled; with
        ``scale < 1`` its bounds must be multiples of ``1/scale``; block-aligned for
        coefficients); in sets made with ``crop_tile`` it also fetches only the tiles under
        it. ``trim=True`` (pixels, no crop) returns a list of each image cut to its true
        size (``fit="pad"`` sets)."""
        k = self.fmt.check_k(k)
        if output not in ("pixels", "coefficients"):
            raise InvalidArgumentError(f"output must be 'pixels' or 'coefficients', got "
                                       f"{output!r}")
        m = self.fmt.check_scale(scale) if output == "pixels" else self.fmt.block
        if trim and (output != "pixels" or crop is not None):
            raise InvalidArgumentError("trim=True cuts pixels to each image's true size: it "
                                       "needs output='pixels' and no crop")
        window = self._window(crop, m, output)
        fetch = self.fetched_k(k, output, scale)
        chosen = self._in_range(ids)
        blocks = (slice(window[0], window[1]), slice(window[2], window[3]))
        # whether the ids are images (not holes) is read beside the data, not before it
        checked = (None if self._heights is not None and self.coeffs.timestamp is not None
                   else submit(self._check_ids, chosen))
        if checked is None:
            self._check_ids(chosen)
        coefficients: np.ndarray | list[np.ndarray]
        pixels: np.ndarray | None = None
        try:
            if self.cache is not None and (crop is None or self.crop_tile is None):
                coefficients = self._cached_coefficients(chosen, fetch, blocks)
            elif output == "pixels":  # large reads: each batch decoded as the next arrives
                parts: list[ReadReport] = []

                def batch(ids: list[int]) -> list[np.ndarray]:
                    got = self.read_columns(ids, 0, fetch, blocks)
                    report = self.coeffs.last_read  # batches are read one at a time
                    assert report is not None  # a read was just made
                    parts.append(report)
                    return got

                pixels = read_decoded(self.fmt, batch, chosen, self.group, fetch, m,
                                      self._coefficient_bytes(fetch, blocks))
                if pixels is not None:  # last_read tells of every batch, not the last one
                    self._batched_read = (parts[-1], combined(parts))
                else:
                    coefficients = self.read_columns(chosen.tolist(), 0, fetch, blocks)
            else:
                coefficients = self.read_columns(chosen.tolist(), 0, fetch, blocks)
        except CorruptDataError as err:
            if checked is not None:
                concurrent.futures.wait([checked])
            err.args = (self._images_of(err),)  # the same error (and fields), which images
            raise
        except BaseException:
            if checked is not None:
                concurrent.futures.wait([checked])
            raise
        if checked is not None:
            checked.result()
        if output == "coefficients":
            return (coefficients if isinstance(coefficients, np.ndarray)
                    else concatenate(coefficients))
        if pixels is None:
            pixels = decode_concatenated(self.fmt, coefficients, fetch, m)
        if crop is not None:
            f = m / self.fmt.block
            y0, x0 = window[0] * m, window[2] * m
            return pixels[:, round(crop[0] * f) - y0:round(crop[1] * f) - y0,
                          round(crop[2] * f) - x0:round(crop[3] * f) - x0]
        if trim:  # each image's true size at this scale, rounded up
            b = self.fmt.block
            return [img[:-(-int(h) * m // b), :-(-int(w) * m // b)]
                    for img, (h, w) in zip(pixels, self.sizes(chosen), strict=True)]
        return pixels

    def fetched_k(self, k: int, output: str = "pixels", scale: float = 1.0) -> int:
        """Diagonals a read at ``k`` fetches: all ``k`` for coefficients and full-size pixels;
        at ``scale = m / block`` only ``2m - 1`` can reach the ``m x m`` corner that is
        transformed, so no more are fetched."""
        if output != "pixels" or scale == 1.0:
            return k
        return min(k, 2 * self.fmt.check_scale(scale) - 1)

    def _coefficient_bytes(self, k: int, blocks: tuple[slice, slice]) -> int:
        """One image's bytes of diagonals ``0..k-1`` over ``blocks``."""
        b = self.fmt.block
        by = len(range(self.size[0] // b)[blocks[0]])
        bx = len(range(self.size[1] // b)[blocks[1]])
        width = self.coeffs.schema.attr("d00").np_dtype.itemsize
        return self.fmt.channels(self.channels) * by * bx * self.fmt.stored(k) * width

    def _images_of(self, err: CorruptDataError) -> str:
        """``err``'s message and the image ids of the damaged tile's group."""
        if err.tile is None:
            return str(err)
        group = err.tile[0]  # the coefficient arrays' first dimension: groups of images
        first = group * self.group
        return (f"{err} (images {first}..{first + self.group - 1}, group {group} of the "
                "image set)")

    def _window(self, crop: Any, m: int, output: str) -> tuple[int, int, int, int]:
        """The blocks ``(by0, by1, bx0, bx1)`` under ``crop`` (all without one)."""
        b = self.fmt.block
        by, bx = self.size[0] // b, self.size[1] // b
        if crop is None:
            return 0, by, 0, bx
        try:
            y0, y1, x0, x1 = (int(v) for v in crop)
        except (TypeError, ValueError):
            raise SelectionError(f"crop must be (y0, y1, x0, x1) pixels, got {crop!r}") from None
        if not (0 <= y0 < y1 <= self.size[0] and 0 <= x0 < x1 <= self.size[1]):
            raise SelectionError(f"crop {crop!r} is empty or outside the {self.size[0]}x"
                                 f"{self.size[1]} images (y0 < y1 <= height, x0 < x1 <= width)")
        step = b if output == "coefficients" else b // m
        if any(v % step for v in (y0, y1, x0, x1)):
            what = ("block-aligned (multiples of the block) for coefficients"
                    if output == "coefficients" else f"multiples of {step} at this scale")
            raise InvalidArgumentError(f"crop {crop!r} must be {what}")
        return y0 // b, -(-y1 // b), x0 // b, -(-x1 // b)

    def read_columns(self, ids: list[int], first: int, k: int,
                     blocks: tuple[slice, slice] = (slice(None), slice(None)),
                     ) -> list[np.ndarray]:
        """The quantized diagonals ``first..k-1`` of images ``ids`` (no checks, no cache),
        read in one call: one array ``(N, C, BY, BX, n_d)`` per diagonal (``blocks``: the
        block rows and columns, all by default)."""
        names = [f"d{d:02d}" for d in range(first, k)]
        got = self.coeffs.read((ids, slice(None), *blocks), attrs=names)
        return [got[n] for n in names]

    def _cached_coefficients(self, chosen: np.ndarray, k: int,
                             blocks: tuple[slice, slice]) -> np.ndarray:
        """Diagonals ``0..k-1`` of ``chosen`` concatenated (``(N, C, BY, BX, T(k))``, the
        ``blocks`` of each image) through the cache of whole groups' leading diagonals: the
        groups touched are read whole, each from its lowest diagonal the cache lacks (one
        call per distinct lowest diagonal, usually one), so a rising k fetches only the new
        diagonals and a second reader of the same groups nothing. One copy per group into
        the result."""
        assert self.cache is not None
        g, ident = self.group, self._identity
        group_of = chosen // g
        groups = [int(grp) for grp in np.unique(group_of)]
        held: dict[int, np.ndarray] = {}
        missing: dict[int, list[int]] = {}
        for grp in groups:
            entry = self.cache.group((ident, grp))
            have = 0 if entry is None else entry.k
            if have >= k:
                assert entry is not None
                held[grp] = entry.data
            else:
                missing.setdefault(have, []).append(grp)
        for start, todo in sorted(missing.items()):
            members = np.concatenate([np.arange(grp * g, (grp + 1) * g) for grp in todo])
            fresh = concatenate(self.read_columns(members.tolist(), start, k))
            for i, grp in enumerate(todo):
                new = fresh[i * g:(i + 1) * g]
                if start:
                    old = self.cache.peek((ident, grp))
                    if old is None or old.k < start:  # evicted meanwhile: read it whole
                        new = concatenate(self.read_columns(
                            list(range(grp * g, (grp + 1) * g)), 0, k))
                    else:
                        new = np.concatenate([old.data[..., :self.fmt.stored(start)], new],
                                             axis=-1)
                data = np.ascontiguousarray(new)
                held[grp] = data
                self.cache.put_group((ident, grp), k, data)
        total = self.fmt.stored(k)
        first = held[groups[0]][:, :, blocks[0], blocks[1], :total]
        out = np.empty((len(chosen), *first.shape[1:]), dtype=first.dtype)
        for grp in groups:
            at = np.flatnonzero(group_of == grp)
            source = held[grp][:, :, blocks[0], blocks[1], :total]
            offsets = chosen[at] % g
            if (np.diff(at) == 1).all() and (np.diff(offsets) == 1).all():  # a run: a slice
                out[at[0]:at[-1] + 1] = source[offsets[0]:offsets[-1] + 1]
            else:
                out[at] = source[offsets]
        return out

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
        best = self.fmt.decode(columns)  # one concatenation per decode: a sample only
        lo, hi = 1, self.fmt.k_max  # PSNR rises with k: the smallest k reaching the target
        while lo < hi:
            mid = (lo + hi) // 2
            if psnr(best, self.fmt.decode(columns[:mid])) >= target:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def explain(self, ids: Any, k: Any = "all", *, output: str = "pixels",
                scale: float = 1.0) -> Plan:
        """The plan a read of ``ids`` at ``k`` would follow (requests, bytes, seconds,
        dollars), without reading any data. At ``scale < 1`` only the diagonals that reach
        the reduced output are planned (:meth:`fetched_k`); the plan's attributes say which.
        With the column cache on, a read may fetch less than this: groups' diagonals already
        held are not fetched again."""
        k = self.fmt.check_k(k)
        if output == "pixels":
            self.fmt.check_scale(scale)
        chosen = self._check_ids(ids)
        return self.coeffs.explain((chosen.tolist(), slice(None), slice(None), slice(None)),
                                   attrs=[f"d{d:02d}" for d in
                                          range(self.fetched_k(k, output, scale))])

    @property
    def last_read(self) -> Any:
        """What the latest :meth:`read` did (the coefficient array's report; for a read
        fetched in batches beside its decode, one report of all of them, each batch's with
        its plan in ``parts``)."""
        report = self.coeffs.last_read
        batched = self._batched_read
        if batched is not None and report is batched[0]:  # no read of the array since
            return batched[1]
        return report

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
            held = self.ids()
            span = f", ids {held[0]}..{held[-1]}" if len(held) else ""
            raise SelectionError(f"image id {int(arr[bad][0])} does not exist: the set holds "
                                 f"{len(held)} image(s){span}")
        return arr.astype(np.int64)

    @staticmethod
    def _refuse_holes(chosen: np.ndarray, heights: np.ndarray) -> None:
        if not heights.all():
            raise SelectionError(f"image id {int(chosen[heights == 0][0])} is a hole (padding "
                                 "of an append to whole groups), not an image")


def open_images(url: str, mode: str = "r", *, storage_options: dict[str, Any] | None = None,
                config: Config | None = None, at: At = None,
                cache: ColumnCache | str | None = SHARED) -> ImageColumns:
    """The image set at ``url`` (:meth:`ImageColumns.open`). ``at``: a datetime, an
    ISO-8601 string or a commit time in ns.

    >>> import numpy as np, tessera
    >>> _ = tessera.create_images("memory://doc-open-images", size=(32, 32))
    >>> tessera.open_images("memory://doc-open-images").size
    (32, 32)
    """
    return ImageColumns.open(url, mode, storage_options=storage_options, config=config,
                             at=at, cache=cache)


def create_images(url: str, *, size: tuple[int, int],
                  storage_options: dict[str, Any] | None = None, config: Config | None = None,
                  **options: Any) -> ImageColumns:
    """A new, empty image set at ``url`` for images of ``size`` (height, width)
    (:meth:`ImageColumns.create`: ``group``, ``fmt``, ``codec``, ``fit``, ``crop_tile``,
    ``cache`` go there).

    >>> import numpy as np, tessera
    >>> cols = tessera.create_images("memory://doc-create-images", size=(32, 32), group=8)
    >>> len(cols), cols.group
    (0, 8)
    """
    return ImageColumns.create(url, size=size, storage_options=storage_options,
                               config=config, **options)


def _cache(cache: ColumnCache | str | None) -> ColumnCache | None:
    if cache is None or isinstance(cache, ColumnCache):
        return cache
    if cache == SHARED:
        shared = shared_cache()
        return shared if shared.capacity_bytes > 0 else None
    raise InvalidArgumentError(f"cache must be 'shared', a ColumnCache or None, got {cache!r}")


def _crop_tile(crop_tile: Any, blocks: tuple[int, int]) -> tuple[int, int]:
    if crop_tile is None:
        return blocks
    try:
        ty, tx = (int(v) for v in crop_tile)
    except (TypeError, ValueError):
        raise SchemaError(f"crop_tile must be (ty, tx) blocks, got {crop_tile!r}") from None
    if not (1 <= ty <= blocks[0] and 1 <= tx <= blocks[1]):
        raise SchemaError(f"crop_tile {crop_tile!r} must be 1..{blocks[0]} by 1..{blocks[1]} "
                          "blocks (the image's blocks)")
    return ty, tx


def _header(store: Store, url: str) -> SetHeader:
    """The set's header, checked (``ArrayNotFoundError`` / ``SchemaError`` naming it)."""
    try:
        data = bytes(store.get(HEADER_KEY))
    except ObjectNotFoundError:
        raise ArrayNotFoundError(f"no image set at {url} (no {HEADER_KEY}); make one with "
                                 "ImageColumns.create") from None
    return SetHeader.from_json(data, url)


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


