"""Selections on dense arrays: ints, slices (with steps), ``...``, per-dimension integer
lists and 1-D boolean masks, as numpy's basic and orthogonal indexing (h5py's, zarr's
``oindex``) takes them; and point selections (:class:`Points`, :func:`vectorized_points`:
zarr's ``vindex``, numpy's full-shape boolean masks).

Indices are **domain coordinates**. For a dimension whose domain starts at 0 they coincide
with numpy positions, and negative values count from the end as in numpy; for other domains
they are the coordinates themselves (as in TileDB). Anything outside the domain raises
:class:`~tessera.errors.SelectionError` (an ``IndexError``).

One set of rules serves every engine; :class:`Rules` names the three places where engines
differ, and each engine passes its own: arrays (:data:`ARRAY_RULES`) refuse slice bounds
more than one past either end (a domain is a contract, as in TileDB) and allow repeated
indices; tensors in tables (:data:`TENSOR_RULES`, through :func:`normalize_shape`) clip
slice bounds as numpy does and refuse repeated indices (a sparse result cannot hold a
non-zero twice). Both take 1-D boolean masks. The table in docs/arrays.md
("Selections") lists them.

>>> from tessera.format.schema import ArraySchema, Dim, Attr
>>> schema = ArraySchema([Dim("y", (0, 9), 5), Dim("x", (0, 9), 5)], [Attr("v", "i4")])
>>> sel = normalize_selection((slice(2, 8, 3), [7, 1]), schema)
>>> [d.coords.tolist() for d in sel.dims], sel.shape
([[2, 5], [7, 1]], (2, 2))
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from tessera.errors import (
    InvalidArgumentError,
    InvalidTypeError,
    MemoryLimitError,
    SelectionError,
)
from tessera.format.schema import ArraySchema, Dim


@dataclasses.dataclass(frozen=True)
class Rules:
    """Where engines differ in reading a selection.

    Attributes:
        clip_slices: slice bounds past either end are clipped as numpy does (``a[0:100]`` of
            a 5-cell dimension is its 5 cells); False refuses bounds more than one past an
            end with a :class:`~tessera.errors.SelectionError`.
        repeats: an index list may name a coordinate more than once (the result repeats
            it); False refuses such a list.
        masks: 1-D boolean masks select the cells where they are True.
        negative_steps: slices may step backwards; False refuses them
            (:class:`~tessera.errors.InvalidArgumentError`, a ``ValueError``).
        increasing_lists: index lists must increase strictly (no repeats, no going back),
            else :class:`~tessera.errors.InvalidTypeError` (a ``TypeError``).
        one_list: at most one dimension may take an index list or mask
            (:class:`~tessera.errors.InvalidTypeError` for more).
        type_errors: a selection of the wrong form (``None``, a float, a dict, a mask of
            the wrong shape, too many indices) raises
            :class:`~tessera.errors.InvalidTypeError` and a zero step or too many indices
            :class:`~tessera.errors.InvalidArgumentError`, as h5py does, instead of
            :class:`~tessera.errors.SelectionError` (an ``IndexError``, numpy's class for
            most of them). An index outside the domain is a ``SelectionError`` either way.
    """

    clip_slices: bool = False
    repeats: bool = True
    masks: bool = True
    negative_steps: bool = True
    increasing_lists: bool = False
    one_list: bool = False
    type_errors: bool = False


ARRAY_RULES = Rules()
"""Dense arrays: slice bounds inside the domain (one past an end allowed), repeats and
masks allowed."""

TENSOR_RULES = Rules(clip_slices=True, repeats=False)
"""Tensors in tables: numpy's slice clipping, no repeated indices, masks allowed."""

H5_RULES = Rules(clip_slices=True, repeats=False, negative_steps=False, increasing_lists=True,
                 one_list=True, type_errors=True)
