"""Lazy references to the tensors of a table: ``tt[id]`` reads nothing until it is sliced;
then only the rows (row groups, byte ranges) that hold the slice are fetched.

Selections are numpy's basic ones: ints (negative count from the end), slices with steps
(bounds clipped as numpy clips them), ``...``, plus lists of distinct ints and 1-D boolean
masks per dimension (orthogonal, as ``oindex``); fewer indices than dimensions select the
rest whole. The rules are the shared floor's (:mod:`tessera.format.selection`,
``TENSOR_RULES``).

>>> normalize((1, slice(None, None, 2)), (3, 5))[0]
(array([1]), array([0, 2, 4]))
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any, Protocol

import numpy as np

from tessera.config import TablesConfig
from tessera.errors import FormatError, MemoryLimitError
from tessera.format.selection import TENSOR_RULES, normalize_shape
from tessera.query.plan import Plan, ranged_plan
from tessera.storage.blocking import Store
from tessera.storage.stats import IOStats
from tessera.tables.layouts import get_layout
from tessera.tables.layouts.base import DataRow, Header, Need, Selection
from tessera.tables.reader import DataFile, TableRead, chunk_ranges, merge_ranges
from tessera.tables.schema import DATA_COLUMNS
from tessera.tables.tensors import DTYPES, CooTensor, DenseTensor, Tensor
from tessera.when import renamed

OUTPUTS = ("numpy", "torch", "sparse")


@dataclasses.dataclass(frozen=True)
class SparseTensor:
    """A sparse read: ``coords`` ``(nnz, N)`` int64 in C order, ``values`` ``(nnz,)``, the
    ``shape`` and ``dtype`` name."""

    coords: np.ndarray
    values: np.ndarray
    shape: tuple[int, ...]
    dtype: str

    @property
    def nnz(self) -> int:
        return len(self.values)

    def to_dense(self) -> np.ndarray:
        """As a numpy array (bfloat16 has no numpy dtype: use :meth:`to_torch`)."""
        _no_bfloat16_numpy(self.dtype)
        out = np.zeros(self.shape, DTYPES[self.dtype])
        if self.nnz:
            out[tuple(self.coords.T)] = self.values
        return out

    def to_torch(self) -> Any:
        """As a coalesced ``torch.sparse_coo_tensor``."""
        import torch

        values = _torch_values(self.values, self.dtype)
        indices = torch.from_numpy(np.ascontiguousarray(self.coords.T))
        return torch.sparse_coo_tensor(indices, values, self.shape).coalesce()


def normalize(sel: Any, shape: tuple[int, ...]) -> tuple[Selection, tuple[int, ...]]:
    """``sel`` as one index array per dimension, and the dimensions an int removes, read by
    the shared selection floor under :data:`~tessera.format.selection.TENSOR_RULES` (a
    ``SelectionError`` names what is out of range or malformed)."""
    dims = normalize_shape(sel, shape, TENSOR_RULES).dims
    return tuple(d.coords for d in dims), tuple(i for i, d in enumerate(dims) if d.drop)


class RowSource(Protocol):
    """What a reference needs of its table (:class:`~tessera.tables.TensorTable`)."""

    config: TablesConfig
    last_read: TableRead | None
    store: Store

    def aux(self, header: Header) -> Header: ...

    def read_rows(self, header: Header, need: Need, report: TableRead) -> list[DataRow]: ...

    def plan(self, header: Header, needs: list[Need]) -> list[tuple[DataFile, Any,
                                                                    list[int]]]: ...

    def collecting(self) -> contextlib.AbstractContextManager[IOStats]: ...


class TensorRef:
    """One tensor of a table (see the module docstring)."""

    def __init__(self, table: RowSource, header: Header) -> None:
        self.table, self.header = table, header

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def shape(self) -> tuple[int, ...]:
        return self.header.shape

    @property
    def ndim(self) -> int:
        return len(self.header.shape)

    @property
    def dtype(self) -> str:
        """The dtype's name (``bfloat16`` included)."""
        return self.header.dtype

    @property
    def layout(self) -> str:
        return self.header.layout

    @property
    def nnz(self) -> int:
        return self.header.nnz

    @property
    def metadata(self) -> dict[str, str]:
        return dict(self.header.metadata)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __getitem__(self, sel: Any) -> np.ndarray:
        out: np.ndarray = self.read(sel)
        return out

    def read(self, sel: Any = (), output: str = "numpy", *, force: bool = False,
             out: str | None = None) -> Any:
        """The selection as ``output``: ``numpy`` (dense), ``torch`` (dense for FTSF, a
        sparse COO tensor for sparse formats) or ``sparse`` (a :class:`SparseTensor`). Dense
        results of sparse formats above the table's ``max_dense_bytes`` are refused unless
        ``force``. (``out=`` is the older name of ``output=``.)"""
        out = renamed("out", "output", out, output, "numpy")
        if out not in OUTPUTS:
            raise FormatError(f"output must be one of {OUTPUTS}, got {out!r}")
        index, dropped = normalize(sel, self.shape)
        layout = get_layout(self.header.layout)
        size = math.prod(len(i) for i in index) * DTYPES[self.dtype].itemsize
        dense_out = out == "numpy" or (out == "torch" and layout.dense)
        if dense_out and not layout.dense and size > self.table.config.max_dense_bytes \
                and not force:
            raise MemoryLimitError(
                f"tensor {self.id!r} {self.shape}: the selection is {size:,} bytes dense, over "
                f"max_dense_bytes ({self.table.config.max_dense_bytes:,}); read it with "
                "output='sparse' (or output='torch'), narrow the selection, or pass "
                "force=True")
        if out == "numpy":
            _no_bfloat16_numpy(self.dtype)
        tensor = self._fetch(index)
        return _output(tensor, dropped, out)

    def _fetch(self, index: Selection) -> Tensor:
        report = TableRead()
        with self.table.collecting() as stats:
            header = self.table.aux(self.header)
            self.header = header

            def fetch(need: Need) -> list[Any]:
                return self.table.read_rows(header, need, report)

            tensor = get_layout(header.layout).read(header, index, fetch)
        report.stats = stats
        self.table.last_read = report
        return tensor

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The whole tensor as a numpy array."""
        out: np.ndarray = self.read((), "numpy", force=force)
        return out

    def torch(self) -> Any:
        """The whole tensor as a torch tensor (sparse COO for sparse formats)."""
        return self.read((), "torch")

    def to_sparse(self) -> SparseTensor:
        """The whole tensor's non-zeros."""
        result: SparseTensor = self.read((), "sparse")
        return result

    def explain(self, sel: Any = ()) -> Plan:
        """The plan of a read of ``sel``: which files, row groups and byte ranges it takes
        first (one row per file; formats that follow pointers, CSF, read deeper levels
        after these), with requests, bytes, seconds and dollars, without reading data
        (footers are read once and kept). Prints as a table; ``.to_dict()`` summarises."""
        index, _ = normalize(sel, self.shape)
        header = self.table.aux(self.header)
        needs = get_layout(header.layout).needs(header, index)
        plan = self.table.plan(header, needs) if needs else []
        return ranged_plan(self.table.store.url, [
            (f"{f.path}: row groups {_short(groups)}", f.path,
             np.array([(o, o + n) for o, n in merge_ranges(chunk_ranges(meta, groups,
                                                                         DATA_COLUMNS))]))
            for f, meta, groups in plan],
            f"tensor {self.id!r} {self.shape} {self.dtype} as {self.layout}"
            + ("" if get_layout(header.layout).dense or header.layout != "csf"
               else " (then deeper CSF levels)"))

    def _repr_html_(self) -> str:
        """A notebook's view: the tensor's id, shape, dtype, layout, non-zeros and metadata."""
        import html

        cells = [self.id, str(self.shape), self.dtype, self.layout, f"{self.nnz:,}",
                 ", ".join(f"{k}={v}" for k, v in self.header.metadata.items())]
        return ("<table><thead><tr><th>id</th><th>shape</th><th>dtype</th><th>layout</th>"
                "<th>non-zeros</th><th>metadata</th></tr></thead><tbody><tr>"
                + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr></tbody></table>")

    def __repr__(self) -> str:
        return (f"<tessera.TensorRef {self.id!r} {self.shape} {self.dtype} {self.layout}, "
                f"nnz {self.nnz}>")


def _short(groups: list[int]) -> str:
    return ", ".join(map(str, groups[:8])) + (f", ... ({len(groups)})" if len(groups) > 8
                                              else "")


def _output(tensor: Tensor, dropped: tuple[int, ...], out: str) -> Any:
    keep = [a for a in range(len(tensor.shape)) if a not in dropped]
    if out == "sparse" or (out == "torch" and isinstance(tensor, CooTensor)):
        coo = tensor.to_coo() if isinstance(tensor, DenseTensor) else tensor
        result = SparseTensor(coo.coords[:, keep], coo.values,
                              tuple(coo.shape[a] for a in keep), coo.dtype)
        return result if out == "sparse" else result.to_torch()
    dense = tensor if isinstance(tensor, DenseTensor) else tensor.to_dense()
    array = dense.array.reshape(tuple(dense.shape[a] for a in keep))
    if out == "numpy":
        return array
    import torch

    if dense.dtype == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16)).view(
            torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(array))


def _torch_values(values: np.ndarray, dtype: str) -> Any:
    import torch

    if dtype == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(values).view(np.int16)).view(
            torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(values))


def _no_bfloat16_numpy(dtype: str) -> None:
    if dtype == "bfloat16":
        raise FormatError("numpy has no bfloat16: read this tensor with output='torch' (or "
                          "output='sparse' and its values as uint16 bits)")
