"""The read path of the array engine: selection x fragments -> a list of :class:`TileRead`,
then an executor that fetches whole tiles concurrently, verifies, decodes and scatters them
into the output, newest fragment winning per cell.

The list of tile reads is the seam the read planner replaces the executor's choices at: each
entry names the object, the tile's byte offset and length, its codec and shape, the cells it
contributes and where they land in the output.
"""

from __future__ import annotations

import asyncio
import dataclasses
import zlib
from typing import Any

import numpy as np

from tessera.array.codecs import get_codec
from tessera.array.fragment import FragmentMeta
from tessera.array.layout import Box, covered, intersect, tile_box, tile_from_bytes, tile_position
from tessera.array.schema import ArraySchema, Attr
from tessera.errors import CorruptDataError, InvalidRangeError, ObjectNotFoundError
from tessera.query.selection import Selection
from tessera.storage.store import AsyncStore


@dataclasses.dataclass(frozen=True)
class TileRead:
    """One tile of one attribute of one fragment that a read needs.

    Attributes:
        fragment: fragment name; ``rank`` orders fragments (higher = newer, wins).
        attr: attribute name.
        key: the data object holding the tile.
        offset, length: the tile's bytes in that object.
        codec: codec spec (``None``: raw, range-readable).
        crc32: checksum of the stored bytes.
        tile_index: the space tile's index; ``tile_origin`` its first coordinate.
        region: inclusive box of cells this read contributes (tile x fragment x selection).
    """

    fragment: str
    rank: int
    attr: str
    key: str
    offset: int
    length: int
    codec: str | None
    crc32: int
    tile_index: tuple[int, ...]
    tile_origin: tuple[int, ...]
    region: Box


@dataclasses.dataclass
class ReadReport:
    """What the latest read did: the tile reads, fragments consulted and skipped, I/O stats."""

    tile_reads: list[TileRead]
    fragments_used: int
    fragments_skipped: int
    stats: Any = None


def plan_tile_reads(schema: ArraySchema, sel: Selection, metas: list[FragmentMeta],
                    attrs: list[str]) -> tuple[list[TileRead], int]:
    """Tile reads for ``sel`` over ``metas`` (oldest first). Tiles whose contribution is fully
    covered by newer fragments are left out. Returns the reads and the fragments skipped."""
    if sel.empty:
        return [], len(metas)
    bbox = sel.bounds()
    boxes: list[Box | None] = [intersect(m.subarray, bbox) for m in metas]
    reads: list[TileRead] = []
    skipped = 0
    for rank, (meta, fbox) in enumerate(zip(metas, boxes, strict=True)):
        if fbox is None:
            skipped += 1
            continue
        newer = [b for b in boxes[rank + 1:] if b is not None]
        if newer and covered(fbox, newer):
            skipped += 1
            continue
        ext = np.array(schema.tile_shape)
        low = np.array(schema.lower)
        tlo = (np.array(fbox[0]) - low) // ext
        thi = (np.array(fbox[1]) - low) // ext
        grid = np.stack(np.meshgrid(*[np.arange(a, b + 1) for a, b in zip(tlo, thi,
                                                                          strict=True)],
                                    indexing="ij"), axis=-1).reshape(-1, schema.ndim)
        used = False
        for index_arr in grid:
            index = tuple(int(i) for i in index_arr)
            tb = tile_box(schema, index)
            region = intersect(tb, fbox)
            if region is None or not _selects_any(sel, region):
                continue
            if newer and covered(region, newer):
                continue
            pos = tile_position(schema, meta.tile_lo, meta.tile_hi, index)
            used = True
            for name in attrs:
                at = meta.attrs[name]
                reads.append(TileRead(meta.name, rank, name, at.key, int(at.offsets[pos]),
                                      int(at.sizes[pos]), at.codec, int(at.crc32[pos]),
                                      index, tb[0], region))
        skipped += 0 if used else 1
    return reads, skipped


def _selects_any(sel: Selection, region: Box) -> bool:
    return all(len(d.within(lo, hi)[0]) > 0
               for d, lo, hi in zip(sel.dims, region[0], region[1], strict=True))


