"""Attributes of :mod:`tessera.h5` groups and datasets, kept as h5py keeps them: stored as
JSON beside the node (never pickled), numbers and arrays with their dtype, text as text,
bytes values read back as text (h5py's variable-length strings) and fixed-length bytes
(``S``) arrays keeping their dtype; names are text or UTF-8 bytes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, MutableMapping
from typing import Any

import numpy as np

from tessera.array.array import Array
from tessera.errors import (
    InvalidArgumentError,
    InvalidTypeError,
    NameNotFoundError,
    ObjectNotFoundError,
    ReadOnlyError,
)
from tessera.storage.blocking import Store

ATTRS_KEY = "__attrs.json"


def unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(f"tessera.h5 does not support {what}; see the tessera.h5 "
                               "module docs for what the facade covers")


def join_path(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


class AttributeManager(MutableMapping[str, Any]):
    """``obj.attrs``: a mapping stored as JSON beside the node (numbers keep their dtype).

    >>> from tessera.integrations.h5 import File
    >>> with File("memory://doc-h5-attrs/f.h5", "w") as f:
    ...     f.attrs["units"] = "m/s"
    ...     f.attrs["units"], list(f.attrs)
    ('m/s', ['units'])
    """

    def __init__(self, store: Store, path: str, writable: bool) -> None:
        self._store, self._key, self._writable = store, join_path(path, ATTRS_KEY), writable

    def _load(self) -> dict[str, Any]:
        try:
            doc = json.loads(bytes(self._store.get(self._key)))
        except ObjectNotFoundError:
            return {}
        return dict(doc)

    def _save(self, doc: dict[str, Any]) -> None:
        if not self._writable:
            raise ReadOnlyError(f"cannot change attributes: {self._store.url} is open "
                                "read-only (mode 'r')")
        self._store.put(self._key, json.dumps(doc).encode())

    def __getitem__(self, name: str) -> Any:
        name = attr_name(name)
        doc = self._load()
        if name not in doc:
            raise NameNotFoundError(f"Can't open attribute (attribute {name!r} doesn't exist)")
        return _decode_attr(doc[name])

    def __setitem__(self, name: str, value: Any) -> None:
        name = attr_name(name)
        doc = self._load()
        doc[name] = _encode_attr(value, name)
        self._save(doc)

    def __delitem__(self, name: str) -> None:
        name = attr_name(name)
        doc = self._load()
        if name not in doc:
            raise NameNotFoundError(f"Can't delete attribute (attribute {name!r} doesn't exist)")
        del doc[name]
        self._save(doc)

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def create(self, name: str, data: Any, shape: Any = None, dtype: Any = None) -> None:
        """Set ``name`` to ``data`` converted to ``dtype`` and reshaped to ``shape``, as
        h5py's ``attrs.create`` (a ``shape`` of another size raises ``ValueError``)."""
        if shape is None and dtype is None:
            self[name] = data
            return
        value = np.asarray(data, dtype=dtype)
        if shape is not None:
            shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
            if int(np.prod(shape)) != value.size:
                raise InvalidArgumentError(f"attribute {name!r}: Shape of new attribute "
                                           f"{shape} conflicts with shape of data "
                                           f"{value.shape}")
            value = value.reshape(shape)
        self[name] = value[()] if value.ndim == 0 else value

    def modify(self, name: str, value: Any) -> None:
        """Set ``name`` to ``value``, keeping the existing attribute's dtype (h5py's
        ``attrs.modify``); a new name is created as :meth:`create` would."""
        name = attr_name(name)
        if name not in self:
            self[name] = value
            return
        old = np.asarray(self[name])
        if old.dtype.kind in "biufc":
            self.create(name, value, dtype=old.dtype)
        else:
            self[name] = value

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"<Attributes of {self._key.rsplit('/', 1)[0] or '/'}: {sorted(self._load())}>"


