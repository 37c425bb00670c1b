"""Fragments: immutable, timestamped batches of writes, made visible by a commit marker.

Layout below the array's root (all keys relative to it)::

    __schema.json                         the schema (create-only)
    __fragments/<id>/<attr>.data          tiles of one attribute, in the global tile order
    __fragments/<id>/__tiles.data         tile-major arrays (dense fragments): tile after tile,
                                          every attribute's tile in schema order
    __fragments/<id>/__meta.json          bookkeeping: subarray, per-tile offset/size/CRC
                                          (small sparse fragments: their tiles inline;
                                          compressed dense tiles: per-block sizes/CRCs)
    __commits/f<timestamp>-<id>           the commit marker, written last, create-only
    __doomed/<id>                         written by vacuum before it removes the objects
                                          of a writer it takes for dead (create-only)

A fragment exists for readers only once its commit marker does, so a writer killed at any
point leaves nothing visible; orphaned objects without a marker are never read (vacuum
removes them). ``<id>`` is random, so writers in different processes never collide and need
no lock (a plain dense fragment's id also records the box it writes:
:mod:`tessera.array.names`). The timestamp (ns since the epoch, 20 digits) is taken when
the writer commits, after its data is stored; a commit whose requests are slow can still
become visible after a later one, which is why consolidations say what they outrank
(``FragmentMeta.covers``, :mod:`tessera.array.maintenance`).

How a commit meets a vacuum, and how committed fragments are listed and loaded, is
:mod:`tessera.array.commits`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import concurrent.futures
import dataclasses
import itertools
import json
import os
from collections.abc import Generator, Mapping
from typing import Any

import numpy as np

from tessera.array.bookkeeping import COLUMNS, check_document, tile_column
from tessera.array.lazy_attrs import LazyAttrs, PendingAttrs
from tessera.array.names import new_fragment_id
from tessera.errors import (
    CorruptDataError,
)
from tessera.format.blocks import (
    BLOCK_BYTES,
    TileBlocks,
    blocks_per_tile,
    encode_blocked,
    raw_block_table,
)
from tessera.format.checksum import DEFAULT_CHECKSUM, check_algorithm, checksum
from tessera.format.codecs import get_codec
from tessera.format.layout import (
    Box,
    tile_box,
    tile_from_bytes,
    tile_nbytes,
    tile_range,
    tile_to_bytes,
    tiles_in_order,
)
from tessera.format.schema import ArraySchema, Attr
from tessera.storage.store import AsyncStore, PutResult

FRAGMENT_VERSION = 7  # 2: small sparse fragments may keep their tiles inline;
#                      3: compressed dense tiles are blocked (tessera.format.blocks);
#                      4: CRC-32C checksums, named per attribute (tessera.format.checksum);
#                      5: a dense tile its codec does not shrink is stored raw
#                         (AttrTiles.stored_raw)
#                      6: consolidated fragments name the fragments they outrank
#                         (FragmentMeta.covers; tessera.array.maintenance)
#                      7: per-tile offsets, sizes and checksums as base64 of
#                         little-endian values (bookkeeping.COLUMNS), not JSON lists
#: Sparse fragments whose encoded tiles (all attributes and coordinates) fit in this many
#: bytes, and whose cells take at most INLINE_RAW_BYTES decoded, keep their tiles inside
#: their bookkeeping object, which readers load once per handle: a small update then costs
#: no extra request on later reads, and a handle keeps at most INLINE_RAW_BYTES of decoded
#: cells per such fragment.
INLINE_BYTES = 64 << 10
INLINE_RAW_BYTES = 256 << 10
SCHEMA_KEY = "__schema.json"
#: The one data object of a dense fragment of a tile-major array (``attr_layout``).
TILE_MAJOR_KEY = "__tiles.data"
COMMITS = "__commits"
FRAGMENTS = "__fragments"
VACUUMED = "__vacuumed"
DOOMED = "__doomed"

@dataclasses.dataclass(frozen=True)
class FragmentInfo:
    """A committed fragment, as ``arr.fragments`` lists it.

    Attributes:
        name: unique, time-sortable name.
        timestamp: commit time in ns since the epoch; ``open_array(at=...)`` takes it.
        kind: ``dense`` (later also ``sparse``, ``delete``, ``consolidated``).
        nonempty_domain: inclusive ``(lo, hi)`` per dimension of the cells it writes.
        cell_count: cells written.
        nbytes: bytes stored (all attributes, after compression).

    >>> import numpy as np, tessera
    >>> arr = tessera.from_numpy("memory://doc-fragment-info", np.zeros((4, 4)), tile=(2, 2))
    >>> info = arr.fragments[0]
    >>> info.cell_count, info.nonempty_domain
    (16, ((0, 3), (0, 3)))
    """

    name: str
    timestamp: int
    kind: str
    nonempty_domain: tuple[tuple[int, int], ...]
    cell_count: int
    nbytes: int


@dataclasses.dataclass(frozen=True)
class AttrTiles:
    """Where one attribute's tiles of a fragment lie in its data object.

    ``crc32`` holds each encoded tile's CRC-32 of the variant named by ``checksum``
    (:mod:`tessera.format.checksum`: ``crc32c`` since format 4, zlib's ``crc32`` before).

    ``stored_raw`` marks the dense tiles of a compressed attribute that are stored as their
    raw bytes because the codec did not make them smaller (random or already-compressed
    data), as Blosc stores such chunks: they cost no decoding and can be read by exact
    byte ranges, like the tiles of an uncompressed attribute. :meth:`tile_codec` and
    :meth:`blocks` say how each tile is stored.
    """

    key: str
    codec: str | None
    offsets: np.ndarray
    sizes: np.ndarray
    crc32: np.ndarray
    inline: bytes | None = None  # small sparse fragments keep their tiles here, not in key
    #: Compressed dense tiles: decoded bytes per block (0: tiles are not blocked) and per
    #: tile, and the encoded size and crc32 of each block, one row per tile (see
    #: tessera.format.blocks).
    block_bytes: int = 0
    tile_raw_bytes: int = 0
    block_sizes: np.ndarray | None = None
    block_crc32: np.ndarray | None = None
    checksum: str = DEFAULT_CHECKSUM
    #: Per tile, ``True`` where the tile is stored raw despite ``codec`` (``None``: none is).
    stored_raw: np.ndarray | None = None
    #: Block tables made so far (:meth:`blocks`), kept with the handle: a table's offsets
    #: are summed once, not on every read of its tile (the fragment never changes).
    _tables: dict[int, TileBlocks] = dataclasses.field(
        default_factory=dict, init=False, compare=False, repr=False)

    def is_stored_raw(self, t: int) -> bool:
        """True if tile ``t`` is stored as its raw bytes although the attribute has a
        codec."""
        return self.stored_raw is not None and bool(self.stored_raw[t])

    def tile_codec(self, t: int) -> str | None:
        """The codec tile ``t`` is stored with (``None`` for a raw tile)."""
        return None if self.is_stored_raw(t) else self.codec

    def blocks(self, t: int) -> TileBlocks | None:
        """Tile ``t``'s block table, or ``None`` if its tiles are not blocked (or it is
        stored raw)."""
        if not self.block_bytes or self.block_sizes is None or self.block_crc32 is None:
            return None
        if self.is_stored_raw(t):
            return None
        table = self._tables.get(t)
        if table is None:
            table = self._tables[t] = TileBlocks(self.block_bytes, self.tile_raw_bytes,
                                                 self.block_sizes[t], self.block_crc32[t],
                                                 self.checksum)
        return table


@dataclasses.dataclass(frozen=True)
class FragmentMeta:
    """A fragment's bookkeeping, loaded from ``__meta.json``."""

    name: str
    timestamp: int
    kind: str
    subarray: Box
    tile_lo: np.ndarray
    tile_hi: np.ndarray
    attrs: Mapping[str, AttrTiles]
    cell_count: int
    # Sparse and delete fragments: their data tiles of ``capacity`` cells each.
    coords: AttrTiles | None = None
    mbrs: np.ndarray | None = None  # (tiles, 2, ndim): lo and hi of each data tile
    bounds: np.ndarray | None = None  # (tiles, 2, ndim): first and last cell in global order
    tile_cells: np.ndarray | None = None  # (tiles,)
    replaces: tuple[str, ...] = ()  # consolidated fragments: the names they replace
    #: Consolidated fragments (format 6): the visible fragments the consolidation saw
    #: ranked below the newest fragment it merged, which it outranks without replacing
    #: them. Every other fragment ranks above it, whatever its timestamp: a commit the
    #: consolidation did not see is never hidden by it (tessera.array.maintenance).
    #: ``None``: not consolidated, or consolidated before format 6 (it outranks every
    #: older fragment, by name).
    covers: tuple[str, ...] | None = None
    #: Decoded inline tiles, filled by readers of this handle (the fragment never changes).
    decoded: dict[Any, Any] = dataclasses.field(default_factory=dict, compare=False,
                                                repr=False)

    @property
    def is_dense(self) -> bool:
        """True for fragments that hold every cell of their subarray."""
        return self.coords is None

    @property
    def pending(self) -> bool:
        """True for a dense fragment a handle knows by its name's box
        (:mod:`tessera.array.names`) while its bookkeeping is not loaded."""
        return isinstance(self.attrs, PendingAttrs) and not self.attrs.loaded

    @property
    def info(self) -> FragmentInfo:
        """The public summary."""
        dom = tuple((_num(a), _num(b)) for a, b in zip(*self.subarray, strict=True))
        pieces = [*self.attrs.values(), *([self.coords] if self.coords else [])]
        nbytes = int(sum(int(a.sizes.sum()) for a in pieces))
        return FragmentInfo(self.name, self.timestamp, self.kind, dom, self.cell_count, nbytes)

    def to_json(self) -> bytes:
        doc = {
            "format": "tessera.fragment", "version": FRAGMENT_VERSION, "name": self.name,
            "timestamp": self.timestamp, "kind": self.kind,
            "subarray": [list(self.subarray[0]), list(self.subarray[1])],
            "tile_lo": self.tile_lo.tolist(), "tile_hi": self.tile_hi.tolist(),
            "cell_count": self.cell_count,
            "attrs": {n: _tiles_doc(a) for n, a in self.attrs.items()},
            "replaces": list(self.replaces),
        }
        if self.covers is not None:
            doc["covers"] = list(self.covers)
        if self.coords is not None:
            assert self.mbrs is not None and self.bounds is not None
            assert self.tile_cells is not None
            doc["coords"] = _tiles_doc(self.coords)
            doc["mbrs"] = self.mbrs.tolist()
            doc["bounds"] = self.bounds.tolist()
            doc["tile_cells"] = self.tile_cells.tolist()
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> FragmentMeta:
        try:
            doc = json.loads(data)
        except ValueError as err:
            raise CorruptDataError(f"{where}: unreadable fragment bookkeeping: {err}") from None
        check_document(doc, where)
        try:
            if doc.get("format") != "tessera.fragment":
                raise ValueError("not a fragment bookkeeping object")
            if int(doc["version"]) > FRAGMENT_VERSION:
                raise ValueError(f"fragment format version {doc['version']} is newer than this "
                                 "Tessera understands; upgrade Tessera")
            attrs = LazyAttrs(doc["attrs"], _tiles_from_doc, where)  # parsed when read
            sparse = "coords" in doc
            return cls(doc["name"], int(doc["timestamp"]), doc["kind"],
                       (tuple(doc["subarray"][0]), tuple(doc["subarray"][1])),
                       np.asarray(doc["tile_lo"], np.int64), np.asarray(doc["tile_hi"], np.int64),
                       attrs, int(doc["cell_count"]),
                       coords=_tiles_from_doc(doc["coords"]) if sparse else None,
                       mbrs=np.asarray(doc["mbrs"]) if sparse else None,
                       bounds=np.asarray(doc["bounds"]) if sparse else None,
                       tile_cells=np.asarray(doc["tile_cells"], np.int64) if sparse else None,
                       replaces=tuple(doc.get("replaces", ())),
                       covers=tuple(doc["covers"]) if "covers" in doc else None)
        except (ValueError, KeyError, TypeError, IndexError, binascii.Error) as err:
            raise CorruptDataError(f"{where}: unreadable fragment bookkeeping: {err}") from None


