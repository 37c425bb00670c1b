"""CSF, Compressed Sparse Fiber (the Delta Tensor paper, section IV.E): the non-zeros as a
tree, level ``l`` = dimension ``mode_order[l]`` (``0..N-1`` by default, so a leading slice is
a set of subtrees; pyarrow's CSF sorts dimensions by size, which breaks that). Each level has
``fids`` (the index of each node) and ``fptr`` (where each node's children start in the next
level, one more entry than nodes). Levels 0 and 1 live in the header's ``aux`` (the paper's
non-chunked part); deeper non-leaf levels in ``level:l`` rows (``fids`` in ``indices``,
``fptr`` in ``values``) and the leaf level with the values in ``entries`` rows, each with
``start..stop`` = its node positions. ``t[a:b]`` follows the pointers from the root and reads
only the rows under ``a..b``.

>>> import numpy as np
>>> from tessera.tables.tensors import coo_tensor
>>> t = coo_tensor((2, 2, 3), np.array([[0, 0, 1], [0, 1, 2], [1, 1, 0]]), np.array([1, 2, 3]))
>>> enc = CSF.encode(t, EncodeOptions(chunk_bytes=1 << 20, max_row_bytes=1 << 20))
>>> enc.aux["fid0"].tolist(), enc.aux["fptr0"].tolist(), enc.aux["fid1"].tolist()
([0, 1], [0, 2, 3], [0, 1, 1])
"""

from __future__ import annotations

from collections.abc import Callable

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

AUX_LEVELS = 2


