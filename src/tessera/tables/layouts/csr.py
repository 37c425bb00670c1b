"""CSR and CSC (the Delta Tensor paper, section IV.D), for any rank: the tensor is flattened
to a matrix, rows = the first ``flatten_at`` dimensions (1 by default, so ``t[i]`` is one CSR
row), columns = the rest. CSR keeps the row pointers (``crow_indices``, torch's name) in the
header's ``aux`` and the column indices and values in ``entries`` rows of about
``chunk_bytes`` with ``start..stop`` = their positions, so a leading slice reads the entries
``crow[a]..crow[b]`` only. CSC mirrors it (``ccol_indices`` and ``row_indices``); a leading
slice then needs every entry row, which ``explain`` shows.

>>> import numpy as np
>>> from tessera.tables.tensors import coo_tensor
>>> t = coo_tensor((3, 4), np.array([[0, 1], [2, 0], [2, 3]]), np.array([5, 6, 7]))
>>> enc = CSR.encode(t, EncodeOptions(chunk_bytes=1 << 20, max_row_bytes=1 << 20))
>>> enc.aux["crow_indices"].tolist(), enc.flattened_shape
([0, 1, 1, 3], (3, 4))
"""

from __future__ import annotations

import math

import numpy as np

from tessera.errors import FormatError
from tessera.tables.layouts.base import (
    DataRow,
    Encoded,
    EncodeOptions,
    Fetch,
    Header,
    Need,
    Selection,
    blob,
    group_rows,
    index_dtype,
    lead_window,
    take_coo,
    unblob,
)
from tessera.tables.layouts.coo import coo_of
from tessera.tables.tensors import CooTensor, Tensor


class CompressedLayout:
    """CSR (``by_rows=True``) or CSC."""

    def __init__(self, name: str, by_rows: bool) -> None:
        self.name, self.by_rows, self.dense = name, by_rows, False

    def _flatten_at(self, shape: tuple[int, ...], opts: EncodeOptions) -> int:
        n = len(shape)
        if n < 2:
            if opts.flatten_at is not None:
                raise FormatError(f"flatten_at needs a tensor of rank >= 2, this one has {n}")
            return n
        k = 1 if opts.flatten_at is None else opts.flatten_at
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n - 1:
            raise FormatError(f"flatten_at must be 1..{n - 1} (rows = the first flatten_at "
                              f"dimensions), got {opts.flatten_at!r}")
        return k

    def encode(self, t: Tensor, opts: EncodeOptions) -> Encoded:
        coo = coo_of(t)
        shape = coo.shape
        k = self._flatten_at(shape, opts)
        rows_n, cols_n = math.prod(shape[:k]), math.prod(shape[k:])
        if not shape:
            rows_n = cols_n = 1
        r = _flat(coo.coords[:, :k], shape[:k])
        c = _flat(coo.coords[:, k:], shape[k:])
        major, minor, n_major = (r, c, rows_n) if self.by_rows else (c, r, cols_n)
        order = np.lexsort((minor, major))
        major, minor, values = major[order], minor[order], coo.values[order]
        pointers = np.searchsorted(major, np.arange(n_major + 1)).astype(np.int64)
        idx = index_dtype((rows_n, cols_n))
        lead_of = r[order] // max(1, math.prod(shape[1:k])) if shape else np.zeros(len(r),
                                                                                   np.int64)
        rows = []
        for i, (a, b) in enumerate(group_rows(coo.nnz, idx.itemsize + values.itemsize,
                                              opts.chunk_bytes)):
            rows.append(DataRow("entries", i, int(lead_of[a:b].min()), int(lead_of[a:b].max()),
                                a, b, b - a, indices=blob(minor[a:b], idx),
                                values=blob(values[a:b], values.dtype)))
        name = "crow_indices" if self.by_rows else "ccol_indices"
        return Encoded(rows, flattened_shape=(rows_n, cols_n), aux={name: pointers},
                       params={"flatten_at": k, "index_dtype": idx.str})

    def _positions(self, header: Header, sel: Selection) -> tuple[int, int] | None:
        """Entries a CSR read needs: ``crow[a * s]..crow[(b + 1) * s] - 1``."""
        window = lead_window(sel) if header.shape else (0, 0)
        if window is None or not header.nnz:
            return None
        k = int(header.params.get("flatten_at", 1))
        per_lead = math.prod(header.shape[1:k]) if header.shape else 1
        crow = header.aux["crow_indices"]
        a, b = int(crow[window[0] * per_lead]), int(crow[(window[1] + 1) * per_lead])
        return (a, b - 1) if b > a else None

    def needs(self, header: Header, sel: Selection) -> list[Need]:
        if not header.nnz:
            return []
        if not self.by_rows:  # CSC: a leading slice is spread over every column
            window = lead_window(sel) if header.shape else (0, 0)
            return [] if window is None else [Need("entries", "lead", (window,))]
        pos = self._positions(header, sel)
        return [] if pos is None else [Need("entries", "pos", (pos,))]

    def read(self, header: Header, sel: Selection, fetch: Fetch) -> CooTensor:
        shape = header.shape
        k = int(header.params.get("flatten_at", 1))
        idx = np.dtype(header.params.get("index_dtype", "<i8"))
        needs = self.needs(header, sel)
        rows = sorted(fetch(needs[0]), key=lambda r: r.start) if needs else []
        what = f"tensor {header.id!r} {self.name} entries"
        pointers = header.aux["crow_indices" if self.by_rows else "ccol_indices"]
        if rows:
            minor = np.concatenate([unblob(r.indices, idx, what) for r in rows]).astype(np.int64)
            values = np.concatenate([unblob(r.values, header.bits, what) for r in rows])
            positions = np.concatenate([np.arange(r.start, r.stop) for r in rows])
        else:
            minor = np.zeros(0, np.int64)
            values = np.zeros(0, header.bits)
            positions = np.zeros(0, np.int64)
        major = np.searchsorted(pointers, positions, "right") - 1
        r, c = (major, minor) if self.by_rows else (minor, major)
        coords = np.concatenate([_unflat(r, shape[:k]), _unflat(c, shape[k:])], axis=1) \
            if shape else np.zeros((len(values), 0), np.int64)
        coo = CooTensor(shape, coords.astype(np.int64), values, header.dtype)
        return take_coo(coo, sel)


def _flat(coords: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if not shape:
        return np.zeros(len(coords), np.int64)
    flat: np.ndarray = np.ravel_multi_index(tuple(coords.T), shape)
    return flat.astype(np.int64)


def _unflat(flat: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if not shape:
        return np.zeros((len(flat), 0), np.int64)
    return np.stack(np.unravel_index(flat, shape), axis=1)


CSR = CompressedLayout("csr", by_rows=True)
CSC = CompressedLayout("csc", by_rows=False)