def _num(v: Any) -> Any:
    return int(v) if float(v).is_integer() and not isinstance(v, float) else float(v)


def _tiles_doc(a: AttrTiles) -> dict[str, Any]:
    # The per-tile columns as base64 of little-endian values: read back as arrays, without
    # a Python number per tile (JSON lists of numbers were most of an open's parsing).
    doc: dict[str, Any] = {"key": a.key, "codec": a.codec, "checksum": a.checksum, **{
        name: base64.b64encode(np.ascontiguousarray(values, dtype=COLUMNS[name]).tobytes()
                               ).decode("ascii")
        for name, values in (("offsets", a.offsets), ("sizes", a.sizes), ("crc32", a.crc32))}}
    if a.inline is not None:
        doc["inline"] = base64.b64encode(a.inline).decode("ascii")
    if a.stored_raw is not None and a.stored_raw.any():
        doc["stored_raw"] = np.flatnonzero(a.stored_raw).tolist()
    if a.block_bytes and a.block_sizes is not None and a.block_crc32 is not None:
        # One row per tile, as little-endian uint32 in base64 (a 4 MiB tile has 64 blocks).
        doc["blocks"] = {"block_bytes": a.block_bytes, "tile_bytes": a.tile_raw_bytes,
                         "per_tile": a.block_sizes.shape[1],
                         "sizes": _b64_u32(a.block_sizes), "crc32": _b64_u32(a.block_crc32)}
    return doc


