"""What every storage format of a tensor table shares: the rows a format writes, the header
it fills, the selection it is asked for, and how it asks for rows back.

A format (one module per format, registered in :mod:`tessera.tables.layouts`) turns a
canonical tensor into a header (small arrays in ``aux``) and data rows, and answers a
selection by asking a ``fetch`` callback for the rows it needs, described by a :class:`Need`
(a part and intervals of one of the row keys: the leading-index range ``lo..hi``, the
``chunk_index``, or the position range ``start..stop-1``), so the table reads only the row
groups whose statistics overlap them.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from tessera.errors import FormatError
from tessera.tables.tensors import DTYPES, CooTensor, DenseTensor, Tensor

#: Row keys a need can name, and the columns that bound them.
KEYS = {"lead": ("lo", "hi"), "chunk": ("chunk_index", "chunk_index"),
        "pos": ("start", "stop")}


@dataclasses.dataclass
class DataRow:
    """One data row: ``part`` (``chunk``, ``entries``, ``blocks`` or ``level:k``), its
    ordinal within the part, the leading-index range it covers (``lo..hi``, inclusive), the
    positions of the encoded arrays it holds (``start..stop-1``), and its bytes."""

    part: str
    chunk_index: int
    lo: int
    hi: int
    start: int = 0
    stop: int = 0
    count: int = 0
    indices: bytes | None = None
    values: bytes | None = None


@dataclasses.dataclass(frozen=True)
class Need:
    """Rows of ``part`` whose ``key`` range overlaps one of ``intervals`` (inclusive)."""

    part: str
    key: str
    intervals: tuple[tuple[int, int], ...]

    def wants(self, lo: int, hi: int) -> bool:
        """Whether a row (or a row group) spanning ``lo..hi`` of the key may hold some."""
        return any(lo <= b and hi >= a for a, b in self.intervals)


Fetch = Callable[[Need], list[DataRow]]


@dataclasses.dataclass
class Encoded:
    """A format's output: header fields (``chunk_dim_count``, ``flattened_shape``,
    ``block_shape``, small arrays for ``aux``, ``params`` for ``aux_layout``) and rows."""

    rows: list[DataRow]
    chunk_dim_count: int | None = None
    flattened_shape: tuple[int, ...] | None = None
    block_shape: tuple[int, ...] | None = None
    aux: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    params: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def encoded_bytes(self) -> int:
        """Bytes of the rows' blobs and the aux arrays (before Parquet compression; what a
        format costs, not what lands on storage)."""
        return sum(len(r.indices or b"") + len(r.values or b"") for r in self.rows) + sum(
            a.nbytes for a in self.aux.values())


@dataclasses.dataclass(frozen=True)
class Header:
    """A tensor's header row, as read back."""

    id: str
    write_id: str
    layout: str
    dtype: str
    shape: tuple[int, ...]
    nnz: int
    created_at: int
    chunk_dim_count: int | None = None
    flattened_shape: tuple[int, ...] | None = None
    block_shape: tuple[int, ...] | None = None
    aux: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)
    #: the stored ``aux_layout`` JSON (names the arrays ``aux`` holds once read)
    aux_layout: str | None = None

    @property
    def bits(self) -> np.dtype[Any]:
        return DTYPES[self.dtype]

    @property
    def needs_aux(self) -> bool:
        """Whether the format keeps arrays in ``aux`` that are not loaded yet."""
        if self.aux or not self.aux_layout:
            return False
        return bool(json.loads(self.aux_layout).get("arrays"))


@dataclasses.dataclass(frozen=True)
class EncodeOptions:
    """What a write asks of a format."""

    chunk_bytes: int
    max_row_bytes: int
    chunk_dim: int | None = None
    block_shape: tuple[int, ...] | None = None
    flatten_at: int | None = None
    mode_order: tuple[int, ...] | None = None


#: A selection: one index array per dimension (in the order asked; no dimension dropped).
Selection = tuple[np.ndarray, ...]


