"""Checks of a fragment's bookkeeping (``__fragments/<id>/__meta.json``) before it is used.

Two checks, both raising :class:`~tessera.errors.CorruptDataError` naming the array and the
fragment:

- :func:`check_document`: the parsed JSON has the shape the format writes (an object with
  every field of the right type; lists of tile offsets, sizes and checksums of one length),
  so a damaged or hand-edited object never surfaces as an ``AttributeError`` or
  ``KeyError`` deep in a read;
- :func:`check_against_schema`: the fragment fits the array's schema (its dimensions, and for
  dense fragments the tile box its subarray spans under the schema's tile extents, with one
  stored tile per space tile), so a schema changed behind the fragments' back is named as
  such instead of failing a tile lookup.

>>> check_document([], "array memory://x, fragment f1")
Traceback (most recent call last):
...
tessera.errors.CorruptDataError: array memory://x, fragment f1: unreadable fragment ... a list, ...
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from tessera.array.lazy_attrs import LazyAttrs
from tessera.errors import CorruptDataError
from tessera.format.checksum import check_algorithm
from tessera.format.layout import Box, tile_range
from tessera.format.schema import ArraySchema


class _Tiles(Protocol):
    @property
    def sizes(self) -> np.ndarray: ...


class Fragment(Protocol):
    """What :func:`check_against_schema` reads of a fragment's bookkeeping
    (:class:`~tessera.array.fragment.FragmentMeta` has it)."""

    @property
    def name(self) -> str: ...
    @property
    def subarray(self) -> Box: ...
    @property
    def tile_lo(self) -> np.ndarray: ...
    @property
    def tile_hi(self) -> np.ndarray: ...
    @property
    def mbrs(self) -> np.ndarray | None: ...
    @property
    def attrs(self) -> Mapping[str, _Tiles]: ...
    @property
    def is_dense(self) -> bool: ...


#: What a fragment's ``kind`` may be.
KINDS = ("dense", "sparse", "delete", "consolidated")

_TOP: dict[str, type] = {"format": str, "version": int, "name": str, "timestamp": int,
                         "kind": str, "subarray": list, "tile_lo": list, "tile_hi": list,
                         "cell_count": int, "attrs": dict}
_SPARSE: dict[str, type] = {"coords": dict, "mbrs": list, "bounds": list, "tile_cells": list}
_TILES: dict[str, type] = {"key": str}

#: The per-tile columns of an attribute's bookkeeping and their stored types: since format
#: 7 base64 of little-endian values (a JSON list of numbers before; still read).
COLUMNS: dict[str, str] = {"offsets": "<i8", "sizes": "<i8", "crc32": "<u4"}


def tile_column(value: Any, name: str, where: str) -> np.ndarray:
    """One per-tile column (``offsets``, ``sizes`` or ``crc32``) of an attribute's
    bookkeeping as integers: from base64 of little-endian values, or from a JSON list of
    integers (older fragments); ``ValueError`` naming ``where`` for anything else.

    >>> tile_column("AQAAAAAAAAACAAAAAAAAAA==", "sizes", "attrs['v']").tolist()
    [1, 2]
    >>> tile_column([1, 2], "sizes", "attrs['v']").tolist()
    [1, 2]
    """
    dtype = np.dtype(COLUMNS[name])
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except binascii.Error as err:
            raise ValueError(f"{where}.{name} is not base64: {err}") from None
        size = dtype.itemsize
        if len(raw) % size:
            raise ValueError(f"{where}.{name} holds {len(raw)} bytes, not a whole number of "
                             f"{size}-byte values")
        # A little-endian signed value is negative when the top bit of its last byte is set
        # (checked on the bytes: a fragment has many small columns, and a numpy call on
        # one costs microseconds).
        if dtype.kind == "i" and raw and max(raw[size - 1::size]) >= 0x80:
            raise ValueError(f"{where}.{name} holds a negative number")
        out = np.frombuffer(raw, dtype=dtype)  # read-only: bookkeeping never changes
        return out if dtype.isnative else out.astype(dtype.newbyteorder("="))
    if isinstance(value, list):
        _ints(value, f"{where}.{name}")
        out = np.asarray(value, dtype=np.int64)
        if name == "crc32" and len(out) and (out.min() < 0 or out.max() >= 1 << 32):
            raise ValueError(f"{where}.crc32 holds a number outside 0..2**32-1")
        out = out.astype(dtype.newbyteorder("="))
        if name != "crc32" and len(out) and out.min() < 0:
            raise ValueError(f"{where}.{name} holds a negative number")
        return out
    raise ValueError(f"{where}: field {name!r} is a {_kind(value)}, not a list or a base64 "
                     "string")


def column_length(value: Any, name: str, where: str) -> int:
    """How many values a per-tile column holds, without decoding a base64 one (its bytes
    are checked where it is decoded, :func:`tile_column`)."""
    if isinstance(value, str):
        pad = len(value) - len(value.rstrip("="))
        return (len(value) // 4 * 3 - pad) // np.dtype(COLUMNS[name]).itemsize
    return len(tile_column(value, name, where))


def _kind(value: Any) -> str:
    return "null" if value is None else {dict: "JSON object", list: "list", str: "string",
                                         bool: "boolean", int: "integer",
                                         float: "number"}.get(type(value), type(value).__name__)


def _fields(doc: Any, spec: dict[str, type], where: str) -> None:
    if not isinstance(doc, dict):
        raise ValueError(f"{where} is a {_kind(doc)}, not a JSON object")
    for key, want in spec.items():
        if key not in doc:
            raise ValueError(f"{where} has no field {key!r}")
        value = doc[key]
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise ValueError(f"{where}: field {key!r} is a {_kind(value)}, not a "
                             f"{_kind(want())}")


def _ints(values: list[Any], where: str, nonnegative: bool = False) -> None:
    """Raise unless ``values`` are integers (and ``>= 0``): one numpy pass, not a loop (a
    fragment of many tiles lists thousands)."""
    arr = np.asarray(values)
    if arr.size and (arr.dtype.kind not in "iu" or arr.ndim != 1):
        raise ValueError(f"{where} must hold integers only")
    if nonnegative and arr.size and arr.min() < 0:
        raise ValueError(f"{where} holds a negative number")


def _numbers(values: list[Any], where: str) -> None:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.dtype.kind not in "iuf" or (arr.dtype.kind == "f"
                                                        and np.isnan(arr).any()):
        raise ValueError(f"{where} must hold numbers only (no NaN)")


def _tiles(doc: Any, where: str) -> None:
    _fields(doc, _TILES, where)
    if not (doc.get("codec") is None or isinstance(doc.get("codec"), str)):
        raise ValueError(f"{where}: field 'codec' must be a string or null")
    for k in COLUMNS:
        if k not in doc:
            raise ValueError(f"{where} has no field {k!r}")
    offsets, sizes, crcs = (column_length(doc[k], k, where) for k in COLUMNS)
    # an attribute without tiles is written with offsets [0] by older versions: accepted
    if crcs != sizes or not (offsets == sizes or (sizes == 0 and offsets <= 1)):
        raise ValueError(f"{where}: offsets, sizes and crc32 have different lengths "
                         f"({offsets}, {sizes}, {crcs})")
    if "blocks" in doc and not isinstance(doc["blocks"], dict):
        raise ValueError(f"{where}: field 'blocks' must be a JSON object")
    check_algorithm(doc.get("checksum", "crc32"), where)  # refused at open, read or not


def check_document(doc: Any, where: str) -> None:
    """Raise :class:`CorruptDataError` (``where: unreadable fragment bookkeeping: ...``)
    unless ``doc`` has the shape of a fragment's bookkeeping document."""
    try:
        _fields(doc, _TOP, "the document")
        if doc["kind"] not in KINDS:
            raise ValueError(f"kind {doc['kind']!r} is none of {', '.join(KINDS)}")
        sub = doc["subarray"]
        if len(sub) != 2 or not all(isinstance(s, list) for s in sub) or \
                len(sub[0]) != len(sub[1]):  # (both empty for a 0-d array)
            raise ValueError("subarray must be two lists (lo, hi) of one number per dimension")
        for s in sub:
            _numbers(s, "subarray")
        ndim = len(sub[0])
        for k in ("tile_lo", "tile_hi"):
            _ints(doc[k], k)
            if len(doc[k]) not in (0, ndim):
                raise ValueError(f"{k} has {len(doc[k])} entries for {ndim} dimensions")
        if doc["cell_count"] < 0:
            raise ValueError("cell_count is negative")
        for name, tiles in doc["attrs"].items():
            _tiles(tiles, f"attrs[{name!r}]")
        if not isinstance(doc.get("replaces", []), list) or \
                not all(isinstance(r, str) for r in doc.get("replaces", [])):
            raise ValueError("replaces must be a list of fragment names")
        if "covers" in doc and (not isinstance(doc["covers"], list) or
                                not all(isinstance(r, str) for r in doc["covers"])):
            raise ValueError("covers must be a list of fragment names")
        if "coords" in doc:
            _fields(doc, _SPARSE, "the document")
            _tiles(doc["coords"], "coords")
            n = column_length(doc["coords"]["sizes"], "sizes", "coords")
            for k in ("mbrs", "bounds"):
                arr = np.asarray(doc[k], dtype=object)
                if arr.shape != (n, 2, ndim) and not (n == 0 and arr.size == 0):
                    raise ValueError(f"{k} must be {n} x 2 x {ndim} numbers")
            if len(doc["tile_cells"]) != n:
                raise ValueError(f"tile_cells has {len(doc['tile_cells'])} entries for {n} "
                                 "tiles")
            _ints(doc["tile_cells"], "tile_cells")
    except ValueError as err:
        raise CorruptDataError(f"{where}: unreadable fragment bookkeeping: {err}") from None


