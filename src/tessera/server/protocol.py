"""The pushdown wire format, version 1: what a client sends to ``POST /v1/read`` and what
comes back. Both sides of the wire use this module; nothing in it unpickles or evaluates.

**Request** (``Content-Type: application/json``): one JSON object::

    {"protocol": 1,
     "reads": [ITEM, ...]}

A ``tile`` item asks for cells of one dense tile::

    {"kind": "tile", "array": "arrays/a",            # the array, relative to the served root
     "key": "__fragments/<id>/a.data",               # the data object, relative to the array
     "offset": 0, "length": 4194304,                 # the encoded tile's bytes in that object
     "codec": null | "zstd" | "zstd:5" | ...,        # as in the array schema
     "crc32": 123456,                                # CRC of the stored bytes, of the
     "checksum": "crc32c",                           # optional variant (default "crc32")
     "blocks": BLOCKS,                               # optional: a blocked compressed tile
     "dtype": "<i4", "cell_shape": [], "tile_shape": [1024, 1024],
     "cell_order": "row-major" | "col-major",
     "select": [DIM, ...]}                           # one per dimension, tile-relative

where ``DIM`` is ``[start, stop, step]`` (a slice, ``step >= 1``) or ``{"index": [i, ...]}``
(those positions, in that order, repeats allowed). The answer holds
``tile[np.ix_(dim_0, dim_1, ...)]`` in C order. ``BLOCKS`` (see :mod:`tessera.array.blocks`)
is ``{"block_bytes": 65536, "tile_bytes": <decoded tile bytes>, "sizes": [...],
"crc32": [...]}``: the tile's blocks, each compressed alone; the server then reads and decodes
only the blocks holding the selected cells, each checked against its own CRC (of the piece's
``checksum`` variant, :mod:`tessera.array.checksum`).

A ``cells`` item asks for the cells of one sparse data tile that lie in a box::

    {"kind": "cells", "array": "arrays/s",
     "coords": PIECE, "coords_dtype": "<i8", "ndim": 2,
     "attrs": {"a": PIECE + {"dtype": "<f4", "cell_shape": []}, ...},
     "box": {"lo": [..], "hi": [..], "hi_open": [..], "members": [null | [..], ...]}}

with ``PIECE = {"key", "offset", "length", "codec", "crc32", "checksum"}``. The answer holds the
selected coordinates ``(n, ndim)`` and each attribute's values, in stored order.

**Response** (``Content-Type: application/x-tessera-pushdown``)::

    b"TSPD" | uint32 LE protocol version | uint32 LE header length | header JSON | buffers

The header is ``{"protocol": 1, "server_s": <seconds the server worked>, "results": [...]}``
with one entry per item, in order: ``{"ok": true, "buffers": [BUF, ...]}`` or
``{"ok": false, "status": 404, "error": "message"}`` (one damaged or missing tile does not
fail the batch). ``BUF = {"name", "dtype", "shape", "offset", "nbytes"}``: a raw
little-endian buffer at ``offset`` bytes after the header.

>>> req = TileItem("a", "k", 0, 16, None, 0, "<i4", (), (2, 2), "row-major",
...                (Slice(0, 2, 1), Index((1,))))
>>> parse_read_request(encode_read_request([req]), Limits())[0] == req
True
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import struct
from typing import Any, TypeGuard

import numpy as np

from tessera.array.blocks import TileBlocks, blocks_per_tile
from tessera.array.checksum import CHECKSUMS
from tessera.array.codecs import normalize_codec_spec
from tessera.array.schema import NAME_PATTERN
from tessera.config import ServerConfig
from tessera.errors import ForbiddenKeyError as ForbiddenKeyError  # re-exported: the
from tessera.errors import InvalidKeyError, SchemaError  # protocol's errors live in errors.py
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


@dataclasses.dataclass(frozen=True)
class Slice:
    """Positions ``start, start+step, ... < stop`` of one tile dimension."""

    start: int
    stop: int
    step: int

    def __len__(self) -> int:
        return max(0, -(-(self.stop - self.start) // self.step))

    def as_index(self) -> slice:
        return slice(self.start, self.stop, self.step)

    def to_json(self) -> Any:
        return [self.start, self.stop, self.step]


@dataclasses.dataclass(frozen=True)
class Index:
    """Explicit positions of one tile dimension (any order, repeats allowed)."""

    positions: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.positions)

    def as_index(self) -> np.ndarray:
        return np.asarray(self.positions, dtype=np.int64)

    def to_json(self) -> Any:
        return {"index": list(self.positions)}


DimSelect = Slice | Index


def select_positions(select: DimSelect) -> np.ndarray:
    """The positions a dimension's selection takes, in order, as an array."""
    if isinstance(select, Slice):
        return np.arange(select.start, select.stop, select.step, dtype=np.int64)
    return select.as_index()


