"""Names of fragments: the commit marker's name ``f<timestamp>-<id>`` and the id, which for a
plain dense write also records the box the fragment writes.

A dense fragment's id is ``<16 hex digits>.d.<lo>_<hi>.<lo>_<hi>...`` (one ``lo_hi`` per
dimension, inclusive), so the listing of commit markers alone says where each dense fragment
lies: a handle opened on an array of many appends loads the bookkeeping of only the fragments
a read meets (as TileDB keeps each fragment's non-empty domain where it can prune fragments
before loading their tile tables). Ids of other fragments (sparse, deletes, consolidations,
and dense fragments written before ids recorded boxes) are 16 characters and no box; their
bookkeeping is loaded when the array is listed. The box is part of the id, so the
fragment's folder (``__fragments/<id>/``) and every key made from the id are unchanged in
form, and readers that do not look for a box read such fragments as before.

>>> fid = new_fragment_id(box=((0, -3), (249, 31)))
>>> fid[16:]
'.d.0_249.-3_31'
>>> name = fragment_name(17, fid)
>>> name_timestamp(name), name_box(name), replaces_others(name)
(17, ((0, -3), (249, 31)), False)
>>> name_box(fragment_name(17, new_fragment_id())) is None
True
"""

from __future__ import annotations

import threading
import time
import uuid

from tessera.format.layout import Box

_clock_lock = threading.Lock()
_last_ns = 0

#: The first letter of the id of a fragment that replaces others (a consolidation's): not a
#: hex digit, so the commit markers' listing alone says which fragments replace others.
REPLACING = "r"

#: Ids whose box would make them longer than this are kept without it (object stores cap
#: keys at 1,024 bytes, and the array's own prefix comes first).
MAX_ID_CHARS = 200

_DENSE = ".d."


def new_timestamp() -> int:
    """Nanoseconds since the epoch, strictly increasing within this process."""
    global _last_ns
    with _clock_lock:
        _last_ns = max(time.time_ns(), _last_ns + 1)
        return _last_ns


def new_fragment_id(replacing: bool = False, box: Box | None = None) -> str:
    """A random fragment id (the folder of its objects); one of a fragment that replaces
    others starts with :data:`REPLACING`; ``box``: the box a plain dense fragment writes,
    recorded in the id (while the id stays within :data:`MAX_ID_CHARS`)."""
    if replacing:
        return REPLACING + uuid.uuid4().hex[:15]
    fid = uuid.uuid4().hex[:16]
    if box is None:
        return fid
    boxed = fid + _DENSE + ".".join(f"{int(a)}_{int(b)}" for a, b in zip(*box, strict=True))
    return boxed if len(boxed) <= MAX_ID_CHARS else fid


def replaces_others(name: str) -> bool:
    """Whether the committed fragment ``name`` replaces others, from its name alone
    (fragments consolidated before this mark existed answer False: readers then load the
    bookkeeping of every fragment, which is always correct)."""
    return name_id(name).startswith(REPLACING)


def fragment_name(timestamp: int, fragment_id: str) -> str:
    """The time-sortable name a fragment is committed under."""
    return f"f{timestamp:020d}-{fragment_id}"


def name_timestamp(name: str) -> int:
    """The timestamp encoded in a fragment name."""
    return int(name[1:21])


def name_id(name: str) -> str:
    """The fragment id encoded in a fragment name."""
    return name[22:]


def name_box(name: str) -> Box | None:
    """The box a dense fragment's name records, or ``None`` when it records none (or
    records it in a form this reader does not know: its bookkeeping is then loaded and
    says)."""
    fid = name_id(name)
    at = fid.find(_DENSE)
    if at < 0 or fid.startswith(REPLACING):
        return None
    dims = fid[at + len(_DENSE):]
    lo: list[int] = []
    hi: list[int] = []
    try:
        for part in dims.split(".") if dims else ():
            a, b = part.split("_")
            lo.append(int(a))
            hi.append(int(b))
    except ValueError:  # not two integers
        return None
    if any(a > b for a, b in zip(lo, hi, strict=True)):
        return None
    return tuple(lo), tuple(hi)