def _b64_u32(values: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(values, dtype="<u4").tobytes()).decode("ascii")


def _u32_b64(text: str, rows: int, cols: int) -> np.ndarray:
    data = np.frombuffer(base64.b64decode(text, validate=True), dtype="<u4")
    if data.size != rows * cols:
        raise ValueError(f"block table holds {data.size} entries, not {rows} x {cols}")
    return data.reshape(rows, cols)


def _tiles_from_doc(a: dict[str, Any]) -> AttrTiles:
    inline = base64.b64decode(a["inline"], validate=True) if "inline" in a else None
    where = f"attribute data {a['key']}"
    algorithm = check_algorithm(a.get("checksum", "crc32"), where)
    sizes = tile_column(a["sizes"], "sizes", where)
    blocks: dict[str, Any] = {}
    if "blocks" in a:
        b = a["blocks"]
        per, block_bytes = int(b["per_tile"]), int(b["block_bytes"])
        tile_bytes = int(b["tile_bytes"])
        if block_bytes <= 0 or per != blocks_per_tile(tile_bytes, block_bytes):
            raise ValueError(f"{per} blocks of {block_bytes} bytes cannot hold a tile of "
                             f"{tile_bytes} bytes")
        block_sizes = _u32_b64(b["sizes"], len(sizes), per).astype(np.int64)
        if not np.array_equal(block_sizes.sum(axis=1), sizes):
            raise ValueError("block sizes do not add up to the tile sizes")
        blocks = {"block_bytes": block_bytes, "tile_raw_bytes": tile_bytes,
                  "block_sizes": block_sizes,
                  "block_crc32": _u32_b64(b["crc32"], len(sizes), per).astype(np.uint32)}
    stored_raw = _stored_raw_from_doc(a, sizes, blocks)
    return AttrTiles(a["key"], a["codec"],
                     tile_column(a["offsets"], "offsets", where), sizes,
                     tile_column(a["crc32"], "crc32", where), inline,
                     checksum=algorithm,
                     stored_raw=stored_raw, **blocks)