def dim_select(positions: np.ndarray) -> DimSelect:
    """The compact form of tile positions: a slice when they step evenly upwards."""
    p = np.asarray(positions, dtype=np.int64)
    if len(p) == 1:
        return Slice(int(p[0]), int(p[0]) + 1, 1)
    if len(p) > 1:
        d = np.diff(p)
        if d[0] >= 1 and bool(np.all(d == d[0])):
            return Slice(int(p[0]), int(p[-1]) + 1, int(d[0]))
    return Index(tuple(int(i) for i in p))


@dataclasses.dataclass(frozen=True)
class PieceRef:
    """A byte range of a stored object holding one encoded tile, and its CRC (``crc32``) of
    the variant ``checksum`` names."""

    key: str
    offset: int
    length: int
    codec: str | None
    crc32: int
    blocks: TileBlocks | None = dataclasses.field(default=None, compare=False)
    checksum: str = "crc32"

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"key": self.key, "offset": self.offset, "length": self.length,
                               "codec": self.codec, "crc32": self.crc32,
                               "checksum": self.checksum}
        if self.blocks is not None:
            doc["blocks"] = {"block_bytes": self.blocks.block_bytes,
                             "tile_bytes": self.blocks.raw_nbytes,
                             "sizes": self.blocks.sizes.tolist(),
                             "crc32": self.blocks.crc32.tolist()}
        return doc


@dataclasses.dataclass(frozen=True)
class TileItem:
    """Cells of one dense tile (see the module docs)."""

    array: str
    key: str
    offset: int
    length: int
    codec: str | None
    crc32: int
    dtype: str
    cell_shape: tuple[int, ...]
    tile_shape: tuple[int, ...]
    cell_order: str
    select: tuple[DimSelect, ...]
    blocks: TileBlocks | None = dataclasses.field(default=None, compare=False)
    checksum: str = "crc32"

    @property
    def piece(self) -> PieceRef:
        return PieceRef(self.key, self.offset, self.length, self.codec, self.crc32, self.blocks,
                        self.checksum)

    @property
    def out_shape(self) -> tuple[int, ...]:
        """Shape of the answer: selected positions per dimension, then the cell shape."""
        return tuple(len(s) for s in self.select) + self.cell_shape

    @property
    def out_bytes(self) -> int:
        return math.prod(self.out_shape) * np.dtype(self.dtype).itemsize

    @property
    def tile_bytes(self) -> int:
        """Decoded size of the whole tile."""
        return (math.prod(self.tile_shape) * math.prod(self.cell_shape)
                * np.dtype(self.dtype).itemsize)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "tile", "array": self.array, **self.piece.to_json(),
                "dtype": self.dtype, "cell_shape": list(self.cell_shape),
                "tile_shape": list(self.tile_shape), "cell_order": self.cell_order,
                "select": [s.to_json() for s in self.select]}


@dataclasses.dataclass(frozen=True)
class CellAttr:
    """One attribute of a sparse data tile: where its values are and their type."""

    piece: PieceRef
    dtype: str
    cell_shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class CellBox:
    """A box in coordinate space (see :class:`~tessera.array.sparse_read.SparseSelection`)."""

    lo: tuple[float, ...]
    hi: tuple[float, ...]
    hi_open: tuple[bool, ...]
    members: tuple[tuple[float, ...] | None, ...]

    def to_json(self) -> dict[str, Any]:
        return {"lo": list(self.lo), "hi": list(self.hi), "hi_open": list(self.hi_open),
                "members": [None if m is None else list(m) for m in self.members]}


@dataclasses.dataclass(frozen=True)
class CellsItem:
    """The cells of one sparse data tile inside a box (see the module docs)."""

    array: str
    coords: PieceRef
    coords_dtype: str
    ndim: int
    attrs: tuple[tuple[str, CellAttr], ...]
    box: CellBox

    def to_json(self) -> dict[str, Any]:
        return {"kind": "cells", "array": self.array, "coords": self.coords.to_json(),
                "coords_dtype": self.coords_dtype, "ndim": self.ndim,
                "attrs": {n: {**a.piece.to_json(), "dtype": a.dtype,
                              "cell_shape": list(a.cell_shape)} for n, a in self.attrs},
                "box": self.box.to_json()}


ReadItem = TileItem | CellsItem


