"""What a store holds, as the viewer's tree: every array, tensor table, image set and
tessera.h5 file below the viewed URL (found by their markers in one listing), and the plain
objects beside them, each with its size in bytes and its last commit time.

>>> import numpy as np, tessera
>>> _ = tessera.from_numpy("memory://doc-catalog/frames", np.zeros((4, 4)))
>>> [(e.path, e.kind) for e in catalog(tessera.open_store("memory://doc-catalog"))]
[('frames', 'array')]
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from tessera.kinds import DELTA_LOG, MARKERS
from tessera.storage.blocking import Store

#: Plain objects listed one by one at most; more are counted.
MAX_OBJECTS = 500


@dataclasses.dataclass(frozen=True)
class Entry:
    """One thing in the store: ``path`` relative to the viewed URL (``""``: the URL itself),
    ``kind`` (``array``, ``tensor table``, ``image set``, ``tessera.h5 file`` or ``object``),
    the bytes of its objects, how many there are, and the newest object's time."""

    path: str
    kind: str
    size: int
    objects: int
    modified: dt.datetime | None

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON holds it."""
        return {"path": self.path, "kind": self.kind, "size": self.size,
                "objects": self.objects,
                "modified": self.modified.isoformat() if self.modified else None}


def _kind_root(key: str) -> tuple[str, str] | None:
    """The kind whose marker ``key`` is and the folder it marks, or ``None``."""
    for kind, marker in MARKERS:
        if key == marker or key.endswith("/" + marker):
            return kind, key[: -len(marker)].rstrip("/")
    if key.startswith(DELTA_LOG) or f"/{DELTA_LOG}" in key:
        at = key.find(DELTA_LOG) if key.startswith(DELTA_LOG) else key.find(f"/{DELTA_LOG}")
        return "tensor table", key[:at]
    return None


def _inside(key: str, folder: str) -> bool:
    return not folder or key.startswith(folder + "/")


def catalog(store: Store) -> list[Entry]:
    """The :class:`Entry` of everything below ``store``'s root, sorted by path: one per
    array, tensor table, image set and tessera.h5 file (the datasets of a tessera.h5 file
    are listed under it; the arrays an image set is made of are not), then plain objects
    (at most :data:`MAX_OBJECTS`; a last ``object`` entry named ``... N more`` counts the
    rest)."""
    objects = store.list()
    kinds: dict[str, str] = {}
    for o in objects:
        found = _kind_root(o.key)
        if found is not None:
            kinds.setdefault(found[1], found[0])
    for f in list(kinds):  # the parts of an image set or a table, a group of a tessera.h5 file
        if any(other != f and _inside(f, other) and (kinds[other] != "tessera.h5 file"
                                                      or kinds[f] != "array")
               for other in kinds):
            del kinds[f]
    folders = sorted(kinds, key=len, reverse=True)
    sizes: dict[str, list[Any]] = {f: [0, 0, None] for f in kinds}
    plain: list[Entry] = []
    extra = 0
    for o in objects:
        owners = [f for f in folders if _inside(o.key, f)]
        for f in owners:
            acc = sizes[f]
            acc[0] += o.size
            acc[1] += 1
            acc[2] = o.last_modified if acc[2] is None else max(acc[2], o.last_modified)
        if not owners:
            if len(plain) < MAX_OBJECTS:
                plain.append(Entry(o.key, "object", o.size, 1, o.last_modified))
            else:
                extra += 1
    entries = [Entry(f, kinds[f], *sizes[f]) for f in kinds]
    entries.sort(key=lambda e: e.path)
    if extra:
        plain.append(Entry(f"... {extra} more", "object", 0, extra, None))
    return entries + plain
