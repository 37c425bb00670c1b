"""How a handle lists the committed fragments and loads their bookkeeping.

A listing names the fragments a read uses, lowest rank first (replaced fragments hidden:
:func:`~tessera.array.maintenance.apply_replacements`). A dense fragment whose name records
its box (:mod:`tessera.array.names`) enters the listing *pending*: its box is known, its
bookkeeping (the per-tile offsets, sizes and checksums, one ``__meta.json`` each) is loaded
only when a read meets it (:meth:`FragmentListing._load_for`), in place, so the listing
stays the same list object (what the handle's caches key on) while it fills. A first read
of one region of an array of many appends then loads one fragment's bookkeeping, not all
of them. Every caller that is not a read (writes, consolidation, ``fragments``) asks for a
listing with everything loaded.

>>> import numpy as np, tessera
>>> from tessera._sync import run_sync
>>> from tessera.array.commits import META_CACHE
>>> arr = tessera.from_numpy("memory://doc-listing", np.zeros(8, np.int8), tile=(4,))
>>> arr[4:8] = np.ones(4, np.int8)
>>> META_CACHE().clear()
>>> fresh = tessera.open_array("memory://doc-listing")
>>> fresh[0:2].tolist()
[0, 0]
>>> [m.pending for m in fresh.current_fragments()]
[False, True]
>>> [m.pending for m in run_sync(fresh._visible_metas())]
[False, False]
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tessera.array.bookkeeping import check_against_schema
from tessera.array.commits import (
    META_CACHE,
    list_committed,
    load_meta,
    load_pending,
    pending_meta,
)
from tessera.array.fragment import FragmentMeta
from tessera.array.maintenance import (
    apply_replacements,
    check_history,
    visible_at,
)
from tessera.array.names import name_timestamp, replaces_others
from tessera.array.read.fragment_index import fragment_index
from tessera.array.writes import LOCAL_CHANGES
from tessera.config import ReadConfig
from tessera.errors import CorruptDataError
from tessera.format.layout import Box
from tessera.format.schema import ArraySchema
from tessera.storage.blocking import Store
from tessera.when import first_commit_error


class FragmentListing:
    """Listing and loading of committed fragments. The handle's state is
    :class:`~tessera.array.array.Array`'s; this base names what it uses of it."""

    schema: ArraySchema
    _created: ArraySchema
    timestamp: int | None
    reads: ReadConfig
    _store: Store
    _metas: dict[str, FragmentMeta]
    _snapshot: list[FragmentMeta] | None
    _listed: tuple[float, int, list[FragmentMeta]] | None
    _extent_at: tuple[float, int] | None
    _last_visible: list[FragmentMeta] | None
    #: Fragments whose commit marker a vacuum made void (their writer takes it back): not
    #: listed again by this handle.
    _void: set[str]
    #: The latest list :meth:`_pending_meeting` looked at, and whether every fragment of it
    #: was loaded then (a fragment once loaded stays so: a small read on the calling thread
    #: then costs one comparison, not a look at the fragment index).
    _loaded_state: tuple[list[FragmentMeta] | None, bool]

    if TYPE_CHECKING:
        @property
        def uri(self) -> str:
            """The array's URI."""

    async def _committed_names(self) -> list[str]:
        """Names of the fragments committed at this handle's timestamp, oldest first, less
        those found void."""
        everything = await list_committed(self._store.aio)
        names = visible_at(everything, self.timestamp)
        if everything and not names:
            raise first_commit_error(self.uri, name_timestamp(everything[0]), self.timestamp)
        return [n for n in names if n not in self._void] if self._void else names

    async def _committed_metas(self) -> list[FragmentMeta]:
        """Every committed fragment at this handle's timestamp, replaced ones included, its
        bookkeeping loaded."""
        names = await self._committed_names()
        await self._load_metas([n for n in names if n not in self._metas])
        metas = [self._metas[n] for n in names if n in self._metas]
        return metas if await self._load_for(metas) else await self._committed_metas()

    async def _live_metas(self) -> list[FragmentMeta]:
        """The committed fragments no consolidation replaced, dense ones whose names record
        their boxes left pending: the fragments that replace others (their names say so)
        are loaded first, and those they replace are not loaded at all (readers never use
        them; an open after a consolidation loads only the live bookkeeping)."""
        names = await self._committed_names()
        newest = max((n for n in names if replaces_others(n)), default="")
        # first those and what is named after all of them (which none of them can replace)
        await self._load_metas([n for n in names if n not in self._metas
                                and (replaces_others(n) or n > newest)], lazy=True)
        gone = {r for n in names if n in self._metas for r in self._metas[n].replaces}
        await self._load_metas([n for n in names if n not in self._metas and n not in gone],
                               lazy=True)
        return [self._metas[n] for n in names if n in self._metas and n not in gone]

    async def _load_metas(self, names: list[str], lazy: bool = False) -> None:
        """Load the bookkeeping of committed fragments ``names`` (concurrently); ``lazy``:
        those :func:`~tessera.array.commits.pending_meta` knows by their names are left
        pending."""
        if lazy:
            for n in names:
                meta = pending_meta(n, self._created, self.uri)
                if meta is not None:
                    self._metas[n] = meta
            names = [n for n in names if n not in self._metas]
        # What this process holds is taken as it is (no task per fragment), the rest fetched.
        cache, held, missing = META_CACHE(), [], []
        for n in names:
            got = cache.get((self.uri, n))
            if got is None:
                missing.append(n)
            else:
                held.append(got)
        for meta in held + await asyncio.gather(*(load_meta(self._store.aio, n, self.uri)
                                                  for n in missing)):
            if meta is not None:
                check_against_schema(meta, self._created, self.uri)
                self._metas[meta.name] = meta

    async def _visible_metas(self, cached_ok: bool = True,
                             lazy: bool = False) -> list[FragmentMeta]:
        """The fragments reads use, oldest first: replaced fragments hidden; every one
        loaded unless ``lazy`` (reads: they load what they meet with :meth:`_load_for`).

        A handle opened at a timestamp lists them once, at its first read (as TileDB opens
        an array at a timestamp), and again only when not ``cached_ok``; a handle without
        one lists them again unless :meth:`_cached_listing` still holds (and ``cached_ok``).
        """
        metas = await self._listing(cached_ok)
        if lazy or await self._load_for(metas):
            return metas
        return await self._visible_metas(cached_ok=False)  # one was void: list again

    async def _listing(self, cached_ok: bool) -> list[FragmentMeta]:
        """The handle's list of the fragments reads use, dense ones possibly pending."""
        if self.timestamp is None:
            cached = self._cached_listing() if cached_ok else None
            if cached is not None:
                return cached
            listed_at, change = time.monotonic(), LOCAL_CHANGES.get(self.uri, 0)
            metas = self._same_list(apply_replacements(await self._live_metas()))
            self._listed = (listed_at, change, metas)
            return metas
        if self._snapshot is None or not cached_ok:
            # (again when a read found its objects gone: another process consolidated and
            # vacuumed; the fragments that replaced them hold the same cells at this time,
            # or the history is gone and HistoryVacuumedError says so)
            await check_history(self._store.aio, self.timestamp, self.uri)
            self._snapshot = apply_replacements(await self._live_metas())
        return self._snapshot

    async def _load_for(self, metas: list[FragmentMeta],
                        boxes: Sequence[Box] | None = None) -> bool:
        """Load the bookkeeping of the pending fragments of ``metas`` that meet any of
        ``boxes``, or of all of them (``boxes`` ``None``). False when one turned out void
        (a vacuum took its writer for dead: it is left out of later listings, and the
        caller lists again)."""
        todo = self._pending_meeting(metas, boxes)
        if not todo:
            return True
        void = await load_pending(self._store.aio, todo, self._created, self.uri)
        self._void.update(void)
        self._loaded_state = (None, False)  # look at the list again
        return not void

    async def _load_for_read(self, metas: list[FragmentMeta],
                             boxes: Sequence[Box] | None = None) -> None:
        """:meth:`_load_for`; a void fragment is :class:`CorruptDataError`, on which reads
        list again (as for fragments vacuumed under them)."""
        if not await self._load_for(metas, boxes):
            raise CorruptDataError(f"array {self.uri}: a fragment this read listed was "
                                   "taken back by its writer (a vacuum ran meanwhile)")

    def _pending_meeting(self, metas: list[FragmentMeta],
                         boxes: Sequence[Box] | None = None) -> list[FragmentMeta]:
        """The pending fragments of ``metas`` meeting ``boxes`` (what a read of them plans
        over: the fragments meeting a selection's bounds), all of them when ``boxes`` is
        ``None``."""
        seen, loaded = self._loaded_state
        if seen is metas and loaded:
            return []
        if boxes is None:
            todo = [m for m in metas if m.pending]
        else:
            index = fragment_index(metas, self.schema)
            ranks = set()
            for box in boxes:
                ranks.update(index.meeting(box))
            todo = [metas[r] for r in sorted(ranks) if metas[r].pending]
        if seen is not metas:
            self._loaded_state = (metas, not todo and not any(m.pending for m in metas))
        return todo

    def _same_list(self, metas: list[FragmentMeta]) -> list[FragmentMeta]:
        """The handle's previous list of fragments if ``metas`` names the same ones (the
        same objects, in the same order), else ``metas``: what a read planned, recipes and
        the fragment index are kept by the list's identity, so a listing that finds nothing
        new keeps them."""
        for old in (self._listed[2] if self._listed is not None else None,
                    self._last_visible):
            if old is not None and len(old) == len(metas) \
                    and all(a is b for a, b in zip(metas, old, strict=True)):
                return old
        return metas

    def _cached_listing(self) -> list[FragmentMeta] | None:
        """The latest list of fragments if ``reads.refresh_s`` still covers it and no
        handle of this process changed the array since."""
        if self.timestamp is not None or self._listed is None:
            return None
        listed_at, change, metas = self._listed
        if change != LOCAL_CHANGES.get(self.uri, 0):
            return None
        return metas if time.monotonic() - listed_at < self.reads.refresh_s else None
