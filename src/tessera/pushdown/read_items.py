"""The read items of the pushdown wire, version 1: what a client sends to ``POST /v1/read``
(the framing, and the response, are :mod:`tessera.pushdown.framing`'s). Both sides of the wire
use this module; nothing in it unpickles or evaluates.

**Request** (``Content-Type: application/json``): one JSON object::

    {"protocol": 1,
     "reads": [ITEM, ...],
     "stream": true}                                 # optional: a streamed answer

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
``tile[np.ix_(dim_0, dim_1, ...)]`` in C order. ``BLOCKS`` (see :mod:`tessera.format.blocks`)
is ``{"block_bytes": 65536, "tile_bytes": <decoded tile bytes>, "sizes": [...],
"crc32": [...]}``: the tile's blocks, each compressed alone; the server then reads and decodes
only the blocks holding the selected cells, each checked against its own CRC (of the piece's
``checksum`` variant, :mod:`tessera.format.checksum`).

A ``cells`` item asks for the cells of one sparse data tile that lie in a box::

    {"kind": "cells", "array": "arrays/s",
     "coords": PIECE, "coords_dtype": "<i8", "ndim": 2,
     "attrs": {"a": PIECE + {"dtype": "<f4", "cell_shape": []}, ...},
     "box": {"lo": [..], "hi": [..], "hi_open": [..], "members": [null | [..], ...]}}

with ``PIECE = {"key", "offset", "length", "codec", "crc32", "checksum"}``. The answer holds the
selected coordinates ``(n, ndim)`` and each attribute's values, in stored order.

>>> req = TileItem("a", "k", 0, 16, None, 0, "<i4", (), (2, 2), "row-major",
...                (Slice(0, 2, 1), Index((1,))))
>>> parse_read_request(encode_read_request([req]), Limits()).items[0] == req
True
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np

from tessera.errors import SchemaError
from tessera.format.blocks import TileBlocks, blocks_per_tile
from tessera.format.checksum import CHECKSUMS
from tessera.format.codecs import normalize_codec_spec
from tessera.format.schema import NAME_PATTERN
from tessera.format.tile import Piece, StoredTileFields
from tessera.pushdown.framing import (
    MAX_NDIM,
    PROTOCOL_VERSION,
    LimitError,
    Limits,
    ProtocolError,
    array_path,
    check_dtype,
    confined,
    is_int,
    json_object,
    load_document,
    numbers,
    request_items,
    shape_list,
)


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


def piece_json(piece: Piece) -> dict[str, Any]:
    """A stored tile as the wire's ``PIECE`` (inline bytes never travel: the server reads
    the store)."""
    doc: dict[str, Any] = {"key": piece.key, "offset": piece.offset, "length": piece.length,
                           "codec": piece.codec, "crc32": piece.crc32,
                           "checksum": piece.checksum}
    if piece.blocks is not None:
        doc["blocks"] = {"block_bytes": piece.blocks.block_bytes,
                         "tile_bytes": piece.blocks.raw_nbytes,
                         "sizes": piece.blocks.sizes.tolist(),
                         "crc32": piece.blocks.crc32.tolist()}
    return doc


@dataclasses.dataclass(frozen=True)
class TileItem(StoredTileFields):
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
        return {"kind": "tile", "array": self.array, **piece_json(self.piece),
                "dtype": self.dtype, "cell_shape": list(self.cell_shape),
                "tile_shape": list(self.tile_shape), "cell_order": self.cell_order,
                "select": [s.to_json() for s in self.select]}


@dataclasses.dataclass(frozen=True)
class CellAttr:
    """One attribute of a sparse data tile: where its values are and their type."""

    piece: Piece
    dtype: str
    cell_shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class CellBox:
    """A box in coordinate space (see :class:`~tessera.format.selection.SparseSelection`)."""

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
    coords: Piece
    coords_dtype: str
    ndim: int
    attrs: tuple[tuple[str, CellAttr], ...]
    box: CellBox

    def to_json(self) -> dict[str, Any]:
        return {"kind": "cells", "array": self.array, "coords": piece_json(self.coords),
                "coords_dtype": self.coords_dtype, "ndim": self.ndim,
                "attrs": {n: {**piece_json(a.piece), "dtype": a.dtype,
                              "cell_shape": list(a.cell_shape)} for n, a in self.attrs},
                "box": self.box.to_json()}


ReadItem = TileItem | CellsItem


def encode_read_request(items: list[ReadItem], stream: bool = False) -> bytes:
    """The JSON body of ``POST /v1/read`` for ``items`` (``stream``: ask for a streamed
    answer, see :mod:`tessera.pushdown.framing`)."""
    doc: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "reads": [i.to_json() for i in items]}
    if stream:
        doc["stream"] = True
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()


@dataclasses.dataclass(frozen=True)
class ReadRequest:
    """A checked ``POST /v1/read`` body: its items, and whether it asks for a streamed
    answer."""

    items: list[ReadItem]
    stream: bool = False


def parse_read_request(body: bytes, limits: Limits) -> ReadRequest:
    """Decode and check a request body; raises :class:`ProtocolError` (400),
    :class:`ForbiddenKeyError` (403) or :class:`LimitError` (413) naming what is wrong."""
    doc = load_document(body, limits)
    stream = doc.get("stream", False)
    if not isinstance(stream, bool):
        raise ProtocolError(f"'stream' must be true or false, got {stream!r}")
    reads = request_items(doc, limits, "reads")
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
    return ReadRequest(items, stream)


def _parse_tile(raw: dict[str, Any], where: str, limits: Limits) -> TileItem:
    piece = _piece(raw, where, limits)
    dtype = check_dtype(raw.get("dtype"), f"{where}.dtype")
    cell_shape = shape_list(raw.get("cell_shape"), f"{where}.cell_shape", allow_empty=True)
    tile_shape = shape_list(raw.get("tile_shape"), f"{where}.tile_shape", allow_empty=False)
    order = raw.get("cell_order")
    if order not in ("row-major", "col-major"):
        raise ProtocolError(f"{where}.cell_order must be 'row-major' or 'col-major'")
    select = raw.get("select")
    if not isinstance(select, list) or len(select) != len(tile_shape):
        raise ProtocolError(f"{where}.select must be a list with one entry per tile "
                            f"dimension ({len(tile_shape)})")
    dims = tuple(_dim(s, n, f"{where}.select[{d}]") for d, (s, n) in
                 enumerate(zip(select, tile_shape, strict=True)))
    item = TileItem(array_path(raw, where), piece.key, piece.offset, piece.length, piece.codec,
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
    array = array_path(raw, where)
    coords = _piece(json_object(raw.get("coords"), f"{where}.coords"), f"{where}.coords", limits)
    cdt = raw.get("coords_dtype")
    if cdt not in ("<i8", "<f8"):
        raise ProtocolError(f"{where}.coords_dtype must be '<i8' or '<f8'")
    ndim = raw.get("ndim")
    if not is_int(ndim) or not 1 <= ndim <= MAX_NDIM:
        raise ProtocolError(f"{where}.ndim must be an integer in [1, {MAX_NDIM}]")
    attrs_raw = json_object(raw.get("attrs"), f"{where}.attrs")
    attrs = []
    for name, spec in attrs_raw.items():
        aw = f"{where}.attrs[{name!r}]"
        if not NAME_PATTERN.match(name):
            raise ProtocolError(f"{aw}: not a valid attribute name")
        spec = json_object(spec, aw)
        attrs.append((name, CellAttr(_piece(spec, aw, limits), check_dtype(spec.get("dtype"),
                                                                      f"{aw}.dtype"),
                                     shape_list(spec.get("cell_shape"), f"{aw}.cell_shape",
                                            allow_empty=True))))
    box = json_object(raw.get("box"), f"{where}.box")
    lo, hi = (numbers(box.get(k), ndim, f"{where}.box.{k}") for k in ("lo", "hi"))
    hi_open = box.get("hi_open")
    if (not isinstance(hi_open, list) or len(hi_open) != ndim
            or not all(isinstance(b, bool) for b in hi_open)):
        raise ProtocolError(f"{where}.box.hi_open must be {ndim} booleans")
    members = box.get("members")
    if not isinstance(members, list) or len(members) != ndim:
        raise ProtocolError(f"{where}.box.members must have {ndim} entries (null or a list)")
    mem = tuple(None if m is None else numbers(m, None, f"{where}.box.members[{d}]")
                for d, m in enumerate(members))
    return CellsItem(array, coords, cdt, ndim, tuple(attrs),
                     CellBox(lo, hi, tuple(hi_open), mem))


def _piece(raw: dict[str, Any], where: str, limits: Limits) -> Piece:
    key = raw.get("key")
    if not isinstance(key, str):
        raise ProtocolError(f"{where}.key must be a string")
    confined(key, f"{where}.key")
    offset, length, crc = raw.get("offset"), raw.get("length"), raw.get("crc32")
    if not is_int(offset) or offset < 0 or offset >= 1 << 62:
        raise ProtocolError(f"{where}.offset must be an integer >= 0")
    if not is_int(length) or length < 0:
        raise ProtocolError(f"{where}.length must be an integer >= 0")
    if length > limits.max_tile_bytes:
        raise LimitError(f"{where}: {length} stored bytes exceed the tile limit of "
                         f"{limits.max_tile_bytes}")
    if not is_int(crc) or not 0 <= crc < 1 << 32:
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
    return Piece(key, offset, length, codec, crc, blocks=blocks, checksum=algorithm)


def _blocks(raw: Any, length: int, algorithm: str, where: str, limits: Limits) -> TileBlocks:
    if not isinstance(raw, dict):
        raise ProtocolError(f"{where} must be an object")
    block_bytes, tile_bytes = raw.get("block_bytes"), raw.get("tile_bytes")
    if not is_int(block_bytes) or block_bytes <= 0:
        raise ProtocolError(f"{where}.block_bytes must be an integer > 0")
    if not is_int(tile_bytes) or not 0 <= tile_bytes <= limits.max_tile_bytes:
        raise ProtocolError(f"{where}.tile_bytes must be an integer in [0, "
                            f"{limits.max_tile_bytes}]")
    count = blocks_per_tile(tile_bytes, block_bytes)
    values = {}
    for name in ("sizes", "crc32"):
        v = raw.get(name)
        if (not isinstance(v, list) or len(v) != count
                or not all(is_int(x) and 0 <= x < 1 << 32 for x in v)):
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


def _dim(v: Any, extent: int, where: str) -> DimSelect:
    if isinstance(v, list):
        if len(v) != 3 or not all(is_int(x) for x in v):
            raise ProtocolError(f"{where} must be [start, stop, step] or {{'index': [...]}}")
        start, stop, step = v
        if step < 1 or not 0 <= start < stop <= extent:
            raise ProtocolError(f"{where}: slice {v} is not inside [0, {extent}) with step "
                                ">= 1")
        return Slice(start, stop, step)
    if isinstance(v, dict) and set(v) == {"index"}:
        idx = v["index"]
        if not isinstance(idx, list) or not idx or not all(is_int(x) for x in idx):
            raise ProtocolError(f"{where}.index must be a non-empty list of integers")
        if len(idx) > 1 << 20:
            raise LimitError(f"{where}.index has {len(idx)} entries; the limit is {1 << 20}")
        if min(idx) < 0 or max(idx) >= extent:
            raise ProtocolError(f"{where}.index has positions outside [0, {extent})")
        return Index(tuple(idx))
    raise ProtocolError(f"{where} must be [start, stop, step] or {{'index': [...]}}")


