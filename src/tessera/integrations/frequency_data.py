"""PyTorch over image columns (import from :mod:`tessera.torch`): :class:`FrequencyDataset`
gives one image (and its label) per index, read at the ``k`` the training phase asks for, and
:class:`GroupShuffleSampler` orders an epoch so that groups of images are fetched together.

A DataLoader batch is read with one call (``__getitems__``): the images of a batch that
share a group cost one request for ``Sf_k`` of that group. The sampler shuffles the order of
the groups each epoch and draws the batches from a window of ``buffer_groups`` groups at a
time (as FFCV's quasi-random order and WebDataset's shuffle buffers do), so an epoch fetches
every group once per ``k``; plain random sampling (``sampler=RandomSampler(ds)``) works too
and moves a group's ``Sf_k`` for every image drawn from it.

The dataset pins a snapshot (the time it was made), so every worker and epoch sees the same
images; it pickles as its URL and options and reopens the set in each worker (start workers
with ``spawn``, as :meth:`FrequencyDataset.loader` does).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from tessera.errors import InvalidArgumentError
from tessera.images.cache import ColumnCache
from tessera.images.columns import SHARED, ImageColumns
from tessera.integrations.handle import PerProcess
from tessera.integrations.loading import Loader
from tessera.when import At, at_ns, renamed

KSchedule = int | str | Callable[[int], int]


class GroupShuffleSampler(Sampler[int]):
    """Dataset positions in an order that keeps groups together: the groups' order is
    shuffled each epoch (:meth:`set_epoch`), then positions are drawn at random from a
    window of ``buffer_groups`` groups at a time.

    >>> s = GroupShuffleSampler([0, 1, 2, 3, 4, 5, 6, 7], group=4, buffer_groups=1, seed=3)
    >>> order = list(s)
    >>> sorted(order) == list(range(8)) and {p // 4 for p in order[:4]} in ({0}, {1})
    True
    """

    def __init__(self, ids: Sequence[int] | np.ndarray, group: int, *, buffer_groups: int = 64,
                 seed: int = 0) -> None:
        if buffer_groups < 1:
            raise InvalidArgumentError(f"buffer_groups must be >= 1, got {buffer_groups}")
        self.ids = np.asarray(ids, dtype=np.int64)
        self.group, self.buffer_groups, self.seed = int(group), int(buffer_groups), int(seed)
        self.epoch = 0
        keys = self.ids // self.group
        order = np.argsort(keys, kind="stable")
        cuts = np.flatnonzero(np.diff(keys[order])) + 1
        self._groups = np.split(order, cuts) if len(order) else []

    def set_epoch(self, epoch: int) -> None:
        """Shuffle differently in ``epoch`` (as ``DistributedSampler.set_epoch``)."""
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[int]:
        rng = np.random.default_rng((self.seed, self.epoch))
        groups = [self._groups[i] for i in rng.permutation(len(self._groups))]
        for start in range(0, len(groups), self.buffer_groups):
            window = np.concatenate(groups[start:start + self.buffer_groups])
            yield from (int(p) for p in rng.permutation(window))

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return (f"<tessera.torch.GroupShuffleSampler {len(self)} samples, buffer of "
                f"{self.buffer_groups} groups, epoch {self.epoch}>")


class FrequencyDataset(Dataset[Any]):
    """Images of an :class:`~tessera.images.ImageColumns` set, one per index (in id order),
    as ``(tensor, label)`` (``labels=False``: the tensor alone).

    Args:
        url: the image set.
        k: diagonals to read: an int, ``"all"``, or a callable ``epoch -> k``
            (:meth:`set_epoch` calls it); :meth:`set_k` changes it.
        output: ``"pixels"`` (uint8 ``(3, H*scale, W*scale)`` tensors, channels first) or
            ``"coefficients"`` (int8 ``(C, BY, BX, T(k))``).
        scale: reduced-resolution pixels (``1/2 .. 1/32``).
        transform: applied to each image tensor.
        cache_bytes: None (default): read through the process's shared column cache
            (:mod:`tessera.images.cache`, ``TESSERA_IMAGES_CACHE_BYTES``), so a rising k, or
            another model reading the same set in this process, fetches only diagonals not
            held yet; 0: no cache; a number: a cache of this many bytes of this dataset's
            own (per worker process).

    >>> import numpy as np, tessera
    >>> cols = tessera.create_images("memory://doc-frequency-dataset", size=(32, 32))
    >>> _ = cols.append(np.zeros((3, 32, 32, 3), np.uint8), labels=[0, 1, 1])
    >>> ds = FrequencyDataset("memory://doc-frequency-dataset", k=4)
    >>> image, label = ds[2]
    >>> len(ds), tuple(image.shape), int(label)
    (3, (3, 32, 32), 1)
    """

    def __init__(self, url: str, k: KSchedule = 8, *, output: str = "pixels",
                 scale: float = 1.0, transform: Callable[[torch.Tensor], Any] | None = None,
                 labels: bool = True, storage_options: dict[str, Any] | None = None,
                 at: At = None, cache_bytes: int | None = None,
                 timestamp: int | None = None) -> None:
        if cache_bytes is not None and (isinstance(cache_bytes, bool)
                                        or not isinstance(cache_bytes, int) or cache_bytes < 0):
            raise InvalidArgumentError(f"cache_bytes must be None (the shared cache), 0 (none) "
                                       f"or a number of bytes, got {cache_bytes!r}")
        self.cache_bytes = cache_bytes
        self.url, self.storage_options = url, dict(storage_options or {})
        when = at_ns(renamed("timestamp", "at", timestamp, at))
        self.timestamp = time.time_ns() if when is None else when
        self.output, self.scale, self.transform, self.with_labels = (output, scale, transform,
                                                                     labels)
        self._cols = PerProcess(functools.partial(  # reopened in each worker
            _open_set, url, self.timestamp, self.storage_options, cache_bytes))
        self._schedule = k
        self.epoch = 0
        cols = self.columns
        self.k = self._resolve(k)
        if output not in ("pixels", "coefficients"):
            raise InvalidArgumentError(f"output must be 'pixels' or 'coefficients', got "
                                       f"{output!r}")
        if output == "pixels":
            cols.fmt.check_scale(scale)
        self.ids = cols.ids()
        # The snapshot never changes: every label is read once, not once per batch.
        self._labels = cols.labels(self.ids) if labels and len(self.ids) else None

    @property
    def columns(self) -> ImageColumns:
        """The image set, opened in this process at the dataset's snapshot."""
        return self._cols.get()

    def _resolve(self, k: KSchedule) -> int:
        value = k(self.epoch) if callable(k) else k
        return self.columns.fmt.check_k(value)

    def set_k(self, k: int | str) -> None:
        """Read ``k`` diagonals from now on (a new loader iterator picks it up)."""
        self._schedule = k
        self.k = self._resolve(k)

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch``: a callable ``k`` is asked for this epoch's k."""
        self.epoch = int(epoch)
        self.k = self._resolve(self._schedule)

    def __getstate__(self) -> dict[str, Any]:
        """What a worker process receives: the current ``k`` in place of the schedule (a
        worker never changes epochs, and a lambda cannot be pickled for ``spawn``)."""
        state = dict(self.__dict__)
        state["_schedule"] = self.k
        return state

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return (f"<tessera.torch.FrequencyDataset {self.url} {len(self)} images at k={self.k}, "
                f"output {self.output!r}, scale {self.scale:g}>")

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """The items of one batch, read with one call (one request per group touched)."""
        positions = [int(i) for i in indices]
        for p in positions:
            if not -len(self.ids) <= p < len(self.ids):
                raise IndexError(f"index {p} is out of range: {self.url} has {len(self.ids)} "
                                 "images")
        ids = self.ids[positions]
        cols = self.columns
        values = cols.read(ids, k=self.k, output=self.output, scale=self.scale)
        tensors = torch.from_numpy(np.ascontiguousarray(
            values.transpose(0, 3, 1, 2) if self.output == "pixels" else values))
        items: list[Any] = [t if self.transform is None else self.transform(t)
                            for t in tensors]
        if not self.with_labels:
            return items
        assert self._labels is not None
        labels = self._labels[positions]
        return [(item, int(label)) for item, label in zip(items, labels, strict=True)]

    def group_keys(self) -> list[int]:
        """Per position, the image-column group holding the image (its images are fetched
        together): the key :class:`~tessera.torch.DistributedGroupSampler` shards by."""
        group = self.columns.group
        return [int(i) // group for i in self.ids]

    def sampler(self, *, buffer_groups: int = 64, seed: int = 0) -> GroupShuffleSampler:
        """A :class:`GroupShuffleSampler` over this dataset."""
        return GroupShuffleSampler(self.ids, self.columns.group, buffer_groups=buffer_groups,
                                   seed=seed)

    def loader(self, batch_size: int = 256, *, num_workers: int = 0, buffer_groups: int = 64,
               seed: int = 0, **kwargs: Any) -> Loader:
        """A DataLoader whose default sampler is a :class:`GroupShuffleSampler` (pass
        ``sampler=`` for another), whose workers start with ``spawn`` and whose worker
        deaths are explained (:class:`~tessera.integrations.loading.Loader`)."""
        if "sampler" not in kwargs:
            sampler = self.sampler(buffer_groups=buffer_groups, seed=seed)
            sampler.set_epoch(self.epoch)
            kwargs["sampler"] = sampler
        return Loader(self, batch_size=batch_size, num_workers=num_workers, **kwargs)


def _open_set(url: str, timestamp: int, storage_options: dict[str, Any],
              cache_bytes: int | None) -> ImageColumns:
    """The image set at its snapshot, reading through the process's shared cache
    (``cache_bytes=None``), a cache of its own, or none (0)."""
    cache: ColumnCache | str | None = (SHARED if cache_bytes is None else
                                       ColumnCache(cache_bytes) if cache_bytes else None)
    return ImageColumns.open(url, at=timestamp, storage_options=storage_options, cache=cache)
