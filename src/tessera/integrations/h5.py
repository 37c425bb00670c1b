"""An h5py-shaped facade over Tessera arrays (import it as :mod:`tessera.h5`).

``import tessera.h5 as h5py`` lets a plain h5py script run against any Tessera store for
the operations below; what h5py can do and this facade cannot raises
:class:`NotImplementedError` naming the feature.

A group is a folder holding ``__group.json``, a dataset a Tessera array (its chunks are
tiles; its writes add fragments, so ``tessera.open_array(url, at=...)`` reads earlier
versions); attributes are JSON, never pickled (the layout: docs/integrations.md).

Selections (:data:`~tessera.format.selection.H5_RULES`), creation arguments, attributes,
groups and file modes follow h5py, refusals and exception classes included. Differences:
``chunks`` is always the tile shape; datasets are numeric with at least one dimension; a
value outside a dataset's dtype is refused where h5py wraps it; a group's attribute updates
are read-modify-write of one object (last writer wins), a dataset's per key. Each dataset
keeps a chunk cache as HDF5's (``rdcc_nbytes``; :mod:`tessera.integrations.h5_chunks`).

>>> import numpy as np
>>> import tessera.h5 as h5py
>>> with h5py.File("memory://doc-h5", "w") as f:
...     d = f.create_dataset("grp/x", data=np.arange(12).reshape(3, 4), chunks=(2, 2))
...     d.attrs["units"] = "m"
...     d[0, :2] = [-1, -2]
>>> f = h5py.File("memory://doc-h5", "r")
>>> f["grp/x"][:, 1], f["grp"]["x"].attrs["units"], list(f.keys())
(array([-2,  5,  9]), 'm', ['grp'])
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tessera.array.array import Array
from tessera.array.factories import create_array, open_array
from tessera.array.fragment import SCHEMA_KEY
from tessera.errors import (
    InvalidArgumentError,
    InvalidTypeError,
    NameNotFoundError,
    ReadOnlyError,
)
from tessera.format.layout import default_tile
from tessera.format.schema import ArraySchema, Attr, Dim
from tessera.format.selection import (
    H5_RULES,
    box_of,
    is_full_mask,
    normalize_selection,
    plain_items,
)
from tessera.format.values import as_values, fit_values
from tessera.integrations.h5_args import (
    check_broadcast,
    codec_spec,
    member_name,
    scalar_selection,
    shape_arg,
)
from tessera.integrations.h5_attrs import (
    AttributeManager,
    DatasetAttributes,
    join_path,
    unsupported,
)
from tessera.integrations.h5_chunks import OpenDatasets, chunk_budget
from tessera.storage.blocking import open_store
from tessera.storage.keys import validate_key

GROUP_KEY = "__group.json"
MODES = ("r", "r+", "w", "w-", "x", "a")
#: h5py Dataset features this facade does not offer (each raises NotImplementedError).
UNSUPPORTED_DATASET = ("id", "dims", "regionref", "asstr", "fields",
                       "iter_chunks", "virtual_sources", "is_virtual", "flush",
                       "external", "scaleoffset", "shuffle", "fletcher32",
                       "make_scale", "is_scale", "file_id", "ref", "lazy_compute")


class _Node:
    """What groups and datasets share: a path in a file, a name, a parent, attributes."""

    def __init__(self, file: File, path: str) -> None:
        self._file, self._path = file, path

    @property
    def name(self) -> str:
        """The absolute name, ``/`` for the root."""
        return "/" + self._path

    @property
    def file(self) -> File:
        """The file this node belongs to."""
        return self._file

    @property
    def parent(self) -> Group:
        """The group holding this node (the root is its own parent)."""
        return Group(self._file, self._path.rpartition("/")[0])

    @property
    def attrs(self) -> AttributeManager:
        """The node's attributes."""
        return AttributeManager(self._file._store, self._path, self._file._writable)

    def __eq__(self, other: object) -> bool:
        """The same object of the same store, as h5py compares objects (a group and a
        dataset are never equal; two handles on one dataset are)."""
        return (isinstance(other, _Node) and isinstance(other, Dataset) ==
                isinstance(self, Dataset) and other._path == self._path
                and str(other._file._store.url) == str(self._file._store.url))

    def __hash__(self) -> int:
        return hash((str(self._file._store.url), self._path, isinstance(self, Dataset)))


