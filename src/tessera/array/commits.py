"""Commits: how a fragment becomes visible, how readers list what is committed, and how the
bookkeeping of committed fragments is loaded (once per process).

A fragment's data objects and its ``__meta.json`` are stored first; its commit marker
``__commits/f<timestamp>-<id>`` is written last, create-only, and makes it visible whole.
Vacuum and a commit in flight meet with two writes and two reads, so at least one sees the
other: vacuum writes ``__doomed/<id>`` and then lists the commit markers (an id it finds
committed is spared), a writer writes its marker and then looks for ``__doomed/<id>`` (if
it is there, the writer takes its marker back and raises
:class:`~tessera.errors.CommitConflictError`). Readers treat a marker whose id is doomed and
whose bookkeeping is gone as never committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
from collections.abc import Sequence

import numpy as np

from tessera.array.bookkeeping import check_against_schema
from tessera.array.fragment import (
    COMMITS,
    DOOMED,
    FRAGMENTS,
    FragmentMeta,
    store_dense_fragment,
)
from tessera.array.lazy_attrs import PendingAttrs
from tessera.array.names import fragment_name, name_box, name_id, name_timestamp, new_timestamp
from tessera.cache import LRUCache, ProcessCache
from tessera.config import CacheConfig
from tessera.errors import (
    CommitConflictError,
    CorruptDataError,
    ObjectNotFoundError,
    StorageError,
)
from tessera.format.blocks import BLOCK_BYTES
from tessera.format.layout import tile_range
from tessera.format.schema import ArraySchema
from tessera.storage.store import AsyncStore


async def write_dense_fragment(store: AsyncStore, schema: ArraySchema,
                               values: dict[str, np.ndarray], origin: tuple[int, ...], *,
                               kind: str = "dense", replaces: tuple[str, ...] = (),
                               covers: tuple[str, ...] | None = None,
                               timestamp: int | None = None,
                               block_bytes: int = BLOCK_BYTES) -> FragmentMeta:
    """Write one dense fragment holding ``values`` (one array per attribute, same shape) at
    coordinates ``origin`` (:func:`~tessera.array.fragment.store_dense_fragment`), then
    commit it. Returns its bookkeeping."""
    fid, meta = await store_dense_fragment(store, schema, values, origin, kind=kind,
                                           replaces=replaces, block_bytes=block_bytes)
    return await commit_fragment(store, fid, meta, timestamp, covers=covers)


async def commit_fragment(store: AsyncStore, fid: str, meta: FragmentMeta,
                          timestamp: int | None = None, *,
                          covers: tuple[str, ...] | None = None) -> FragmentMeta:
    """Stamp ``meta`` with the commit time (or ``timestamp``: consolidation places its
    fragment at the newest merged one's time) and, for a consolidation, the fragments it
    outranks (``covers``), store it, then write the commit marker."""
    timestamp = new_timestamp() if timestamp is None else timestamp
    name = fragment_name(timestamp, fid)
    meta = dataclasses.replace(meta, name=name, timestamp=timestamp, covers=covers)
    await store.put(f"{FRAGMENTS}/{fid}/__meta.json", meta.to_json())
    marker = json.dumps({"name": name, "timestamp": timestamp}).encode()
    await store.put(f"{COMMITS}/{name}", marker, mode="create")
    if await store.exists(f"{DOOMED}/{fid}"):  # a vacuum took this writer for dead
        with contextlib.suppress(StorageError):  # left behind, readers skip it all the same
            await store.delete(f"{COMMITS}/{name}")
        raise CommitConflictError(
                f"{store.url}: this write took longer than a concurrent vacuum's orphan "
                f"grace period, and the vacuum removed its objects (fragment {fid}); nothing "
                "was committed: write again, and give vacuum a longer orphan_grace_s")
    return meta


async def list_committed(store: AsyncStore) -> list[str]:
    """Names of the committed fragments, oldest first."""
    names = await store.list_names(COMMITS)
    return sorted(n for n in names if n.startswith("f") and len(n) > 21)


#: The process's cache of committed fragments' bookkeeping (``TESSERA_FRAGMENTS_CACHE_BYTES``,
#: 64 MiB of JSON), so that every handle opened on an array in this process loads a
#: fragment's ``__meta.json`` once. A committed fragment never changes (its name is unique:
#: timestamp and random id), so an entry never goes stale; a vacuumed fragment is simply no
#: longer listed. ``META_CACHE()`` is the cache.
META_CACHE: ProcessCache[tuple[str, str], FragmentMeta] = ProcessCache(lambda: LRUCache(
    "fragment bookkeeping", CacheConfig.from_env().fragments_cache_bytes))


async def load_meta(store: AsyncStore, name: str, array_url: str) -> FragmentMeta | None:
    """Read one committed fragment's bookkeeping (once per process: :data:`META_CACHE`).
    ``None`` for a marker a vacuum made void (its writer was taken for dead and takes the
    marker back: see the module's notes)."""
    cached = META_CACHE().get((array_url, name))
    if cached is not None:
        return cached
    key = f"{FRAGMENTS}/{name_id(name)}/__meta.json"
    try:
        data = await store.get(key)
    except ObjectNotFoundError:
        if await store.exists(f"{DOOMED}/{name_id(name)}"):
            return None
        raise CorruptDataError(f"array {array_url}, fragment {name}: committed but its "
                               f"bookkeeping object {key} is missing") from None
    meta = FragmentMeta.from_json(bytes(data), f"array {array_url}, fragment {name}")
    META_CACHE().put((array_url, name), meta, len(data))
    return meta


def pending_meta(name: str, schema: ArraySchema, array_url: str) -> FragmentMeta | None:
    """A committed dense fragment known by the box its name records, its bookkeeping not
    loaded (:attr:`FragmentMeta.pending`; :func:`load_pending` loads it); ``None`` when the
    name records no box that fits ``schema`` or this process holds the bookkeeping already
    (:data:`META_CACHE`): the caller then loads it.

    >>> import tessera
    >>> from tessera.array.names import fragment_name, new_fragment_id
    >>> schema = tessera.ArraySchema([tessera.Dim("x", (0, 99), 10)],
    ...                              [tessera.Attr("v", "int8")])
    >>> name = fragment_name(5, new_fragment_id(box=((20,), (39,))))
    >>> meta = pending_meta(name, schema, "memory://doc-pending")
    >>> meta.subarray, meta.tile_lo.tolist(), meta.tile_hi.tolist(), meta.pending
    (((20,), (39,)), [2], [3], True)
    """
    box = name_box(name)
    if box is None or len(box[0]) != schema.ndim \
            or META_CACHE().get((array_url, name)) is not None:
        return None
    tlo, thi = tile_range(schema, box)
    cells = math.prod(b - a + 1 for a, b in zip(*box, strict=True))
    return FragmentMeta(name, name_timestamp(name), "dense", box, tlo, thi,
                        PendingAttrs(f"array {array_url}, fragment {name}"), cells)


async def load_pending(store: AsyncStore, metas: Sequence[FragmentMeta], schema: ArraySchema,
                       array_url: str) -> list[str]:
    """Load the bookkeeping of the pending fragments among ``metas`` (concurrently) and fill
    each one's tile tables with it; returns the names of those a vacuum made void (see
    :func:`load_meta`), left pending. A fragment whose bookkeeping does not say what its
    name says (a dense fragment of that box), or does not fit ``schema``, is
    :class:`CorruptDataError` naming it."""
    todo = [m for m in metas if m.pending]
    void = []
    for meta, real in zip(todo, await asyncio.gather(*(load_meta(store, m.name, array_url)
                                                      for m in todo)), strict=True):
        if real is None:
            void.append(meta.name)
            continue
        check_against_schema(real, schema, array_url)
        said = (real.kind, real.subarray, real.cell_count, real.replaces, real.is_dense)
        if said != (meta.kind, meta.subarray, meta.cell_count, (), True):
            raise CorruptDataError(
                f"array {array_url}, fragment {meta.name}: its name records a dense "
                f"fragment of the box {meta.subarray}, but its bookkeeping holds a "
                f"{real.kind} fragment of {real.subarray}")
        assert isinstance(meta.attrs, PendingAttrs)
        meta.attrs.fill(real.attrs)
    return void
