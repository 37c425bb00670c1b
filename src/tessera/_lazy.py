"""Read-only sequences whose items are made when asked for: :class:`MadeOnDemand`, and
:class:`Chained` (several sequences one after another, none copied).

A read of 10^6 tiles keeps its tile reads and its plan's choices as columns of numbers; a
caller that looks at some of them (a report, a printed plan, a viewer's overlay) gets each
one made from the columns as it asks. A subclass says how many items there are
(``__len__``) and how item ``i`` is made (``_item``); indexing, slicing and iteration are
here.

>>> class Squares(MadeOnDemand[int]):
...     def __len__(self) -> int:
...         return 5
...     def _item(self, i: int) -> int:
...         return i * i
>>> s = Squares()
>>> s[-1], s[1:3], list(s), 16 in s
(16, [1, 4], [0, 1, 4, 9, 16], True)
>>> s[5]
Traceback (most recent call last):
...
IndexError: item 5 of a sequence of 5
>>> both = Chained([s, [25, 36]])
>>> len(both), both[5], both[-1], both[4:6]
(7, 25, 36, [16, 25])
"""

from __future__ import annotations

import abc
import bisect
import itertools
from collections.abc import Iterator, Sequence
from typing import TypeVar, overload

T = TypeVar("T")


class MadeOnDemand(Sequence[T], abc.ABC):
    """A sequence of ``len(self)`` items, item ``i`` made by :meth:`_item` when indexed."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """How many items there are."""

    @abc.abstractmethod
    def _item(self, i: int) -> T:
        """Item ``i`` (``0 <= i < len(self)``), made now."""

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self._item(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError(f"item {i} of a sequence of {n}")
        return self._item(j)

    def __iter__(self) -> Iterator[T]:
        return (self._item(i) for i in range(len(self)))


class Chained(MadeOnDemand[T]):
    """The items of ``parts`` one after another, each taken from its part when asked for
    (a report of a read made in batches lists every batch's tile reads this way without
    making them)."""

    def __init__(self, parts: Sequence[Sequence[T]]) -> None:
        self.parts = list(parts)
        self._ends = list(itertools.accumulate(len(p) for p in self.parts))

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def _item(self, i: int) -> T:
        p = bisect.bisect_right(self._ends, i)
        return self.parts[p][i - (self._ends[p - 1] if p else 0)]