def encode_read_request(items: list[ReadItem]) -> bytes:
    """The JSON body of ``POST /v1/read`` for ``items``."""
    return json.dumps({"protocol": PROTOCOL_VERSION, "reads": [i.to_json() for i in items]},
                      separators=(",", ":"), allow_nan=False).encode()


def parse_read_request(body: bytes, limits: Limits) -> list[ReadItem]:
    """Decode and check a request body; raises :class:`ProtocolError` (400),
    :class:`ForbiddenKeyError` (403) or :class:`LimitError` (413) naming what is wrong."""
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
    reads = doc.get("reads")
    if not isinstance(reads, list) or not reads:
        raise ProtocolError("'reads' must be a non-empty list")
    if len(reads) > limits.max_items:
        raise LimitError(f"{len(reads)} reads in one request; the limit is {limits.max_items}")
    items: list[ReadItem] = []
    out_bytes = 0
    for i, raw in enumerate(reads):
        where = f"reads[{i}]"
        if not isinstance(raw, dict):
            raise ProtocolError(f"{where} must be an object")
        kind = raw.get("kind")
        if kind == "tile":
            tile = _parse_tile(raw, where, limits)
            out_bytes += tile.out_bytes
            items.append(tile)
        elif kind == "cells":
            items.append(_parse_cells(raw, where, limits))
        else:
            raise ProtocolError(f"{where}.kind must be 'tile' or 'cells', got {kind!r}")
    if out_bytes > limits.max_output_bytes:
        raise LimitError(f"the request selects {out_bytes} bytes of cells; the limit is "
                         f"{limits.max_output_bytes} per request: split it")
    return items


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _parse_tile(raw: dict[str, Any], where: str, limits: Limits) -> TileItem:
    piece = _piece(raw, where, limits)
    dtype = _dtype(raw.get("dtype"), f"{where}.dtype")
    cell_shape = _shape(raw.get("cell_shape"), f"{where}.cell_shape", allow_empty=True)
    tile_shape = _shape(raw.get("tile_shape"), f"{where}.tile_shape", allow_empty=False)
    order = raw.get("cell_order")
    if order not in ("row-major", "col-major"):
        raise ProtocolError(f"{where}.cell_order must be 'row-major' or 'col-major'")
    select = raw.get("select")
    if not isinstance(select, list) or len(select) != len(tile_shape):
        raise ProtocolError(f"{where}.select must be a list with one entry per tile "
                            f"dimension ({len(tile_shape)})")
    dims = tuple(_dim(s, n, f"{where}.select[{d}]") for d, (s, n) in
                 enumerate(zip(select, tile_shape, strict=True)))
    item = TileItem(_array(raw, where), piece.key, piece.offset, piece.length, piece.codec,
                    piece.crc32, dtype, cell_shape, tile_shape, order, dims, piece.blocks,
                    piece.checksum)
    if item.tile_bytes > limits.max_tile_bytes:
        raise LimitError(f"{where}: a tile of {item.tile_bytes} bytes exceeds the limit of "
                         f"{limits.max_tile_bytes}")
    if piece.codec is None and piece.length != item.tile_bytes:
        raise ProtocolError(f"{where}: a raw tile of shape {tile_shape} and dtype {dtype} "
                            f"has {item.tile_bytes} bytes, not {piece.length}")
    if piece.blocks is not None and piece.blocks.raw_nbytes != item.tile_bytes:
        raise ProtocolError(f"{where}.blocks.tile_bytes is {piece.blocks.raw_nbytes}, but a "
                            f"tile of shape {tile_shape} and dtype {dtype} has "
                            f"{item.tile_bytes} bytes")
    return item


