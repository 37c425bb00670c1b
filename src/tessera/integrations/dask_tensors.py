"""Dask arrays over the tensors of a tensor table (import :func:`from_tensor` from
:mod:`tessera.dask`): chunks along the leading dimension, each task a slice read that fetches
only the rows holding it, in whichever process runs it (the source is picklable and pinned
to the table version seen when the dask array was made). Sparse tensors are read dense per
chunk (each chunk under the table's ``max_dense_bytes``).

>>> import numpy as np, tempfile
>>> from tessera.tables import TensorTable
>>> url = "file://" + tempfile.mkdtemp() + "/t"
>>> _ = TensorTable.create(url).write("x", np.arange(24.0).reshape(6, 4))
>>> d = from_tensor(url, "x", chunks=4)
>>> d.chunks, float(d[1:5, 2].sum().compute())
(((4, 2), (4,)), 48.0)
"""

from __future__ import annotations

import functools
import math
from typing import Any

import dask.array as da
import numpy as np

from tessera.errors import FormatError
from tessera.integrations.handle import PerProcess
from tessera.tables import TensorTable
from tessera.tables.tensors import DTYPES
from tessera.when import At, renamed

#: Bytes per chunk when ``chunks`` is not given.
DEFAULT_CHUNK_BYTES = 64 << 20


class TensorSource:
    """What ``dask.array.from_array`` slices: one tensor of a table.

    >>> import tempfile, numpy as np, tessera
    >>> url = tempfile.mkdtemp() + "/tensors"
    >>> _ = tessera.create_table(url).write("x", np.arange(4.0))
    >>> TensorSource(url, "x", 1, {})[1:3].tolist()
    [1.0, 2.0]
    """

    def __init__(self, url: str, tensor_id: str, version: int,
                 storage_options: dict[str, Any]) -> None:
        self.url, self.tensor_id, self.version = url, tensor_id, version
        self.storage_options = storage_options
        self._table = PerProcess(functools.partial(
            TensorTable.open, url, at=version, storage_options=storage_options))
        ref = self._ref()
        if ref.dtype == "bfloat16":
            raise FormatError(f"tensor {tensor_id!r} is bfloat16, which numpy (and so dask) "
                              "cannot hold; read it with TensorRef.torch()")
        self.shape, self.ndim = ref.shape, len(ref.shape)
        self.dtype = DTYPES[ref.dtype]

    def _ref(self) -> Any:
        return self._table.get()[self.tensor_id]

    def __getitem__(self, key: Any) -> np.ndarray:
        items = key if isinstance(key, tuple) else (key,)
        if any(isinstance(i, slice) and not len(range(*i.indices(n)))
               for i, n in zip(items, self.shape, strict=False)):
            shape = tuple(len(range(*i.indices(n))) if isinstance(i, slice) else 1
                          for i, n in zip(items, self.shape, strict=False))
            return np.zeros(shape, self.dtype)  # dask asks for empty blocks (meta)
        out: np.ndarray = self._ref().read(key, force=True)
        return out


def from_tensor(url: str, tensor_id: str, *, chunks: Any = None, at: At = None,
                storage_options: dict[str, Any] | None = None,
                version: int | None = None) -> da.Array:
    """A dask array of tensor ``tensor_id`` of the table at ``url`` (as it was ``at``: a
    version, a datetime or an ISO-8601 string; ``version=`` is its older name); ``chunks``
    as dask takes them (default: whole trailing dimensions, leading slices of about 64
    MiB).

    >>> import tempfile, numpy as np, tessera
    >>> url = tempfile.mkdtemp() + "/tensors"
    >>> _ = tessera.create_table(url).write("x", np.arange(6.0).reshape(2, 3))
    >>> float(from_tensor(url, "x").sum().compute())
    15.0
    """
    table = TensorTable.open(url, at=renamed("version", "at", version, at),
                             storage_options=storage_options)
    source = TensorSource(url, tensor_id, table.version, dict(storage_options or {}))
    if chunks is None:
        per_lead = math.prod(source.shape[1:]) * source.dtype.itemsize if source.shape else 1
        lead = max(1, DEFAULT_CHUNK_BYTES // max(1, per_lead))
        chunks = (lead, *source.shape[1:]) if source.shape else ()
    return da.from_array(source, chunks=chunks, asarray=False, fancy=False,
                         name=f"tessera-tensor-{tensor_id}-{table.version}-{hash(url)}")
