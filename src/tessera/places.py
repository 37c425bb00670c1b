"""Whole datasets as sets of objects: :func:`remove` and :func:`copy` any kind at a URL.

Every kind Tessera stores (an array, a tensor table, an image set, a tessera.h5 file) lives
below one URL and holds only relative keys, so a dataset moves between stores by copying its
objects, with its whole history. Both verbs touch the objects that mark the kind (an
array's ``__schema.json``, a table's ``_delta_log/``, ...) last: a copy that stops half way
is not yet a dataset (and is removed again), a removal that stops half way is still one, so
the same command finishes it.

>>> import numpy as np, tessera
>>> _ = tessera.from_numpy("memory://doc-places/a", np.arange(6))
>>> copy("memory://doc-places/a", "memory://doc-places/b").kind
'array'
>>> tessera.open("memory://doc-places/b")[2:4]
array([2, 3])
>>> remove("memory://doc-places/a").kind
'array'
>>> kind_at(tessera.open_store("memory://doc-places/a")) is None
True
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tessera.errors import DataNotFoundError, PlaceNotEmptyError
from tessera.kinds import DELTA_LOG, MARKERS, kind_at
from tessera.storage.blocking import open_store
from tessera.storage.bulk import Progress, copy_all, delete_all

__all__ = ["Moved", "copy", "remove"]


@dataclasses.dataclass(frozen=True)
class Moved:
    """What :func:`copy` or :func:`remove` did: the ``kind`` found (``None``: plain
    objects), ``objects`` and their ``nbytes``."""

    kind: str | None
    objects: int
    nbytes: int


#: The objects that mark a kind at a dataset's root.
_MARKERS = frozenset(marker for _, marker in MARKERS)


def marks_kind(key: str) -> bool:
    """Whether ``key`` marks its dataset's kind (copied and removed last).

    >>> marks_kind("__schema.json"), marks_kind("_delta_log/00000.json"), marks_kind("t/0")
    (True, True, False)
    """
    return key in _MARKERS or key.startswith(DELTA_LOG)


def remove(url: str, *, storage_options: dict[str, Any] | None = None,
           progress: Progress | None = None) -> Moved:
    """Delete every object below ``url``: a dataset of any kind, or plain objects (the
    caller decides whether plain objects may go; the CLI asks for ``--recursive``).
    ``progress(done, total)`` counts objects.

    Raises :class:`~tessera.errors.DataNotFoundError` when nothing is there.
    """
    store = open_store(url, **(storage_options or {}))
    kind = kind_at(store)
    objects = store.list()
    if not objects:
        raise DataNotFoundError(f"nothing at {url}: no object below it")
    delete_all(store, objects, last=marks_kind, progress=progress)
    return Moved(kind, len(objects), sum(o.size for o in objects))


def copy(source: str, target: str, *, storage_options: dict[str, Any] | None = None,
         target_options: dict[str, Any] | None = None,
         progress: Progress | None = None) -> Moved:
    """Copy every object below ``source`` to ``target`` (which must hold nothing), keeping
    the dataset's whole history; ``target_options`` default to ``storage_options``;
    ``progress(done, total)`` counts bytes.

    A copy that fails removes what it wrote, so the target holds nothing again.
    Raises :class:`~tessera.errors.DataNotFoundError` when nothing is at ``source`` and
    :class:`~tessera.errors.PlaceNotEmptyError` when ``target`` holds objects.
    """
    src = open_store(source, **(storage_options or {}))
    dst = open_store(target, **(target_options if target_options is not None
                                else storage_options or {}))
    objects = src.list()
    if not objects:
        raise DataNotFoundError(f"nothing at {source}: no object below it")
    if held := dst.list():
        raise PlaceNotEmptyError(f"{target} already holds {len(held)} object(s): copy to an "
                                 "empty place, or remove them first")
    nbytes = copy_all(src, dst, objects, last=marks_kind, progress=progress)
    return Moved(kind_at(src), len(objects), nbytes)
