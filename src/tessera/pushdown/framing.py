"""The pushdown wire's framing, version 1, shared by every handler of ``tessera serve`` and
by their clients; nothing in it unpickles or evaluates. A request is one JSON object
``{"protocol": 1, <items>: [ITEM, ...]}`` (:func:`load_document` checks the body's size, its
JSON and the version, :func:`request_items` the number of items against :class:`Limits`);
what each item means is
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

**Streamed response** (same content type; a request asks for it with ``"stream": true``, and
a server that does not stream answers with the response above, which a client tells apart
by its magic)::

    b"TSPS" | uint32 LE protocol version | RECORD ... | END

    RECORD = uint32 LE item index | uint32 LE header length | uint64 LE data length
             | header JSON | data
    END    = uint32 LE 0xFFFFFFFF | uint32 LE header length | uint64 LE 0 | header JSON

Each item's record is sent as soon as the item is answered, in the order answers complete;
its header is the item's entry as above (``offset`` counted from the start of the record's
data). ``END``'s header is ``{"server_s": <seconds>, "items": <n>}`` plus the handler's own
keys, as the whole response's header has them. Every item has exactly
one record before ``END``; a stream that stops early (a server that timed out or failed
mid-answer) leaves the items not yet sent to the client to fetch itself:
:class:`StreamDecoder` names them ``ItemError(502, ...)``.

>>> body = b"".join([*stream_prefix(),
...                  *encode_record(1, ItemError(404, "gone")),
...                  *encode_record(0, {"cells": np.arange(3, dtype="<i4")}),
...                  *stream_end(0.25, 2)])
>>> dec = StreamDecoder(expected=2)
>>> [(i, type(r).__name__) for i, r in dec.feed(body[:40]) + dec.feed(body[40:])]
[(1, 'ItemError'), (0, 'dict')]
>>> done = dec.finish()
>>> done.results[0]["cells"].tolist(), done.server_s
([0, 1, 2], 0.25)
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


def request_items(doc: dict[str, Any], limits: Limits, field: str) -> list[Any]:
    """The items of a checked request document (:func:`load_document`): its list ``field``,
    non-empty and within ``limits.max_items``; raises :class:`ProtocolError` (400) or
    :class:`LimitError` (413) naming what is wrong.

    >>> body = b'{"protocol": 1, "reads": [{"kind": "tile"}]}'
    >>> request_items(load_document(body, Limits()), Limits(), "reads")
    [{'kind': 'tile'}]
    """
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
        entry, views, offset = _entry(res, offset)
        entries.append(entry)
        chunks += views
    header = json.dumps({**(extra or {}), "protocol": PROTOCOL_VERSION, "server_s": server_s,
                         "results": entries}, separators=(",", ":")).encode()
    return [_PREFIX.pack(MAGIC, PROTOCOL_VERSION, len(header)), header, *chunks]


def _entry(res: ItemResult, offset: int) -> tuple[dict[str, Any], list[memoryview], int]:
    """One result's header entry (buffers placed from ``offset`` on), its buffers' views (no
    copy) and the offset after them."""
    if isinstance(res, ItemError):
        return {"ok": False, "status": res.status, "error": res.error}, [], offset
    bufs, views = [], []
    for name, arr in res.items():
        a = np.ascontiguousarray(arr)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        views.append(a.data.cast("B") if a.nbytes else memoryview(b""))
        bufs.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape),
                     "offset": offset, "nbytes": a.nbytes})
        offset += a.nbytes
    return {"ok": True, "buffers": bufs}, views, offset


def _result(e: Any, data: memoryview) -> ItemResult:
    """The result an entry describes, its arrays zero-copy views of ``data``; raises
    ``ValueError``, ``KeyError`` or ``TypeError`` when it does not add up."""
    if not e["ok"]:
        return ItemError(int(e["status"]), str(e["error"]))
    out = {}
    for b in e["buffers"]:
        dtype = np.dtype(check_dtype(b["dtype"], "buffer dtype"))
        shape = tuple(int(s) for s in b["shape"])
        off, n = int(b["offset"]), int(b["nbytes"])
        if off < 0 or off + n > len(data) or n != math.prod(shape) * dtype.itemsize:
            raise ValueError(f"buffer {b['name']!r} does not fit the body")
        out[str(b["name"])] = np.frombuffer(data[off:off + n], dtype).reshape(shape)
    return out


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
        data = view[start:]
        results = [_result(e, data) for e in entries]
    except (ValueError, KeyError, TypeError) as err:
        raise ProtocolError(f"malformed pushdown response: {err}") from None
    extra = {k: v for k, v in header.items() if k not in ("protocol", "server_s", "results")}
    return ReadResponse(results, server_s, extra)


# -- streamed responses ----------------------------------------------------------------------

STREAM_MAGIC = b"TSPS"
_STREAM_PREFIX = struct.Struct("<4sI")
_RECORD = struct.Struct("<IIQ")
END_INDEX = 0xFFFFFFFF


def is_streamed(prefix: bytes | bytearray | memoryview) -> bool:
    """True if a response body starting with ``prefix`` (at least 4 bytes) is streamed."""
    return bytes(prefix[:4]) == STREAM_MAGIC


def stream_prefix() -> list[bytes]:
    """The first bytes of a streamed response."""
    return [_STREAM_PREFIX.pack(STREAM_MAGIC, PROTOCOL_VERSION)]


def encode_record(index: int, result: ItemResult) -> list[bytes | memoryview]:
    """One item's record of a streamed response (head, then its buffers, not copied)."""
    entry, views, nbytes = _entry(result, 0)
    header = json.dumps(entry, separators=(",", ":")).encode()
    return [_RECORD.pack(index, len(header), nbytes) + header, *views]


