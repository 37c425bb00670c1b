"""One set of verbs over every kind of data Tessera stores (exported from :mod:`tessera`).

``tessera.open(url)`` opens whatever is at ``url``: an array, a tensor table, an image set
or a ``tessera.h5`` file, and says what it found when it is none of them. Each kind also
has its own verbs, with the same argument names and order: ``url`` first, then ``mode``
(``"r"``: read-only, the default; ``"w"``: writable), then keyword-only
``storage_options``, ``config`` and ``at`` (time travel: a datetime, an ISO-8601 string or
the kind's own marker; :mod:`tessera.when`).

==================  ==============================  ===========================
kind                open                            create
==================  ==============================  ===========================
array               :func:`open_array`              :func:`create_array`, :func:`from_numpy`
tensor table        :func:`open_table`              :func:`create_table`
image set           :func:`open_images`             :func:`create_images`
tessera.h5 file     ``tessera.h5.File(url, mode)``  ``tessera.h5.File(url, "w")``
==================  ==============================  ===========================

>>> import numpy as np, tessera
>>> _ = tessera.from_numpy("memory://doc-kinds", np.arange(4))
>>> tessera.open("memory://doc-kinds")
<tessera.Array memory://doc-kinds shape=(4,) int64 tiles=(4,) mode='r' 1 fragment>
>>> kind_at(tessera.open_store("memory://doc-kinds"))
'array'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tessera.array.factories import open_array
from tessera.array.fragment import SCHEMA_KEY
from tessera.config import Config
from tessera.errors import DataNotFoundError, InvalidArgumentError
from tessera.storage.blocking import Store, open_store
from tessera.when import At

if TYPE_CHECKING:
    from tessera.array.array import Array
    from tessera.images.columns import ImageColumns
    from tessera.integrations.h5 import File
    from tessera.tables.table import TensorTable

#: What marks each kind at the root of its URL, in the order they are looked for.
MARKERS = (("array", SCHEMA_KEY), ("image set", "__images.json"),
           ("tessera.h5 file", "__group.json"))
#: The folder of a Delta table's log (a tensor table is a Delta table).
DELTA_LOG = "_delta_log/"


def kind_at(store: Store) -> str | None:
    """What is at ``store``'s root: ``"array"``, ``"tensor table"``, ``"image set"``,
    ``"tessera.h5 file"``, or ``None`` (nothing Tessera made)."""
    for kind, key in MARKERS:
        if store.exists(key):
            return kind
    return "tensor table" if store.list(DELTA_LOG) else None


def open(url: str, mode: str = "r", *, storage_options: dict[str, Any] | None = None,
         config: Config | None = None, at: At = None,
         ) -> Array | TensorTable | ImageColumns | File:
    """Open whatever is at ``url``: an :class:`~tessera.Array`, a
    :class:`~tessera.tables.TensorTable`, an :class:`~tessera.images.ImageColumns` set or a
    :class:`tessera.h5.File`, read-only unless ``mode="w"`` (``"r+"`` for a tessera.h5
    file). ``at``: as it was then (not for tessera.h5 files). A place holding none of them
    raises :class:`~tessera.errors.DataNotFoundError` saying what it holds.

    >>> import numpy as np, tessera
    >>> _ = tessera.from_numpy("memory://doc-open", np.arange(3))
    >>> tessera.open("memory://doc-open")
    <tessera.Array memory://doc-open shape=(3,) int64 tiles=(3,) mode='r' 1 fragment>
    """
    return opened(url, mode, storage_options=storage_options, config=config, at=at)[1]


def opened(url: str, mode: str = "r", *, storage_options: dict[str, Any] | None = None,
           config: Config | None = None, at: At = None, cache: Any = "shared",
           ) -> tuple[str, Array | TensorTable | ImageColumns | File]:
    """:func:`open`, and the kind it found (as :func:`kind_at` names it). ``cache``: an image
    set's column cache (:meth:`~tessera.images.ImageColumns.open`; ``None``: every read
    fetches)."""
    settings = config or Config.from_env()
    store = open_store(url, config=settings.store, **(storage_options or {}))
    kind = kind_at(store)
    if kind == "array":
        return kind, open_array(url, mode, storage_options=storage_options, config=settings,
                                at=at)
    if kind == "tensor table":
        from tessera.tables.table import open_table

        return kind, open_table(url, mode, storage_options=storage_options, config=settings,
                                at=at)
    if kind == "image set":
        from tessera.images.columns import open_images

        return kind, open_images(url, mode, storage_options=storage_options, config=settings,
                                 at=at, cache=cache)
    if kind == "tessera.h5 file":
        if at is not None:
            raise InvalidArgumentError("a tessera.h5 file has no time travel: open its "
                                       "datasets' arrays with tessera.open_array(url, at=...)")
        from tessera.integrations.h5 import File

        return kind, File(url, "r+" if mode == "w" else mode, storage_options=storage_options)
    found = store.list()
    what = (f"{len(found)} other object(s), e.g. {found[0].key}" if found
            else "nothing (no object at all)")
    raise DataNotFoundError(f"{url} holds no array, tensor table, image set or tessera.h5 file: "
                        f"{what}. Make one with tessera.from_numpy, tessera.create_table "
                        "or tessera.create_images; list the store with `tessera ls URL`")
