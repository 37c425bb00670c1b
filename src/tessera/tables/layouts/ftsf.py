"""FTSF, the Flattened Tensor Storage Format (the Delta Tensor paper, section IV.A): a dense
tensor cut into fibers over its last ``D^c`` dimensions, one row per fiber (``part="chunk"``),
``chunk_index`` = the fiber's linear index over the first ``N - D^c`` dimensions in C order
(the paper draws no such column; table scans do not keep row order, so it is stored),
``lo = hi`` = its leading index. A read fetches exactly the fibers its selection crosses.

The default ``D^c`` is the largest whose fiber fits ``chunk_bytes`` (a (N, 3, 1024, 1024)
uint8 stack gives 3: one 3 MiB image per row, the paper's choice).

>>> import numpy as np
>>> from tessera.tables.tensors import dense_tensor
>>> enc = FTSF.encode(dense_tensor(np.arange(24).reshape(2, 3, 4)),
...                   EncodeOptions(chunk_bytes=64, max_row_bytes=1 << 20))
>>> enc.chunk_dim_count, len(enc.rows), [r.lo for r in enc.rows]
(1, 6, [0, 0, 0, 1, 1, 1])
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
    as_dense,
    runs,
    take_dense,
    unblob,
)
from tessera.tables.tensors import DenseTensor, Tensor, dense_tensor


class FtsfLayout:
    name = "ftsf"
    dense = True

    def chunk_dim(self, shape: tuple[int, ...], itemsize: int, opts: EncodeOptions) -> int:
        """``D^c``: as asked (1..N), else the largest whose fiber fits ``chunk_bytes``."""
        n = len(shape)
        if n == 0:
            return 0
        if opts.chunk_dim is not None:
            if isinstance(opts.chunk_dim, bool) or not 1 <= opts.chunk_dim <= n:
                raise FormatError(f"chunk_dim must be 1..{n} (the tensor's rank), got "
                                  f"{opts.chunk_dim!r}")
            dc = opts.chunk_dim
        else:
            dc = 1
            while dc < n and math.prod(shape[n - dc - 1:]) * itemsize <= opts.chunk_bytes:
                dc += 1
        row = math.prod(shape[n - dc:]) * itemsize
        if row > opts.max_row_bytes:
            raise FormatError(f"an FTSF row of chunk_dim {dc} holds {row:,} bytes, over the "
                              f"{opts.max_row_bytes:,}-byte row limit; reshape the tensor so "
                              "its last dimension is smaller")
        return dc

    def encode(self, t: Tensor, opts: EncodeOptions) -> Encoded:
        d = as_dense(t)
        shape = d.shape
        dc = self.chunk_dim(shape, d.array.itemsize, opts)
        n = len(shape)
        if d.array.size == 0:
            return Encoded([], chunk_dim_count=dc)
        fibers = d.array.reshape(-1, math.prod(shape[n - dc:]) if n else 1)
        per_lead = math.prod(shape[1:n - dc]) if n - dc >= 1 else len(fibers)
        rows = []
        for c, fiber in enumerate(fibers):
            lead = c // per_lead if n - dc >= 1 else 0
            hi = lead if n - dc >= 1 else (shape[0] - 1 if n else 0)
            rows.append(DataRow("chunk", c, lead, hi, count=fiber.size,
                                values=fiber.tobytes()))
        return Encoded(rows, chunk_dim_count=dc)

    def _chunks(self, header: Header, sel: Selection) -> np.ndarray:
        n, dc = len(header.shape), int(header.chunk_dim_count or 0)
        outer = sel[:n - dc]
        if not outer:
            return np.zeros(1, np.int64)
        grids = np.meshgrid(*outer, indexing="ij")
        return np.ravel_multi_index(tuple(g.ravel() for g in grids),
                                    header.shape[:n - dc]).astype(np.int64)

    def needs(self, header: Header, sel: Selection) -> list[Need]:
        if math.prod(header.shape) == 0 or any(not len(i) for i in sel):
            return []
        return [Need("chunk", "chunk", runs(self._chunks(header, sel)))]

    def read(self, header: Header, sel: Selection, fetch: Fetch) -> DenseTensor:
        shape, n = header.shape, len(header.shape)
        dc = int(header.chunk_dim_count or 0)
        out_shape = tuple(len(i) for i in sel)
        if math.prod(out_shape) == 0 or math.prod(shape) == 0:
            return DenseTensor(np.zeros(out_shape, header.bits), header.dtype)
        chunks = self._chunks(header, sel)
        got = {r.chunk_index: r for r in fetch(Need("chunk", "chunk", runs(chunks)))}
        fiber_shape = shape[n - dc:]
        parts = []
        for c in chunks.tolist():
            row = got.get(c)
            if row is None:
                raise FormatError(f"tensor {header.id!r}: FTSF chunk {c} is missing; the "
                                  "table is damaged")
            parts.append(unblob(row.values, header.bits, f"tensor {header.id!r} chunk {c}")
                         .reshape(fiber_shape))
        # fibers in selection order: only the last D^c dimensions are left to select
        stacked = np.stack(parts).reshape(tuple(len(i) for i in sel[:n - dc]) + fiber_shape)
        return dense_tensor(take_dense(stacked, (*(np.arange(len(i)) for i in sel[:n - dc]),
                                                 *sel[n - dc:])), header.dtype)


FTSF = FtsfLayout()
