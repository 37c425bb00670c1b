"""Which way a read goes, decided once: :func:`route` looks at a selection and says whether
it is a sparse array's box, points, a union of hyperslabs or one selection of a dense array,
with the selection as that way takes it. :meth:`~tessera.array.array.Array.read` follows the
route and :meth:`~tessera.array.array.Array.explain` plans the same one, so the two cannot
disagree on what a selection means.

>>> import numpy as np
>>> from tessera.format.schema import ArraySchema, Attr, Dim
>>> schema = ArraySchema([Dim("y", (0, 3), 2), Dim("x", (0, 3), 2)], [Attr("v", "<i4")])
>>> route(schema, np.ones((4, 4), bool)).way  # numpy's a[mask]
'points'
>>> route(schema, (slice(0, 2), 1)).way
'selection'
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from tessera.array.read.sparse import normalize_sparse_selection
from tessera.array.sparse import check_coords
from tessera.errors import SelectionError
from tessera.format.schema import ArraySchema
from tessera.format.selection import (
    Hyperslabs,
    Points,
    is_full_mask,
    normalize_selection,
    vectorized_points,
)

#: The ways a read goes: a sparse array's box; points (``Points`` or a full boolean mask);
#: a union of hyperslabs (one plan over their tiles); any other selection of a dense array.
Way = Literal["sparse", "points", "union", "selection"]


@dataclasses.dataclass(frozen=True, slots=True)
class Route:
    """A read's way and what it takes: ``selection`` is a ``SparseSelection`` (sparse), an
    ``(n, ndim)`` array of checked coordinates (points), a list of normalized selections
    (union), or the selection as given (selection: a box of a footprint read before is read
    without normalizing it)."""

    way: Way
    selection: Any


def route(schema: ArraySchema, sel: Any) -> Route:
    """The way a read of ``sel`` goes (see the module docs); raises ``SelectionError`` for a
    selection the array's kind does not take."""
    if schema.sparse:
        if isinstance(sel, (Hyperslabs, Points)):
            raise SelectionError(f"{type(sel).__name__} are for dense arrays; read a sparse "
                                 "array by boxes")
        return Route("sparse", normalize_sparse_selection(sel, schema))
    if is_full_mask(sel, schema):  # numpy's a[mask]: the True cells, in C order
        sel = vectorized_points(sel, schema)[0]
    if isinstance(sel, Points):
        return Route("points", check_coords(schema, sel.coords))
    if isinstance(sel, Hyperslabs):
        return Route("union", [normalize_selection(s, schema) for s in sel.selections])
    return Route("selection", sel)