class Group(_Node):
    """A group: a hierarchy of names holding groups and datasets (as h5py's).

    >>> with File("memory://doc-h5-group/f.h5", "w") as f:
    ...     _ = f.create_group("runs").create_dataset("first", data=[1, 2, 3])
    ...     list(f["runs"].keys())
    ['first']
    """

    # -- names -----------------------------------------------------------------------------
    def _resolve(self, name: str | bytes) -> str:
        name = member_name(name)
        if not name:
            raise InvalidArgumentError("a name is not empty")
        if name in (".", "./"):
            return self._path
        path = name.strip("/") if name.startswith("/") else join_path(self._path, name.strip("/"))
        if not path:
            return ""
        validate_key(path)
        for seg in path.split("/"):
            if seg.startswith("__"):
                raise InvalidArgumentError(f"name {name!r}: segments starting with '__' are "
                                           "reserved for Tessera's own objects")
        return path

    def _kind(self, path: str) -> str | None:
        store = self._file._store
        if path == "" or store.exists(join_path(path, GROUP_KEY)):
            return "group"
        if store.exists(join_path(path, SCHEMA_KEY)):
            return "dataset"
        return None

    def __getitem__(self, name: str) -> Group | Dataset:
        self._file._check_open()
        path = self._resolve(name)
        kept = self._file._datasets.kept(path)
        if kept is not None:
            return Dataset(self._file, path, kept)
        kind = self._kind(path)
        if kind == "group":
            return Group(self._file, path)
        if kind == "dataset":
            return Dataset(self._file, path)
        raise NameNotFoundError(f"Unable to open object (object {name!r} doesn't exist in "
                                f"{self.name})")

    def get(self, name: str, default: Any = None) -> Any:
        """The member ``name``, or ``default``."""
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        """True if ``name`` (str or bytes; ``.`` is this group) names a member; False on a
        closed file, as h5py's."""
        text = member_name(name)
        if not self._file._open or not text:
            return False
        return self._kind(self._resolve(text)) is not None

    def keys(self) -> list[str]:
        """Member names, sorted (h5py's default order)."""
        self._file._check_open()
        listing = self._file._store.list_dir(self._path)
        out = []
        for prefix in listing.prefixes:
            child = prefix.rstrip("/").rsplit("/", 1)[-1]
            if not child.startswith("__") and self._kind(join_path(self._path, child)):
                out.append(child)
        return out

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def values(self) -> list[Group | Dataset]:
        """The members, in key order."""
        return [self[k] for k in self.keys()]

    def items(self) -> list[tuple[str, Group | Dataset]]:
        """(name, member) pairs, in key order."""
        return [(k, self[k]) for k in self.keys()]

    def visititems(self, func: Callable[[str, Any], Any]) -> Any:
        """Call ``func(name, obj)`` for every member below, depth first, names relative to
        this group; stop at the first call that returns something other than ``None``."""
        def walk(group: Group, prefix: str) -> Any:
            for key, obj in group.items():
                name = join_path(prefix, key)
                if (ret := func(name, obj)) is not None:
                    return ret
                if isinstance(obj, Group) and (ret := walk(obj, name)) is not None:
                    return ret
            return None
        return walk(self, "")

    def visit(self, func: Callable[[str], Any]) -> Any:
        """Call ``func(name)`` for every member below (see :meth:`visititems`)."""
        return self.visititems(lambda name, _obj: func(name))

    # -- creation --------------------------------------------------------------------------
    def create_group(self, name: str) -> Group:
        """A new group (and any missing groups on its way)."""
        self._file._check_writable(InvalidArgumentError)
        path = self._resolve(name)
        if self._kind(path) is not None:
            raise InvalidArgumentError(f"Unable to create group (name {name!r} already exists)")
        self._make_groups(path)
        return Group(self._file, path)

    def require_group(self, name: str) -> Group:
        """The group ``name``, created if missing."""
        path = self._resolve(name)
        kind = self._kind(path)
        if kind == "dataset":
            raise InvalidTypeError(f"Incompatible object (Dataset) already exists: {name!r}")
        if kind is None:
            self._make_groups(path)
        return Group(self._file, path)

    def _make_groups(self, path: str) -> None:
        self._file._check_writable()
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            kind = self._kind(sub)
            if kind == "dataset":
                raise InvalidArgumentError(f"cannot create {path!r}: {sub!r} is a dataset")
            if kind is None:
                self._file._store.put(join_path(sub, GROUP_KEY), b'{"tessera_h5": 1}')

    def create_dataset(self, name: str, shape: Any = None, dtype: Any = None, data: Any = None,
                       *, chunks: Any = None, compression: Any = None,
                       compression_opts: Any = None, fillvalue: Any = None,
                       maxshape: Any = None, **kwargs: Any) -> Dataset:
        """A new dataset, as h5py's: give ``shape`` and ``dtype`` (default ``float32``), or
        ``data``. ``chunks`` becomes the tile shape; ``compression``: ``gzip`` (level from
        ``compression_opts``, default 4; an int 0-9 means gzip at that level), or another of
        Tessera's codecs (:func:`tessera.format.codecs.codec_names`: ``zstd``, ``lz4``,
        ``blosc``), with ``compression_opts`` as its level. ``shape``, ``chunks`` and
        ``maxshape`` take an int for one dimension."""
        self._file._check_writable(InvalidArgumentError)
        for key, value in kwargs.items():
            if value not in (None, False):
                raise unsupported(f"create_dataset({key}=...)")
        path = self._resolve(name)
        if self._kind(path) is not None:
            raise InvalidArgumentError(f"Unable to create dataset (name {name!r} already exists)")
        shape = shape_arg(shape, "shape")
        maxshape = shape_arg(maxshape, "maxshape", none_ok=True)
        if chunks not in (None, True, False):
            chunks = shape_arg(chunks, "chunks")
        values = None
        if data is not None:
            values = as_values(data, None if dtype is None else np.dtype(dtype))
            if dtype is not None and values.dtype.kind in "biufc":
                # h5py's conversion, checked: floats truncate into integers, and a value
                # that does not fit the dtype raises instead of wrapping around
                values = fit_values(values, np.dtype(dtype), name, cast="value",
                                    what="dataset")
            shape = values.shape if shape is None else tuple(shape)
            if values.shape != tuple(shape):
                values = values.reshape(shape)
        if shape is None:
            raise InvalidTypeError("create_dataset needs a shape or data")
        dt = np.dtype(values.dtype if values is not None else (dtype or "f4"))
        if dt.kind not in "biufc":
            raise unsupported(f"datasets of dtype {dt} (numeric dtypes only)")
        tile = (default_tile(tuple(max(1, n) for n in shape), dt.itemsize)
                if chunks in (None, True, False) else tuple(chunks))
        if len(tile) != len(shape):
            raise InvalidArgumentError(f"chunks {tile} do not match shape {shape}")
        if chunks not in (None, True, False):
            limit = maxshape or shape
            if any(t < 1 or (m is not None and t > m) for t, m in zip(tile, limit,
                                                                     strict=True)):
                raise InvalidArgumentError(
                    f"Chunk shape must not be greater than data shape in any dimension. "
                    f"{tile} is not compatible with {limit}")
        if "/" in path:
            self._make_groups(path.rpartition("/")[0])
        # unwritten cells read as 0 unless told, as in HDF5 (an array's float default is NaN)
        fill = np.asarray(0 if fillvalue is None else fillvalue, dt).item()
        grows = [maxshape is not None and (m is None or m > n)
                 for n, m in zip(shape, maxshape or shape, strict=True)]
        schema = ArraySchema(
            [Dim(f"d{i}", (0, n - 1), t if g else max(1, min(t, n))) for i, (n, t, g) in
             enumerate(zip(shape, tile, grows, strict=True))],
            [Attr("data", dt.newbyteorder("<").str, fill, codec_spec(compression,
                                                                 compression_opts))],
            maxshape=maxshape)
        arr = create_array(self._file._child(path), schema,
                           storage_options=self._file.storage_options)
        if values is not None and values.size:  # (an empty dataset has nothing to write)
            arr.write(values.astype(dt.newbyteorder("<"), copy=False))
        return Dataset(self._file, path, self._file._datasets.open(path, arr))

    def require_dataset(self, name: str, shape: Any, dtype: Any, exact: bool = False,
                        **kwargs: Any) -> Dataset:
        """The dataset ``name`` if it has this shape (and dtype, exactly with ``exact``,
        else one that casts safely), else a new one."""
        if name not in self:
            return self.create_dataset(name, shape, dtype, **kwargs)
        dset = self[name]
        if not isinstance(dset, Dataset):
            raise InvalidTypeError(f"Incompatible object (Group) already exists: {name!r}")
        want = np.dtype(dtype)
        shape = shape_arg(shape, "shape")
        if tuple(dset.shape) != shape:
            # as h5py: a growable dataset is found by its maxshape when that is given
            maxshape = kwargs.get("maxshape")
            if maxshape is None:
                raise InvalidTypeError(f"Shapes do not match (existing {dset.shape} vs new "
                                       f"{shape})")
            if shape_arg(maxshape, "maxshape", none_ok=True) != dset.maxshape:
                raise InvalidTypeError(f"Max shapes do not match (existing {dset.maxshape} "
                                       f"vs new {maxshape})")
        if exact and dset.dtype != want:
            raise InvalidTypeError(f"Datatypes do not exactly match (existing {dset.dtype} "
                                   f"vs new {want})")
        if not np.can_cast(want, dset.dtype):  # the requested type must fit the existing
            raise InvalidTypeError(f"Datatypes cannot be safely cast (existing {dset.dtype} "
                                   f"vs new {want})")
        return dset

    def create_dataset_like(self, name: str, other: Dataset, **kwargs: Any) -> Dataset:
        """A new dataset with ``other``'s shape, dtype, chunks, maxshape, compression and
        fill value (each overridden by a keyword), as h5py's."""
        for key in ("shape", "dtype", "chunks", "compression", "compression_opts",
                    "fillvalue", "maxshape"):
            kwargs.setdefault(key, getattr(other, key))
        if kwargs["maxshape"] == kwargs["shape"]:
            kwargs["maxshape"] = None
        return self.create_dataset(name, **kwargs)

    def __setitem__(self, name: str, value: Any) -> None:
        self.create_dataset(name, data=value)

    def __delitem__(self, name: str) -> None:
        self._file._check_writable(NameNotFoundError)
        path = self._resolve(name)
        if not path or self._kind(path) is None:
            raise NameNotFoundError(f"Couldn't delete link (object {name!r} doesn't exist)")
        store = self._file._store
        for info in store.list(path):
            store.delete(info.key)
        self._file._datasets.forget(path)

    def __repr__(self) -> str:
        return f'<tessera.h5 group "{self.name}" in {self._file.filename}>'


