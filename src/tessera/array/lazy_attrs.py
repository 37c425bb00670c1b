"""A fragment's per-attribute tile tables, parsed from its bookkeeping document when a read
first needs them: opening a fragment checks the document's structure (every attribute's
columns, by length) but decodes only the attributes read. An image set stores one attribute
per diagonal (63), and a read at k = 8 needs 8 of them, so the first read after opening a
set of many appends parses an eighth of the tables it parsed before.

>>> calls = []
>>> lazy = LazyAttrs({"a": {"sizes": [1, 2]}, "b": {"sizes": [3]}},
...                  lambda doc: calls.append(doc) or sum(doc["sizes"]), "fragment f")
>>> lazy["a"], len(lazy), sorted(lazy), len(calls), sorted(lazy.parsed)
(3, 2, ['a', 'b'], 1, ['a'])
>>> lazy["a"], len(calls)
(3, 1)
>>> LazyAttrs({"a": {}}, lambda doc: doc["sizes"], "fragment f")["a"]
Traceback (most recent call last):
...
tessera.errors.CorruptDataError: fragment f: unreadable fragment bookkeeping: 'sizes'
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from tessera.errors import CorruptDataError

T = TypeVar("T")


class LazyAttrs(Mapping[str, T]):
    """Attribute name -> its parsed tile table, each parsed by ``parse`` from its document
    on first use; a document that cannot be parsed raises :class:`CorruptDataError` naming
    ``where`` (the array and fragment), as the whole fragment's document does when it
    is opened."""

    def __init__(self, docs: Mapping[str, Any], parse: Callable[[Any], T], where: str) -> None:
        self._docs = dict(docs)
        self._parse = parse
        self._where = where
        self._parsed: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        got = self._parsed.get(name)
        if got is None:
            doc = self._docs[name]  # an unknown name: KeyError, as a dict
            try:
                got = self._parse(doc)
            except (ValueError, KeyError, TypeError, IndexError, binascii.Error) as err:
                raise CorruptDataError(f"{self._where}: unreadable fragment bookkeeping: "
                                       f"{err}") from None
            self._parsed[name] = got  # two threads may both parse: the same value
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(self._docs)

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, name: object) -> bool:
        return name in self._docs

    @property
    def parsed(self) -> frozenset[str]:
        """The attributes whose tile tables have been parsed so far."""
        return frozenset(self._parsed)

    def document(self, name: str) -> Any:
        """The unparsed document of attribute ``name``."""
        return self._docs[name]

    def __repr__(self) -> str:
        return f"LazyAttrs({list(self._docs)}, parsed {sorted(self._parsed)})"


class PendingAttrs(Mapping[str, T]):
    """The tile tables of a fragment whose bookkeeping is not loaded yet (a handle knows
    its box from its name: :mod:`tessera.array.names`); a read loads the bookkeeping of the
    fragments it meets first (:func:`tessera.array.commits.load_pending`), which
    :meth:`fill` s this mapping with their tables. Using it before then is a bug in Tessera
    and raises :class:`RuntimeError` naming ``where``.

    >>> pending = PendingAttrs("fragment f")
    >>> pending.loaded
    False
    >>> pending.fill({"a": 1})
    >>> pending["a"], list(pending), pending.loaded
    (1, ['a'], True)
    """

    def __init__(self, where: str) -> None:
        self._where = where
        self._tables: Mapping[str, T] | None = None

    @property
    def loaded(self) -> bool:
        """Whether the fragment's bookkeeping was loaded into this mapping."""
        return self._tables is not None

    def fill(self, tables: Mapping[str, T]) -> None:
        """Take the loaded bookkeeping's tile tables (a fragment never changes, so two
        loads fill the same tables)."""
        self._tables = tables

    @property
    def tables(self) -> Mapping[str, T]:
        """The loaded tile tables."""
        if self._tables is None:
            raise RuntimeError(f"{self._where}: its bookkeeping was used before it was "
                               "loaded (a bug in Tessera: please report it)")
        return self._tables

    def __getitem__(self, name: str) -> T:
        return self.tables[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tables)

    def __len__(self) -> int:
        return len(self.tables)

    def __repr__(self) -> str:
        return f"PendingAttrs({self._where}, loaded={self.loaded})"
