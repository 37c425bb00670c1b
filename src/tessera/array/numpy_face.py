"""What numpy, h5py and zarr users reach for on an array handle (:class:`NumpyConventions`,
a base of :class:`~tessera.array.array.Array`): ``np.asarray(arr)``, ``len``, iteration over
the first axis, ``size``, ``nbytes``, ``tile`` (alias ``chunks``), ``fill_value``, and zarr's
``oindex`` (orthogonal) and ``vindex`` (vectorised, pointwise) selections.

>>> import numpy as np, tessera
>>> arr = tessera.from_numpy("memory://doc-numpy-face", np.arange(12).reshape(3, 4),
...                          tile=(2, 2))
>>> len(arr), arr.size, arr.chunks, int(np.asarray(arr).sum())
(3, 12, (2, 2), 66)
>>> arr.oindex[[0, 2], np.array([True, False, False, True])].tolist()
[[0, 3], [8, 11]]
>>> arr.vindex[[0, 2], [1, 3]].tolist()
[1, 11]
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from tessera.config import CastRule
from tessera.errors import InvalidArgumentError, InvalidTypeError
from tessera.format.schema import ArraySchema
from tessera.format.selection import vectorized_points


class NumpyConventions:
    """numpy/h5py/zarr conventions on an array handle (state and reads are
    :class:`~tessera.array.array.Array`'s)."""

    schema: ArraySchema

    if TYPE_CHECKING:
        @property
        def shape(self) -> tuple[int, ...]:
            """Cells per dimension."""

        def read(self, sel: Any = ..., *, attrs: list[str] | None = None,
                 method: str | None = None, phi: float | None = None) -> Any:
            """A read (see :meth:`Array.read`)."""

        def write_points(self, sel: Any, values: Any, *, cast: CastRule | None = None,
                         ) -> Any:
            """A vectorised write (see :meth:`ArrayWrites.write_points`)."""

        def __setitem__(self, sel: Any, values: Any) -> None:
            """A write (see :meth:`ArrayWrites.__setitem__`)."""

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The whole array as an ndarray (``np.asarray(arr)``, ``np.array(arr, dtype)``).
        Reading always makes a new array, so ``copy=False`` is refused, as numpy 2 asks."""
        if copy is False:
            raise InvalidArgumentError("np.asarray(arr, copy=False) cannot hold: reading an "
                                       "array always makes a new ndarray; drop copy=False")
        if self.schema.sparse:
            raise InvalidTypeError("np.asarray needs a dense array; read a sparse array by "
                                   "boxes (arr[lo:hi, ...] gives its cells and coordinates)")
        if len(self.schema.attrs) != 1:
            raise InvalidTypeError(f"np.asarray needs a single-attribute array; this one has "
                                   f"{[a.name for a in self.schema.attrs]}: read one with "
                                   "arr.read(attrs=[name])")
        out: np.ndarray = np.asarray(self.read(...))  # (a 0-d array reads as a scalar)
        return out if dtype is None else out.astype(dtype, copy=False)

    def __len__(self) -> int:
        """Cells along the first dimension (a 0-d array has no length, as in numpy)."""
        if not self.schema.dims:
            raise InvalidTypeError("len() of unsized object: the array has 0 dimensions")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        """The first axis, one index at a time (as numpy), read one tile-row of the first
        dimension at a time: a 1000-row array in tiles of 100 rows is 10 reads, not 1000."""
        if self.schema.sparse:
            raise InvalidTypeError("iteration walks the first axis of a dense array; read a "
                                   "sparse array by boxes")
        if not self.schema.dims:
            raise InvalidTypeError("iteration over a 0-d array")
        dim = self.schema.dims[0]
        lo, hi = int(dim.domain[0]), int(dim.domain[1])
        rows = self.schema.tile_shape[0]
        for start in range(lo, hi + 1, rows):
            block = self.read(slice(start, min(start + rows, hi + 1)))
            for i in range(min(rows, hi + 1 - start)):
                yield ({n: v[i] for n, v in block.items()} if isinstance(block, dict)
                       else block[i])

    @property
    def size(self) -> int:
        """Number of cells."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of every cell of every attribute once read (numpy's ``nbytes`` for a
        single-attribute array)."""
        return self.size * sum(a.cell_nbytes for a in self.schema.attrs)

    @property
    def tile(self) -> tuple[int, ...]:
        """The space tile's extent per dimension."""
        return self.schema.tile_shape

    @property
    def chunks(self) -> tuple[int, ...]:
        """:attr:`tile`, by the name dask and zarr users know."""
        return self.tile

    @property
    def fill_value(self) -> Any:
        """What unwritten cells read as (of the first attribute, as :attr:`dtype` is)."""
        return self.schema.attrs[0].fill_value

    @property
    def oindex(self) -> OrthogonalIndex:
        """Orthogonal selections, as zarr's ``oindex``: per dimension an int, a slice, an
        integer list or a 1-D boolean mask, each applied to its axis independently (what
        ``arr[...]`` does too)."""
        return OrthogonalIndex(self)

    @property
    def vindex(self) -> VectorizedIndex:
        """Vectorised (pointwise) selections, as zarr's ``vindex`` and numpy's fancy
        indexing: one integer array per dimension, broadcast together, or a boolean mask of
        the array's shape; read as points with one plan."""
        return VectorizedIndex(self)


class OrthogonalIndex:
    """``arr.oindex[...]``: reads and writes of orthogonal selections."""

    def __init__(self, array: NumpyConventions) -> None:
        self._array = array

    def __getitem__(self, sel: Any) -> Any:
        return self._array.read(sel)

    def __setitem__(self, sel: Any, values: Any) -> None:
        self._array[sel] = values


class VectorizedIndex:
    """``arr.vindex[...]``: reads and writes of pointwise selections."""

    def __init__(self, array: NumpyConventions) -> None:
        self._array = array

    def __getitem__(self, sel: Any) -> Any:
        points, shape = vectorized_points(sel, self._array.schema)
        got = self._array.read(points)
        if isinstance(got, dict):
            return {n: v.reshape(shape + v.shape[1:]) for n, v in got.items()}
        return got.reshape(shape + got.shape[1:])

    def __setitem__(self, sel: Any, values: Any) -> None:
        self._array.write_points(sel, values)