def check_against_schema(meta: Fragment, schema: ArraySchema, array_url: str) -> None:
    """Raise :class:`CorruptDataError` unless fragment ``meta`` fits ``schema``: as many
    dimensions, and for a dense fragment the tile box of its subarray under the schema's
    tile extents, one stored tile per space tile for every attribute."""
    where = f"array {array_url}, fragment {meta.name}"
    ndim = len(meta.subarray[0])
    if ndim != schema.ndim:
        raise CorruptDataError(f"{where}: the fragment has {ndim} dimensions, the array's "
                               f"schema {schema.ndim}; the schema was changed after the "
                               "fragment was written")
    if meta.mbrs is not None and len(meta.mbrs) and meta.mbrs.shape[-1] != schema.ndim:
        raise CorruptDataError(f"{where}: its tiles' bounding boxes have "
                               f"{meta.mbrs.shape[-1]} dimensions, the schema {schema.ndim}")
    if not meta.is_dense:
        return
    box = (tuple(int(v) for v in meta.subarray[0]), tuple(int(v) for v in meta.subarray[1]))
    tlo, thi = tile_range(schema, box)
    if not (np.array_equal(tlo, meta.tile_lo) and np.array_equal(thi, meta.tile_hi)):
        raise CorruptDataError(
            f"{where}: it spans tiles {tuple(meta.tile_lo.tolist())}.."
            f"{tuple(meta.tile_hi.tolist())}, but under the schema's tile extents "
            f"{schema.tile_shape} its subarray spans {tuple(tlo.tolist())}.."
            f"{tuple(thi.tolist())}: the schema's tiling was changed after the fragment was "
            "written; restore the schema object (__schema.json)")
    count = math.prod(int(h) - int(lo) + 1 for lo, h in zip(tlo, thi, strict=True))
    attrs = meta.attrs
    for name in attrs:  # counted from the documents: a tile table is parsed when read
        stored = (column_length(attrs.document(name)["sizes"], "sizes", where)
                  if isinstance(attrs, LazyAttrs) else len(attrs[name].sizes))
        if stored != count:
            raise CorruptDataError(f"{where}, attribute {name!r}: {stored} tiles "
                                   f"stored for the {count} space tiles of its subarray")