async def execute_tile_reads(store: AsyncStore, schema: ArraySchema, sel: Selection,
                             reads: list[TileRead], attrs: list[str], array_url: str,
                             ) -> dict[str, np.ndarray]:
    """Fetch, verify, decode and scatter every tile read; returns full-shape outputs."""
    outputs: dict[str, np.ndarray] = {}
    ranks: dict[str, np.ndarray | None] = {}
    multi = len({r.rank for r in reads}) > 1
    for name in attrs:
        attr = schema.attr(name)
        outputs[name] = np.full(sel.full_shape + attr.cell_shape, attr.fill_value,
                                dtype=attr.np_dtype)
        ranks[name] = np.full(sel.full_shape, -1, dtype=np.int32) if multi else None
    limit = asyncio.Semaphore(store.config.max_concurrency)

    async def one(read: TileRead) -> None:
        async with limit:
            tile = await _fetch_tile(store, schema, schema.attr(read.attr), read, array_url)
        _scatter(outputs[read.attr], ranks[read.attr], tile, read, sel)

    tasks = [asyncio.ensure_future(one(r)) for r in reads]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return outputs


async def _fetch_tile(store: AsyncStore, schema: ArraySchema, attr: Attr, read: TileRead,
                      array_url: str) -> np.ndarray:
    where = (f"array {array_url}, fragment {read.fragment}, attribute {read.attr!r}, "
             f"tile {read.tile_index}")
    try:
        data = await store.get_range(read.key, read.offset, read.length) if read.length else b""
    except ObjectNotFoundError:
        raise CorruptDataError(f"{where}: data object {read.key} is missing") from None
    except InvalidRangeError:
        data = b""  # the object ends before this tile starts: truncated
    if len(data) != read.length:
        raise CorruptDataError(f"{where}: data object {read.key} is truncated (wanted "
                               f"{read.length} bytes at {read.offset}, got {len(data)})")
    if zlib.crc32(memoryview(data)) != read.crc32:
        raise CorruptDataError(f"{where}: checksum mismatch in {read.key}; the stored bytes are "
                               "damaged")
    raw = get_codec(read.codec).decode(memoryview(data)) if read.codec else data
    try:
        return tile_from_bytes(raw, schema, attr)
    except ValueError as err:
        raise CorruptDataError(f"{where}: decoded tile has the wrong size: {err}") from None


def _scatter(out: np.ndarray, rank_arr: np.ndarray | None, tile: np.ndarray, read: TileRead,
             sel: Selection) -> None:
    src: list[Any] = []
    dst: list[Any] = []
    for d, lo, hi, origin in zip(sel.dims, read.region[0], read.region[1], read.tile_origin,
                                 strict=True):
        coords, pos = d.within(lo, hi)
        if len(coords) == 0:
            return
        src.append(_index(coords - origin))
        dst.append(_index(pos))
    if all(isinstance(i, slice) for i in src + dst):
        s_idx: Any = tuple(src)
        d_idx: Any = tuple(dst)
    else:
        s_idx = np.ix_(*[_as_array(i) for i in src])
        d_idx = np.ix_(*[_as_array(i) for i in dst])
    values = tile[s_idx]
    if rank_arr is None:
        out[d_idx] = values
        return
    current = rank_arr[d_idx]
    newer = current < read.rank
    if newer.all():
        out[d_idx] = values
        rank_arr[d_idx] = read.rank
    elif newer.any():
        block = out[d_idx]
        block[newer] = values[newer]
        out[d_idx] = block
        rank_arr[d_idx] = np.where(newer, read.rank, current)


def _index(arr: np.ndarray) -> slice | np.ndarray:
    """A slice when ``arr`` is a run of consecutive integers (basic indexing, no copy)."""
    if len(arr) == 1 or (len(arr) > 1 and arr[-1] - arr[0] == len(arr) - 1
                         and bool(np.all(np.diff(arr) == 1))):
        return slice(int(arr[0]), int(arr[-1]) + 1)
    return arr


def _as_array(i: slice | np.ndarray) -> np.ndarray:
    return np.arange(i.start, i.stop) if isinstance(i, slice) else i
