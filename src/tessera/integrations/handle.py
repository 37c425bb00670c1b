"""A picklable reference to an array, reopened once per process.

Worker processes (PyTorch DataLoader workers, Dask workers) must not share an open handle
with their parent: obstore's I/O runtime does not survive ``fork`` and sockets must not be
shared. An :class:`ArrayRef` carries only what it takes to open the array (URI, storage
options, snapshot timestamp, pushdown server URL) and opens it lazily in whichever process
uses it.

>>> import copy, numpy as np, tessera
>>> from tessera.integrations.handle import ArrayRef
>>> _ = tessera.from_numpy("memory://doc-ref", np.arange(6).reshape(2, 3))
>>> ref = ArrayRef("memory://doc-ref")
>>> ref.array[1].tolist()
[3, 4, 5]
>>> copy.deepcopy(ref)._array is None      # copies (and pickles) carry no open handle
True
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from tessera.array.array import Array
from tessera.array.factories import open_array
from tessera.errors import InvalidTypeError


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
    _array: Array | None = dataclasses.field(default=None, repr=False, compare=False)
    _pid: int | None = dataclasses.field(default=None, repr=False, compare=False)

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
            ref._array, ref._pid = arr, os.getpid()
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
        if self._array is None or self._pid != os.getpid():
            self._array = open_array(self.uri, self.mode, at=self.timestamp,
                                     storage_options=self.storage_options,
                                     pushdown=self.pushdown,
                                     pushdown_token=self.pushdown_token)
            self._pid = os.getpid()
        return self._array

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_array"] = None
        state["_pid"] = None
        return state
