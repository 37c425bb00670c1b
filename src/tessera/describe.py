"""What is at a URL, as plain data: one JSON-ready document per kind (an array, a tensor
table, an image set, a tessera.h5 file), the same for ``tessera info --json`` and the viewer.

>>> import numpy as np, tessera, tessera.kinds
>>> _ = tessera.from_numpy("memory://doc-describe", np.arange(6).reshape(2, 3))
>>> doc = describe("memory://doc-describe", *tessera.kinds.opened("memory://doc-describe"))
>>> doc["kind"], doc["shape"], doc["attrs"][0]["dtype"]
('array', [2, 3], '<i8')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tessera.integrations.h5 import File
from tessera.when import iso

if TYPE_CHECKING:
    from tessera.array.array import Array


def a_kind(kind: str) -> str:
    """``kind`` with its article.

    >>> a_kind("image set"), a_kind("array")
    ('an image set', 'an array')
    """
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def array_doc(url: str, arr: Array) -> dict[str, Any]:
    """An array's ``info`` document."""
    schema = arr.schema
    return {
        "url": url, "kind": "array", "sparse": schema.sparse, "shape": list(arr.shape),
        "maxshape": None if schema.maxshape is None else list(schema.maxshape),
        "cell_order": schema.cell_order, "tile_order": schema.tile_order,
        "dims": [{"name": d.name, "domain": list(d.domain), "tile": d.tile}
                 for d in schema.dims],
        "attrs": [{"name": a.name, "dtype": str(a.dtype), "fill": _plain(a.fill_value),
                   "codec": a.codec} for a in schema.attrs],
        "metadata": arr.metadata.to_dict(),
        "fragments": [{"name": f.name, "committed": iso(f.timestamp), "kind": f.kind,
                       "nonempty_domain": [list(r) for r in f.nonempty_domain],
                       "cells": f.cell_count, "nbytes": f.nbytes} for f in arr.fragments],
    }


def _plain(value: Any) -> Any:
    """A fill value as JSON holds it."""
    item = getattr(value, "item", None)
    value = item() if callable(item) else value
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


def table_doc(url: str, tt: Any) -> dict[str, Any]:
    """A tensor table's ``info`` document."""
    layouts: dict[str, int] = {}
    for tensor_id in tt.ids():
        layout = tt.header(tensor_id).layout
        layouts[layout] = layouts.get(layout, 0) + 1
    stats = tt.stats()
    return {"url": url, "kind": "tensor table", "version": stats.version,
            "tensors": stats.tensors, "files": stats.files,
            "stored_bytes": stats.stored_bytes, "encoded_bytes": stats.encoded_bytes,
            "layouts": dict(sorted(layouts.items()))}


def images_doc(url: str, cols: Any) -> dict[str, Any]:
    """An image set's ``info`` document."""
    count = len(cols)
    fmt = cols.fmt
    per_image = (cols.bytes_per_k() / count).round().astype(int).tolist() if count else []
    return {"url": url, "kind": "image set", "images": count, "size": list(cols.size),
            "colour": fmt.colour, "chroma": fmt.chroma, "block": fmt.block, "q": fmt.q,
            "k_max": fmt.k_max,
            "group": cols.group, "codec": cols.header.codec, "classes": cols.classes(),
            "bytes_per_image_by_k": per_image}


def h5_doc(url: str, file: File) -> dict[str, Any]:
    """A tessera.h5 file's ``info`` document: its datasets."""
    datasets: list[dict[str, Any]] = []

    def visit(name: str, obj: Any) -> None:
        if hasattr(obj, "shape"):
            datasets.append({"name": name, "shape": list(obj.shape), "dtype": str(obj.dtype)})

    file.visititems(visit)
    return {"url": url, "kind": "tessera.h5 file", "datasets": datasets}


#: ``info``'s document per kind (the kinds of :func:`tessera.kinds.kind_at`).
DOCUMENTS: dict[str, Callable[[str, Any], dict[str, Any]]] = {
    "array": array_doc,
    "tensor table": table_doc,
    "image set": images_doc,
    "tessera.h5 file": h5_doc,
}


def describe(url: str, kind: str, found: Any) -> dict[str, Any]:
    """The document of what :func:`tessera.kinds.opened` found at ``url`` (its ``kind``
    and the opened handle)."""
    return DOCUMENTS[kind](url, found)