def _parse_cells(raw: dict[str, Any], where: str, limits: Limits) -> CellsItem:
    array = _array(raw, where)
    coords = _piece(_obj(raw.get("coords"), f"{where}.coords"), f"{where}.coords", limits)
    cdt = raw.get("coords_dtype")
    if cdt not in ("<i8", "<f8"):
        raise ProtocolError(f"{where}.coords_dtype must be '<i8' or '<f8'")
    ndim = raw.get("ndim")
    if not _is_int(ndim) or not 1 <= ndim <= MAX_NDIM:
        raise ProtocolError(f"{where}.ndim must be an integer in [1, {MAX_NDIM}]")
    attrs_raw = _obj(raw.get("attrs"), f"{where}.attrs")
    attrs = []
    for name, spec in attrs_raw.items():
        aw = f"{where}.attrs[{name!r}]"
        if not NAME_PATTERN.match(name):
            raise ProtocolError(f"{aw}: not a valid attribute name")
        spec = _obj(spec, aw)
        attrs.append((name, CellAttr(_piece(spec, aw, limits), _dtype(spec.get("dtype"),
                                                                      f"{aw}.dtype"),
                                     _shape(spec.get("cell_shape"), f"{aw}.cell_shape",
                                            allow_empty=True))))
    box = _obj(raw.get("box"), f"{where}.box")
    lo, hi = (_numbers(box.get(k), ndim, f"{where}.box.{k}") for k in ("lo", "hi"))
    hi_open = box.get("hi_open")
    if (not isinstance(hi_open, list) or len(hi_open) != ndim
            or not all(isinstance(b, bool) for b in hi_open)):
        raise ProtocolError(f"{where}.box.hi_open must be {ndim} booleans")
    members = box.get("members")
    if not isinstance(members, list) or len(members) != ndim:
        raise ProtocolError(f"{where}.box.members must have {ndim} entries (null or a list)")
    mem = tuple(None if m is None else _numbers(m, None, f"{where}.box.members[{d}]")
                for d, m in enumerate(members))
    return CellsItem(array, coords, cdt, ndim, tuple(attrs),
                     CellBox(lo, hi, tuple(hi_open), mem))