def _stored_raw_from_doc(a: dict[str, Any], sizes: np.ndarray,
                         blocks: dict[str, Any]) -> np.ndarray | None:
    """The ``stored_raw`` marks of an attribute's bookkeeping, checked: tile indices in
    range, only with a codec, and (where the tiles are blocked, so their decoded size is
    known) each such tile exactly as long as its raw bytes."""
    if "stored_raw" not in a:
        return None
    listed = a["stored_raw"]
    if not isinstance(listed, list) or not all(type(v) is int for v in listed):
        raise ValueError("stored_raw must be a list of tile indices")
    if a["codec"] is None:
        raise ValueError("stored_raw is listed for an attribute without a codec")
    index = np.asarray(listed, dtype=np.int64)
    if len(index) and (index.min() < 0 or index.max() >= len(sizes)):
        raise ValueError(f"stored_raw names tile {int(index.max())}, but there are only "
                         f"{len(sizes)} tiles")
    marks = np.zeros(len(sizes), dtype=bool)
    marks[index] = True
    if blocks and not np.all(sizes[marks] == blocks["tile_raw_bytes"]):
        raise ValueError(f"a tile stored raw must hold {blocks['tile_raw_bytes']} bytes")
    return marks


def encode_tiles(key: str, codec_spec: str | None, raw_tiles: list[Any],
                 ) -> tuple[AttrTiles, bytes]:
    """Encode tiles with a codec, checksum them and lay them end to end in one object."""
    codec = get_codec(codec_spec)
    return pack_tiles(key, codec_spec, [codec.encode(t) for t in raw_tiles])


