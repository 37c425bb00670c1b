"""BSGS, Block Sparse Generic Storage (the Delta Tensor paper, section IV.F): the tensor cut
into blocks of a full-rank ``block_shape`` (the paper's text and figure disagree on its rank;
block coordinates have one entry per dimension, so must it), only blocks holding a non-zero
kept, edge blocks zero-padded (clipped on read). Rows of about ``chunk_bytes`` of blocks
(``part="blocks"``): block coordinates in ``indices`` (as gaps between their C-order
numbers over the block grid), the flattened blocks in ``values``,
``lo..hi`` = the leading indices the row's blocks cover, so a leading slice reads only the
rows of its block rows (the paper's slice steps 1-5, step 4 pushed into row pruning).

Without ``block_shape`` one is searched: from all ones, the dimension whose doubling most
lowers ``blocks x (block cells x itemsize + 8 N)`` (block count from a sample of up to
1,000,000 non-zeros) is doubled, up to 64 tries; the leading dimension stays 1 so a leading
index never shares a block with its neighbours.

>>> import numpy as np
>>> from tessera.tables.tensors import coo_tensor
>>> t = coo_tensor((4, 6), np.array([[0, 0], [0, 2], [1, 1], [3, 5]]), np.array([1, 2, 3, 4]))
>>> enc = BSGS.encode(t, EncodeOptions(chunk_bytes=1 << 20, max_row_bytes=1 << 20,
...                                    block_shape=(2, 3)))
>>> enc.params["index_encoding"], undo_deltas(enc.rows[0].indices, enc.params["index_dtype"],
...                                           (2, 2), "doc").tolist()
('linear-deltas', [[0, 0], [1, 1]])
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
    linear_deltas,
    take_coo,
    unblob,
    undo_deltas,
)
from tessera.tables.layouts.coo import coo_of
from tessera.tables.tensors import CooTensor, Tensor

SAMPLE = 1_000_000
TRIES = 64


def block_ids(coords: np.ndarray, block: tuple[int, ...], shape: tuple[int, ...]
              ) -> np.ndarray:
    """Each coordinate's block as one C-order number over the block grid (sorting and
    counting one int64 column is far faster than rows of N)."""
    grid = tuple(-(-n // b) for n, b in zip(shape, block, strict=True))
    ids: np.ndarray = np.ravel_multi_index(tuple((coords // np.asarray(block)).T), grid)
    return ids


def block_cost(coords: np.ndarray, block: tuple[int, ...], itemsize: int,
               shape: tuple[int, ...]) -> float:
    """Estimated stored bytes with ``block``: blocks x (cells x itemsize + 8 N)."""
    if not shape or not len(coords):
        return min(1, len(coords)) * 8.0
    ids = np.sort(block_ids(coords, block, shape))  # sorting counts faster than np.unique
    blocks = 1 + int(np.count_nonzero(np.diff(ids)))
    return blocks * (math.prod(block) * itemsize + 8 * len(block))


def search_block(coords: np.ndarray, shape: tuple[int, ...], itemsize: int,
                 seed: int = 0) -> tuple[int, ...]:
    """The block shape :mod:`this format <tessera.tables.layouts.bsgs>` picks (see above)."""
    n = len(shape)
    if len(coords) > SAMPLE:
        pick = np.random.default_rng(seed).choice(len(coords), SAMPLE, replace=False)
        coords = coords[pick]
    block = [1] * n
    best = block_cost(coords, tuple(block), itemsize, shape)
    for _ in range(TRIES):
        trials = []
        for d in range(1, n) if n > 1 else range(n):
            if block[d] >= shape[d]:  # already covers the dimension
                continue
            cand = list(block)
            cand[d] *= 2
            trials.append((block_cost(coords, tuple(cand), itemsize, shape), d, cand))
        if not trials:
            break
        cost, _, cand = min(trials)
        if cost >= best:
            break
        best, block = cost, cand
    return tuple(block)


class BsgsLayout:
    name = "bsgs"
    dense = False

    def encode(self, t: Tensor, opts: EncodeOptions) -> Encoded:
        coo = coo_of(t)
        shape, n = coo.shape, len(coo.shape)
        itemsize = coo.values.itemsize
        if opts.block_shape is not None:
            block = tuple(opts.block_shape)
            if len(block) != n or any(isinstance(b, bool) or not isinstance(b, (int, np.integer))
                                      or b < 1 for b in block):
                raise FormatError(f"block_shape must be {n} positive integers (one per "
                                  f"dimension of shape {shape}), got {opts.block_shape!r}")
            block = tuple(int(b) for b in block)
        else:
            block = search_block(coo.coords, shape, itemsize)
        cells = math.prod(block)
        if cells * itemsize > opts.max_row_bytes:
            raise FormatError(f"block_shape {block} holds {cells * itemsize:,} bytes, over the "
                              f"{opts.max_row_bytes:,}-byte row limit; choose smaller blocks")
        if not coo.nnz or n == 0:
            if n == 0 and coo.nnz:
                return Encoded([DataRow("blocks", 0, 0, 0, 0, 1, 1, indices=b"",
                                        values=blob(coo.values, coo.values.dtype))],
                               block_shape=block, params={"index_dtype": "<i4"})
            return Encoded([], block_shape=block, params={"index_dtype": "<i4"})
        b = np.asarray(block)
        grid = tuple(-(-n // k) for n, k in zip(shape, block, strict=True))
        flat, inverse = np.unique(block_ids(coo.coords, block, shape), return_inverse=True)
        keys = np.stack(np.unravel_index(flat, grid), axis=1).astype(np.int64)
        inverse = inverse.reshape(-1)
        within = np.ravel_multi_index(tuple((coo.coords % b).T), block)
        data = np.zeros((len(keys), cells), coo.values.dtype)
        data[inverse, within] = coo.values
        idx = index_dtype(shape)
        bounds = group_rows(len(keys), cells * itemsize + n * idx.itemsize, opts.chunk_bytes)
        deltas = linear_deltas(keys, grid, bounds)
        rows = []
        for i, (s, e) in enumerate(bounds):
            lo = int(keys[s:e, 0].min()) * block[0]
            hi = min(shape[0] - 1, int(keys[s:e, 0].max()) * block[0] + block[0] - 1)
            indices = blob(keys[s:e], idx) if deltas is None else deltas[0][i]
            rows.append(DataRow("blocks", i, lo, hi, s, e, e - s, indices=indices,
                                values=blob(data[s:e], data.dtype)))
        params = {"index_dtype": idx.str} if deltas is None else {
            "index_encoding": "linear-deltas", "index_dtype": deltas[1]}
        return Encoded(rows, block_shape=block, params=params)

    def needs(self, header: Header, sel: Selection) -> list[Need]:
        window = lead_window(sel) if header.shape else (0, 0)
        return [] if window is None or not header.nnz else [Need("blocks", "lead", (window,))]

    def read(self, header: Header, sel: Selection, fetch: Fetch) -> CooTensor:
        shape, n = header.shape, len(header.shape)
        block = tuple(header.block_shape or ())
        needs = self.needs(header, sel)
        rows = sorted(fetch(needs[0]), key=lambda r: r.chunk_index) if needs else []
        what = f"tensor {header.id!r} BSGS blocks"
        if n == 0:
            values = np.concatenate([unblob(r.values, header.bits, what) for r in rows]) \
                if rows else np.zeros(0, header.bits)
            return CooTensor((), np.zeros((len(values), 0), np.int64), values, header.dtype)
        cells = math.prod(block)
        idx = np.dtype(header.params.get("index_dtype", "<i8"))
        grid = tuple(-(-n_ // k) for n_, k in zip(shape, block, strict=True))
        if rows and header.params.get("index_encoding") == "linear-deltas":
            keys = np.concatenate([undo_deltas(r.indices, str(idx), grid, what) for r in rows])
            data = np.concatenate([unblob(r.values, header.bits, what).reshape(-1, cells)
                                   for r in rows])
        elif rows:
            keys = np.concatenate([unblob(r.indices, idx, what).reshape(-1, n) for r in rows])
            data = np.concatenate([unblob(r.values, header.bits, what).reshape(-1, cells)
                                   for r in rows])
        else:
            keys = np.zeros((0, n), np.int64)
            data = np.zeros((0, cells), header.bits)
        window = lead_window(sel)
        if window is not None and len(keys):  # only the block rows under the selection
            keep = (keys[:, 0] >= window[0] // block[0]) & (keys[:, 0] <= window[1] // block[0])
            keys, data = keys[keep], data[keep]
        mask = (data & 0x7FFF) != 0 if header.dtype == "bfloat16" else data != 0
        if cells == 1:  # blocks of one cell: the block coordinates are the cells'
            nz = mask[:, 0]
            return take_coo(CooTensor(shape, keys[nz].astype(np.int64),
                                      np.ascontiguousarray(data[nz, 0]), header.dtype), sel)
        which, within = np.nonzero(mask)
        coords = keys[which].astype(np.int64) * np.asarray(block) + np.stack(
            np.unravel_index(within, block), axis=1)
        inside = (coords < np.asarray(shape)).all(axis=1)
        coo = CooTensor(shape, coords[inside], data[which, within][inside], header.dtype)
        return take_coo(coo, sel)


BSGS = BsgsLayout()