class Layout(Protocol):
    """A storage format."""

    name: str
    dense: bool

    def encode(self, t: Tensor, opts: EncodeOptions) -> Encoded:
        """Header fields and rows of ``t``."""

    def read(self, header: Header, sel: Selection, fetch: Fetch) -> Tensor:
        """The selected part of the tensor (shape ``len(sel[d])`` per dimension), fetching
        only the rows that hold it."""

    def needs(self, header: Header, sel: Selection) -> list[Need]:
        """The rows the first fetch of :meth:`read` asks for (for ``explain``; formats that
        walk pointers fetch more afterwards)."""


# -- helpers shared by the formats -----------------------------------------------------------
def index_dtype(shape: Sequence[int]) -> np.dtype[Any]:
    """int32 when every coordinate fits it, else int64."""
    return np.dtype("<i4") if max(shape, default=0) < 2**31 else np.dtype("<i8")


def runs(ids: np.ndarray) -> tuple[tuple[int, int], ...]:
    """Sorted unique ``ids`` as inclusive runs of consecutive values.

    >>> runs(np.array([1, 2, 3, 7, 9, 10]))
    ((1, 3), (7, 7), (9, 10))
    """
    ids = np.unique(ids)
    if not len(ids):
        return ()
    cuts = np.flatnonzero(np.diff(ids) != 1) + 1
    return tuple((int(r[0]), int(r[-1])) for r in np.split(ids, cuts))


def lead_window(sel: Selection) -> tuple[int, int] | None:
    """The inclusive range of leading indices a selection touches (None: empty)."""
    if not sel or not len(sel[0]):
        return None
    return int(sel[0].min()), int(sel[0].max())


def take_dense(array: np.ndarray, sel: Selection) -> np.ndarray:
    """``array[sel]`` as orthogonal indexing (one index array per dimension)."""
    out = array
    for axis, idx in enumerate(sel):
        if len(idx) != out.shape[axis] or not np.array_equal(idx, np.arange(out.shape[axis])):
            out = np.take(out, idx, axis=axis)
    return out


def take_coo(coo: CooTensor, sel: Selection, offset: Sequence[int] | None = None) -> CooTensor:
    """The entries of ``coo`` (whose coordinates start at ``offset``) that ``sel`` keeps
    (indices unique per dimension, as ints and slices give), renumbered to their positions
    in the selection, in C order."""
    coords = coo.coords + (np.asarray(offset, np.int64) if offset is not None else 0)
    if all(len(idx) == n and (n == 0 or (idx[0] == 0 and idx[-1] == n - 1 and bool(
            (np.diff(idx) == 1).all()))) for idx, n in zip(sel, coo.shape, strict=True)):
        return _c_order(CooTensor(coo.shape, coords, coo.values, coo.dtype))  # everything
    keep = np.ones(len(coords), bool)
    new = np.zeros_like(coords)
    for axis, idx in enumerate(sel):
        if not len(idx):
            keep[:] = False
            continue
        order = np.argsort(idx, kind="stable")
        sorted_idx = idx[order]
        col = coords[:, axis]
        pos = np.minimum(np.searchsorted(sorted_idx, col), len(sorted_idx) - 1)
        found = sorted_idx[pos] == col
        keep &= found
        new[:, axis] = order[pos]
    new, values = new[keep], coo.values[keep]
    shape = tuple(len(idx) for idx in sel)
    if len(new) and shape:
        order = np.argsort(np.ravel_multi_index(tuple(new.T), shape), kind="stable")
        new, values = new[order], values[order]
    return CooTensor(shape, new.astype(np.int64), np.ascontiguousarray(values), coo.dtype)


def _c_order(coo: CooTensor) -> CooTensor:
    """``coo`` with its entries in C order (sorted only if they are not)."""
    if len(coo.coords) < 2 or not coo.shape:
        return coo
    linear = np.ravel_multi_index(tuple(coo.coords.T), coo.shape)
    if bool((np.diff(linear) > 0).all()):
        return coo
    order = np.argsort(linear, kind="stable")
    return CooTensor(coo.shape, coo.coords[order], coo.values[order], coo.dtype)


