"""Making and opening arrays: :func:`create_array`, :func:`open_array` and
:func:`from_numpy` (the factories of :class:`~tessera.array.array.Array`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tessera._sync import run_sync
from tessera.array.array import Array
from tessera.array.fragment import SCHEMA_KEY
from tessera.array.maintenance import TimestampLike
from tessera.config import Config
from tessera.errors import (
    ArrayExistsError,
    ArrayNotFoundError,
    ObjectExistsError,
    ObjectNotFoundError,
    SchemaError,
)
from tessera.format.layout import default_tile
from tessera.format.schema import ArraySchema, Attr, Dim
from tessera.pushdown.client import PushdownClient
from tessera.pushdown.fleet import PushdownFleet
from tessera.storage.blocking import open_store
from tessera.when import At, at_ns, positional_at, renamed


def create_array(url: str, schema: ArraySchema, *,
                 storage_options: dict[str, Any] | None = None, config: Config | None = None,
                 maxshape: Any = None) -> Array:
    """Create an empty array at ``url`` and return it open for writing.

    ``maxshape``: the most cells per dimension the array may grow to (``None`` entries:
    unbounded), as :func:`from_numpy`'s and h5py's; it replaces the schema's ``maxshape``.
    ``config``: the settings the handle and its store use (one
    :class:`~tessera.config.Config` snapshot; default: read from the environment now).
    Raises :class:`~tessera.errors.ArrayExistsError` if anything already exists there.

    >>> import numpy as np, tessera
    >>> schema = tessera.ArraySchema([tessera.Dim("t", (0, 3), 4)], [tessera.Attr("v", "i4")])
    >>> arr = tessera.create_array("memory://doc-create-grow", schema, maxshape=(None,))
    >>> _ = arr.append(np.ones(6, np.int32)); arr.shape
    (10,)
    """
    if maxshape is not None:
        schema = dataclasses.replace(schema, maxshape=tuple(
            None if m is None else int(m) for m in maxshape))
    settings = config or Config.from_env()
    store = open_store(url, config=settings.store, **(storage_options or {}))
    if store.list():
        raise ArrayExistsError(f"cannot create an array at {url}: objects already exist there")
    try:
        store.put(SCHEMA_KEY, schema.to_json().encode(), mode="create")
    except ObjectExistsError:
        raise ArrayExistsError(f"an array was created at {url} concurrently") from None
    return Array(store, schema, mode="w", config=settings)


def open_array(url: str, mode: str = "r", *legacy: Any,
               storage_options: dict[str, Any] | None = None, config: Config | None = None,
               at: At = None, pushdown: Any = None, pushdown_token: str | None = None,
               refresh_s: float | None = None, timestamp: TimestampLike = None) -> Array:
    """Open the array at ``url``, read-only unless ``mode="w"``.

    ``at``: open it as it was then: a datetime, an ISO-8601 string or a commit time in
    nanoseconds since the epoch (``arr.history()`` lists them); a point before the first
    commit raises :class:`~tessera.errors.BeforeFirstCommitError` naming that commit's
    time. (``timestamp=`` is the older name of ``at=``.)

    ``refresh_s``: how long the handle may reuse its list of committed fragments before a
    read lists the commit markers again (default ``TESSERA_READ_REFRESH_S``, else 1 s; 0:
    at every read); see :class:`~tessera.config.ReadConfig`.

    ``pushdown``: a pushdown server (``http://host:port``, see ``tessera serve``) whose
    root holds this array, a list of such servers (a
    :class:`~tessera.pushdown.fleet.PushdownFleet`: each tile goes to one by rendezvous
    hashing, failing over to the next; also URLs joined by commas), or a
    :class:`~tessera.pushdown.client.PushdownClient`; default ``TESSERA_PUSHDOWN_URL``.
    Its token: ``pushdown_token`` or ``TESSERA_PUSHDOWN_TOKEN``. The planner then weighs
    pushing tiles down against fetching them; ``method="pushdown"`` forces it.

    ``config``: the settings the handle and its store use (one
    :class:`~tessera.config.Config` snapshot: the environment is read once for all of them;
    default: read now).

    >>> import numpy as np, tessera
    >>> _ = tessera.from_numpy("memory://doc-open-array", np.arange(4))
    >>> tessera.open_array("memory://doc-open-array")[1:3].tolist()
    [1, 2]
    """
    at = positional_at("open_array", legacy, at)
    said = "at" if timestamp is None else "timestamp"  # errors name it as it was written
    at = renamed("timestamp", "at", timestamp, at)
    settings = config or Config.from_env()
    if pushdown is None:
        pushdown = settings.pushdown.url or None
    if isinstance(pushdown, str) and "," in pushdown:  # a fleet: "http://a:8700,http://b:8700"
        pushdown = [u.strip() for u in pushdown.split(",") if u.strip()]
    if isinstance(pushdown, str):
        pushdown = PushdownClient(pushdown, pushdown_token, config=settings.pushdown)
    elif isinstance(pushdown, (list, tuple)):
        pushdown = PushdownFleet(pushdown, pushdown_token, config=settings.pushdown)
    store = open_store(url, config=settings.store, **(storage_options or {}))
    try:
        text = bytes(store.get(SCHEMA_KEY))
    except ObjectNotFoundError:
        raise ArrayNotFoundError(f"no array at {url} (no {SCHEMA_KEY})") from None
    arr = Array(store, ArraySchema.from_json(text), mode=mode, timestamp=at_ns(at, said),
                pushdown=pushdown, config=settings)
    if refresh_s is not None:
        arr.reads = dataclasses.replace(arr.reads, refresh_s=refresh_s)
    if arr.timestamp is not None:  # what it sees is fixed: list it now (a point before
        run_sync(arr._visible_metas())  # the first commit is an error here, not later)
    return arr


def from_numpy(url: str, ndarray: Any, tile: Any = None, codec: str | None = None,
               attr: str = "data", *, storage_options: dict[str, Any] | None = None,
               maxshape: Any = None, config: Config | None = None) -> Array:
    """Create an array from an ndarray (domains ``[0, n-1]``) and write it as one fragment.

    ``tile``: extents per dimension (default: about 1 MiB tiles). ``maxshape``: the most
    cells per dimension the array may grow to (``None`` entries: unbounded), as h5py's; a
    growable dimension keeps its tile extent however small the data is.

    >>> import numpy as np, tessera
    >>> arr = tessera.from_numpy("memory://doc-from-numpy", np.arange(6).reshape(2, 3), tile=(1, 3))
    >>> arr.schema.tile_shape, arr[1].tolist()
    ((1, 3), [3, 4, 5])
    """
    data = np.asarray(ndarray)
    extents = (default_tile(tuple(max(1, n) for n in data.shape), data.dtype.itemsize)
               if tile is None else tuple(tile))
    if len(extents) != data.ndim:
        raise SchemaError(f"tile has {len(extents)} extents for {data.ndim} dimensions")
    if maxshape is not None and len(maxshape) != data.ndim:
        raise SchemaError(f"maxshape has {len(maxshape)} entries for {data.ndim} dimensions")
    grows = [maxshape is not None and (m is None or m > n)
             for n, m in zip(data.shape, maxshape or data.shape, strict=True)]
    dims = [Dim(f"d{i}", (0, n - 1), int(t) if g else max(1, min(int(t), n))) for i, (n, t, g) in
            enumerate(zip(data.shape, extents, grows, strict=True))]
    schema = ArraySchema(dims, [Attr(attr, data.dtype.str, None, codec)], maxshape=maxshape)
    arr = create_array(url, schema, storage_options=storage_options, config=config)
    if data.size:  # an empty start (a growable array) has nothing to write
        arr.write(data)
    return arr
