"""Array schemas: dimensions, attributes, dense or sparse, orders; versioned JSON.

>>> import tessera
>>> schema = tessera.ArraySchema(
...     dims=[tessera.Dim("y", domain=(0, 99), tile=32), tessera.Dim("x", domain=(0, 49), tile=32)],
...     attrs=[tessera.Attr("v", dtype="int32", fill=-1, codec="zstd")])
>>> schema.shape, schema.tile_shape, schema.tile_grid
((100, 50), (32, 32), (4, 2))
>>> tessera.ArraySchema.from_json(schema.to_json()) == schema
True
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from tessera.errors import SchemaError
from tessera.format.codecs import normalize_codec_spec

SCHEMA_VERSION = 2  # 2: growable arrays (``maxshape``); schemas without it are written as 1
Order = Literal["row-major", "col-major"]
AttrLayout = Literal["attr-major", "tile-major"]
ATTR_LAYOUTS = ("attr-major", "tile-major")
_ORDERS = ("row-major", "col-major")
NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


@dataclasses.dataclass(frozen=True)
class Dim:
    """One dimension: a name, an inclusive ``domain`` ``(lo, hi)`` and a tile extent.

    Dense arrays need integer domains; sparse arrays may use floats. ``tile=None`` means
    one tile spans the whole domain.

    >>> import tessera
    >>> tessera.Dim("x", (0, 99), 10)
    Dim(name='x', domain=(0, 99), tile=10)
    """

    name: str
    domain: tuple[Any, Any]
    tile: Any = None

    @property
    def is_integer(self) -> bool:
        """True for integer domains."""
        return all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                   for v in self.domain)

    @property
    def size(self) -> int:
        """Number of cells along an integer dimension."""
        return int(self.domain[1]) - int(self.domain[0]) + 1

    @property
    def extent(self) -> int:
        """The tile extent of an integer dimension (the domain size when ``tile`` is None)."""
        return self.size if self.tile is None else int(self.tile)


@dataclasses.dataclass(frozen=True, eq=False)
class Attr:
    """One attribute: name, numpy dtype (a fixed-size vector such as ``"(3,)u1"`` allowed),
    fill value for unwritten cells (default 0 / NaN for floats) and codec spec.

    >>> import tessera
    >>> tessera.Attr("v", "f4", fill=-1).np_dtype
    dtype('float32')
    """

    name: str
    dtype: Any = "float64"
    fill: Any = None
    codec: str | None = None

    def __post_init__(self) -> None:
        # Parse the dtype once, here. numpy parses strings such as "(3,)u1" with Python's
        # ast module, which CPython 3.11 cannot run on several threads at once ("SystemError:
        # AST constructor recursion depth mismatch"), and readers decode tiles on worker
        # threads. A dtype numpy refuses is left for the schema's checks to name.
        try:
            parsed: np.dtype[Any] | None = np.dtype(self.dtype)
        except (TypeError, ValueError, SyntaxError):
            parsed = None
        object.__setattr__(self, "_parsed", parsed)

    @property
    def _dt(self) -> np.dtype[Any]:
        parsed: np.dtype[Any] | None = self.__dict__.get("_parsed")
        return parsed if parsed is not None else np.dtype(self.dtype)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attr):
            return NotImplemented
        same_fill = (self.fill is None and other.fill is None) or (
            self.fill is not None and other.fill is not None
            and bool(np.array_equal(np.asarray(self.fill), np.asarray(other.fill),
                                    equal_nan=True)))
        return (self.name, self._dt, self.codec) == (
            other.name, other._dt, other.codec) and same_fill

    def __hash__(self) -> int:
        return hash((self.name, self._dt.str, self.codec))

    # The three below are asked for on every tile of every read: worked out once per
    # attribute (the attribute never changes).
    @functools.cached_property
    def np_dtype(self) -> np.dtype[Any]:
        """The cell's base dtype, little-endian (without any vector shape)."""
        dt = self._dt
        base: np.dtype[Any] = dt.subdtype[0] if dt.subdtype else dt
        return base.newbyteorder("<") if base.byteorder == ">" else base

    @functools.cached_property
    def cell_shape(self) -> tuple[int, ...]:
        """Shape of one cell's value: ``()`` for scalars, e.g. ``(3,)`` for RGB triples."""
        dt = self._dt
        return tuple(dt.subdtype[1]) if dt.subdtype else ()

    @functools.cached_property
    def cell_nbytes(self) -> int:
        """Bytes per cell."""
        return int(self.np_dtype.itemsize * math.prod(self.cell_shape))

    @property
    def fill_value(self) -> Any:
        """The fill value as a numpy scalar of the base dtype."""
        dt = self.np_dtype
        if self.fill is not None:
            return dt.type(self.fill)
        return dt.type(np.nan) if dt.kind in "fc" else dt.type(0)


