"""PyTorch datasets over Tessera arrays (import them from :mod:`tessera.torch`).

A training step asks for a batch of samples, or of regions of samples (crops around boxes).
These datasets answer a whole batch with **one plan**: DataLoader calls ``__getitems__``
with the batch's indices, and the dataset reads their hyperslabs as one
:class:`~tessera.Hyperslabs` union, so tiles that several samples share are fetched once
and the planner sees all of the step's requests together.

Snapshots: a dataset reads the array as it was when the dataset was made (pinned to the
newest fragment then), so every worker and every epoch sees the same data, and a step's
read needs no listing of fragments.

Worker processes: the datasets pickle as references (URI, options, snapshot) and reopen
the array in each worker. obstore's I/O runtime does not survive ``fork`` once the parent
has done I/O, so :meth:`loader` starts workers with ``spawn`` and explains a worker that
dies (:mod:`tessera.integrations.loading`); a forked worker raises
:class:`~tessera.errors.ForkSafetyError` instead of hanging.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from tessera.array.array import Array
from tessera.errors import InvalidArgumentError, InvalidTypeError, NameNotFoundError, SelectionError
from tessera.format.selection import Hyperslabs, normalize_selection
from tessera.integrations.handle import ArrayRef
from tessera.integrations.loading import Loader
from tessera.storage.stats import IOStats

Box = tuple[Any, ...]
Transform = Callable[[torch.Tensor], Any]

#: How image axes lie inside one sample, for MegaDetector boxes.
IMAGE_LAYOUTS = ("CHW", "HWC", "HW")


class _ArraySamples(Dataset[Any]):
    """What both datasets share: the array reference, reads through the planner, tensors
    from numpy without a copy, and the I/O this process made."""

    def __init__(self, array: str | Array | ArrayRef, *, sample_dim: int, attr: str | None,
                 transform: Transform | None, storage_options: dict[str, Any] | None,
                 pushdown: str | None, method: str | None, phi: float | None) -> None:
        self.ref = ArrayRef.resolve(array, storage_options, pushdown)
        schema = self.ref.array.schema
        if not -schema.ndim <= sample_dim < schema.ndim:
            raise InvalidArgumentError(f"sample_dim {sample_dim} is out of range for the "
                                       f"{schema.ndim}-dimensional array {self.ref.uri}")
        if schema.sparse:
            raise InvalidTypeError(f"{self.ref.uri} is a sparse array; tessera.torch datasets read "
                                   "dense arrays")
        self.sample_dim = sample_dim % schema.ndim
        self.attr = schema.attrs[0].name if attr is None else schema.attr(attr).name
        self.transform = transform
        self.method = method
        self.phi = phi
        self._lower = schema.lower[self.sample_dim]
        self._count = schema.shape[self.sample_dim]
        self._io: IOStats | None = None
        self._io_pid: int | None = None

    @property
    def array(self) -> Array:
        """The array, opened in this process."""
        return self.ref.array

    @property
    def io(self) -> IOStats:
        """Requests, bytes and dollars of every read this dataset made in this process."""
        if self._io is None or self._io_pid != os.getpid():
            self._io, self._io_pid = IOStats(), os.getpid()
        return self._io

    def _sample_index(self, index: int) -> int:
        i = int(index)
        if not -self._count <= i < self._count:
            raise IndexError(f"sample {index} is out of range: {self.ref.uri} has "
                             f"{self._count} samples along dimension {self.sample_dim}")
        return self._lower + (i % self._count)

    def _tile_row(self, coord: int) -> int:
        """The tile row (along the sample dimension) holding the sample at ``coord``."""
        dim = self.array.schema.dims[self.sample_dim]
        return (int(coord) - int(dim.domain[0])) // dim.extent

    def _read(self, selections: list[Box]) -> list[np.ndarray]:
        arr = self.array
        # One sample (``__getitem__``) is a plain read: a box of a footprint read before
        # takes its recipe (docs/performance.md, "Per-call cost"); a batch is one union.
        outs = ([arr.read(selections[0], attrs=[self.attr], method=self.method, phi=self.phi)]
                if len(selections) == 1 else
                arr.read(Hyperslabs(selections), attrs=[self.attr], method=self.method,
                         phi=self.phi))
        if (stats := arr.last_read_stats) is not None:
            self._io = self.io + stats
        return [o[self.attr] for o in outs]

    def _tensor(self, values: np.ndarray) -> Any:
        tensor = torch.from_numpy(values)  # shares memory with the read's output buffer
        return tensor if self.transform is None else self.transform(tensor)

    def loader(self, batch_size: int = 32, *, shuffle: bool = False, num_workers: int = 0,
               **kwargs: Any) -> Loader:
        """A DataLoader over this dataset whose workers start safely (``spawn``; a worker
        that dies is explained: :class:`~tessera.integrations.loading.Loader`).

        Every batch is read as one plan (``__getitems__``). Other keyword arguments go to
        :class:`torch.utils.data.DataLoader` (``sampler=DistributedGroupSampler(self)``,
        ``collate_fn``, ``pin_memory``, ...).
        """
        return Loader(self, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers,
                      **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_io"], state["_io_pid"] = None, None
        return state

    def __len__(self) -> int:
        raise NotImplementedError  # pragma: no cover - defined by subclasses

    def __repr__(self) -> str:
        return (f"<tessera.torch.{type(self).__name__} {self.ref.uri} {len(self)} samples, "
                f"attribute {self.attr!r}, sample dimension {self.sample_dim}>")


class ArrayDataset(_ArraySamples):
    """One sample per index along ``sample_dim`` of a dense array.

    ``transform`` receives each sample as a torch tensor (sharing memory with the read).

    >>> import numpy as np, tessera
    >>> from tessera.torch import ArrayDataset
    >>> _ = tessera.from_numpy("memory://doc-ads", np.arange(24).reshape(4, 6), tile=(2, 3))
    >>> ds = ArrayDataset("memory://doc-ads")
    >>> len(ds), ds[1].tolist()
    (4, [6, 7, 8, 9, 10, 11])
    >>> [t.sum().item() for t in ds.__getitems__([0, 3])]
    [15, 123]
    """

    def __init__(self, uri: str | Array | ArrayRef, sample_dim: int = 0,
                 transform: Transform | None = None, *, attr: str | None = None,
                 storage_options: dict[str, Any] | None = None, pushdown: str | None = None,
                 method: str | None = None, phi: float | None = None) -> None:
        super().__init__(uri, sample_dim=sample_dim, attr=attr, transform=transform,
                         storage_options=storage_options, pushdown=pushdown, method=method,
                         phi=phi)

    def __len__(self) -> int:
        return self._count

    def _selection(self, index: int) -> Box:
        sel: list[Any] = [slice(None)] * self.array.ndim
        sel[self.sample_dim] = self._sample_index(index)
        return tuple(sel)

    def group_keys(self) -> list[int]:
        """Per sample, its tile row along the sample dimension (samples of one tile row
        share tiles): the key :class:`~tessera.torch.DistributedGroupSampler` shards by."""
        return [self._tile_row(self._sample_index(i)) for i in range(len(self))]

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """The samples at ``indices``, read as one plan."""
        if not len(indices):
            return []
        values = self._read([self._selection(i) for i in indices])
        return [self._tensor(v) for v in values]


class RegionDataset(_ArraySamples):
    """Regions of samples: ``regions`` is a list of ``(sample index, box)`` pairs, the box a
    tuple of ints and slices over the sample's own dimensions (domain coordinates; missing
    trailing entries mean the whole extent).

    With ``labels`` (one per region) an item is ``(tensor, label)``, else the tensor.
    A batch of regions is read as one plan: tiles shared by several crops come once.

    >>> import numpy as np, tessera
    >>> from tessera.torch import RegionDataset
    >>> imgs = np.arange(2 * 3 * 8 * 8, dtype=np.uint8).reshape(2, 3, 8, 8)
    >>> _ = tessera.from_numpy("memory://doc-rds", imgs, tile=(1, 3, 4, 4))
    >>> ds = RegionDataset("memory://doc-rds",
    ...                    [(0, (slice(None), slice(2, 4), slice(1, 6))), (1, (0, 7))])
    >>> tuple(ds[0].shape), ds[1].tolist()
    ((3, 2, 5), [248, 249, 250, 251, 252, 253, 254, 255])
    """

    def __init__(self, uri: str | Array | ArrayRef, regions: Sequence[tuple[int, Any]],
                 transform: Transform | None = None, *, labels: Sequence[Any] | None = None,
                 sample_dim: int = 0, attr: str | None = None,
                 storage_options: dict[str, Any] | None = None, pushdown: str | None = None,
                 method: str | None = None, phi: float | None = None) -> None:
        super().__init__(uri, sample_dim=sample_dim, attr=attr, transform=transform,
                         storage_options=storage_options, pushdown=pushdown, method=method,
                         phi=phi)
        if labels is not None and len(labels) != len(regions):
            raise InvalidArgumentError(f"got {len(labels)} labels for {len(regions)} regions; "
                                       "give one label per region")
        schema = self.array.schema
        self.labels = None if labels is None else list(labels)
        self.selections = [self._check_region(n, r, schema) for n, r in enumerate(regions)]

    def _check_region(self, n: int, region: Any, schema: Any) -> Box:
        try:
            index, box = region
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"region {n} is {region!r}; regions are (sample index, box) "
                                       "pairs") from None
        items = box if isinstance(box, tuple) else (box,)
        if len(items) > schema.ndim - 1:
            raise SelectionError(f"region {n}: the box has {len(items)} entries but a sample "
                                 f"of {self.ref.uri} has {schema.ndim - 1} dimensions")
        for item in items:
            if not isinstance(item, (slice, int, np.integer)):
                raise SelectionError(f"region {n}: box entries are ints and slices, got "
                                     f"{item!r}")
        full = list(items) + [slice(None)] * (schema.ndim - 1 - len(items))
        full.insert(self.sample_dim, self._sample_index(index))
        sel = tuple(full)
        try:
            normalize_selection(sel, schema)
        except SelectionError as err:
            raise SelectionError(f"region {n} ({region!r}): {err}") from None
        return sel

    def __len__(self) -> int:
        return len(self.selections)

    def group_keys(self) -> list[int]:
        """Per region, the tile row (along the sample dimension) of its sample: regions of
        one tile row share tiles (:class:`~tessera.torch.DistributedGroupSampler`)."""
        return [self._tile_row(sel[self.sample_dim]) for sel in self.selections]

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """The regions at ``indices``, read as one plan."""
        if not len(indices):
            return []
        values = self._read([self.selections[int(i)] for i in indices])
        tensors = [self._tensor(v) for v in values]
        if self.labels is None:
            return tensors
        return [(t, self.labels[int(i)]) for t, i in zip(tensors, indices, strict=True)]

    @classmethod
    def from_megadetector(cls, uri: str | Array | ArrayRef, detections: Any,
                          transform: Transform | None = None, *, layout: str = "CHW",
                          min_conf: float = 0.0, index_of: Mapping[str, int] | None = None,
                          storage_options: dict[str, Any] | None = None,
                          **kwargs: Any) -> RegionDataset:
        """Regions from MegaDetector output (a JSON file, its text, or the parsed dict):
        every detection at or above ``min_conf`` becomes a region labelled with its
        category (an int). Boxes are normalised ``[x_min, y_min, width, height]``.

        ``layout`` says how a sample's image axes lie (``CHW``, ``HWC`` or ``HW``);
        ``index_of`` maps an image's ``file`` to its sample index (default: its position in
        the ``images`` list).
        """
        ref = ArrayRef.resolve(uri, storage_options, kwargs.pop("pushdown", None))
        sample_dim = kwargs.get("sample_dim", 0)
        shape = list(ref.array.shape)
        del shape[sample_dim % len(shape)]
        regions, labels = regions_from_megadetector(detections, tuple(shape), layout=layout,
                                                    min_conf=min_conf, index_of=index_of)
        return cls(ref, regions, transform, labels=labels, **kwargs)


def regions_from_megadetector(detections: Any, sample_shape: tuple[int, ...], *,
                              layout: str = "CHW", min_conf: float = 0.0,
                              index_of: Mapping[str, int] | None = None,
                              ) -> tuple[list[tuple[int, Box]], list[int]]:
    """``(regions, labels)`` from MegaDetector output, for images of ``sample_shape``.

    >>> md = {"images": [{"file": "a.jpg", "detections": [
    ...     {"category": "1", "conf": 0.9, "bbox": [0.25, 0.5, 0.5, 0.25]}]}]}
    >>> regions_from_megadetector(md, (3, 100, 200))
    ([(0, (slice(None, None, None), slice(50, 75, None), slice(50, 150, None)))], [1])
    """
    doc = _load_detections(detections)
    if layout not in IMAGE_LAYOUTS:
        raise InvalidArgumentError(f"layout must be one of {IMAGE_LAYOUTS}, got {layout!r}")
    if len(sample_shape) != len(layout):
        raise InvalidArgumentError(f"layout {layout!r} needs samples of {len(layout)} "
                                   f"dimensions, got shape {sample_shape}")
    height, width = sample_shape[layout.index("H")], sample_shape[layout.index("W")]
    regions: list[tuple[int, Box]] = []
    labels: list[int] = []
    for pos, image in enumerate(doc.get("images", [])):
        name = image.get("file", str(pos))
        if index_of is not None:
            if name not in index_of:
                raise NameNotFoundError(f"MegaDetector image {name!r} is not in index_of")
            index = int(index_of[name])
        else:
            index = pos
        for det in image.get("detections") or []:
            if float(det.get("conf", 1.0)) < min_conf:
                continue
            bbox = det.get("bbox")
            if not isinstance(bbox, (list, tuple)) or len(bbox) != 4:
                raise InvalidArgumentError(f"MegaDetector image {name!r}: bbox {bbox!r} is not "
                                           "[x_min, y_min, width, height]")
            x, y, w, h = (float(v) for v in bbox)
            ys = _pixels(y, h, height)
            xs = _pixels(x, w, width)
            box = {"CHW": (slice(None), ys, xs), "HWC": (ys, xs), "HW": (ys, xs)}[layout]
            regions.append((index, box))
            labels.append(int(det.get("category", 0)))
    return regions, labels


def _pixels(start: float, extent: float, size: int) -> slice:
    """A normalised [start, start + extent) span as a pixel slice of at least one pixel."""
    lo = min(max(math.floor(start * size), 0), size - 1)
    hi = min(max(math.ceil((start + extent) * size), lo + 1), size)
    return slice(lo, hi)


def _load_detections(detections: Any) -> dict[str, Any]:
    if isinstance(detections, dict):
        return detections
    if isinstance(detections, Path) or (isinstance(detections, str)
                                        and not detections.lstrip().startswith("{")):
        detections = Path(detections).read_text()
    try:
        doc = json.loads(detections)
    except json.JSONDecodeError as err:
        raise InvalidArgumentError(f"MegaDetector output is not valid JSON: {err}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("images"), list):
        raise InvalidArgumentError("MegaDetector output needs an 'images' list")
    return doc


class Resize:
    """A transform that resizes an image tensor (``C, H, W``) to ``size`` (bilinear),
    returning float32 in [0, 1] for uint8 input. Picklable, so workers can use it.

    >>> import torch
    >>> Resize((4, 4))(torch.zeros(3, 10, 7, dtype=torch.uint8)).shape
    torch.Size([3, 4, 4])
    """

    def __init__(self, size: tuple[int, int]) -> None:
        self.size = (int(size[0]), int(size[1]))

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        x = image.to(torch.float32)
        if image.dtype == torch.uint8:
            x = x / 255.0
        out = torch.nn.functional.interpolate(x[None], size=self.size, mode="bilinear",
                                              align_corners=False)
        return out[0]
