"""The pushdown wire's framing, version 1, shared by every handler of ``tessera serve`` and
by their clients; nothing in it unpickles or evaluates. A request is one JSON object
``{"protocol": 1, <items>: [ITEM, ...]}`` (:func:`load_request` checks the body's size, its
JSON, the version and the number of items against :class:`Limits`); what each item means is
the handler's (the read items: :mod:`tessera.pushdown.read_items`). The checks items are
built from (:func:`json_object`, :func:`confined`, :func:`check_dtype`, ...) raise
:class:`~tessera.errors.ProtocolError` (400), ``ForbiddenKeyError`` (403) or ``LimitError``
(413) naming the field.

**Response** (``Content-Type: application/x-tessera-pushdown``)::

    b"TSPD" | uint32 LE protocol version | uint32 LE header length | header JSON | buffers

The header is ``{"protocol": 1, "server_s": <seconds the server worked>, "results": [...]}``
with one entry per item, in order: ``{"ok": true, "buffers": [BUF, ...]}`` or
``{"ok": false, "status": 404, "error": "message"}`` (one damaged or missing tile does not
fail the batch). ``BUF = {"name", "dtype", "shape", "offset", "nbytes"}``: a raw
little-endian buffer at ``offset`` bytes after the header.

>>> chunks = encode_response([{"cells": np.arange(3, dtype="<i4")}, ItemError(404, "gone")],
...                          server_s=0.5)
>>> got = decode_response(b"".join(chunks), expected=2)
>>> got.results[0]["cells"].tolist(), got.results[1], got.server_s
([0, 1, 2], ItemError(status=404, error='gone'), 0.5)
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import struct
from typing import Any, TypeGuard

import numpy as np

from tessera.config import ServerConfig
from tessera.errors import ForbiddenKeyError as ForbiddenKeyError  # re-exported: the
from tessera.errors import InvalidKeyError  # wire's errors live in errors.py
from tessera.errors import LimitError as LimitError
from tessera.errors import ProtocolError as ProtocolError
from tessera.storage.keys import validate_key

PROTOCOL_VERSION = 1
MAGIC = b"TSPD"
RESPONSE_TYPE = "application/x-tessera-pushdown"
_PREFIX = struct.Struct("<4sII")
_DTYPE = re.compile(r"^[<|][biuf][1248]$|^<c(8|16)$")
_UNSAFE_KEY = re.compile(r"[%:?#]")
MAX_NDIM = 32


_SERVER_DEFAULTS = ServerConfig()


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may ask for.

    Attributes:
        max_body_bytes: size of the request body.
        max_items: tile and cell items per request.
        max_output_bytes: bytes of selected cells per request (sum over its tile items).
        max_tile_bytes: stored or decoded size of one tile.
    """

    max_body_bytes: int = _SERVER_DEFAULTS.max_body_bytes
    max_items: int = _SERVER_DEFAULTS.max_items
    max_output_bytes: int = _SERVER_DEFAULTS.max_output_bytes
    max_tile_bytes: int = _SERVER_DEFAULTS.max_tile_bytes

    @classmethod
    def of(cls, config: ServerConfig) -> Limits:
        """The limits a server with ``config`` enforces (the defaults are
        :class:`~tessera.config.ServerConfig`'s, written there only).

        >>> Limits.of(ServerConfig(max_items=8)).max_items, Limits().max_items
        (8, 256)
        """
        return cls(config.max_body_bytes, config.max_items, config.max_output_bytes,
                   config.max_tile_bytes)


def load_request(body: bytes, limits: Limits, field: str) -> list[Any]:
    """The items of a request body (its list ``field``), once the body's size, its JSON,
    its protocol version and its number of items are checked; raises
    :class:`ProtocolError` (400) or :class:`LimitError` (413) naming what is wrong.

    >>> load_request(b'{"protocol": 1, "reads": [{"kind": "tile"}]}', Limits(), "reads")
    [{'kind': 'tile'}]
    """
    doc = load_document(body, limits)
    items = doc.get(field)
    if not isinstance(items, list) or not items:
        raise ProtocolError(f"{field!r} must be a non-empty list")
    if len(items) > limits.max_items:
        raise LimitError(f"{len(items)} {field} in one request; the limit is "
                         f"{limits.max_items}")
    return items


def load_document(body: bytes, limits: Limits) -> dict[str, Any]:
    """A request body's JSON object once its size, its JSON (no NaN or Infinity) and its
    protocol version are checked; raises :class:`ProtocolError` or :class:`LimitError`."""
    if len(body) > limits.max_body_bytes:
        raise LimitError(f"request body of {len(body)} bytes exceeds the limit of "
                         f"{limits.max_body_bytes}")
    try:
        doc = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError) as err:
        raise ProtocolError(f"request body is not valid JSON: {err}") from None
    if not isinstance(doc, dict):
        raise ProtocolError("request body must be a JSON object")
    if doc.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(f"unsupported protocol {doc.get('protocol')!r}; this server "
                            f"speaks {PROTOCOL_VERSION}")
    return doc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def json_object(v: Any, where: str) -> dict[str, Any]:
    """``v`` if it is a JSON object, else a :class:`ProtocolError` naming ``where``."""
    if not isinstance(v, dict):
        raise ProtocolError(f"{where} must be an object")
    return v


def is_int(v: Any) -> TypeGuard[int]:
    """True for a JSON integer (not a boolean)."""
    return isinstance(v, int) and not isinstance(v, bool)


