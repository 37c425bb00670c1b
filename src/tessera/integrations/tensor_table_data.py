"""PyTorch over tensor tables (import from :mod:`tessera.torch`): :class:`TensorTableDataset`
gives one sample per leading index of each tensor (or one per tensor), reads a DataLoader
batch with one read per tensor it touches (the batch's indices of a tensor as one
selection: only their rows), pins the table version it was made at, and starts workers
with ``spawn`` (delta-rs panics in a forked child).

>>> import numpy as np, tempfile
>>> from tessera.tables import TensorTable
>>> url = "file://" + tempfile.mkdtemp() + "/t"
>>> tt = TensorTable.create(url)
>>> _ = tt.write_many({"a": np.arange(6.0).reshape(3, 2), "b": np.ones((2, 2))})
>>> ds = TensorTableDataset(url)
>>> len(ds), ds[3].tolist(), ds.index[3]
(5, [1.0, 1.0], ('b', 0))
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils.data import Dataset

from tessera.errors import InvalidArgumentError
from tessera.integrations.handle import PerProcess
from tessera.integrations.loading import Loader
from tessera.tables import TensorTable
from tessera.tables.tensors import DTYPES
from tessera.when import At, renamed


class TensorTableDataset(Dataset[Any]):
    """Samples of the tensors of a table.

    Args:
        url: the table.
        ids: the tensors (a list, or a prefix string; default all).
        whole_tensors: one sample per tensor instead of one per leading index.
        transform: applied to each sample.
        at: the table as it was then: a version, a datetime or an ISO-8601 string (default:
            the newest when made; ``version=`` is its older name).
        dense: sparse tensors' samples as dense tensors instead of sparse COO ones.

    >>> import tempfile, numpy as np, tessera
    >>> url = tempfile.mkdtemp() + "/tensors"
    >>> _ = tessera.create_table(url).write("x", np.arange(6.0).reshape(3, 2))
    >>> ds = TensorTableDataset(url, "x")  # one sample per row of the tensor
    >>> len(ds), ds[1].tolist()
    (3, [2.0, 3.0])
    """

    def __init__(self, url: str, ids: Sequence[str] | str | None = None, *,
                 whole_tensors: bool = False, transform: Callable[[Any], Any] | None = None,
                 at: At = None, dense: bool = False, version: int | None = None,
                 storage_options: dict[str, Any] | None = None) -> None:
        self.url, self.storage_options = url, dict(storage_options or {})
        self.whole_tensors, self.transform, self.dense = whole_tensors, transform, dense
        table = TensorTable.open(url, at=renamed("version", "at", version, at),
                                 storage_options=self.storage_options)
        self.version = table.version
        self._table = PerProcess(functools.partial(  # reopened in each worker
            TensorTable.open, url, at=self.version, storage_options=self.storage_options),
            table)
        known = table.ids()
        if ids is None:
            chosen = known
        elif isinstance(ids, str):
            chosen = table.ids(prefix=ids)
        else:
            chosen = list(ids)
            missing = [i for i in chosen if i not in table]
            if missing:
                raise InvalidArgumentError(f"no tensor {missing[0]!r} in {url} at version "
                                           f"{self.version}")
        self.ids = chosen
        self.index: list[tuple[str, int | None]] = []
        for tensor_id in chosen:
            ref = table[tensor_id]
            if whole_tensors or not ref.shape:
                self.index.append((tensor_id, None))
            else:
                self.index.extend((tensor_id, i) for i in range(ref.shape[0]))

    @property
    def table(self) -> TensorTable:
        """The table, opened in this process at the dataset's version."""
        return self._table.get()

    def __len__(self) -> int:
        return len(self.index)

    def __repr__(self) -> str:
        return (f"<tessera.torch.TensorTableDataset {self.url} version {self.version}, "
                f"{len(self.ids)} tensors, {len(self)} samples>")

    def __getitem__(self, position: int) -> Any:
        return self.__getitems__([position])[0]

    def __getitems__(self, positions: Sequence[int]) -> list[Any]:
        """The samples of one batch: one read per tensor the batch touches."""
        wanted: dict[str, list[int]] = {}
        for p in positions:
            if not -len(self.index) <= int(p) < len(self.index):
                raise IndexError(f"index {p} is out of range: the dataset has "
                                 f"{len(self.index)} samples")
            tensor_id, lead = self.index[int(p)]
            if lead is not None:
                wanted.setdefault(tensor_id, []).append(lead)
        got: dict[tuple[str, int | None], Any] = {}
        out_kind = "numpy" if self.dense else "torch"
        for tensor_id, leads in wanted.items():
            unique = sorted(set(leads))
            ref = self.table[tensor_id]
            values = ref.read((unique,), output=out_kind if ref.layout == "ftsf" or self.dense
                              else "torch", force=self.dense)
            for n, lead in enumerate(unique):
                got[(tensor_id, lead)] = values[n]
        items = []
        for p in positions:
            key = self.index[int(p)]
            if key not in got:  # a whole tensor (or a 0-d one)
                ref = self.table[key[0]]
                got[key] = ref.read((), output=out_kind if ref.layout == "ftsf" or self.dense
                                    else "torch", force=self.dense)
            value = got[key]
            if not isinstance(value, torch.Tensor):
                value = torch.from_numpy(value.copy() if not value.flags.writeable else value)
            items.append(value if self.transform is None else self.transform(value))
        return items

    def group_keys(self) -> list[tuple[str, int]]:
        """Per sample, its tensor and the stretch of leading indices whose rows are stored
        together (about ``chunk_bytes`` of the table's settings here, as a row group
        written with the same settings holds): the key
        :class:`~tessera.torch.DistributedGroupSampler` shards by. A whole tensor is one
        group."""
        table = self.table
        per: dict[str, int] = {}
        keys = []
        for tensor_id, lead in self.index:
            if lead is None:
                keys.append((tensor_id, 0))
                continue
            if tensor_id not in per:
                ref = table[tensor_id]
                lead_bytes = math.prod(ref.shape[1:]) * DTYPES[ref.dtype].itemsize
                per[tensor_id] = max(1, table.config.chunk_bytes // max(1, lead_bytes))
            keys.append((tensor_id, lead // per[tensor_id]))
        return keys

    def shard(self, rank: int, world_size: int) -> TensorTableDataset:
        """The part of this dataset that ``rank`` of ``world_size`` reads: whole tensors
        assigned by a hash of their id (the same on every machine and run)."""
        if not 0 <= rank < world_size:
            raise InvalidArgumentError(f"rank must be 0..{world_size - 1}, got {rank}")
        mine = [i for i in self.ids if zlib.crc32(i.encode()) % world_size == rank]
        return TensorTableDataset(self.url, mine, whole_tensors=self.whole_tensors,
                                  transform=self.transform, at=self.version,
                                  dense=self.dense, storage_options=self.storage_options)

    def loader(self, batch_size: int = 32, *, shuffle: bool = False, num_workers: int = 0,
               **kwargs: Any) -> Loader:
        """A DataLoader whose workers start with ``spawn`` and whose worker deaths are
        explained (:class:`~tessera.integrations.loading.Loader`)."""
        return Loader(self, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers,
                      **kwargs)