class Dataset(_Node):
    """A dataset: a Tessera array read and written with numpy indexing.

    >>> with File("memory://doc-h5-dataset/f.h5", "w") as f:
    ...     ds = f.create_dataset("x", shape=(4, 4), dtype="f4", chunks=(2, 2))
    ...     ds[1:3, 1:3] = 1.0
    ...     ds.shape, ds.chunks, float(ds[...].sum())
    ((4, 4), (2, 2), 4.0)
    """

    def __init__(self, file: File, path: str, array: Array | None = None) -> None:
        super().__init__(file, path)
        self._array = array if array is not None else file._datasets.open(path)
        self._chunks = file._datasets.chunks(path)

    @property
    def attrs(self) -> AttributeManager:
        """The dataset's attributes: the array's metadata (see :class:`DatasetAttributes`)."""
        return DatasetAttributes(self._array, super().attrs)

    def refresh(self) -> None:
        """See what other processes wrote since this dataset last listed its fragments (as
        h5py's ``Dataset.refresh`` rereads a dataset written by another process): the next
        read lists them again (:meth:`tessera.Array.refresh`). Writes made in this process
        are seen without it, and other processes' within ``TESSERA_READ_REFRESH_S``
        (1 s by default).

        >>> with File("memory://doc-h5-refresh", "w") as f:
        ...     d = f.create_dataset("x", data=[0, 1, 2, 3])
        ...     d.refresh()
        ...     d[:].tolist()
        [0, 1, 2, 3]
        """
        self._array.refresh()

    def __getattr__(self, name: str) -> Any:
        if name in UNSUPPORTED_DATASET:
            raise unsupported(f"Dataset.{name}")
        raise AttributeError(f"'Dataset' object has no attribute {name!r}")

    @property
    def array(self) -> Array:
        """The Tessera array behind the dataset (plans, fragments, time travel)."""
        return self._array

    @property
    def shape(self) -> tuple[int, ...]:
        """Cells per dimension."""
        return self._array.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """The element type."""
        return self._array.dtype

    @property
    def chunks(self) -> tuple[int, ...] | None:
        """The tile shape (``None`` for a scalar dataset, as h5py's)."""
        dims = self._array.schema.dims
        return tuple(d.tile for d in dims) if dims else None

    @property
    def compression(self) -> str | None:
        """``gzip`` or a Tessera codec name, or ``None``."""
        codec = self._array.schema.attrs[0].codec
        return None if codec is None else codec.split(":")[0]

    @property
    def compression_opts(self) -> int | None:
        """The compression level, where one was set."""
        codec = self._array.schema.attrs[0].codec
        return int(codec.split(":")[1]) if codec and ":" in codec else None

    @property
    def fillvalue(self) -> Any:
        """What unwritten cells read as."""
        fill = self._array.schema.attrs[0].fill
        return self.dtype.type(0 if fill is None else fill)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        """Bytes of the whole dataset in memory."""
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise InvalidTypeError("Attempt to take len() of scalar dataset")
        return self.shape[0]

    @property
    def maxshape(self) -> tuple[int | None, ...]:
        """The most cells per dimension (``None``: unbounded), as h5py's."""
        return tuple(self._array.schema.maxshape or self.shape)

    def resize(self, size: Any, axis: int | None = None) -> None:
        """Change the shape within ``maxshape``, as h5py's: ``size`` is the new shape, or
        with ``axis`` the new length of that axis (:meth:`tessera.Array.resize`)."""
        self._file._check_writable()
        if self._array.schema.maxshape is None:
            raise InvalidTypeError(f"Only datasets created with maxshape can be resized; "
                                   f"{self.name} has a fixed shape {self.shape}")
        if axis is None:
            shape = shape_arg(size, "size")
        else:
            if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) \
                    or not 0 <= axis < len(self.shape):
                raise InvalidArgumentError(f"Invalid axis (0 to {len(self.shape) - 1} "
                                           f"allowed), got {axis!r}")
            shape = tuple(int(size) if a == axis else n for a, n in enumerate(self.shape))
        self._array.resize(shape)

    def __iter__(self) -> Iterator[Any]:
        """The first axis, one index at a time (read one tile-row at a time)."""
        if not self.shape:
            raise InvalidTypeError("Can't iterate over a scalar dataset")
        return iter(self._array)

    def len(self) -> int:
        """The length of the first axis (``len(dset)``), as h5py's ``Dataset.len``."""
        return len(self)

    def _selection(self, sel: Any) -> Any:
        """``sel`` read with h5py's rules (:data:`~tessera.format.selection.H5_RULES`:
        slices clipped, steps of 1 or more, one increasing index list, h5py's exception
        classes) as a selection the array reads the same way: a plain box in range as it
        is (the same under both rules; a small read's call stays cheap), anything else
        normalised first."""
        if not self.shape:
            return scalar_selection(sel)
        if isinstance(sel, tuple) and not sel:
            return ...
        for it in sel if isinstance(sel, tuple) else (sel,):
            if isinstance(it, str):
                raise unsupported("field names in selections (compound dtypes)")
        schema = self._array.schema
        if box_of(sel, schema) is not None or is_full_mask(sel, schema):
            return sel
        return plain_items(normalize_selection(sel, schema, H5_RULES), schema)

    def __getitem__(self, sel: Any) -> Any:
        if not self.shape:  # a scalar dataset: d[()] is the value, d[...] a 0-d array
            return self._array[scalar_selection(sel)]
        # a plain box in range (all the chunk cache takes) reads the same under h5py's rules
        # and the array's: the cache first, the rules only for what it does not take
        got = self._chunks.read(self._array, sel)
        return self._array.read(self._selection(sel)) if got is None else got

    def __setitem__(self, sel: Any, values: Any) -> None:
        self._file._check_writable()
        # h5py converts to the dataset's dtype (floats truncate into integers); a value that
        # does not fit raises InvalidTypeError naming the dataset instead of wrapping around
        sel = self._selection(sel)
        fitted = fit_values(values, self.dtype, self.name, cast="value", what="dataset")
        if fitted.ndim:
            check_broadcast(fitted.shape, self._selected_shape(sel))
        self._array[sel] = fitted

    def _selected_shape(self, sel: Any) -> tuple[int, ...]:
        """The shape ``self[sel]`` has (``sel`` already through :meth:`_selection`: plain
        items the array reads by its own rules)."""
        schema = self._array.schema
        if is_full_mask(sel, schema):
            return (int(np.count_nonzero(sel)),)
        return normalize_selection(sel, schema).shape

    def read_direct(self, dest: np.ndarray, source_sel: Any = None,
                    dest_sel: Any = None) -> None:
        """Read ``self[source_sel]`` into ``dest[dest_sel]`` (defaults: everything); as
        h5py's, ``dest`` must be a C-contiguous, writable array and the shapes must match
        (:class:`~tessera.errors.InvalidTypeError` otherwise)."""
        if not isinstance(dest, np.ndarray) or not dest.flags.c_contiguous \
                or not dest.flags.writeable:
            raise InvalidTypeError("Array must be C-contiguous and writable")
        values = np.asarray(self[... if source_sel is None else source_sel])
        target = dest[... if dest_sel is None else dest_sel]
        check_broadcast(values.shape, np.shape(target))
        dest[... if dest_sel is None else dest_sel] = values

    def write_direct(self, source: np.ndarray, source_sel: Any = None,
                     dest_sel: Any = None) -> None:
        """Write ``source[source_sel]`` to ``self[dest_sel]`` (defaults: everything); as
        h5py's, ``source`` must be a C-contiguous array and the shapes must match
        (:class:`~tessera.errors.InvalidTypeError` otherwise)."""
        if not isinstance(source, np.ndarray) or not source.flags.c_contiguous:
            raise InvalidTypeError("Array must be C-contiguous")
        values = source[... if source_sel is None else source_sel]
        sel = self._selection(... if dest_sel is None else dest_sel)
        check_broadcast(np.shape(values), self._selected_shape(sel))
        self[sel] = values

    def astype(self, dtype: Any) -> _AsType:
        """A view reading as ``dtype``: ``dset.astype('f8')[:10]``."""
        return _AsType(self, np.dtype(dtype))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.asarray(self[...])
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        return f'<tessera.h5 dataset "{self.name}": shape {self.shape}, type "{self.dtype.str}">'


