"""The read-method registry: each way of getting a tile's cells (a whole-tile ``get``, byte
``range`` requests, a ``pushdown`` to a server beside the store) is one
:class:`ReadMethod` (whether it competes for a tile, the requests it would issue, the
:class:`~tessera.query.cost.RequestMix` they cost, and what the executor does with it), and
each forced read mode a user may pass as ``method=`` is one :class:`ReadMode`.
The planner (:mod:`tessera.query.refine`), the executor (:mod:`tessera.array.read`) and the
read report ask the registry instead of comparing names.

>>> from tessera.query.methods import read_method, mode_names
>>> read_method("range").store_bytes, read_method("pushdown").on_server
(True, True)
>>> mode_names()
('auto', 'get', 'merge', 'fetch', 'pushdown')
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import ClassVar, TypeVar

from tessera.errors import ConfigError
from tessera.query.cost import CostModel, RequestMix
from tessera.query.need import TileNeed

T = TypeVar("T")

#: ``[start, stop)`` byte ranges of the stored object (absolute offsets).
Requests = list[tuple[int, int]]


@dataclasses.dataclass(frozen=True)
class ChoiceContext:
    """What a method may use to build a tile's requests: the cost model, the rest of the
    plan (``context``: every other tile's current requests) and the cell size (single ranges
    are split at cell boundaries)."""

    model: CostModel
    context: RequestMix
    cell_nbytes: int


class ReadMethod(abc.ABC):
    """One way of getting a tile's cells.

    Class attributes:
        name: the method's name in plans, reports and request statistics.
        store_bytes: its requests are byte ranges of the stored object, fetched from the
            store (neighbouring tiles' may be merged into one request).
        whole_tile: it reads the whole stored tile (checked against the tile's checksum);
            else only parts of it (raw or blocked tiles).
        on_server: it runs on a pushdown server, which returns only the selected cells.
        margin: factor by which its estimated extra cost must beat the others' (a range
            plan pays reassembly the model does not count).
    """

    name: ClassVar[str]
    store_bytes: ClassVar[bool] = True
    whole_tile: ClassVar[bool] = True
    on_server: ClassVar[bool] = False
    margin: ClassVar[float] = 1.0

    @abc.abstractmethod
    def competes(self, need: TileNeed, allow_pushdown: bool) -> bool:
        """Whether it is a candidate for ``need`` when the planner chooses (``auto``)."""

    @abc.abstractmethod
    def requests(self, need: TileNeed, ctx: ChoiceContext) -> Requests:
        """The requests it would issue for ``need`` in the plan ``ctx`` describes."""

    @abc.abstractmethod
    def mix(self, requests: Requests, need: TileNeed) -> RequestMix:
        """What those requests cost, as a request mix."""

    def unavailable(self, allow_pushdown: bool) -> str | None:
        """Why it cannot be forced (``None``: it can)."""
        return None


@dataclasses.dataclass(frozen=True)
class ReadMode:
    """A read mode (``method=`` of a read): ``auto`` lets the planner choose per tile; a
    forced mode gives every tile ``method`` with ``requests`` (default: the method's own).
    A tile that cannot be read in parts (a compressed tile without blocks) is fetched whole
    under a forced mode whose method reads parts."""

    name: str
    method: str | None
    requests: Callable[[TileNeed, ChoiceContext], Requests] | None = None


_METHODS: dict[str, ReadMethod] = {}
_MODES: dict[str, ReadMode] = {"auto": ReadMode("auto", None)}


def register_method(method: ReadMethod) -> None:
    """Add a read method (its name must be new). Methods compete in registration order, the
    first of the cheapest winning a tie."""
    if method.name in _METHODS:
        raise ConfigError(f"read method {method.name!r} is already registered")
    _METHODS[method.name] = method


def register_mode(mode: ReadMode) -> None:
    """Add a read mode users may pass as ``method=`` (its method must be registered)."""
    if mode.name in _MODES:
        raise ConfigError(f"read mode {mode.name!r} is already registered")
    if mode.method not in _METHODS:
        raise ConfigError(f"read mode {mode.name!r} names no registered method "
                          f"({mode.method!r})")
    _MODES[mode.name] = mode


def read_method(name: str) -> ReadMethod:
    """The registered method ``name``."""
    return _lookup(_METHODS, name, "registered:")


def read_mode(name: str) -> ReadMode:
    """The read mode ``name`` (``ConfigError`` naming the choices if none)."""
    return _lookup(_MODES, name, "choose one of")


def _lookup(table: dict[str, T], name: str, choices: str) -> T:
    try:
        return table[name]
    except KeyError:
        raise ConfigError(f"unknown read method {name!r}; {choices} "
                          f"{', '.join(table)}") from None


def methods() -> tuple[ReadMethod, ...]:
    """The registered methods, in registration order."""
    return tuple(_METHODS.values())


def mode_names() -> tuple[str, ...]:
    """The read modes, ``auto`` first."""
    return tuple(_MODES)