def blob(array: np.ndarray, dtype: np.dtype[Any] | str) -> bytes:
    """``array`` as little-endian bytes of ``dtype``."""
    return np.ascontiguousarray(array, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


def unblob(data: bytes | None, dtype: np.dtype[Any] | str, what: str) -> np.ndarray:
    """Bytes back to an array (a ``FormatError`` names a truncated blob)."""
    dt = np.dtype(dtype).newbyteorder("<")
    raw = data or b""
    if len(raw) % dt.itemsize:
        raise FormatError(f"{what}: {len(raw)} bytes is not a whole number of {dt} values; "
                          "the row is damaged")
    return np.frombuffer(raw, dtype=dt)


def aux_layout(aux: dict[str, np.ndarray], params: dict[str, Any]) -> tuple[bytes, str]:
    """The ``aux`` blob and its ``aux_layout`` JSON (names, dtypes, offsets; params)."""
    parts, entries, offset = [], [], 0
    for name, array in aux.items():
        data = blob(array, array.dtype)
        entries.append({"name": name, "dtype": array.dtype.newbyteorder("<").str,
                        "offset": offset, "length": len(data)})
        parts.append(data)
        offset += len(data)
    return b"".join(parts), json.dumps({"arrays": entries, "params": params})


def parse_aux(data: bytes | None, layout: str | None) -> tuple[dict[str, np.ndarray],
                                                               dict[str, Any]]:
    """Inverse of :func:`aux_layout`."""
    if not layout:
        return {}, {}
    doc = json.loads(layout)
    raw = data or b""
    arrays = {e["name"]: np.frombuffer(raw[e["offset"]:e["offset"] + e["length"]],
                                       dtype=np.dtype(e["dtype"])) for e in doc["arrays"]}
    return arrays, dict(doc.get("params", {}))


def linear_deltas(coords: np.ndarray, shape: tuple[int, ...],
                  bounds: Sequence[tuple[int, int]]) -> tuple[list[bytes], str] | None:
    """C-order coordinates as each row's first linear index and then the gaps to the next
    (rows ``bounds``), in the narrowest unsigned width that holds them all: sorted
    coordinates become small numbers, which compress far better than ``(nnz, N)`` indices.
    None when the linear index would not fit int64.

    >>> blobs, width = linear_deltas(np.array([[0, 1], [0, 3], [2, 0]]), (3, 4), [(0, 3)])
    >>> width, np.frombuffer(blobs[0], width).tolist()
    ('<u1', [1, 2, 5])
    """
    if not shape or math.prod(shape) >= 2**63:
        return None
    linear = np.ravel_multi_index(tuple(coords.T), shape).astype(np.int64) if len(coords) \
        else np.zeros(0, np.int64)
    deltas = np.empty_like(linear)
    for a, b in bounds:
        if b > a:
            deltas[a] = linear[a]
            deltas[a + 1:b] = np.diff(linear[a:b])
    top = int(deltas.max()) if len(deltas) else 0
    width = next(w for w in ("<u1", "<u2", "<u4", "<u8") if top <= np.iinfo(w).max)
    return [deltas[a:b].astype(width).tobytes() for a, b in bounds], width


def undo_deltas(blob: bytes | None, width: str, shape: tuple[int, ...], what: str
                ) -> np.ndarray:
    """Inverse of :func:`linear_deltas` for one row: coordinates ``(count, N)``."""
    linear = np.cumsum(unblob(blob, width, what).astype(np.int64))
    return np.stack(np.unravel_index(linear, shape), axis=1).astype(np.int64) if len(
        linear) else np.zeros((0, len(shape)), np.int64)


def group_rows(n_items: int, item_bytes: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges splitting ``n_items`` items of ``item_bytes`` into rows of
    about ``chunk_bytes`` (at least one item per row)."""
    per_row = max(1, chunk_bytes // max(1, item_bytes))
    return [(s, min(s + per_row, n_items)) for s in range(0, n_items, per_row)]


def as_dense(t: Tensor) -> DenseTensor:
    return t if isinstance(t, DenseTensor) else t.to_dense()