class _AsType:
    """``dset.astype(dtype)``: reads as ``dtype`` (``[...]``, ``len``, ``np.asarray``)."""

    def __init__(self, dset: Dataset, dtype: np.dtype[Any]) -> None:
        self._dset, self._dtype = dset, dtype

    def __getitem__(self, sel: Any) -> np.ndarray:
        return np.asarray(self._dset[sel]).astype(self._dtype)

    def __len__(self) -> int:
        return len(self._dset)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[...]
        return out if dtype is None else out.astype(dtype)


class File(Group):
    """An h5py-shaped file rooted at a store URI.

    Modes as h5py's: ``r`` (must exist), ``r+`` (read/write, must exist), ``w`` (create,
    replacing a tessera.h5 file there; other objects there are refused, nothing deleted),
    ``w-`` or ``x`` (create, fail if it exists), ``a`` (read/write, create if missing).
    ``rdcc_nbytes``: each dataset's chunk cache in bytes (0: none;
    :mod:`tessera.integrations.h5_chunks`), by default ``TESSERA_H5_CHUNK_CACHE_BYTES``
    (8 MiB) on memory and folder stores, 0 on network stores; ``rdcc_nslots`` and
    ``rdcc_w0`` are accepted as h5py's and change nothing (least recently used goes first).

    >>> with File("memory://doc-h5-file/f.h5", "w") as f:
    ...     _ = f.create_dataset("scans/a", data=[[0, 1, 2], [3, 4, 5]])
    >>> File("memory://doc-h5-file/f.h5")["scans/a"][1].tolist()
    [3, 4, 5]
    """

    def __init__(self, uri: str | os.PathLike[str], mode: str = "r", *,
                 storage_options: dict[str, Any] | None = None, rdcc_nbytes: int | None = None,
                 rdcc_nslots: int | None = None, rdcc_w0: float | None = None,
                 **kwargs: Any) -> None:
        for key, value in kwargs.items():
            if value is not None:
                raise unsupported(f"File({key}=...)")
        if mode not in MODES:
            raise InvalidArgumentError(f"Invalid mode {mode!r}; must be one of "
                                       f"{', '.join(MODES)}")
        given = uri
        uri = os.fspath(uri)
        self.storage_options = dict(storage_options or {})
        self._store = open_store(uri, **self.storage_options)
        self._datasets = OpenDatasets(self._store, chunk_budget(
            self._store, rdcc_nbytes, rdcc_nslots, rdcc_w0), lambda path: open_array(
                self._child(path), "w" if self._writable else "r",
                storage_options=self.storage_options))
        #: the path or URL as given (h5py's ``filename``): a local path stays a path
        self.filename = uri if isinstance(given, os.PathLike) or "://" not in uri \
            else str(self._store.url)
        self.mode = "r" if mode == "r" else "r+"
        self._writable = mode != "r"
        self._open = True
        super().__init__(self, "")
        exists = self._store.exists(GROUP_KEY)
        if mode in ("r", "r+") and not exists:
            raise FileNotFoundError(f"Unable to open file (no tessera.h5 file at {uri}; "
                                    "create one with mode 'w' or 'a')")
        if mode in ("w-", "x") and exists:
            raise FileExistsError(f"Unable to create file ({uri} already holds a file; use "
                                  "mode 'w' to replace it or 'a' to add to it)")
        if mode == "w":
            stale = self._store.list()
            if stale and not exists:
                raise FileExistsError(
                    f"Unable to create file ({uri} holds {len(stale)} object(s) that are not "
                    "a tessera.h5 file; mode 'w' replaces only a tessera.h5 file, so nothing "
                    "was deleted: choose an empty location)")
            for info in stale:
                self._store.delete(info.key)
        if not exists or mode == "w":
            self._store.put(GROUP_KEY, b'{"tessera_h5": 1}')

    def _child(self, path: str) -> str:
        return self._store.url.child(path)

    def _check_open(self) -> None:
        if not self._open:
            raise InvalidArgumentError(f"{self.filename} is closed")

    def _check_writable(self, error: type[Exception] = ReadOnlyError) -> None:
        """Raise unless the file is open for writing: ``error`` is h5py's class for the
        operation (ValueError to create, KeyError to delete, OSError to write)."""
        self._check_open()
        if not self._writable:
            raise error(f"{self.filename} is open read-only (mode 'r'): no write intent on "
                        "file")

    def close(self) -> None:
        """Close the file; later use of it raises."""
        self._open = False

    def flush(self) -> None:
        """Nothing to do: every write is durable when it returns."""

    def __enter__(self) -> File:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __bool__(self) -> bool:
        return self._open

    def __repr__(self) -> str:
        state = "open" if self._open else "closed"
        return f'<tessera.h5 file "{self.filename}" (mode {self.mode}, {state})>'
