"""User metadata on an array (h5py's and zarr's ``.attrs``, TileDB's array metadata):
``arr.metadata``, a mutable mapping of JSON values.

Every change is its own small object, ``__meta/m<timestamp>-<id>.json``, written with a
create-only put, holding only the keys it changes (set or deleted), each with its timestamp.
A key's value is the newest entry for it (last writer per key wins, ties broken by object
id), so writers at the same time never lose each other's keys, and a handle opened at a past
timestamp sees the entries written at or before it. Consolidation writes one object (its
writer id starts with ``z``) with the newest entry per key and the names of the objects it
covers (readers then skip those); vacuum removes covered objects, after which time travel
before the consolidation refuses with :class:`~tessera.errors.HistoryVacuumedError`.

>>> import numpy as np, tessera
>>> arr = tessera.from_numpy("memory://doc-metadata", np.zeros(4), tile=(2,))
>>> arr.metadata["units"] = "m/s"
>>> arr.metadata.update(labels=["a", "b"], scale=0.5)
>>> dict(arr.metadata)
{'labels': ['a', 'b'], 'scale': 0.5, 'units': 'm/s'}
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any

from tessera.array.names import new_fragment_id, new_timestamp
from tessera.errors import (
    CorruptDataError,
    HistoryVacuumedError,
    InvalidTypeError,
    NameNotFoundError,
)
from tessera.storage.blocking import Store
from tessera.when import iso

META = "__meta"
FORMAT = 1
CONSOLIDATED = "z"  # the first letter of a consolidated object's writer id


@dataclasses.dataclass(frozen=True)
class Entry:
    """One key's value (or deletion) as of ``timestamp``, written by object ``writer``."""

    timestamp: int
    writer: str
    deleted: bool
    value: Any = None

    @property
    def rank(self) -> tuple[int, str]:
        """Newer entries rank higher (ties: the larger writer id)."""
        return (self.timestamp, self.writer)


@dataclasses.dataclass(frozen=True)
class MetaObject:
    """One stored metadata object: its entries and, for a consolidated one, what it covers."""

    name: str
    timestamp: int
    entries: dict[str, Entry]
    covers: tuple[str, ...] = ()


def object_name(timestamp: int, writer: str) -> str:
    """The time-sortable name of a metadata object."""
    return f"m{timestamp:020d}-{writer}.json"


def name_timestamp(name: str) -> int:
    """The timestamp in a metadata object's name."""
    return int(name[1:21])


def is_consolidated(name: str) -> bool:
    """True for a consolidated object's name (its writer id starts with ``z``; a change's
    id is hexadecimal), so a time-travelling reader finds them without reading the others."""
    return name[22:23] == CONSOLIDATED


