"""COO (the Delta Tensor paper, section IV.C), made practical: the non-zeros in C order,
coalesced (duplicates summed, as torch's ``coalesce``), in rows of about ``chunk_bytes``
(``part="entries"``: coordinates ``(count, N)`` as int32/int64 in ``indices``, values in
``values``; coordinates as gaps between C-order linear indices, which compress to a
fraction of ``(count, N)`` integers) instead of one row per non-zero, with ``lo..hi`` = the
leading coordinates the
row holds, so ``t[i]`` reads only the rows around ``i``. A tensor with no non-zero keeps its
shape in its header (the paper's one-row-per-nnz loses it).

>>> import numpy as np
>>> from tessera.tables.tensors import coo_tensor
>>> t = coo_tensor((4, 5), np.array([[0, 1], [2, 3], [3, 0]]), np.array([1.0, 2.0, 3.0]))
>>> enc = COO.encode(t, EncodeOptions(chunk_bytes=32, max_row_bytes=1 << 20))
>>> [(r.lo, r.hi, r.count) for r in enc.rows]
[(0, 2, 2), (3, 3, 1)]
"""

from __future__ import annotations

import numpy as np

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
    linear_deltas,
    take_coo,
    unblob,
    undo_deltas,
)
from tessera.tables.tensors import CooTensor, DenseTensor, Tensor


def coo_of(t: Tensor) -> CooTensor:
    return t.to_coo() if isinstance(t, DenseTensor) else t


class CooLayout:
    name = "coo"
    dense = False

    def encode(self, t: Tensor, opts: EncodeOptions) -> Encoded:
        coo = coo_of(t)
        n = len(coo.shape)
        idx = index_dtype(coo.shape)
        bounds = group_rows(coo.nnz, n * idx.itemsize + coo.values.itemsize, opts.chunk_bytes)
        deltas = linear_deltas(coo.coords, coo.shape, bounds)
        rows = []
        for i, (a, b) in enumerate(bounds):
            lead = coo.coords[a:b, 0] if n else np.zeros(1, np.int64)
            indices = blob(coo.coords[a:b], idx) if deltas is None else deltas[0][i]
            rows.append(DataRow("entries", i, int(lead.min()), int(lead.max()), a, b, b - a,
                                indices=indices, values=blob(coo.values[a:b],
                                                             coo.values.dtype)))
        params = {"index_dtype": idx.str} if deltas is None else {
            "index_encoding": "linear-deltas", "index_dtype": deltas[1]}
        return Encoded(rows, params=params)

    def needs(self, header: Header, sel: Selection) -> list[Need]:
        window = lead_window(sel) if header.shape else (0, 0)
        return [] if window is None or not header.nnz else [Need("entries", "lead", (window,))]

    def read(self, header: Header, sel: Selection, fetch: Fetch) -> CooTensor:
        need = self.needs(header, sel)
        rows = sorted(fetch(need[0]), key=lambda r: r.chunk_index) if need else []
        idx = np.dtype(header.params.get("index_dtype", "<i8"))
        n = len(header.shape)
        what = f"tensor {header.id!r} COO entries"
        if header.params.get("index_encoding") == "linear-deltas":
            coords = [undo_deltas(r.indices, str(idx), header.shape, what) for r in rows]
        else:
            coords = [unblob(r.indices, idx, what).reshape(-1, n) for r in rows]
        values = [unblob(r.values, header.bits, what) for r in rows]
        coo = CooTensor(header.shape,
                        np.concatenate(coords).astype(np.int64) if coords
                        else np.zeros((0, n), np.int64),
                        np.concatenate(values) if values else np.zeros(0, header.bits),
                        header.dtype)
        return take_coo(coo, sel)


COO = CooLayout()