class DatasetAttributes(AttributeManager):
    """A dataset's ``attrs``: the array's own metadata (:attr:`tessera.Array.metadata`), so
    time travel, concurrent writers and consolidation treat them as the array's. Strings
    are stored as themselves, numbers and arrays with their dtype (``{"dtype", "shape",
    "data"}``); keys set through ``arr.metadata`` read back as their JSON values. Attributes
    an earlier version kept in the dataset's ``__attrs.json`` still read (the metadata wins
    on a name in both), and move to the metadata when set or deleted."""

    def __init__(self, array: Array, legacy: AttributeManager) -> None:
        self._array, self._legacy = array, legacy
        self._key = array.uri

    def _load(self) -> dict[str, Any]:
        return {**self._legacy._load(), **self._array.metadata.to_dict()}

    def __setitem__(self, name: str, value: Any) -> None:
        if self._array.mode != "w":
            raise ReadOnlyError(f"cannot change attributes: {self._array.uri} is open "
                                "read-only (mode 'r')")
        name = attr_name(name)
        encoded = _encode_attr(value, name)
        self._array.metadata[name] = encoded.get("str", encoded)
        if name in self._legacy._load():
            del self._legacy[name]

    def __delitem__(self, name: str) -> None:
        name = attr_name(name)
        if name not in self._load():
            raise NameNotFoundError(f"Can't delete attribute (attribute {name!r} doesn't exist)")
        if name in self._array.metadata:
            del self._array.metadata[name]
        if name in self._legacy._load():
            del self._legacy[name]

    def __repr__(self) -> str:
        return f"<Attributes of {self._array.uri}: {sorted(self._load())}>"


def attr_name(name: Any) -> str:
    """An attribute's name as h5py takes it: text, or bytes as UTF-8."""
    if isinstance(name, bytes):
        try:
            return name.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgumentError(f"attribute name {name!r} is not UTF-8") from None
    if not isinstance(name, str):
        raise InvalidTypeError(f"an attribute name is a str or bytes, got {name!r:.60}")
    return name


def _encode_attr(value: Any, name: str) -> dict[str, Any]:
    if isinstance(value, bytes) and not isinstance(value, np.bytes_):
        # h5py stores a bytes value as a variable-length string and reads it back as str
        if b"\x00" in value:
            raise InvalidArgumentError(f"attribute {name!r}: strings do not support embedded "
                                       "NULs (h5py: VLEN strings do not support embedded "
                                       "NULLs)")
        try:
            return {"str": value.decode("utf-8")}
        except UnicodeDecodeError:
            value = np.bytes_(value)
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, np.ndarray) and value.dtype.kind == "U":
        raise InvalidTypeError(f"attribute {name!r}: a numpy array of dtype {value.dtype} has "
                               "no HDF5 type, as in h5py; give a list of str (stored as text) "
                               "or encode it to bytes (dtype 'S')")
    arr = np.asarray(value)
    if arr.dtype.kind == "S":  # fixed-length bytes keep their dtype, as in HDF5
        return {"bytes": [base64.b64encode(v).decode() for v in arr.ravel().tolist()],
                "itemsize": arr.dtype.itemsize, "shape": list(arr.shape)}
    if arr.dtype.kind in "US" or (arr.dtype.kind == "O" and all(
            isinstance(v, str) for v in arr.ravel())):
        return {"strs": [str(v) for v in arr.ravel()], "shape": list(arr.shape)}
    if arr.dtype.kind not in "biuf":
        raise unsupported(f"attribute {name!r} of dtype {arr.dtype} (attributes are numbers, "
                           "strings or arrays of them)")
    return {"dtype": arr.dtype.str, "shape": list(arr.shape), "data": arr.ravel().tolist()}


def _decode_attr(doc: Any) -> Any:
    if not isinstance(doc, dict) or not ({"str"} <= set(doc) or {"strs", "shape"} <= set(doc)
                                          or {"bytes", "itemsize", "shape"} <= set(doc)
                                          or {"dtype", "shape", "data"} <= set(doc)):
        return doc  # a plain JSON value (a string, or set through arr.metadata)
    if "str" in doc:
        return doc["str"]
    if "bytes" in doc:
        raw = np.array([base64.b64decode(v) for v in doc["bytes"]],
                       dtype=f"S{max(1, int(doc['itemsize']))}").reshape(doc["shape"])
        return raw[()] if raw.ndim == 0 else raw
    if "strs" in doc:
        return np.array(doc["strs"], dtype=object).reshape(doc["shape"])
    arr = np.array(doc["data"], dtype=np.dtype(doc["dtype"])).reshape(doc["shape"])
    return arr[()] if arr.ndim == 0 else arr