def stream_end(server_s: float, items: int, extra: dict[str, Any] | None = None,
               ) -> list[bytes]:
    """The record that closes a streamed response (``extra``: a handler's own header keys,
    as :func:`encode_response`'s)."""
    header = json.dumps({**(extra or {}), "server_s": server_s, "items": items},
                        separators=(",", ":")).encode()
    return [_RECORD.pack(END_INDEX, len(header), 0) + header]


class StreamDecoder:
    """Decodes a streamed response as its bytes arrive (:meth:`feed`); each item's result is
    given out once its record is complete (arrays: views of one buffer per record, filled
    straight from the arriving bytes). :meth:`finish` gives every result in item order.
    Raises :class:`ProtocolError` when the stream does not add up (a wrong prefix, an index
    out of range or repeated, a header that is not an entry, bytes after the end)."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.results: dict[int, ItemResult] = {}
        self.server_s = 0.0
        self.extra: dict[str, Any] = {}
        self.ended = False
        self._head = bytearray()
        self._want = _STREAM_PREFIX.size  # bytes of the head still wanted
        self._stage = "prefix"  # prefix -> record -> header -> data -> record ... -> end
        self._index = 0
        self._hlen = 0
        self._header: Any = None
        self._data: bytearray = bytearray()
        self._filled = 0

    def feed(self, chunk: bytes | memoryview) -> list[tuple[int, ItemResult]]:
        """Take the next bytes of the body; returns the results they completed."""
        view = memoryview(chunk).cast("B")
        done: list[tuple[int, ItemResult]] = []
        while len(view):
            if self.ended:
                raise ProtocolError("streamed pushdown response has bytes after its end")
            if self._stage == "data":
                take = min(len(view), len(self._data) - self._filled)
                self._data[self._filled:self._filled + take] = view[:take]
                self._filled += take
                view = view[take:]
                if self._filled == len(self._data):
                    done.append(self._complete())
                continue
            take = min(len(view), self._want)
            self._head += view[:take]
            self._want -= take
            view = view[take:]
            if not self._want:
                self._advance()
                if self._stage == "data" and not len(self._data):
                    done.append(self._complete())
        return done

    def _advance(self) -> None:
        head = bytes(self._head)
        self._head.clear()
        if self._stage == "prefix":
            magic, version = _STREAM_PREFIX.unpack(head)
            if magic != STREAM_MAGIC or version != PROTOCOL_VERSION:
                raise ProtocolError(f"not a streamed pushdown response of protocol "
                                    f"{PROTOCOL_VERSION} (magic {magic!r}, version {version})")
            self._stage, self._want = "record", _RECORD.size
        elif self._stage == "record":
            self._index, self._hlen, nbytes = _RECORD.unpack(head)
            if self._index != END_INDEX and (self._index >= self.expected
                                             or self._index in self.results):
                raise ProtocolError(f"streamed pushdown response: item {self._index} is out "
                                    f"of range or repeated ({self.expected} items)")
            if self._index == END_INDEX and nbytes:
                raise ProtocolError("streamed pushdown response: its end record has data")
            self._data, self._filled = bytearray(nbytes), 0
            self._stage, self._want = "header", self._hlen
            if not self._hlen:
                raise ProtocolError("streamed pushdown response: a record without header")
        else:  # header
            try:
                self._header = json.loads(head)
            except ValueError as err:
                raise ProtocolError(f"malformed streamed pushdown response: {err}") from None
            if self._index == END_INDEX:
                self._end(self._header)
                return
            self._stage = "data"

    def _complete(self) -> tuple[int, ItemResult]:
        try:
            result = _result(self._header, memoryview(self._data))
        except (ValueError, KeyError, TypeError) as err:
            raise ProtocolError(f"malformed streamed pushdown response: {err}") from None
        self.results[self._index] = result
        self._stage, self._want = "record", _RECORD.size
        return self._index, result

    def _end(self, header: Any) -> None:
        try:
            self.server_s = float(header["server_s"])
            items = int(header["items"])
        except (ValueError, KeyError, TypeError) as err:
            raise ProtocolError(f"malformed end of a streamed pushdown response: {err}") \
                from None
        if items != self.expected or len(self.results) != self.expected:
            raise ProtocolError(f"streamed pushdown response ended with {len(self.results)} "
                                f"of {self.expected} items")
        self.extra = {k: v for k, v in header.items() if k not in ("server_s", "items")}
        self.ended = True

    def finish(self) -> ReadResponse:
        """Every result in item order; an item whose record never came (the stream stopped
        early) is ``ItemError(502, ...)``, for the client to fetch itself."""
        missing = ItemError(502, "the streamed answer stopped before this item")
        return ReadResponse([self.results.get(i, missing) for i in range(self.expected)],
                            self.server_s, self.extra)