def pack_tiles(key: str, codec_spec: str | None, chunks: list[Any],
               ) -> tuple[AttrTiles, bytes]:
    """Checksum tiles already encoded with ``codec_spec`` and lay them end to end."""
    sizes = np.array([len(c) for c in chunks], dtype=np.int64)
    offsets = np.cumsum(sizes) - sizes  # where each tile starts (none for no tiles)
    crcs = np.array([checksum(c, DEFAULT_CHECKSUM) for c in chunks], dtype=np.uint32)
    return AttrTiles(key, codec_spec, offsets, sizes, crcs), b"".join(chunks)


async def store_dense_fragment(store: AsyncStore, schema: ArraySchema,
                               values: dict[str, np.ndarray], origin: tuple[int, ...], *,
                               kind: str = "dense", replaces: tuple[str, ...] = (),
                               block_bytes: int = BLOCK_BYTES) -> tuple[str, FragmentMeta]:
    """Store the data objects of one dense fragment holding ``values`` (one array per
    attribute, same shape) at coordinates ``origin``; returns its id and bookkeeping, not
    committed yet (:func:`tessera.array.commits.write_dense_fragment` commits it).
    Compressed tiles are stored in blocks of ``block_bytes`` decoded bytes (0: each tile
    compressed whole)."""
    shape = next(iter(values.values())).shape[:schema.ndim]
    box: Box = (origin, tuple(o + s - 1 for o, s in zip(origin, shape, strict=True)))
    fid = new_fragment_id(replacing=bool(replaces), box=box if kind == "dense" else None)
    tlo, thi = tile_range(schema, box)
    tiles = tiles_in_order(schema, tlo, thi)
    attrs: dict[str, AttrTiles] = {}
    puts = []
    if schema.attr_layout == "tile-major" and len(schema.attrs) > 1:
        key = f"{FRAGMENTS}/{fid}/{TILE_MAJOR_KEY}"
        encoded = [await _encode_dense_attr(schema, attr, values[attr.name], box, tiles, key,
                                            block_bytes, stream=False)
                   for attr in schema.attrs]
        laid, blob = interleave_tiles(key, [(a.name, t, b) for a, (t, b) in
                                            zip(schema.attrs, encoded, strict=True)])
        attrs.update(laid)
        puts.append(store.put(key, blob))
    for attr in schema.attrs if not attrs else ():
        key = f"{FRAGMENTS}/{fid}/{attr.name}.data"
        attrs[attr.name], blob = await _encode_dense_attr(
            schema, attr, values[attr.name], box, tiles, key, block_bytes,
            LOCAL_STREAM_CHUNK_BYTES if store.is_local else STREAM_CHUNK_BYTES)
        if not isinstance(blob, _StreamedTiles):
            puts.append(store.put(key, blob))
        elif store.is_local:
            puts.append(asyncio.to_thread(_write_file_stream, store, key, blob))
        else:
            puts.append(store.put_stream(key, blob, part_bytes=blob.chunk_bytes))
    await asyncio.gather(*puts)  # streamed checksums are all filled in once these return
    meta = FragmentMeta("", 0, kind, box, tlo, thi, attrs, int(np.prod(shape)),
                        replaces=replaces)
    return fid, meta


