"""Consolidation and vacuum (the TileDB paper, section 4.3), and the visibility rule they need.

Consolidating a set S of fragments writes one fragment C that holds what a reader sees,
inside the bounding box of S, of the fragments ranked up to the highest member of S (and of
the plain fragments named before that member which a consolidation ranked above it hides: a
reader travelling back to before that one sees them again, below the member). C lists S as
replaced and, as ``covers``, the others it holds the effect of. C is named at ``t_max``, the
newest timestamp among what it read. Readers apply two rules (:func:`apply_replacements`):

* a visible fragment that replaces others hides them. C's commit marker is written
  create-only, last, so a reader sees either S (before) or C (after), never both and never
  neither;
* C outranks exactly what it replaced and covers; every other fragment ranks above it,
  whatever its timestamp. A writer's timestamp is taken before its commit PUTs, so a slow
  commit can become visible after a consolidation that did not see it, with an older
  timestamp than C's: it still ranks above C, so a write that returned is never hidden by a
  consolidation (the order of ranks is the order in which commits became visible to the
  consolidations that ran). Between plain writes, which share no such knowledge, the
  timestamp decides, as in TileDB.

Vacuum removes replaced fragments. It first records ``__vacuumed/<C's name>`` with the time
span of what it removes, so that a reader travelling back into that span gets a clear error
instead of a silently incomplete array. It also removes orphaned objects of writers that died
before committing, once they are older than a grace period (a writer still working is never
touched).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json

from tessera.array.commits import list_committed
from tessera.array.fragment import (
    COMMITS,
    DOOMED,
    FRAGMENTS,
    VACUUMED,
    FragmentMeta,
)
from tessera.array.names import name_id, name_timestamp
from tessera.errors import (
    HistoryVacuumedError,
    ObjectExistsError,
)
from tessera.storage.store import AsyncStore
from tessera.when import iso

#: What a handle may be opened at: int nanoseconds, an aware datetime, or None (now).
TimestampLike = int | str | dt.datetime | None


def apply_replacements(metas: list[FragmentMeta]) -> list[FragmentMeta]:
    """The fragments a reader uses, lowest rank first: those not replaced by a visible
    consolidated fragment, in the order :func:`rank_order` gives (``metas``: committed
    fragments, oldest name first)."""
    replaced = {r for m in metas for r in m.replaces}
    return rank_order([m for m in metas if m.name not in replaced])


def rank_order(visible: list[FragmentMeta]) -> list[FragmentMeta]:
    """Visible fragments (oldest name first) in the order reads rank them, lowest first.

    Consolidated fragments are the fixed points: each one outranks the fragments it covers
    and ranks below every other one. They are ordered among themselves by how many of the
    others each covers (a later consolidation saw the earlier ones), then by name; every
    other fragment sits just below the lowest consolidated fragment that covers it (above
    all of them if none does), by name within that place. A consolidated fragment written
    before fragment format 6 covers every fragment named before it, so an array without
    format-6 consolidations keeps the order of names.

    >>> from tessera.array.fragment import FragmentMeta
    >>> import numpy as np
    >>> def frag(name, kind="dense", covers=None):
    ...     return FragmentMeta(name, int(name[1:]), kind, ((0,), (0,)), np.zeros(1),
    ...                         np.zeros(1), {}, 1, covers=covers)
    >>> late, d = frag("f05"), frag("f08")      # late: a slow commit the consolidation missed
    >>> c = frag("f10", "consolidated", covers=("f08",))
    >>> [m.name for m in rank_order([late, d, c])]
    ['f08', 'f10', 'f05']
    """
    separators = [m for m in visible if m.kind == "consolidated"]
    if not separators:
        return visible
    position = {m.name: i for i, m in enumerate(visible)}

    def covered(c: FragmentMeta) -> set[str]:
        if c.covers is not None:
            return set(c.covers)
        return {m.name for m in visible[:position[c.name]]}  # before format 6: by name

    covers = {c.name: covered(c) for c in separators}
    names = {c.name for c in separators}
    separators.sort(key=lambda c: (len(covers[c.name] & names), c.name))
    places: list[list[FragmentMeta]] = [[] for _ in range(len(separators) + 1)]
    for m in visible:
        if m.kind == "consolidated":
            continue
        place = next((i for i, c in enumerate(separators) if m.name in covers[c.name]),
                     len(separators))
        places[place].append(m)
    ordered: list[FragmentMeta] = []
    for group, c in zip(places, separators, strict=False):
        ordered.extend(group)
        ordered.append(c)
    ordered.extend(places[-1])
    return ordered


def with_hidden(below: list[FragmentMeta], committed: list[FragmentMeta],
                top: str) -> list[FragmentMeta]:
    """What a consolidation whose highest member is ``top`` holds and outranks: the
    fragments ranked up to ``top`` (``below``, in rank order) and the plain fragments named
    before ``top`` that a consolidation ranked above ``top`` hides now. A reader travelling
    back to before that consolidation sees them again, below ``top`` as their times say:
    the new fragment must hold their effect and outrank them there too."""
    inside = {m.name for m in below}
    by_name = {m.name: m for m in committed}
    # hidden by a consolidation that is itself below (directly or through what it
    # replaced): held by it already
    held = {g.name for m in below for g in _replaced_closure(m, by_name)}
    hidden = {r for m in committed for r in m.replaces} - inside - held
    extra = [m for m in committed if m.name in hidden and m.kind != "consolidated"
             and m.name < top]
    if not extra:
        return below
    return rank_order(sorted([*below, *extra], key=lambda m: m.name))


async def check_history(store: AsyncStore, timestamp: int, array_url: str) -> None:
    """Raise :class:`HistoryVacuumedError` if fragments visible at ``timestamp`` are gone."""
    for info in await store.list(VACUUMED):
        try:
            span = json.loads(bytes(await store.get(info.key)))
            t_min, t_max = int(span["t_min"]), int(span["t_max"])
        except (ValueError, KeyError, TypeError):
            continue
        if t_min <= timestamp < t_max:
            raise HistoryVacuumedError(
                f"{array_url} at timestamp {timestamp}: the fragments written between "
                f"{iso(t_min)} and {iso(t_max)} were consolidated and vacuumed; open the "
                f"array at {t_max} or later, or before {t_min}")


async def vacuum(store: AsyncStore, metas: list[FragmentMeta], orphan_grace_s: float) -> int:
    """Remove what visible consolidated fragments replaced, and stale orphans. Returns the
    number of objects removed."""
    committed = {m.name: m for m in metas}
    removed = 0
    for c in apply_replacements(metas):
        gone = _replaced_closure(c, committed)
        if not gone:
            continue
        span = {"t_min": min(g.timestamp for g in gone), "t_max": c.timestamp,
                "replaced": [g.name for g in gone]}
        await store.put(f"{VACUUMED}/{c.name}", json.dumps(span).encode())
        for g in gone:
            await store.delete(f"{COMMITS}/{g.name}")
        removed += len(gone)
        for g in gone:
            removed += await _delete_prefix(store, f"{FRAGMENTS}/{name_id(g.name)}")
    live = {name_id(n) for n in committed} | {name_id(n) for m in metas for n in m.replaces
                                               if n in committed}
    now = dt.datetime.now(dt.UTC)
    listing = await store.list(FRAGMENTS)
    orphans: dict[str, list[str]] = {}
    fresh: set[str] = set()
    for info in listing:
        fid = info.key.split("/")[1]
        if fid in live:
            continue
        if (now - info.last_modified).total_seconds() < orphan_grace_s:
            fresh.add(fid)
        orphans.setdefault(fid, []).append(info.key)
    stale = {fid: keys for fid, keys in orphans.items() if fid not in fresh}
    if not stale:
        return removed
    # A writer still committing may be among them: mark each doomed first, then look at the
    # commit markers again; the writer does the same the other way round (tessera.array.commits).
    await asyncio.gather(*(_doom(store, fid) for fid in stale))
    committed_now = {name_id(n) for n in await list_committed(store)}
    for fid, keys in stale.items():
        if fid in committed_now:  # it committed meanwhile: spare it
            await store.delete(f"{DOOMED}/{fid}")
            continue
        await asyncio.gather(*(store.delete(k) for k in keys))
        removed += len(keys)
    return removed


async def _doom(store: AsyncStore, fid: str) -> None:
    with contextlib.suppress(ObjectExistsError):
        await store.put(f"{DOOMED}/{fid}", b"{}", mode="create")


def _replaced_closure(c: FragmentMeta, committed: dict[str, FragmentMeta]) -> list[FragmentMeta]:
    """Every committed fragment ``c`` hides, directly or through fragments it replaced,
    deepest first (so that removing them in order never uncovers one still to remove)."""
    out: list[FragmentMeta] = []
    seen: set[str] = set()

    def visit(meta: FragmentMeta) -> None:
        for name in meta.replaces:
            if name in committed and name not in seen:
                seen.add(name)
                visit(committed[name])
                out.append(committed[name])

    visit(c)
    return out


async def _delete_prefix(store: AsyncStore, prefix: str) -> int:
    keys = [o.key for o in await store.list(prefix)]
    await asyncio.gather(*(store.delete(k) for k in keys))
    return len(keys)


def same_fragments(a: list[FragmentMeta], b: list[FragmentMeta]) -> bool:
    """True if two lists of fragments name the same fragments in the same order."""
    return [m.name for m in a] == [m.name for m in b]


def visible_at(names: list[str], timestamp: int | None) -> list[str]:
    """Committed names at or before ``timestamp`` (all when None)."""
    return names if timestamp is None else [n for n in names if name_timestamp(n) <= timestamp]