@dataclasses.dataclass(frozen=True)
class ArraySchema:
    """The definition of an array, validated on creation.

    Attributes:
        dims: the dimensions, in order.
        attrs: the attributes (at least one).
        sparse: dense (every cell has a value) or sparse (only written cells exist).
        cell_order: order of cells inside a tile, ``row-major`` or ``col-major``.
        tile_order: order of tiles in a fragment's objects, ``row-major`` or ``col-major``.
        capacity: cells per data tile of sparse fragments.
        maxshape: for a dense array that may grow (``arr.resize``, ``arr.append``), the most
            cells per dimension: an int (at least the initial size), or ``None`` for
            unbounded, as h5py's ``maxshape``; ``None`` for the whole schema: a fixed shape.
            The domain's lower bounds never move; a growable dimension needs a tile extent.
        attr_layout: how a dense fragment lays out its attributes' tiles: ``"attr-major"``
            (one object per attribute) or ``"tile-major"`` (one object holding, tile after
            tile, every attribute's tile in schema order: the tiles of several attributes
            of one space tile are then adjacent bytes, read in one request).

    >>> import tessera
    >>> schema = tessera.ArraySchema([tessera.Dim("t", (0, 99), 10), tessera.Dim("x", (0, 63), 64)],
    ...                              [tessera.Attr("v", "f4")])
    >>> schema.shape, schema.tile_shape
    ((100, 64), (10, 64))
    """

    dims: Sequence[Dim]
    attrs: Sequence[Attr]
    sparse: bool = False
    cell_order: Order = "row-major"
    tile_order: Order = "row-major"
    capacity: int = 10_000
    maxshape: Sequence[int | None] | None = None
    attr_layout: AttrLayout = "attr-major"

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(self.dims))
        if self.maxshape is not None:
            object.__setattr__(self, "maxshape", tuple(self.maxshape))
        object.__setattr__(self, "attrs", tuple(self.attrs))
        object.__setattr__(self, "attrs", tuple(
            dataclasses.replace(a, codec=normalize_codec_spec(a.codec)) for a in self.attrs))
        self._validate()

    # -- validation ------------------------------------------------------------------------
    def _validate(self) -> None:
        if not self.dims and self.sparse:
            raise SchemaError("schema.dims: a sparse array needs at least one dimension (its "
                              "cells have coordinates); a dense array may have none (0-d)")
        if not self.attrs:
            raise SchemaError("schema.attrs: an array needs at least one attribute")
        names = [d.name for d in self.dims] + [a.name for a in self.attrs]
        for i, name in enumerate(names):
            if isinstance(name, str) and name.startswith("__"):
                raise SchemaError(f"name {name!r}: names starting with '__' are reserved")
            if not isinstance(name, str) or not NAME_PATTERN.match(name):
                raise SchemaError(f"name {name!r} is invalid: use letters, digits, '_', '.', '-'"
                                  ", starting with a letter or '_' (at most 64 characters)")
            if name in names[:i]:
                raise SchemaError(f"name {name!r} is used twice among dimensions and attributes")
        for i, d in enumerate(self.dims):
            self._validate_dim(d, self._may_grow(i))
        for a in self.attrs:
            try:
                dt = np.dtype(a.dtype)
            except TypeError as err:
                raise SchemaError(f"attrs[{a.name!r}].dtype {a.dtype!r} is not a dtype: {err}"
                                  ) from None
            base = dt.subdtype[0] if dt.subdtype else dt
            if base.kind not in "biufc" or base.hasobject:
                raise SchemaError(f"attrs[{a.name!r}].dtype {a.dtype!r}: only fixed-size numeric "
                                  "dtypes (bool, int, uint, float, complex, or vectors of them)")
            if a.fill is not None:
                fill = np.asarray(a.fill)
                if fill.ndim != 0 or fill.dtype.kind not in "biufc":
                    raise SchemaError(f"attrs[{a.name!r}].fill must be a number, got {a.fill!r}")
                if not np.can_cast(np.min_scalar_type(fill), base, casting="safe"):
                    raise SchemaError(f"attrs[{a.name!r}].fill {a.fill!r} does not fit dtype "
                                      f"{base}")
        for field in ("cell_order", "tile_order"):
            if getattr(self, field) not in _ORDERS:
                raise SchemaError(f"schema.{field} must be 'row-major' or 'col-major', "
                                  f"got {getattr(self, field)!r}")
        if not isinstance(self.capacity, int) or self.capacity < 1:
            raise SchemaError(f"schema.capacity must be a positive integer, got {self.capacity!r}")
        if self.maxshape is not None:
            self._validate_maxshape()
        if self.attr_layout not in ATTR_LAYOUTS:
            raise SchemaError(f"schema.attr_layout must be one of {ATTR_LAYOUTS}, got "
                              f"{self.attr_layout!r}")

    def _validate_maxshape(self) -> None:
        assert self.maxshape is not None
        if self.sparse:
            raise SchemaError("schema.maxshape: sparse arrays have no shape to grow; give "
                              "their domains the largest extent instead")
        if len(self.maxshape) != len(self.dims):
            raise SchemaError(f"schema.maxshape needs one entry per dimension ({len(self.dims)}),"
                              f" got {list(self.maxshape)}")
        for d, m in zip(self.dims, self.maxshape, strict=True):
            if (m is None or m != d.size) and d.tile is None:
                raise SchemaError(f"dims[{d.name!r}] may grow (maxshape {m}), so it needs a "
                                  "tile extent (tile=None spans a fixed domain)")
            if m is None:
                continue
            if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < d.size:
                raise SchemaError(f"schema.maxshape[{d.name!r}] must be None (unbounded) or an "
                                  f"integer >= the dimension's size {d.size}, got {m!r}")
            if int(d.domain[0]) + int(m) - 1 > 2**62:
                raise SchemaError(f"schema.maxshape[{d.name!r}] {m} exceeds 2**62 cells")

    def _may_grow(self, axis: int) -> bool:
        if self.maxshape is None or len(self.maxshape) != len(self.dims):
            return False
        m = self.maxshape[axis]
        return m is None or (not isinstance(m, bool) and isinstance(m, (int, np.integer))
                             and m > self.dims[axis].size)

    def _validate_dim(self, d: Dim, may_grow: bool = False) -> None:
        where = f"dims[{d.name!r}]"
        if not isinstance(d.domain, (tuple, list)) or len(d.domain) != 2:
            raise SchemaError(f"{where}.domain must be a pair (lo, hi), got {d.domain!r}")
        lo, hi = d.domain
        if not all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                   for v in (lo, hi)):
            raise SchemaError(f"{where}.domain must hold numbers, got {d.domain!r}")
        if not d.is_integer:
            if not self.sparse:
                raise SchemaError(f"{where}.domain {d.domain!r}: dense arrays need integer "
                                  "domains; float domains are for sparse arrays")
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise SchemaError(f"{where}.domain must be finite")
        # a dense integer dimension may be empty (hi = lo - 1: no cells, as numpy's and
        # HDF5's zero-length axes), growable or not
        empty_ok = d.is_integer and not self.sparse and hi == lo - 1
        if hi < lo and not empty_ok:
            raise SchemaError(f"{where}.domain {d.domain!r}: hi is below lo")
        if d.is_integer and (lo < -(2**62) or hi > 2**62):
            raise SchemaError(f"{where}.domain {d.domain!r} exceeds +-2**62")
        if d.tile is not None:
            if isinstance(d.tile, bool) or not isinstance(d.tile, (int, float, np.number)):
                raise SchemaError(f"{where}.tile must be a number, got {d.tile!r}")
            if d.tile <= 0:
                raise SchemaError(f"{where}.tile must be positive, got {d.tile!r}")
            if d.is_integer and int(d.tile) != d.tile:
                raise SchemaError(f"{where}.tile must be an integer for an integer domain")
            if d.is_integer and d.tile > d.size and not may_grow and d.size > 0:
                raise SchemaError(f"{where}.tile {d.tile} exceeds the domain size {d.size}")

    # -- derived ---------------------------------------------------------------------------
    @property
    def growable(self) -> bool:
        """True if some dimension may grow (``maxshape`` beyond the current size)."""
        return self.maxshape is not None and any(
            m is None or m > d.size for d, m in zip(self.dims, self.maxshape, strict=True))

    def max_hi(self, axis: int) -> int:
        """The largest upper bound dimension ``axis`` may grow to."""
        d = self.dims[axis]
        m = None if self.maxshape is None else self.maxshape[axis]
        if self.maxshape is None:
            return int(d.domain[1])
        return 2**62 if m is None else int(d.domain[0]) + int(m) - 1

    def with_shape(self, shape: Sequence[int]) -> ArraySchema:
        """This schema with the current shape ``shape`` (domains' lower bounds kept)."""
        dims = [dataclasses.replace(d, domain=(d.domain[0], int(d.domain[0]) + int(n) - 1))
                for d, n in zip(self.dims, shape, strict=True)]
        return dataclasses.replace(self, dims=dims)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.dims)

    @functools.cached_property
    def shape(self) -> tuple[int, ...]:
        """Cells per dimension (integer domains only)."""
        if not all(d.is_integer for d in self.dims):
            raise SchemaError("an array with float dimensions has no shape; use its domains")
        return tuple(d.size for d in self.dims)

    @functools.cached_property
    def lower(self) -> tuple[int, ...]:
        """Lower domain bound per dimension."""
        return tuple(int(d.domain[0]) for d in self.dims)

    @functools.cached_property
    def tile_shape(self) -> tuple[int, ...]:
        """Space tile extents."""
        return tuple(d.extent for d in self.dims)

    @functools.cached_property
    def tile_grid(self) -> tuple[int, ...]:
        """Number of space tiles per dimension."""
        return tuple(-(-d.size // d.extent) for d in self.dims)

    @functools.cached_property
    def _attrs_by_name(self) -> dict[str, Attr]:
        return {a.name: a for a in self.attrs}

    def attr(self, name: str) -> Attr:
        """The attribute called ``name``."""
        found = self._attrs_by_name.get(name)
        if found is not None:
            return found
        raise SchemaError(f"no attribute {name!r}; the array has "
                          f"{', '.join(a.name for a in self.attrs)}")

    # -- JSON ------------------------------------------------------------------------------
    def to_json(self) -> str:
        """Versioned JSON text."""
        def num(v: Any) -> Any:
            return int(v) if isinstance(v, (int, np.integer)) else float(v)

        doc = {
            "format": "tessera.array", "version": SCHEMA_VERSION,
            "dims": [{"name": d.name, "domain": [num(v) for v in d.domain],
                      "tile": None if d.tile is None else num(d.tile)} for d in self.dims],
            "attrs": [{"name": a.name, "dtype": np.dtype(a.dtype).str
                       if not np.dtype(a.dtype).subdtype else _dtype_text(a.dtype),
                       "fill": _jsonable(a.fill), "codec": a.codec} for a in self.attrs],
            "sparse": self.sparse, "cell_order": self.cell_order,
            "tile_order": self.tile_order, "capacity": self.capacity,
        }
        if self.attr_layout != "attr-major":
            doc["attr_layout"] = self.attr_layout  # readers of any version read its fragments
        if self.maxshape is not None:
            doc["version"] = 2
            doc["maxshape"] = [None if m is None else int(m) for m in self.maxshape]
        else:
            doc["version"] = 1
        return json.dumps(doc, indent=1)

    @classmethod
    def from_json(cls, text: str | bytes) -> ArraySchema:
        """Parse :meth:`to_json` output; refuses unknown future versions clearly."""
        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as err:
            raise SchemaError(f"the array schema is not valid JSON: {err}") from None
        if not isinstance(doc, dict) or doc.get("format") != "tessera.array":
            raise SchemaError("not a Tessera array schema (missing format 'tessera.array')")
        version = doc.get("version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise SchemaError(f"array schema version {version!r} is newer than this Tessera "
                              f"understands ({SCHEMA_VERSION}); upgrade Tessera to read it")
        try:
            dims = [Dim(d["name"], tuple(d["domain"]), d.get("tile")) for d in doc["dims"]]
            attrs = [Attr(a["name"], a["dtype"], _from_jsonable(a.get("fill")), a.get("codec"))
                     for a in doc["attrs"]]
            return cls(dims, attrs, sparse=bool(doc["sparse"]), cell_order=doc["cell_order"],
                       tile_order=doc["tile_order"], capacity=int(doc["capacity"]),
                       maxshape=doc.get("maxshape"),
                       attr_layout=doc.get("attr_layout", "attr-major"))
        except (KeyError, TypeError) as err:
            raise SchemaError(f"the array schema is missing or has a malformed field: {err}"
                              ) from None


def _dtype_text(dtype: Any) -> str:
    dt = np.dtype(dtype)
    assert dt.subdtype is not None
    base, shape = dt.subdtype
    return f"{tuple(shape)}{base.str}".replace(" ", "")


def _jsonable(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, (complex, np.complexfloating)):
        return {"complex": [float(v.real), float(v.imag)]}
    if isinstance(v, (float, np.floating)) and not math.isfinite(v):
        return {"float": repr(float(v))}
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    return float(v)


def _from_jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        if "complex" in v:
            return complex(*v["complex"])
        if "float" in v:
            return float(v["float"])
    return v