class CsfLayout:
    name = "csf"
    dense = False

    def encode(self, t: Tensor, opts: EncodeOptions) -> Encoded:
        coo = coo_of(t)
        n = len(coo.shape)
        order = tuple(range(n)) if opts.mode_order is None else tuple(opts.mode_order)
        if sorted(order) != list(range(n)):
            raise FormatError(f"mode_order must be a permutation of 0..{n - 1}, got "
                              f"{opts.mode_order!r}")
        if n == 0:
            return Encoded([], params={"mode_order": []})
        coords, values = coo.coords[:, order], coo.values
        if order != tuple(range(n)) and len(coords):  # canonical COO is in C order already
            perm = np.lexsort(coords.T[::-1])
            coords, values = coords[perm], values[perm]
        # a node starts wherever the prefix of its level changes
        starts = []
        change = np.zeros(len(coords), bool)
        for level in range(n):
            if len(coords):
                change[0] = True
                change[1:] |= coords[1:, level] != coords[:-1, level]
            starts.append(np.flatnonzero(change))
        fids = [coords[s, level] for level, s in enumerate(starts)]
        fptrs = [np.append(np.searchsorted(starts[level + 1], starts[level]),
                           len(starts[level + 1])).astype(np.int64) for level in range(n - 1)]
        idx = index_dtype(coo.shape)
        aux: dict[str, np.ndarray] = {}
        rows: list[DataRow] = []
        if order[0] == 0:
            lead_lo = lead_hi = _lead_per_level(fids, fptrs)
        else:  # the leading dimension is not the root: rows do not bound it
            lead_lo = [np.zeros(len(f), np.int64) for f in fids]
            lead_hi = [np.full(len(f), coo.shape[0] - 1, np.int64) for f in fids]
        for level in range(n):
            leaf = level == n - 1
            if level < AUX_LEVELS and not leaf:
                aux[f"fid{level}"] = fids[level].astype(np.int64)
                aux[f"fptr{level}"] = fptrs[level]
                continue
            part = "entries" if leaf else f"level:{level}"
            item = idx.itemsize + (values.itemsize if leaf else 8)
            for i, (a, b) in enumerate(group_rows(len(fids[level]), item, opts.chunk_bytes)):
                payload = values[a:b] if leaf else fptrs[level][a:b + (1 if b == len(
                    fids[level]) else 0)]
                rows.append(DataRow(part, i, int(lead_lo[level][a]), int(lead_hi[level][b - 1]),
                                    a, b, b - a, indices=blob(fids[level][a:b], idx),
                                    values=blob(payload, payload.dtype)))
        return Encoded(rows, aux=aux, params={"mode_order": list(order),
                                              "index_dtype": idx.str})

    def _root_range(self, header: Header, sel: Selection) -> tuple[int, int] | None:
        """Nodes ``[a, b)`` of level 1 under the selected leading indices (level 0 in aux;
        the leading dimension must be level 0 to be sliceable)."""
        order = header.params.get("mode_order", list(range(len(header.shape))))
        window = lead_window(sel)
        if window is None:
            return None
        fid0 = header.aux.get("fid0")
        if fid0 is None or order[0] != 0:
            return (0, -1)  # all: a leaf-only tensor, or another mode at the root
        j0 = int(np.searchsorted(fid0, window[0], "left"))
        j1 = int(np.searchsorted(fid0, window[1], "right"))
        return j0, j1

    def needs(self, header: Header, sel: Selection) -> list[Need]:
        n = len(header.shape)
        if not header.nnz or n == 0:
            return []
        rng = self._root_range(header, sel)
        if rng is None:
            return []
        if rng == (0, -1) or n == 1:
            window = lead_window(sel)
            return [] if window is None else [Need("entries", "lead", (window,))]
        a, b = rng
        if b <= a:
            return []
        lo, hi = int(header.aux["fptr0"][a]), int(header.aux["fptr0"][b])
        if n == 2:
            return [Need("entries", "pos", ((lo, hi - 1),))] if hi > lo else []
        lo, hi = int(header.aux["fptr1"][lo]), int(header.aux["fptr1"][hi])
        part = "entries" if n == 3 else "level:2"
        return [Need(part, "pos", ((lo, hi - 1 if n == 3 else hi),))] if hi > lo else []

    def read(self, header: Header, sel: Selection, fetch: Fetch) -> CooTensor:
        n = len(header.shape)
        order = header.params.get("mode_order", list(range(n)))
        empty = CooTensor(header.shape, np.zeros((0, n), np.int64), np.zeros(0, header.bits),
                          header.dtype)
        if not header.nnz or n == 0:
            return take_coo(empty, sel)
        idx = np.dtype(header.params.get("index_dtype", "<i8"))
        what = f"tensor {header.id!r} CSF"
        rng = self._root_range(header, sel)
        if rng is None:
            return take_coo(empty, sel)
        if rng == (0, -1) or n == 1:  # leaf level holds the leading dimension, or not at root
            return self._read_all(header, sel, fetch, idx, order)
        # walk down: nodes [a, b) per level, with each node's path so far
        a, b = rng
        fid0 = header.aux["fid0"].astype(np.int64)
        paths = fid0[a:b].reshape(-1, 1)
        lo_ptr = header.aux["fptr0"][a:b + 1].astype(np.int64)
        for level in range(1, n):
            start, stop = int(lo_ptr[0]), int(lo_ptr[-1])
            counts = np.diff(lo_ptr)
            if stop <= start:
                return take_coo(empty, sel)
            if level < AUX_LEVELS and level < n - 1:
                ids = header.aux[f"fid{level}"][start:stop].astype(np.int64)
                nxt = header.aux[f"fptr{level}"][start:stop + 1].astype(np.int64)
                vals = None
            else:
                leaf = level == n - 1
                part = "entries" if leaf else f"level:{level}"
                need_to = stop - 1 if leaf else stop
                rows = sorted(fetch(Need(part, "pos", ((start, need_to),))),
                              key=lambda r: r.start)
                ids = _gather(rows, start, stop, lambda r: unblob(r.indices, idx, what))
                if leaf:
                    vals = _gather(rows, start, stop,
                                   lambda r: unblob(r.values, header.bits, what))
                    nxt = np.zeros(0, np.int64)
                else:
                    vals = None
                    nxt = _gather(rows, start, stop + 1,
                                  lambda r: unblob(r.values, "<i8", what))
            paths = np.concatenate([np.repeat(paths, counts, axis=0),
                                    ids.astype(np.int64).reshape(-1, 1)], axis=1)
            lo_ptr = nxt
        assert vals is not None
        coords = np.empty_like(paths)
        coords[:, order] = paths
        return take_coo(CooTensor(header.shape, coords, vals, header.dtype), sel)

    def _read_all(self, header: Header, sel: Selection, fetch: Fetch, idx: np.dtype,
                  order: list[int]) -> CooTensor:
        """Every level (the leading dimension is not at the root)."""
        n = len(header.shape)
        window = (-(2**62), 2**62)
        what = f"tensor {header.id!r} CSF"
        fids, fptrs = [], []
        for level in range(n):
            if level < AUX_LEVELS and level < n - 1:
                fids.append(header.aux[f"fid{level}"].astype(np.int64))
                fptrs.append(header.aux[f"fptr{level}"].astype(np.int64))
                continue
            leaf = level == n - 1
            part = "entries" if leaf else f"level:{level}"
            rows = sorted(fetch(Need(part, "lead", (window,))), key=lambda r: r.start)
            total = rows[-1].stop if rows else 0
            fids.append(_gather(rows, 0, total, lambda r: unblob(r.indices, idx, what)))
            if leaf:
                vals = _gather(rows, 0, total, lambda r: unblob(r.values, header.bits, what))
            else:
                fptrs.append(_gather(rows, 0, total + 1, lambda r: unblob(r.values, "<i8",
                                                                           what)))
        paths = fids[0].reshape(-1, 1)
        for level in range(1, n):
            counts = np.diff(fptrs[level - 1])
            paths = np.concatenate([np.repeat(paths, counts, axis=0),
                                    fids[level].astype(np.int64).reshape(-1, 1)], axis=1)
        coords = np.empty_like(paths)
        coords[:, order] = paths
        return take_coo(CooTensor(header.shape, coords, vals, header.dtype), sel)


def _gather(rows: list[DataRow], start: int, stop: int,
            decode: Callable[[DataRow], np.ndarray]) -> np.ndarray:
    """Positions ``start..stop-1`` of one level's array from its consecutive rows (the last
    row of a pointer level carries the end pointer as one extra entry)."""
    if not rows:
        return np.zeros(0, np.int64)
    joined = np.concatenate([decode(r) for r in rows])
    out = joined[start - rows[0].start:stop - rows[0].start]
    if len(out) != stop - start:
        raise FormatError(f"CSF positions {start}..{stop - 1} are not all stored; the table "
                          "is damaged")
    return out


def _lead_per_level(fids: list[np.ndarray], fptrs: list[np.ndarray]) -> list[np.ndarray]:
    """The leading index (level 0's fid) of every node of every level."""
    lead = [fids[0].astype(np.int64)]
    for level in range(1, len(fids)):
        lead.append(np.repeat(lead[-1], np.diff(fptrs[level - 1])))
    return lead


CSF = CsfLayout()