def _obj(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ProtocolError(f"{where} must be an object")
    return v


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _numbers(v: Any, n: int | None, where: str) -> tuple[float, ...]:
    if (not isinstance(v, list) or (n is not None and len(v) != n)
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
        raise ProtocolError(f"{where} must be a list of {n if n is not None else 'some'} "
                            "numbers")
    if len(v) > 1 << 20:
        raise LimitError(f"{where} has {len(v)} entries; the limit is {1 << 20}")
    return tuple(v)


def _array(raw: dict[str, Any], where: str) -> str:
    array = raw.get("array")
    if not isinstance(array, str):
        raise ProtocolError(f"{where}.array must be a string (the array's path below the "
                            "served root, '' for the root itself)")
    if array:
        _confined(array, f"{where}.array")
    return array


def _confined(key: str, where: str) -> str:
    if _UNSAFE_KEY.search(key):
        raise ForbiddenKeyError(f"{where}: {key!r} contains '%', ':', '?' or '#'; keys are "
                                "plain paths below the served root")
    try:
        return validate_key(key)
    except InvalidKeyError as err:
        raise ForbiddenKeyError(f"{where}: {err}") from None


def _piece(raw: dict[str, Any], where: str, limits: Limits) -> PieceRef:
    key = raw.get("key")
    if not isinstance(key, str):
        raise ProtocolError(f"{where}.key must be a string")
    _confined(key, f"{where}.key")
    offset, length, crc = raw.get("offset"), raw.get("length"), raw.get("crc32")
    if not _is_int(offset) or offset < 0 or offset >= 1 << 62:
        raise ProtocolError(f"{where}.offset must be an integer >= 0")
    if not _is_int(length) or length < 0:
        raise ProtocolError(f"{where}.length must be an integer >= 0")
    if length > limits.max_tile_bytes:
        raise LimitError(f"{where}: {length} stored bytes exceed the tile limit of "
                         f"{limits.max_tile_bytes}")
    if not _is_int(crc) or not 0 <= crc < 1 << 32:
        raise ProtocolError(f"{where}.crc32 must be an unsigned 32-bit integer")
    algorithm = raw.get("checksum", "crc32")
    if algorithm not in CHECKSUMS:
        raise ProtocolError(f"{where}.checksum must be one of {', '.join(CHECKSUMS)}, not "
                            f"{algorithm!r}")
    codec = raw.get("codec")
    if codec is not None and not isinstance(codec, str):
        raise ProtocolError(f"{where}.codec must be null or a codec name")
    try:
        codec = normalize_codec_spec(codec)
    except SchemaError as err:
        raise ProtocolError(f"{where}.codec: {err}") from None
    blocks = None
    if raw.get("blocks") is not None:
        if codec is None:
            raise ProtocolError(f"{where}.blocks: only compressed tiles are stored in blocks")
        blocks = _blocks(raw["blocks"], length, algorithm, f"{where}.blocks", limits)
    return PieceRef(key, offset, length, codec, crc, blocks, algorithm)


def _blocks(raw: Any, length: int, algorithm: str, where: str, limits: Limits) -> TileBlocks:
    if not isinstance(raw, dict):
        raise ProtocolError(f"{where} must be an object")
    block_bytes, tile_bytes = raw.get("block_bytes"), raw.get("tile_bytes")
    if not _is_int(block_bytes) or block_bytes <= 0:
        raise ProtocolError(f"{where}.block_bytes must be an integer > 0")
    if not _is_int(tile_bytes) or not 0 <= tile_bytes <= limits.max_tile_bytes:
        raise ProtocolError(f"{where}.tile_bytes must be an integer in [0, "
                            f"{limits.max_tile_bytes}]")
    count = blocks_per_tile(tile_bytes, block_bytes)
    values = {}
    for name in ("sizes", "crc32"):
        v = raw.get(name)
        if (not isinstance(v, list) or len(v) != count
                or not all(_is_int(x) and 0 <= x < 1 << 32 for x in v)):
            raise ProtocolError(f"{where}.{name} must be a list of {count} unsigned 32-bit "
                                f"integers (one per block of {block_bytes} of {tile_bytes} "
                                "decoded bytes)")
        values[name] = v
    sizes = np.asarray(values["sizes"], dtype=np.int64)
    if int(sizes.sum()) != length:
        raise ProtocolError(f"{where}.sizes add up to {int(sizes.sum())} bytes, not the "
                            f"tile's {length}")
    return TileBlocks(block_bytes, tile_bytes, sizes,
                      np.asarray(values["crc32"], dtype=np.uint32), algorithm)


def _dtype(v: Any, where: str) -> str:
    if not isinstance(v, str) or not _DTYPE.match(v):
        raise ProtocolError(f"{where} must be a little-endian numeric dtype such as '<i4', "
                            f"'<f8' or '|u1', got {v!r}")
    return v


def _shape(v: Any, where: str, allow_empty: bool) -> tuple[int, ...]:
    if (not isinstance(v, list) or len(v) > MAX_NDIM or (not v and not allow_empty)
            or not all(_is_int(x) and 1 <= x <= 1 << 31 for x in v)):
        raise ProtocolError(f"{where} must be a list of up to {MAX_NDIM} positive integers")
    return tuple(v)


def _dim(v: Any, extent: int, where: str) -> DimSelect:
    if isinstance(v, list):
        if len(v) != 3 or not all(_is_int(x) for x in v):
            raise ProtocolError(f"{where} must be [start, stop, step] or {{'index': [...]}}")
        start, stop, step = v
        if step < 1 or not 0 <= start < stop <= extent:
            raise ProtocolError(f"{where}: slice {v} is not inside [0, {extent}) with step "
                                ">= 1")
        return Slice(start, stop, step)
    if isinstance(v, dict) and set(v) == {"index"}:
        idx = v["index"]
        if not isinstance(idx, list) or not idx or not all(_is_int(x) for x in idx):
            raise ProtocolError(f"{where}.index must be a non-empty list of integers")
        if len(idx) > 1 << 20:
            raise LimitError(f"{where}.index has {len(idx)} entries; the limit is {1 << 20}")
        if min(idx) < 0 or max(idx) >= extent:
            raise ProtocolError(f"{where}.index has positions outside [0, {extent})")
        return Index(tuple(idx))
    raise ProtocolError(f"{where} must be [start, stop, step] or {{'index': [...]}}")


# -- responses -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ItemError:
    """One item the server could not answer (the others in the batch may be fine)."""

    status: int
    error: str


ItemResult = dict[str, np.ndarray] | ItemError


def encode_response(results: list[ItemResult], server_s: float) -> list[bytes | memoryview]:
    """The response body for ``results`` as a list of chunks (header first, then buffers,
    no copy of the buffers)."""
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
    header = json.dumps({"protocol": PROTOCOL_VERSION, "server_s": server_s,
                         "results": entries}, separators=(",", ":")).encode()
    return [_PREFIX.pack(MAGIC, PROTOCOL_VERSION, len(header)), header, *chunks]


@dataclasses.dataclass(frozen=True)
class ReadResponse:
    """A decoded response: one result per item and the server's working seconds."""

    results: list[ItemResult]
    server_s: float


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
                dtype = np.dtype(_dtype(b["dtype"], "buffer dtype"))
                shape = tuple(int(s) for s in b["shape"])
                off, n = int(b["offset"]), int(b["nbytes"])
                if off < 0 or off + n > len(data) or n != math.prod(shape) * dtype.itemsize:
                    raise ValueError(f"buffer {b['name']!r} does not fit the body")
                out[str(b["name"])] = np.frombuffer(data[off:off + n], dtype).reshape(shape)
            results.append(out)
    except (ValueError, KeyError, TypeError) as err:
        raise ProtocolError(f"malformed pushdown response: {err}") from None
    return ReadResponse(results, server_s)