def numbers(v: Any, n: int | None, where: str) -> tuple[float, ...]:
    """``v`` as a tuple of numbers (``n`` of them unless ``None``; at most 2**20)."""
    if (not isinstance(v, list) or (n is not None and len(v) != n)
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
        raise ProtocolError(f"{where} must be a list of {n if n is not None else 'some'} "
                            "numbers")
    if len(v) > 1 << 20:
        raise LimitError(f"{where} has {len(v)} entries; the limit is {1 << 20}")
    return tuple(v)


def array_path(raw: dict[str, Any], where: str) -> str:
    """The item's ``array``: a path below the served root (checked by :func:`confined`)."""
    array = raw.get("array")
    if not isinstance(array, str):
        raise ProtocolError(f"{where}.array must be a string (the array's path below the "
                            "served root, '' for the root itself)")
    if array:
        confined(array, f"{where}.array")
    return array


def confined(key: str, where: str) -> str:
    """``key`` if it is a plain path below the served root, else a
    :class:`ForbiddenKeyError` (403) naming ``where``."""
    if _UNSAFE_KEY.search(key):
        raise ForbiddenKeyError(f"{where}: {key!r} contains '%', ':', '?' or '#'; keys are "
                                "plain paths below the served root")
    try:
        return validate_key(key)
    except InvalidKeyError as err:
        raise ForbiddenKeyError(f"{where}: {err}") from None


def check_dtype(v: Any, where: str) -> str:
    """``v`` if it names a little-endian numeric dtype (``'<i4'``, ``'|u1'``, ...)."""
    if not isinstance(v, str) or not _DTYPE.match(v):
        raise ProtocolError(f"{where} must be a little-endian numeric dtype such as '<i4', "
                            f"'<f8' or '|u1', got {v!r}")
    return v


def shape_list(v: Any, where: str, allow_empty: bool) -> tuple[int, ...]:
    """``v`` as a shape: up to ``MAX_NDIM`` positive integers."""
    if (not isinstance(v, list) or len(v) > MAX_NDIM or (not v and not allow_empty)
            or not all(is_int(x) and 1 <= x <= 1 << 31 for x in v)):
        raise ProtocolError(f"{where} must be a list of up to {MAX_NDIM} positive integers")
    return tuple(v)


# -- responses -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ItemError:
    """One item the server could not answer (the others in the batch may be fine)."""

    status: int
    error: str


ItemResult = dict[str, np.ndarray] | ItemError


def encode_response(results: list[ItemResult], server_s: float,
                    extra: dict[str, Any] | None = None) -> list[bytes | memoryview]:
    """The response body for ``results`` as a list of chunks (header first, then buffers,
    no copy of the buffers); ``extra`` adds keys to the header (a handler's own, e.g. the
    infer handler's ``phases``; readers ignore keys they do not know)."""
    entries: list[dict[str, Any]] = []
    chunks: list[bytes | memoryview] = []
    offset = 0
    for res in results:
        if isinstance(res, ItemError):
            entries.append({"ok": False, "status": res.status, "error": res.error})
            continue
        bufs = []
        for name, arr in res.items():
            a = np.ascontiguousarray(arr)
            if a.dtype.byteorder == ">":
                a = a.astype(a.dtype.newbyteorder("<"))
            view = a.data.cast("B") if a.nbytes else memoryview(b"")
            bufs.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape),
                         "offset": offset, "nbytes": a.nbytes})
            chunks.append(view)
            offset += a.nbytes
        entries.append({"ok": True, "buffers": bufs})
    header = json.dumps({**(extra or {}), "protocol": PROTOCOL_VERSION, "server_s": server_s,
                         "results": entries}, separators=(",", ":")).encode()
    return [_PREFIX.pack(MAGIC, PROTOCOL_VERSION, len(header)), header, *chunks]


@dataclasses.dataclass(frozen=True)
class ReadResponse:
    """A decoded response: one result per item, the server's working seconds, and the
    header's other keys (``extra``)."""

    results: list[ItemResult]
    server_s: float
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


def decode_response(body: bytes | memoryview, expected: int) -> ReadResponse:
    """Decode a response body carrying ``expected`` results; arrays are zero-copy views of
    ``body``. Raises :class:`ProtocolError` when anything does not add up."""
    view = memoryview(body)
    if len(view) < _PREFIX.size:
        raise ProtocolError("pushdown response is shorter than its prefix")
    magic, version, hlen = _PREFIX.unpack_from(view)
    if magic != MAGIC or version != PROTOCOL_VERSION:
        raise ProtocolError(f"not a pushdown response of protocol {PROTOCOL_VERSION} "
                            f"(magic {magic!r}, version {version})")
    start = _PREFIX.size + hlen
    if start > len(view):
        raise ProtocolError("pushdown response header is truncated")
    try:
        header = json.loads(bytes(view[_PREFIX.size:start]))
        entries = header["results"]
        server_s = float(header.get("server_s", 0.0))
        if not isinstance(entries, list) or len(entries) != expected:
            raise ValueError(f"{expected} results expected")
        results: list[ItemResult] = []
        data = view[start:]
        for e in entries:
            if not e["ok"]:
                results.append(ItemError(int(e["status"]), str(e["error"])))
                continue
            out = {}
            for b in e["buffers"]:
                dtype = np.dtype(check_dtype(b["dtype"], "buffer dtype"))
                shape = tuple(int(s) for s in b["shape"])
                off, n = int(b["offset"]), int(b["nbytes"])
                if off < 0 or off + n > len(data) or n != math.prod(shape) * dtype.itemsize:
                    raise ValueError(f"buffer {b['name']!r} does not fit the body")
                out[str(b["name"])] = np.frombuffer(data[off:off + n], dtype).reshape(shape)
            results.append(out)
    except (ValueError, KeyError, TypeError) as err:
        raise ProtocolError(f"malformed pushdown response: {err}") from None
    extra = {k: v for k, v in header.items() if k not in ("protocol", "server_s", "results")}
    return ReadResponse(results, server_s, extra)