class ArrayMetadata(MutableMapping[str, Any]):
    """``arr.metadata``: keys are strings, values anything JSON holds (numbers, strings,
    booleans, ``None``, lists and dicts of them). Each assignment, deletion or
    :meth:`update` writes one object; reads list ``__meta/`` and get the objects not yet
    seen (objects never change, so a handle keeps what it fetched). Values come back as
    JSON gives them (tuples as lists); changing a returned list or dict changes nothing
    stored."""

    def __init__(self, store: Store, uri: str, timestamp: int | None,
                 check_writable: Callable[[], None]) -> None:
        self._store, self._uri, self._timestamp = store, uri, timestamp
        self._check_writable = check_writable
        self._objects: dict[str, MetaObject] = {}
        self._lock = threading.Lock()

    # -- reading ---------------------------------------------------------------------------
    def _all_names(self) -> list[str]:
        return sorted(o.key.rsplit("/", 1)[1] for o in self._store.list(f"{META}/")
                      if o.key.rsplit("/", 1)[1].startswith("m") and o.key.endswith(".json"))

    def _listing(self) -> list[str]:
        t = self._timestamp
        names = self._all_names()
        return names if t is None else [n for n in names if name_timestamp(n) <= t]

    def _load(self, name: str) -> MetaObject:
        with self._lock:
            cached = self._objects.get(name)
        if cached is not None:
            return cached
        key = f"{META}/{name}"
        try:
            doc = json.loads(bytes(self._store.get(key)))
            entries = {str(k): Entry(int(e["t"]), str(e["id"]), bool(e.get("deleted", False)),
                                     e.get("value")) for k, e in doc["entries"].items()}
            obj = MetaObject(name, name_timestamp(name), entries,
                             tuple(str(c) for c in doc.get("covers", ())))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CorruptDataError(f"array {self._uri}: metadata object {key} is damaged "
                                   f"({err})") from None
        with self._lock:
            self._objects[name] = obj
        return obj

    def _visible(self) -> list[MetaObject]:
        """The objects a read applies: covered ones are skipped once their consolidated
        object is visible; a covered object the handle's time needs that vacuum removed is
        an error."""
        every = self._all_names()
        t = self._timestamp
        names = every if t is None else [n for n in every if name_timestamp(n) <= t]
        # Newest first: a consolidated object names what it covers, which is then skipped
        # unread (it holds nothing newer than the consolidated entries).
        objects: list[MetaObject] = []
        covered: set[str] = set()
        for name in reversed(names):
            if name not in covered:
                obj = self._load(name)
                objects.append(obj)
                covered.update(obj.covers)
        if t is not None:
            present = set(every)
            for name in every:
                if name_timestamp(name) <= t or not is_consolidated(name):
                    continue
                later = self._load(name)
                if any(name_timestamp(c) <= t and c not in present for c in later.covers):
                    raise HistoryVacuumedError(
                        f"{self._uri} at timestamp {t}: the metadata written up to "
                        f"{iso(later.timestamp)} was consolidated and vacuumed; open the "
                        f"array at {later.timestamp} or later")
        return [o for o in reversed(objects) if o.name not in covered]

    def _entries(self) -> dict[str, Entry]:
        t = self._timestamp
        return merge_entries(self._visible(), t)

    def to_dict(self) -> dict[str, Any]:
        """Every key and its value, in key order (one listing)."""
        return {k: e.value for k, e in sorted(self._entries().items()) if not e.deleted}

    def __getitem__(self, key: str) -> Any:
        entry = self._entries().get(key)
        if entry is None or entry.deleted:
            raise NameNotFoundError(f"array {self._uri} has no metadata key {key!r}")
        return entry.value

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    def __repr__(self) -> str:
        return f"<metadata of {self._uri}: {self.to_dict()!r}>"

    # -- writing ---------------------------------------------------------------------------
    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        if key not in self.to_dict():
            raise NameNotFoundError(f"array {self._uri} has no metadata key {key!r}")
        self._write({key: None}, deleted={key})

    def update(self, other: Any = (), /, **kwargs: Any) -> None:
        """Set several keys in one object (one request)."""
        items = dict(other.items() if isinstance(other, Mapping) else other, **kwargs)
        if items:
            self._write(items, deleted=set())

    def _write(self, items: dict[str, Any], deleted: set[str]) -> None:
        self._check_writable()
        timestamp, writer = new_timestamp(), new_fragment_id()
        entries: dict[str, Any] = {}
        for key, value in items.items():
            if not isinstance(key, str):
                raise InvalidTypeError(f"metadata keys are strings, got {key!r}")
            entry: dict[str, Any] = {"t": timestamp, "id": writer}
            if key in deleted:
                entry["deleted"] = True
            else:
                entry["value"] = _json_value(key, value)
            entries[key] = entry
        self._put(object_name(timestamp, writer), {"format": FORMAT, "entries": entries})

    def _put(self, name: str, doc: dict[str, Any]) -> None:
        self._store.put(f"{META}/{name}", json.dumps(doc, allow_nan=False).encode(),
                        mode="create")

    # -- maintenance -----------------------------------------------------------------------
    def consolidate(self) -> bool:
        """Write one object with the newest entry of every key (deletions included), covering
        the objects visible now; ``False`` (nothing written) with fewer than two of them."""
        self._check_writable()
        objects = self._visible()
        if len(objects) < 2:
            return False
        newest = merge_entries(objects, None)
        covers = sorted({o.name for o in objects} | {c for o in objects for c in o.covers})
        t_max = max(o.timestamp for o in objects)
        entries = {k: {"t": e.timestamp, "id": e.writer,
                       **({"deleted": True} if e.deleted else {"value": e.value})}
                   for k, e in newest.items()}
        self._put(object_name(t_max, CONSOLIDATED + new_fragment_id()),
                  {"format": FORMAT, "entries": entries, "covers": covers})
        return True

    def vacuum(self) -> int:
        """Remove the objects a visible consolidated object covers; returns how many."""
        self._check_writable()
        names = self._listing()
        covered = {c for n in names for c in self._load(n).covers}
        gone = [n for n in names if n in covered]
        for name in gone:
            self._store.delete(f"{META}/{name}")
        return len(gone)


def _json_value(key: str, value: Any) -> Any:
    """``value`` as JSON will hold it, or ``InvalidTypeError`` naming the key."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise InvalidTypeError(f"metadata value for {key!r} is not JSON ({err}); store "
                               "numbers, strings, booleans, None, or lists and dicts of them "
                               "(numpy values: .tolist())") from None


def merge_entries(objects: Iterable[MetaObject], timestamp: int | None) -> dict[str, Entry]:
    """The newest entry per key across ``objects`` (of those at or before ``timestamp``)."""
    newest: dict[str, Entry] = {}
    for obj in objects:
        for key, entry in obj.entries.items():
            if timestamp is not None and entry.timestamp > timestamp:
                continue
            old = newest.get(key)
            if old is None or entry.rank > old.rank:
                newest[key] = entry
    return newest