def interleave_tiles(key: str, encoded: list[tuple[str, AttrTiles, Any]],
                     ) -> tuple[dict[str, AttrTiles], bytes]:
    """Lay several attributes' encoded tiles out tile-major in one object ``key``: tile 0 of
    every attribute (in the order given), then tile 1, ...; each attribute's offsets point
    into it, its sizes, checksums and block tables stay as they were.

    >>> tiles = [AttrTiles("a", None, np.array([0, 2]), np.array([2, 2]), np.zeros(2, np.uint32)),
    ...          AttrTiles("b", None, np.array([0, 1]), np.array([1, 1]), np.zeros(2, np.uint32))]
    >>> laid, blob = interleave_tiles("k", [("a", tiles[0], b"AAaa"), ("b", tiles[1], b"Bb")])
    >>> blob, laid["a"].offsets.tolist(), laid["b"].offsets.tolist()
    (b'AABaab', [0, 3], [2, 5])
    """
    n = len(encoded[0][1].sizes)
    views = [memoryview(blob).cast("B") for _, _, blob in encoded]
    offsets = {name: np.empty(n, dtype=np.int64) for name, _, _ in encoded}
    parts: list[Any] = []
    pos = 0
    for t in range(n):
        for (name, tiles, _), view in zip(encoded, views, strict=True):
            start, size = int(tiles.offsets[t]), int(tiles.sizes[t])
            parts.append(view[start:start + size])
            offsets[name][t] = pos
            pos += size
    laid = {name: dataclasses.replace(tiles, key=key, offsets=offsets[name])
            for name, tiles, _ in encoded}
    return laid, b"".join(parts)


async def _encode_dense_attr(schema: ArraySchema, attr: Attr, data: np.ndarray, box: Box,
                             tiles: np.ndarray, key: str, block_bytes: int = BLOCK_BYTES,
                             chunk_bytes: int | None = None, stream: bool = True,
                             ) -> tuple[AttrTiles, Any]:
    """Serialise, encode and checksum one attribute's tiles of a box write.

    Raw tiles are written straight into one preallocated buffer (one copy of the data in
    all); compressed tiles are encoded one by one, each in blocks of ``block_bytes`` decoded
    bytes (:mod:`tessera.format.blocks`; 0: whole, as format 2 stored them). Either way the
    work is split over worker threads (numpy copies, checksums and the codecs release the GIL)
    when the write is large.
    """
    n = len(tiles)
    boxes = [tile_box(schema, tuple(int(i) for i in index)) for index in tiles]
    groups = _work_groups(n, data.nbytes)
    if stream and attr.codec is None and n * tile_nbytes(schema, attr) >= STREAM_BYTES:
        tile_bytes = tile_nbytes(schema, attr)
        streamed = _StreamedTiles(schema, attr, data, box, boxes, tile_bytes, chunk_bytes)
        return AttrTiles(key, None, np.arange(n, dtype=np.int64) * tile_bytes,
                         np.full(n, tile_bytes, dtype=np.int64), streamed.crcs), streamed
    if attr.codec is None:
        tile_bytes = tile_nbytes(schema, attr)
        blob = np.empty(n * tile_bytes, dtype=np.uint8)
        crcs = np.zeros(n, dtype=np.uint32)

        def raw_group(lo: int, hi: int) -> None:
            _fill_raw_tiles(blob[lo * tile_bytes:hi * tile_bytes], crcs, lo, hi, schema, attr,
                            data, box, boxes)

        await _run_groups(raw_group, groups)
        sizes = np.full(n, tile_bytes, dtype=np.int64)
        offsets = np.arange(n, dtype=np.int64) * tile_bytes
        return AttrTiles(key, None, offsets, sizes, crcs), blob
    chunks: list[Any] = [b""] * n
    tables: list[Any] = [None] * n
    stored_raw = np.zeros(n, dtype=bool)

    def encoded_group(lo: int, hi: int) -> None:
        codec = get_codec(attr.codec)
        for i in range(lo, hi):
            tile = _dense_tile(schema, attr.fill_value, data, box, boxes[i], attr.cell_shape)
            raw = tile_to_bytes(tile, schema)
            if block_bytes > 0:
                chunks[i], tables[i] = encode_blocked(codec, raw, block_bytes)
            else:
                chunks[i] = codec.encode(raw)
            if len(chunks[i]) >= raw.nbytes:
                # The codec did not shrink this tile (random or already-compressed data):
                # store its raw bytes, which cost no decoding and can be read by exact
                # ranges (Blosc keeps such chunks raw too).
                chunks[i], stored_raw[i] = raw, True
                if block_bytes > 0:
                    tables[i] = raw_block_table(raw, block_bytes)

    await _run_groups(encoded_group, groups)
    packed, encoded = pack_tiles(key, attr.codec, chunks)
    if stored_raw.any():
        packed = dataclasses.replace(packed, stored_raw=stored_raw)
    if block_bytes <= 0:
        return packed, encoded
    return dataclasses.replace(
        packed, block_bytes=block_bytes, tile_raw_bytes=tile_nbytes(schema, attr),
        block_sizes=np.stack([t.sizes for t in tables]).astype(np.int64),
        block_crc32=np.stack([t.crc32 for t in tables]).astype(np.uint32)), encoded


