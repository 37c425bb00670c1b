"""Handles reopened once per process: :class:`PerProcess` for any kind (a table, an image
set), :class:`ArrayRef` for arrays.

Worker processes (PyTorch DataLoader workers, Dask workers) must not share an open handle
with their parent: obstore's I/O runtime does not survive ``fork`` and sockets must not be
shared. A :class:`PerProcess` carries only the call that opens its handle (a picklable
``functools.partial``) and makes it at most once in whichever process uses it; copies and
pickles carry no open handle. An :class:`ArrayRef` is the array's (URL, storage options,
snapshot timestamp, pushdown server URL), with the snapshot pinning datasets need.

>>> import copy, numpy as np, tessera
>>> from tessera.integrations.handle import ArrayRef
>>> _ = tessera.from_numpy("memory://doc-ref", np.arange(6).reshape(2, 3))
>>> ref = ArrayRef("memory://doc-ref")
>>> ref.array[1].tolist()
[3, 4, 5]
>>> copy.deepcopy(ref)._handle is None     # copies (and pickles) carry no open handle
True
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tessera.array.array import Array
from tessera.array.factories import open_array
from tessera.errors import InvalidTypeError

T = TypeVar("T")


class PerProcess(Generic[T]):
    """A handle made by ``opener`` at most once per process (again in a worker process,
    never shared with the parent); ``first`` is a handle already open in this process.

    >>> import copy, functools, numpy as np, tessera
    >>> _ = tessera.from_numpy("memory://doc-per-process", np.arange(3))
    >>> handle = PerProcess(functools.partial(tessera.open_array, "memory://doc-per-process"))
    >>> int(handle.get()[2]), copy.deepcopy(handle)._value is None  # copies carry no handle
    (2, True)
    """

    def __init__(self, opener: Callable[[], T], first: T | None = None) -> None:
        self._opener = opener
        self._value, self._pid = first, (os.getpid() if first is not None else None)

    def get(self) -> T:
        """The handle, opened in this process on first use."""
        if self._value is None or self._pid != os.getpid():
            self._value, self._pid = self._opener(), os.getpid()
        return self._value

    def __getstate__(self) -> dict[str, Any]:
        return {"_opener": self._opener, "_value": None, "_pid": None}


@dataclasses.dataclass
class ArrayRef:
    """What it takes to open an array in another process.

    Attributes:
        uri: the array's URI.
        storage_options: store options (endpoint, keys, ...), as ``open_array`` takes them.
        timestamp: read the array as of this time (ns); ``None`` sees every commit.
        pushdown: a pushdown server URL, or ``None`` (``TESSERA_PUSHDOWN_URL`` applies).
        pushdown_token: its token (default ``TESSERA_PUSHDOWN_TOKEN``).
        mode: ``"r"`` or ``"w"``.
    """

    uri: str
    storage_options: dict[str, Any] | None = None
    timestamp: int | None = None
    pushdown: str | None = None
    pushdown_token: str | None = None
    mode: str = "r"
    _handle: PerProcess[Array] | None = dataclasses.field(default=None, repr=False,
                                                          compare=False)

    @classmethod
    def of(cls, arr: Array, *, storage_options: dict[str, Any] | None = None,
           pin: bool = False) -> ArrayRef:
        """A reference to an open array (its URI, snapshot and pushdown server).

        ``storage_options`` default to those the array's store was opened with (they travel
        with the reference to the processes that reopen it). ``pin``: pin the snapshot to
        the newest fragment visible now, so every process sees the same data even while
        writers go on.
        """
        if storage_options is None:
            storage_options = arr.store.aio.storage_options or None
        timestamp = arr.timestamp
        if pin and timestamp is None:
            frags = arr.fragments
            timestamp = max((f.timestamp for f in frags), default=None)
        client = arr.pushdown
        ref = cls(arr.uri, storage_options, timestamp,
                  client.url if client is not None else None,
                  (client.config.token or None) if client is not None else None, arr.mode)
        if timestamp == arr.timestamp:  # else the pinned snapshot opens on first use
            ref._handle = PerProcess(ref._open, arr)
        return ref

    @classmethod
    def resolve(cls, array: str | os.PathLike[str] | Array | ArrayRef,
                storage_options: dict[str, Any] | None = None,
                pushdown: str | None = None) -> ArrayRef:
        """A reference pinned to the current snapshot from a URI or an open array (an
        ``ArrayRef`` is returned as it is): what datasets and dask arrays hold."""
        if isinstance(array, ArrayRef):
            return array
        if isinstance(array, Array):
            return cls.of(array, storage_options=storage_options, pin=True)
        if isinstance(array, (str, os.PathLike)):
            opened = cls(str(array), storage_options, pushdown=pushdown).array
            return cls.of(opened, storage_options=storage_options, pin=True)
        raise InvalidTypeError(f"expected an array URI, a tessera.Array or an ArrayRef, got "
                               f"{type(array).__name__}")

    @property
    def array(self) -> Array:
        """The open array, opened on first use in this process."""
        if self._handle is None:
            self._handle = PerProcess(self._open)
        return self._handle.get()

    def _open(self) -> Array:
        return open_array(self.uri, self.mode, at=self.timestamp,
                          storage_options=self.storage_options, pushdown=self.pushdown,
                          pushdown_token=self.pushdown_token)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_handle"] = None  # reopened where it is used
        return state
