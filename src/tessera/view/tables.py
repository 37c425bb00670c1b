"""The viewer's tensor-table views: the table's versions and tensors, and one tensor's
header, stored bytes and a preview of a slice.

A preview of a tensor of two or more dimensions is a picture of the plane of its last two
axes (the others held at ``index``), at most :data:`PREVIEW` positions a side; of one
dimension, its first :data:`NUMBERS` values; of none, its value. Sparse formats also give
their density (stored values over cells).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tessera.describe import table_doc
from tessera.errors import InvalidArgumentError
from tessera.tables.layouts import get_layout
from tessera.view.core import Viewer
from tessera.view.params import Query
from tessera.view.pictures import COLOUR_MAPS, colour, data_url, value_range

#: The most positions a preview picture shows on a side.
PREVIEW = 512
#: The most values a preview of a 1-D tensor lists.
NUMBERS = 100
#: Tensors listed per request at most.
MAX_LISTED = 1000


def _table(viewer: Viewer, q: Query, *, fresh: bool = False) -> Any:
    return viewer.open_kind(q.text("path", "") or "", q.text("at"), "tensor table",
                            fresh=fresh)


def page(viewer: Viewer, q: Query) -> dict[str, Any]:
    """A tensor table's page: its ``info`` document, its versions with their operations,
    and up to ``limit`` tensor ids from ``offset`` (those starting with ``prefix``)."""
    tt = _table(viewer, q, fresh=True)
    offset = q.integer("offset", 0, lo=0)
    limit = q.integer("limit", 200, lo=1, hi=MAX_LISTED)
    with viewer.lock:
        doc = table_doc(q.text("path", "") or "", tt)
        doc["history"] = tt.history().to_dicts()
        ids = tt.ids(q.text("prefix"))
    doc["ids"] = ids[offset:offset + limit]
    doc["listed_from"], doc["matching"] = offset, len(ids)
    return doc


def tensor(viewer: Viewer, q: Query) -> dict[str, Any]:
    """One tensor: header, stored bytes and files (from the plan of a whole read), density
    of sparse formats, and a preview (see the module docstring)."""
    tt = _table(viewer, q)
    tensor_id = q.need("id")
    cmap = q.choice("cmap", list(COLOUR_MAPS), next(iter(COLOUR_MAPS)))
    with viewer.lock:
        ref = tt[tensor_id]
        shape = tuple(ref.shape)
        whole = tt.explain(tensor_id)
        files = sorted({r.key for r in whole.requests})
        dense = get_layout(ref.layout).dense
        cells = math.prod(shape)
        answer: dict[str, Any] = {
            "id": tensor_id, "shape": list(shape), "dtype": ref.dtype, "layout": ref.layout,
            "dense": dense, "nnz": ref.nnz, "stored_bytes": whole.totals.nbytes,
            "files": len(files), "metadata": ref.metadata,
            "density": None if dense or not cells else ref.nnz / cells}
        index = q.integers("index", [0] * len(shape))
        if len(index) != len(shape) or any(not 0 <= i < max(n, 1)
                                           for i, n in zip(index, shape, strict=True)):
            raise InvalidArgumentError(f"index must give one position within the tensor's "
                                       f"shape {shape} per axis, got {index}")
        if len(shape) >= 2:
            sel: tuple[Any, ...] = (*index[:-2], slice(0, min(shape[-2], PREVIEW)),
                                    slice(0, min(shape[-1], PREVIEW)))
        elif len(shape) == 1:
            sel = (slice(0, min(shape[0], NUMBERS)),)
        else:
            sel = ()
        plan = tt.explain(tensor_id, sel)
        viewer.check_budget(plan.totals.nbytes, f"a preview of tensor {tensor_id!r}")
        values = np.asarray(ref.read(sel, force=True))
    answer["preview_selection"] = [f"{s.start}:{s.stop}" if isinstance(s, slice) else s
                                   for s in sel]
    if values.ndim == 2:
        vmin, vmax = value_range(values)
        answer.update({"image": data_url(colour(values, vmin, vmax, cmap)),
                       "vmin": vmin, "vmax": vmax})
    else:
        answer["numbers"] = [v if isinstance(v, (int, float, bool)) else str(v)
                             for v in values.reshape(-1).tolist()]
    return answer