"""h5py's datasets (:mod:`tessera.h5`): slices clipped as numpy does, steps of 1 or more,
one index list (or mask) per selection, increasing, and h5py's exception classes.

>>> from tessera.format.schema import Attr
>>> schema = ArraySchema([Dim("x", (0, 49), 10)], [Attr("v", "i4")])
>>> normalize_selection(slice(40, 60), schema, H5_RULES).shape
(10,)
>>> normalize_selection([3, 1], schema, H5_RULES)
Traceback (most recent call last):
...
tessera.errors.InvalidTypeError: Indexing elements must be in increasing order (dimension x)
"""


@dataclasses.dataclass(frozen=True)
class DimSelection:
    """What one dimension selects.

    Attributes:
        coords: selected coordinates in output order (int64).
        drop: True for an integer index (the dimension disappears from the result).
        sorted_coords: ``coords`` sorted ascending.
        out_pos: output position of each entry of ``sorted_coords``.
    """

    coords: np.ndarray
    drop: bool
    sorted_coords: np.ndarray
    out_pos: np.ndarray

    @functools.cached_property
    def contiguous(self) -> bool:
        """True if the selected coordinates are every coordinate from the smallest to the
        largest, each once (a plain slice): then every cell of a box inside them is
        selected."""
        c = self.sorted_coords
        return len(c) > 0 and int(c[-1]) - int(c[0]) == len(c) - 1 and (
            len(c) < 2 or bool((c[1:] != c[:-1]).all()))

    @functools.cached_property
    def ascending_run(self) -> bool:
        """True if the selection is a plain slice of step 1: every coordinate from the
        smallest to the largest, once each, in ascending output order. The cells of a box
        ``[a, b]`` inside it then sit at output positions ``a - lo`` to ``b - lo``."""
        c = self.coords
        return self.contiguous and (len(c) < 2 or bool((c[1:] > c[:-1]).all()))

    @property
    def lo(self) -> int:
        """Smallest selected coordinate."""
        return int(self.sorted_coords[0])

    @property
    def hi(self) -> int:
        """Largest selected coordinate."""
        return int(self.sorted_coords[-1])

    def within(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """``(coords, out_pos)`` of the selected coordinates in ``[lo, hi]``."""
        a = self.sorted_coords.searchsorted(lo, side="left")
        b = self.sorted_coords.searchsorted(hi, side="right")
        return self.sorted_coords[a:b], self.out_pos[a:b]


@dataclasses.dataclass(frozen=True)
class Selection:
    """A normalised orthogonal selection: one :class:`DimSelection` per dimension."""

    dims: tuple[DimSelection, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        """Result shape (dropped dimensions removed; attribute cell shape not included)."""
        return tuple(len(d.coords) for d in self.dims if not d.drop)

    @property
    def full_shape(self) -> tuple[int, ...]:
        """Result shape with every dimension kept."""
        return tuple(len(d.coords) for d in self.dims)

    @property
    def empty(self) -> bool:
        """True if no cell is selected."""
        return any(len(d.coords) == 0 for d in self.dims)

    def bounds(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Inclusive bounding box of the selected coordinates."""
        return (tuple(d.lo for d in self.dims), tuple(d.hi for d in self.dims))


def is_ellipsis(sel: Any) -> bool:
    """True for ``...`` alone (``x[...]``, ``x[(...,)]``)."""
    return sel is Ellipsis or (type(sel) is tuple and len(sel) == 1 and sel[0] is Ellipsis)


def normalize_selection(sel: Any, schema: ArraySchema, rules: Rules = ARRAY_RULES) -> Selection:
    """Turn a user selection into a :class:`Selection` on ``schema``'s dense domain."""
    return _normalize(sel, schema.dims, rules)


def box_of(sel: Any, schema: ArraySchema,
           ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[bool, ...]] | None:
    """The inclusive box a selection of integers and unit-step slices takes (numpy's basic
    indexing of a box: ``a[r:r + 20, c:c + 20]``, ``a[i]``), with the dimensions an integer
    drops; ``None`` for any other selection, an empty one or one with a bound outside the
    domain (:func:`normalize_selection` takes those, and names what is wrong). The same
    cells as :func:`normalize_selection`, without building index arrays: the cost of a
    small read's call.

    >>> from tessera.format.schema import ArraySchema, Dim, Attr
    >>> schema = ArraySchema([Dim("y", (0, 9), 5), Dim("x", (0, 9), 5)], [Attr("v", "i4")])
    >>> box_of((slice(2, 8), -1), schema)
    ((2, 9), (7, 9), (False, True))
    >>> box_of((slice(2, 8, 2), 1), schema) is None, box_of(slice(4, 4), schema) is None
    (True, True)
    """
    items = sel if type(sel) is tuple else (sel,)
    lows, sizes = schema.lower, schema.shape
    if len(items) != len(lows):
        if len(items) > len(lows):
            return None
        items = items + (_ALL,) * (len(lows) - len(items))
    lo: list[int] = []
    hi: list[int] = []
    drop: list[bool] = []
    for item, low, size in zip(items, lows, sizes, strict=True):
        if type(item) is slice:
            a, b = item.start, item.stop
            if item.step is not None and item.step != 1:
                return None
            # Python ints inline (the common case: this runs per bound of every small read)
            if a is None:
                a = low
            elif type(a) is int:
                if a < 0 and low == 0:
                    a += size
            else:
                a = _plain_int(a, low, size)
            if b is None:
                b = low + size
            elif type(b) is int:
                if b < 0 and low == 0:
                    b += size
            else:
                b = _plain_int(b, low, size)
            if a is None or b is None or not low <= a < b <= low + size:
                return None
            lo.append(a)
            hi.append(b - 1)
            drop.append(False)
            continue
        v = _plain_int(item, low, size)
        if v is None or not low <= v < low + size:
            return None
        lo.append(v)
        hi.append(v)
        drop.append(True)
    return tuple(lo), tuple(hi), tuple(drop)


_ALL = slice(None)


def _plain_int(value: Any, low: int, size: int) -> int | None:
    """An integer index as a domain coordinate (negative counts from the end of a domain
    starting at 0), ``None`` for anything that is not an integer."""
    t = type(value)
    if t is not int and (t is bool or not isinstance(value, np.integer)):
        return None
    v = int(value)
    return v + size if v < 0 and low == 0 else v


def normalize_shape(sel: Any, shape: tuple[int, ...], rules: Rules = TENSOR_RULES) -> Selection:
    """A selection on a plain ``shape`` (dimensions counted from 0, named by position), under
    ``rules`` (numpy's by default, as tensors in tables take them).

    >>> s = normalize_shape((1, slice(None, 99, 2)), (3, 5))
    >>> [d.coords.tolist() for d in s.dims], s.shape
    ([[1], [0, 2, 4]], (3,))
    >>> normalize_shape([0, 0], (3,))
    Traceback (most recent call last):
    ...
    tessera.errors.SelectionError: indices on dimension 0 repeat; give each once
    """
    dims = tuple(Dim(str(axis), (0, n - 1)) for axis, n in enumerate(shape))
    return _normalize(sel, dims, rules)


def _normalize(sel: Any, dims: Sequence[Dim], rules: Rules) -> Selection:
    ndim = len(dims)
    items = sel if isinstance(sel, tuple) else (sel,)
    n_ell = sum(1 for it in items if it is Ellipsis)
    if rules.type_errors and any(it is None for it in items):
        raise InvalidTypeError("Indexing with None (or np.newaxis) is not supported")
    if n_ell > 1:
        raise _wrong(rules, "a selection may contain at most one '...'", True)
    if n_ell:
        at = next(i for i, it in enumerate(items) if it is Ellipsis)
        fill = ndim - (len(items) - 1)
        if fill < 0:
            raise _wrong(rules, _too_many(len(items) - 1, ndim), True)
        items = items[:at] + (slice(None),) * fill + items[at + 1:]
    if len(items) > ndim:
        if rules.type_errors:  # h5py looks at the indices it has dimensions for first
            for it, d in zip(items, dims, strict=False):
                if it is not Ellipsis:
                    _one(it, d, rules)
        raise _wrong(rules, _too_many(len(items), ndim), True)
    items = items + (slice(None),) * (ndim - len(items))
    if rules.one_list and sum(isinstance(it, (list, np.ndarray, range))
                              for it in items) > 1:
        raise InvalidTypeError("Only one indexing vector or array is allowed for fancy "
                               "indexing")
    return Selection(tuple(_one(it, d, rules) for it, d in zip(items, dims, strict=True)))


def _wrong(rules: Rules, message: str, value_error: bool = False) -> Exception:
    """The error for a selection of the wrong form under ``rules``: SelectionError, or
    h5py's class (:attr:`Rules.type_errors`)."""
    if not rules.type_errors:
        return SelectionError(message)
    return InvalidArgumentError(message) if value_error else InvalidTypeError(message)


def _too_many(n: int, ndim: int) -> str:
    return f"too many indices: {n} for an array of {ndim} dimensions"


def _called(dim: Dim) -> str:
    """``dimension 'y'`` for a named dimension, ``dimension 0`` for a positional one."""
    return f"dimension {dim.name}" if dim.name.isdigit() else f"dimension {dim.name!r}"


def _coord(value: Any, dim: Dim, what: str, slack: int = 0) -> int:
    """An index in ``dim``'s domain (negative counts from the end when the domain starts at
    0); ``slack=1`` for slice bounds, which may lie one past either end."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise SelectionError(f"{what} for {_called(dim)} must be an integer, "
                             f"got {value!r}")
    lo, hi = int(dim.domain[0]), int(dim.domain[1])
    v = int(value)
    if lo == 0 and v < 0:
        v += dim.size
    if not lo - slack <= v <= hi + slack:
        raise SelectionError(f"{what} {value} is outside {_called(dim)}'s domain "
                             f"[{lo}, {hi}]")
    return v


def _one(item: Any, dim: Dim, rules: Rules) -> DimSelection:
    lo, hi = int(dim.domain[0]), int(dim.domain[1])
    if isinstance(item, slice):
        step = 1 if item.step is None else item.step
        if not isinstance(step, (int, np.integer)) or isinstance(step, (bool, np.bool_)) \
                or step == 0:
            raise _wrong(rules, f"slice step for {_called(dim)} must be a non-zero "
                         f"integer, got {item.step!r}", value_error=step == 0)
        step = int(step)
        if step < 0 and not rules.negative_steps:
            raise InvalidArgumentError(f"Step must be >= 1 (got {step}) for {_called(dim)}")
        if rules.clip_slices:
            coords = _clipped(item, step, dim, rules)
        else:
            if step > 0:
                start = lo if item.start is None else _coord(item.start, dim, "slice start", 1)
                stop = hi + 1 if item.stop is None else _coord(item.stop, dim, "slice stop", 1)
            else:
                start = hi if item.start is None else _coord(item.start, dim, "slice start", 1)
                stop = lo - 1 if item.stop is None else _coord(item.stop, dim, "slice stop", 1)
            # A start one past the end it counts from selects nothing there (numpy's a[-11:5]
            # of 10 cells starts at 0): the first coordinate stays inside the domain.
            start = min(max(start, lo), hi + 1) if step > 0 else max(min(start, hi), lo - 1)
            coords = _arange(start, stop, step, dim)
        if step > 0:
            return DimSelection(coords, False, coords, np.arange(len(coords), dtype=np.int64))
        return _from_list(coords, False)
    if isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
        c = np.array([_coord(item, dim, "index")], dtype=np.int64)
        return DimSelection(c, True, c, np.zeros(1, dtype=np.int64))
    if item is None:
        raise _wrong(rules, "np.newaxis/None is not supported in array selections")
    if isinstance(item, (list, np.ndarray, range)):
        arr = np.asarray(item)
        if arr.dtype == bool:
            if not rules.masks:
                raise _wrong(rules, f"boolean masks are not taken for {_called(dim)} (a mask "
                             "of the whole shape is); give a list of indices")
            if arr.shape != (dim.size,):
                raise _wrong(rules, f"a boolean mask for {_called(dim)} must be 1-D with one "
                             f"entry per cell ({dim.size}), got shape {arr.shape}")
            coords = np.flatnonzero(arr).astype(np.int64) + lo
            return DimSelection(coords, False, coords, np.arange(len(coords), dtype=np.int64))
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise _wrong(rules, f"an index list for {_called(dim)} must be a 1-D list of "
                         f"integers, got {item!r:.80}")
        if rules.increasing_lists and arr.size > 1:  # (as h5py: before the range check
            at = arr.astype(np.int64)                 # past the end, after the one before)
            at = np.where(at < 0, at + dim.size, at) if int(dim.domain[0]) == 0 else at
            if bool((at < int(dim.domain[0])).any()):
                _indices(arr, dim)  # raises SelectionError naming the index
            if not bool((at[1:] > at[:-1]).all()):
                raise InvalidTypeError(f"Indexing elements must be in increasing order "
                                       f"({_called(dim)})")
        coords = _indices(arr, dim)
        if not rules.repeats and len(np.unique(coords)) != len(coords):
            raise SelectionError(f"indices on {_called(dim)} repeat; give each once")
        return _from_list(coords, False)
    raise _wrong(rules, f"unsupported index {item!r:.80} for {_called(dim)}: use an int, a "
                 "slice, '...', a list of ints or a 1-D boolean mask")


def _clipped(item: slice, step: int, dim: Dim, rules: Rules) -> np.ndarray:
    """A slice's coordinates with numpy's rules: bounds past either end are clipped."""
    for bound in (item.start, item.stop):
        if bound is not None and (isinstance(bound, (bool, np.bool_))
                                  or not isinstance(bound, (int, np.integer))):
            raise _wrong(rules, f"slice bounds for {_called(dim)} must be integers, got "
                         f"{bound!r}")
    start, stop, _ = slice(item.start, item.stop, step).indices(dim.size)
    lo = int(dim.domain[0])
    return _arange(start + lo, stop + lo, step, dim)


def _arange(start: int, stop: int, step: int, dim: Dim) -> np.ndarray:
    """The coordinates of a slice, refused with :class:`MemoryLimitError` when they alone
    would not fit in this machine's memory (a whole read of a huge domain)."""
    check_memory(len(range(start, stop, step)) * 8, f"the coordinates of {_called(dim)}")
    return np.arange(start, stop, step, dtype=np.int64)


@functools.cache
def machine_bytes() -> int:
    """This machine's physical memory in bytes (``2**63 - 1`` where it cannot be told)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 2**63 - 1


def check_memory(nbytes: int, what: str) -> None:
    """Raise :class:`~tessera.errors.MemoryLimitError` if ``what`` needs more than this
    machine's physical memory (``nbytes``): numpy would raise its own ``MemoryError``
    after trying, or the machine would start swapping.

    >>> check_memory(2**70, "a read of 1 ZiB")
    Traceback (most recent call last):
    ...
    tessera.errors.MemoryLimitError: a read of 1 ZiB would take 1 ZiB, more than this machine's ...
    """
    have = machine_bytes()
    if nbytes > have:
        raise MemoryLimitError(
            f"{what} would take {_size(nbytes)}, more than this machine's memory "
            f"({_size(have)}); read it in pieces (smaller boxes, a step, or "
            "tessera.Hyperslabs)")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024:
            return f"{n:g} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n:.3g} ZiB"


def _indices(arr: np.ndarray, dim: Dim) -> np.ndarray:
    """Integer indices as int64 domain coordinates: negative ones count from the end of a
    domain starting at 0; any outside the domain raises ``SelectionError``."""
    lo, hi = int(dim.domain[0]), int(dim.domain[1])
    if arr.size and arr.dtype.kind == "u" and int(arr.max()) > hi:  # before a wrapping cast
        raise SelectionError(f"index {int(arr.max())} is outside {_called(dim)}'s "
                             f"domain [{lo}, {hi}]")
    coords = arr.astype(np.int64)
    if lo == 0:
        coords = np.where(coords < 0, coords + dim.size, coords)
    bad = (coords < lo) | (coords > hi)
    if bad.any():
        raise SelectionError(f"index {int(arr[bad].flat[0])} is outside "
                             f"{_called(dim)}'s domain [{lo}, {hi}]")
    return coords


def plain_items(selection: Selection, schema: ArraySchema) -> tuple[Any, ...]:
    """Items that select exactly ``selection`` (made on ``schema``) under the array's rules
    (:data:`ARRAY_RULES`): an int for a dropped dimension, a unit-step slice for a plain
    run (an empty one for no coordinates), the coordinates (in output order) otherwise. A
    facade normalises with its own rules, then hands these to the array.

    >>> from tessera.format.schema import Attr
    >>> schema = ArraySchema([Dim("x", (0, 49), 10), Dim("y", (0, 9), 5)], [Attr("v", "i4")])
    >>> plain_items(normalize_selection((slice(40, 60), -1), schema, H5_RULES), schema)
    (slice(40, 50, None), 9)
    """
    items: list[Any] = []
    for d, dim in zip(selection.dims, schema.dims, strict=True):
        if not len(d.coords):
            low = int(dim.domain[0])
            items.append(slice(low, low))
        elif d.drop:
            items.append(int(d.coords[0]))
        elif d.ascending_run:
            items.append(slice(d.lo, d.hi + 1))
        else:
            items.append(d.coords)
    return tuple(items)


def _from_list(coords: np.ndarray, drop: bool) -> DimSelection:
    order = np.argsort(coords, kind="stable")
    return DimSelection(coords, drop, coords[order], order.astype(np.int64))


class Hyperslabs:
    """A union of selections read with one plan (HDF5's dataspace unions): tiles that
    several selections touch are fetched once. A read returns one result per selection,
    in order.

    >>> Hyperslabs([(slice(0, 2), 1), (5, slice(None))]).selections[1]
    (5, slice(None, None, None))
    """

    def __init__(self, selections: Any) -> None:
        self.selections = tuple(selections)
        if not self.selections:
            raise SelectionError("Hyperslabs needs at least one selection")

    def __repr__(self) -> str:
        return f"Hyperslabs({list(self.selections)!r})"


class Points:
    """Single cells by coordinates: a tuple of 1-D integer arrays, one per dimension, as
    numpy's fancy indexing takes them (domain coordinates; repeats allowed). A read returns
    one value per point, in the order given.

    >>> Points(([1, 5], [2, 2])).coords[0].tolist()
    [1, 5]
    """

    def __init__(self, coords: Any) -> None:
        if not isinstance(coords, (tuple, list)):
            raise SelectionError("Points takes a tuple of 1-D coordinate arrays, one per "
                                 "dimension")
        self.coords = tuple(np.asarray(c) for c in coords)

    def __repr__(self) -> str:
        n = len(self.coords[0]) if self.coords else 0
        return f"Points({n} points in {len(self.coords)} dimensions)"


def is_full_mask(sel: Any, schema: ArraySchema) -> bool:
    """True if ``sel`` is one boolean array over every dimension of a multi-dimensional
    array (numpy's ``a[mask]``); a 1-D mask of a 1-D array is an orthogonal selection."""
    return (isinstance(sel, np.ndarray) and sel.dtype == bool and schema.ndim > 1
            and sel.ndim > 1)


def vectorized_points(sel: Any, schema: ArraySchema) -> tuple[Points, tuple[int, ...]]:
    """A vectorised selection (zarr's ``vindex``) as points and the result's shape: a
    boolean mask of the array's shape (the ``True`` cells in C order, a 1-D result), or
    one integer array per dimension, broadcast together (the result has their broadcast
    shape). Indices are domain coordinates; negative ones count from the end of a domain
    starting at 0, as in numpy.

    >>> from tessera.format.schema import ArraySchema, Attr, Dim
    >>> schema = ArraySchema([Dim("y", (0, 3), 2), Dim("x", (0, 3), 2)], [Attr("v", "i4")])
    >>> pts, shape = vectorized_points(([0, -1], [[1], [2]]), schema)
    >>> [c.tolist() for c in pts.coords], shape
    ([[0, 3, 0, 3], [1, 1, 2, 2]], (2, 2))
    """
    if isinstance(sel, np.ndarray) and sel.dtype == bool:
        if sel.shape != schema.shape:
            raise SelectionError(f"a boolean mask selection must have the array's shape "
                                 f"{schema.shape}, got {sel.shape}")
        hits = np.nonzero(sel)
        coords = tuple(h.astype(np.int64) + int(d.domain[0])
                       for h, d in zip(hits, schema.dims, strict=True))
        return Points(coords), (len(coords[0]),)
    items = sel if isinstance(sel, tuple) else (sel,)
    if len(items) != schema.ndim:
        raise SelectionError(f"a vectorised selection needs one integer array per dimension "
                             f"({schema.ndim}), got {len(items)}")
    arrays = []
    for item, d in zip(items, schema.dims, strict=True):
        arr = np.asarray(item)
        if arr.dtype == bool or (arr.size and arr.dtype.kind not in "iu"):
            raise SelectionError(f"a vectorised selection takes integer arrays; dimension "
                                 f"{d.name!r} got {item!r:.80}")
        arrays.append(_indices(arr, d))
    try:
        shaped = np.broadcast_arrays(*arrays)
    except ValueError:
        raise SelectionError("the index arrays of a vectorised selection do not broadcast "
                             f"together: shapes {[a.shape for a in arrays]}") from None
    return Points(tuple(a.ravel() for a in shaped)), shaped[0].shape


@dataclasses.dataclass(frozen=True)
class SparseSelection:
    """Per dimension: ``lo <= c`` and ``c <= hi`` (or ``c < hi`` when ``hi_open``), and
    membership in ``members`` when a list was given."""

    lo: tuple[Any, ...]
    hi: tuple[Any, ...]
    hi_open: tuple[bool, ...]
    members: tuple[np.ndarray | None, ...]

    def mask(self, coords: np.ndarray) -> np.ndarray:
        """Which of ``(n, ndim)`` coordinates are selected."""
        keep = np.ones(len(coords), dtype=bool)
        for d in range(coords.shape[1]):
            c = coords[:, d]
            keep &= c >= self.lo[d]
            keep &= (c < self.hi[d]) if self.hi_open[d] else (c <= self.hi[d])
            members = self.members[d]
            if members is not None:
                keep &= np.isin(c, members)
        return keep

    def touches(self, mbrs: np.ndarray) -> np.ndarray:
        """Which data tiles (``(tiles, 2, ndim)`` MBRs) may hold selected cells."""
        lo = np.asarray(self.lo, dtype=np.float64)
        hi = np.asarray(self.hi, dtype=np.float64)
        below_hi = np.where(np.asarray(self.hi_open), mbrs[:, 0] < hi, mbrs[:, 0] <= hi)
        touching: np.ndarray = np.all(below_hi, axis=1) & np.all(mbrs[:, 1] >= lo, axis=1)
        return touching
