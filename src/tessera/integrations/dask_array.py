"""Dask arrays over Tessera arrays (import them from :mod:`tessera.dask`).

:func:`from_array` gives a dask array whose chunks are the array's tiles; each task reads its
block through the read planner, in whichever process runs it (the task holds a picklable
:class:`~tessera.integrations.handle.ArrayRef`, pinned to the snapshot seen when the dask
array was made). :func:`to_array` writes a dask array's blocks in parallel, each as its own
fragment: fragments need no locks, so any scheduler works, ``distributed`` included.

>>> import numpy as np, tessera
>>> from tessera.dask import from_array, to_array
>>> arr = tessera.from_numpy("memory://doc-dask", np.arange(36).reshape(6, 6), tile=(4, 4))
>>> x = from_array(arr)
>>> x.chunks, int(x[1:5, 2].sum().compute())
(((4, 2), (4, 2)), 68)
>>> out = to_array(x * 2, "memory://doc-dask-out")
>>> int(out[5, 5]), len(out.fragments)
(70, 4)
"""

from __future__ import annotations

import math
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.delayed import delayed

from tessera.array.array import Array
from tessera.array.factories import create_array, open_array
from tessera.errors import InvalidArgumentError, InvalidTypeError
from tessera.format.schema import ArraySchema, Attr, Dim
from tessera.integrations.handle import ArrayRef


class TileSource:
    """What ``dask.array.from_array`` slices: a Tessera array attribute with 0-based
    indexing. Picklable; reads go through the planner.

    >>> import numpy as np, tessera
    >>> from tessera.integrations.handle import ArrayRef
    >>> _ = tessera.from_numpy("memory://doc-tile-source", np.arange(6).reshape(2, 3))
    >>> source = TileSource(ArrayRef("memory://doc-tile-source"), "data")
    >>> source.shape, source[1, 1:].tolist()
    ((2, 3), [4, 5])
    """

    def __init__(self, ref: ArrayRef, attr: str, method: str | None = None,
                 phi: float | None = None) -> None:
        schema = ref.array.schema
        self.ref, self.attr, self.method, self.phi = ref, attr, method, phi
        a = schema.attr(attr)
        if a.cell_shape:
            raise InvalidTypeError(f"attribute {attr!r} of {ref.uri} has cells of shape "
                                   f"{a.cell_shape}; dask arrays take scalar cells")
        self.shape = schema.shape
        self.dtype = np.dtype(a.dtype)
        self.ndim = len(self.shape)
        self._lower = schema.lower

    def __getitem__(self, key: Any) -> np.ndarray:
        items = key if isinstance(key, tuple) else (key,)
        sel: list[Any] = []
        for item, lo, n in zip(items, self._lower, self.shape, strict=False):
            if isinstance(item, slice):
                start, stop, step = item.indices(n)
                if not len(range(start, stop, step)):  # dask asks for empty blocks (meta)
                    empty: np.ndarray = np.broadcast_to(np.zeros((), self.dtype),
                                                        self.shape)[key].copy()
                    return empty
                sel.append(slice(lo + start, lo + stop, step))
            else:
                sel.append(lo + int(item))
        out: np.ndarray = self.ref.array.read(tuple(sel), attrs=[self.attr],
                                              method=self.method, phi=self.phi)[self.attr]
        return out


def _chunks(schema: ArraySchema) -> tuple[tuple[int, ...], ...]:
    """Chunk sizes per dimension that follow the tile grid."""
    out = []
    for d in schema.dims:
        n, t = d.domain[1] - d.domain[0] + 1, d.tile
        out.append((t,) * (n // t) + ((n % t,) if n % t else ()))
    return tuple(out)


def from_array(array: str | Array | ArrayRef, *, attr: str | None = None,
               storage_options: dict[str, Any] | None = None, method: str | None = None,
               phi: float | None = None) -> da.Array:
    """A dask array over a dense Tessera array: chunks are tiles, each task a planned read.

    ``array``: a URI, an open :class:`~tessera.Array` or an ``ArrayRef``; ``attr``: the
    attribute (default the first); ``method`` and ``phi`` steer the planner per task.

    >>> import numpy as np, tessera
    >>> _ = tessera.from_numpy("memory://doc-dask-from", np.arange(16).reshape(4, 4), tile=(2, 2))
    >>> x = from_array("memory://doc-dask-from")
    >>> x.chunks, int(x.sum().compute())
    (((2, 2), (2, 2)), 120)
    """
    ref = ArrayRef.resolve(array, storage_options)
    schema = ref.array.schema
    if schema.sparse:
        raise InvalidTypeError(f"{ref.uri} is a sparse array; tessera.dask reads dense arrays")
    name = schema.attrs[0].name if attr is None else schema.attr(attr).name
    source = TileSource(ref, name, method, phi)
    token = tokenize(ref.uri, ref.timestamp, name, method, phi)
    return da.from_array(source, chunks=_chunks(schema), lock=False, asarray=False,
                         fancy=False, name=f"tessera-{token}")


def _write_block(ref: ArrayRef, block: np.ndarray, origin: tuple[int, ...]) -> str:
    return ref.array.write(np.ascontiguousarray(block), origin=origin).name


def to_array(x: da.Array, uri: str, *, tile: tuple[int, ...] | None = None,
             codec: str | None = None, attr: str = "data", fill: Any = None,
             storage_options: dict[str, Any] | None = None, compute: bool = True) -> Any:
    """Write a dask array to a new Tessera array at ``uri``, every block as its own fragment
    (written in parallel by whatever scheduler runs the graph; no locks).

    ``tile`` defaults to the dask chunk shape (the first chunk per dimension). Returns the
    array opened for reading, or with ``compute=False`` a ``dask.delayed`` object that
    writes the blocks and yields their fragment names.

    >>> import dask.array as da, tessera
    >>> _ = to_array(da.ones((4, 6), chunks=(2, 3)), "memory://doc-dask-to")
    >>> arr = tessera.open_array("memory://doc-dask-to")
    >>> arr.schema.tile_shape, float(arr[:].sum())
    ((2, 3), 24.0)
    """
    if any(math.isnan(c) for dim in x.chunks for c in dim):
        raise InvalidArgumentError("to_array needs known chunk sizes; call x.compute_chunk_sizes()")
    if x.ndim == 0 or 0 in x.shape:
        raise InvalidArgumentError(f"to_array needs a non-empty array with dimensions, got shape "
                                   f"{x.shape}")
    extents = tile or tuple(int(c[0]) for c in x.chunks)
    dtype = np.dtype(x.dtype).newbyteorder("<")
    schema = ArraySchema([Dim(f"d{i}", (0, n - 1), min(int(t), n)) for i, (n, t) in
                          enumerate(zip(x.shape, extents, strict=True))],
                         [Attr(attr, dtype.str, fill, codec)])
    create_array(uri, schema, storage_options=storage_options)
    ref = ArrayRef(uri, storage_options, mode="w")
    starts = [np.concatenate([[0], np.cumsum(c)[:-1]]).astype(int) for c in x.chunks]
    blocks = x.astype(dtype).to_delayed()
    writes = [delayed(_write_block)(ref, blocks[idx],
                                         tuple(int(starts[d][i]) for d, i in enumerate(idx)))
              for idx in np.ndindex(*blocks.shape)]
    job = delayed(list)(writes)
    if not compute:
        return job
    job.compute()
    return open_array(uri, storage_options=storage_options)