#: Raw attribute data of at least this many bytes is serialised while it uploads, in
#: chunks of about ``STREAM_CHUNK_BYTES`` (whole tiles; at least one), or
#: ``LOCAL_STREAM_CHUNK_BYTES`` on folder stores. Cloud parts must hold 5 MiB or more; a
#: local write gains from chunks that stay in the cores' caches between being filled and
#: being written (1 GiB of 4 MiB tiles in a standalone probe on this project's 2-core
#: machine: 0.216 s in chunks of one tile, 0.233 s in chunks of four).
STREAM_BYTES = 64 << 20
STREAM_CHUNK_BYTES = 16 << 20
LOCAL_STREAM_CHUNK_BYTES = 4 << 20


class _StreamedTiles:
    """The raw tiles of one attribute of a large box write, as an async iterator of chunks
    of whole tiles (about ``chunk_bytes`` each) in the object's order, for uploads; or, with
    :meth:`chunks`, as a plain iterator for a thread that writes a local file.

    Each chunk is serialised and checksummed on a worker thread, up to ``ahead`` chunks
    before the upload asks for them, so serialising overlaps with writing and only the
    chunks in flight are held in memory (not a copy of the whole attribute). ``crcs`` is
    complete once the iterator is exhausted.
    """

    def __init__(self, schema: ArraySchema, attr: Attr, data: np.ndarray, box: Box,
                 boxes: list[Box], tile_bytes: int, chunk_bytes: int | None = None,
                 ahead: int = 2) -> None:
        self.schema, self.attr, self.data, self.box = schema, attr, data, box
        self.boxes, self.tile_bytes = boxes, tile_bytes
        per = max(1, (chunk_bytes or STREAM_CHUNK_BYTES) // tile_bytes)
        self.chunk_bytes = per * tile_bytes
        self.spans = [(lo, min(lo + per, len(boxes))) for lo in range(0, len(boxes), per)]
        self.crcs = np.zeros(len(boxes), dtype=np.uint32)
        self.ahead = max(1, ahead)

    def _fill(self, lo: int, hi: int) -> np.ndarray:
        out = np.empty((hi - lo) * self.tile_bytes, dtype=np.uint8)
        _fill_raw_tiles(out, self.crcs, lo, hi, self.schema, self.attr, self.data, self.box,
                        self.boxes)
        return out

    def chunks(self) -> Generator[np.ndarray, None, None]:
        """The chunks in order, each filled by one helper thread up to ``ahead`` chunks
        before the caller asks for it: for :meth:`AsyncStore.write_file_chunks` on a worker
        thread, so filling and writing take turns on two threads with no trip through the
        event loop per chunk (in a 1 GiB write on this project's 2-core machine, those trips
        cost about a fifth of the time when both cores were busy)."""
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tessera-fill")
        pending: collections.deque[concurrent.futures.Future[np.ndarray]] = collections.deque()
        spans = iter(self.spans)
        try:
            for span in itertools.islice(spans, self.ahead):
                pending.append(pool.submit(self._fill, *span))
            while pending:
                chunk = pending.popleft().result()
                nxt = next(spans, None)
                if nxt is not None:
                    pending.append(pool.submit(self._fill, *nxt))
                yield chunk
        finally:
            for f in pending:
                f.cancel()
            pool.shutdown(wait=True)

    async def __aiter__(self) -> Any:
        pending: list[asyncio.Future[np.ndarray]] = []
        spans = iter(self.spans)
        try:
            for span in itertools.islice(spans, self.ahead):
                pending.append(asyncio.ensure_future(asyncio.to_thread(self._fill, *span)))
            while pending:
                chunk = await pending.pop(0)
                nxt = next(spans, None)
                if nxt is not None:
                    pending.append(asyncio.ensure_future(asyncio.to_thread(self._fill, *nxt)))
                yield chunk
        finally:
            for f in pending:
                f.cancel()


def _write_file_stream(store: AsyncStore, key: str, stream: _StreamedTiles) -> PutResult:
    """Write ``stream`` to a folder store's object ``key`` on the calling thread; its
    helper thread is stopped whether or not the write lands."""
    chunks = stream.chunks()
    try:
        return store.write_file_chunks(key, chunks)
    finally:
        chunks.close()


def _work_groups(n: int, nbytes: int, min_bytes: int = 8 << 20) -> list[tuple[int, int]]:
    """Split ``n`` tiles into contiguous groups, one per worker; one group for small writes."""
    workers = min(n, os.cpu_count() or 1, max(1, nbytes // min_bytes))
    bounds = np.linspace(0, n, workers + 1).astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]


async def _run_groups(fn: Any, groups: list[tuple[int, int]]) -> None:
    if len(groups) == 1:
        fn(*groups[0])
        return
    await asyncio.gather(*(asyncio.to_thread(fn, lo, hi) for lo, hi in groups))


def _fill_raw_tiles(out: np.ndarray, crcs: np.ndarray, lo: int, hi: int, schema: ArraySchema,
                    attr: Attr, data: np.ndarray, box: Box, boxes: list[Box]) -> None:
    """Write tiles ``lo..hi-1`` of a box write end to end into ``out`` and their checksums
    into ``crcs[lo:hi]``."""
    size = len(out) // (hi - lo)
    for i in range(lo, hi):
        dest = out[(i - lo) * size:(i - lo + 1) * size]
        _fill_raw_tile(dest, schema, attr, data, box, boxes[i])
        crcs[i] = checksum(dest, DEFAULT_CHECKSUM)


def _fill_raw_tile(dest: np.ndarray, schema: ArraySchema, attr: Attr, data: np.ndarray,
                   box: Box, tb: Box) -> None:
    """Write space tile ``tb`` of a box write into ``dest`` (its raw bytes, in cell order)."""
    view = tile_from_bytes(dest.data, schema, attr)  # a writable view of dest
    src, dst, whole = _overlap(box, tb)
    if not whole:
        view[...] = attr.fill_value
    view[dst] = data[src]


def _overlap(box: Box, tb: Box) -> tuple[tuple[slice, ...], tuple[slice, ...], bool]:
    """Where a written box and a space tile meet: the slices of it in the box's values and
    in the tile, and whether the tile lies wholly inside the box."""
    inter_lo = [max(a, b) for a, b in zip(box[0], tb[0], strict=True)]
    inter_hi = [min(a, b) for a, b in zip(box[1], tb[1], strict=True)]
    src = tuple(slice(lo - o, hi - o + 1) for lo, hi, o in zip(inter_lo, inter_hi, box[0],
                                                                strict=True))
    dst = tuple(slice(lo - o, hi - o + 1) for lo, hi, o in zip(inter_lo, inter_hi, tb[0],
                                                                strict=True))
    return src, dst, inter_lo == list(tb[0]) and inter_hi == list(tb[1])


def _dense_tile(schema: ArraySchema, fill: Any, data: np.ndarray, box: Box, tb: Box,
                cell_shape: tuple[int, ...]) -> np.ndarray:
    """The space tile ``tb`` of a box write: the box's cells, the fill value elsewhere."""
    src, dst, whole = _overlap(box, tb)
    if whole:
        return data[src]  # the tile lies inside the box: a view, serialised once later
    tile = np.full(schema.tile_shape + cell_shape, fill, dtype=data.dtype)
    tile[dst] = data[src]
    return tile
