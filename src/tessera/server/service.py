"""The work behind ``POST /v1/read``: read each requested tile from the store (or the decoded
tile cache), verify its checksum, decode it and keep only the requested cells. Of a
compressed tile stored in blocks, only the blocks holding the requested cells are read,
checked and decoded (unless the whole tile is in the cache).

Stateless: a request carries everything needed to find and interpret its tiles, so any
server beside the store can answer any request. Each distinct piece of a request is read
once; tiles of 1 MiB and more are verified, decoded and sliced on worker threads.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from tessera.array.read.local import THREAD_BYTES
from tessera.errors import CorruptDataError, InvalidRangeError, ObjectNotFoundError, StorageError
from tessera.format.blocks import TileBlocks, decode_blocked
from tessera.format.codecs import get_codec
from tessera.format.decompose import tile_byte_ranges
from tessera.format.layout import tile_view
from tessera.format.selection import SparseSelection
from tessera.format.tile import Piece, verify_piece
from tessera.pushdown.framing import ItemError, ItemResult
from tessera.pushdown.read_items import CellsItem, ReadItem, TileItem, select_positions
from tessera.server.cache import TileCache
from tessera.storage.keys import join_key
from tessera.storage.store import AsyncStore


class ItemFailure(Exception):
    """One item cannot be answered; becomes an :class:`ItemError` in the response."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ReadService:
    """Answers batches of tile and cell reads against one store.

    Args:
        store: the store below the served root (the server's own, with its own options).
        cache: decoded tiles kept between requests.
    """

    def __init__(self, store: AsyncStore, cache: TileCache) -> None:
        self.store = store
        self.cache = cache

    async def read(self, items: list[ReadItem]) -> tuple[list[ItemResult], float]:
        """One result per item (cells, or an error for that item) and the seconds spent."""
        t0 = time.perf_counter()
        results: list[ItemResult | None] = [None] * len(items)
        async for index, result in self.answers(items):
            results[index] = result
        return [r for r in results if r is not None], time.perf_counter() - t0

    async def answers(self, items: list[ReadItem]) -> AsyncIterator[tuple[int, ItemResult]]:
        """``(index, result)`` of every item as soon as it is answered, in the order answers
        complete (every item read at once, each distinct piece once). Closing the iterator
        early cancels what is still running."""
        pending: dict[tuple[Any, ...], asyncio.Task[Any]] = {}

        def cache_key(array: str, piece: Piece) -> tuple[Any, ...]:
            return (join_key(array, piece.key), piece.offset, piece.length, piece.crc32,
                    piece.codec, piece.checksum)

        def decoded(array: str, piece: Piece, threaded: bool) -> asyncio.Task[Any]:
            key = cache_key(array, piece)
            task = pending.get(key)
            if task is None:
                task = pending[key] = asyncio.ensure_future(
                    self._decoded(key, threaded, piece.blocks))
            return task

        async def one(item: ReadItem) -> ItemResult:
            try:
                if isinstance(item, TileItem):
                    big = item.tile_bytes >= THREAD_BYTES
                    if (item.blocks is not None
                            and cache_key(item.array, item.piece) not in self.cache):
                        some = _needed_blocks(item)
                        if len(some) < item.blocks.count:  # only the blocks holding cells
                            return await self._from_blocks(item, some)
                    data = await decoded(item.array, item.piece, big)
                    if big:
                        return await asyncio.to_thread(_slice_tile, item, data)
                    return _slice_tile(item, data)
                coords = decoded(item.array, item.coords, False)
                values = [decoded(item.array, a.piece, False) for _, a in item.attrs]
                return _select_cells(item, await coords, [await v for v in values])
            except ItemFailure as err:
                return ItemError(err.status, str(err))

        async def indexed(index: int, item: ReadItem) -> tuple[int, ItemResult]:
            return index, await one(item)

        tasks = [asyncio.ensure_future(indexed(i, item)) for i, item in enumerate(items)]
        try:
            for next_done in asyncio.as_completed(tasks):
                yield await next_done
        finally:
            for task in [*tasks, *pending.values()]:
                task.cancel()
            await asyncio.gather(*tasks, *pending.values(), return_exceptions=True)

    async def _decoded(self, key: tuple[Any, ...], threaded: bool,
                       blocks: TileBlocks | None = None) -> Any:
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        full_key, offset, length, crc, codec, algorithm = key
        where = f"{full_key} bytes {offset}..{offset + length}"
        data = await self._read(full_key, offset, length, where)

        def check() -> Any:
            try:
                piece = Piece(full_key, offset, length, codec, crc, blocks=blocks,
                              checksum=algorithm)
                return verify_piece(data, piece, where)
            except CorruptDataError as err:
                raise ItemFailure(422, str(err)) from None
            except Exception as err:  # the client named a codec the bytes are not in
                raise ItemFailure(422, f"{where}: cannot decode with {codec}: {err}") from None

        out = await asyncio.to_thread(check) if threaded else check()
        self.cache.put(key, out)
        return out

    async def _read(self, full_key: str, offset: int, length: int, where: str) -> Any:
        """Stored bytes for an item; a missing object or a failing store fails the item, an
        object that ends early gives fewer bytes (the caller's checks name it)."""
        try:
            return await self.store.get_range(full_key, offset, length) if length else b""
        except ObjectNotFoundError:
            raise ItemFailure(404, f"{full_key}: no such object") from None
        except InvalidRangeError:
            return b""
        except StorageError as err:
            raise ItemFailure(502, f"reading {where} failed: {err}") from None

    async def _from_blocks(self, item: TileItem, indices: np.ndarray) -> dict[str, np.ndarray]:
        """The selected cells of a blocked tile, from only the blocks holding them: each
        run of neighbouring blocks is one range read, each block is checked against its own
        checksum and decoded alone. Not cached (the cache holds whole decoded tiles)."""
        blocks = item.blocks
        assert blocks is not None and item.codec is not None
        full_key = join_key(item.array, item.key)
        where = f"{full_key} bytes {item.offset}..{item.offset + item.length}"
        buf = np.empty(item.length, dtype=np.uint8)

        async def fetch(lo: int, hi: int) -> None:
            got = await self._read(full_key, item.offset + lo, hi - lo, where)
            if len(got) != hi - lo:
                raise ItemFailure(422, f"{where}: the object is truncated (wanted {hi - lo} "
                                       f"bytes at {item.offset + lo}, got {len(got)})")
            buf[lo:hi] = np.frombuffer(memoryview(got), dtype=np.uint8)

        await asyncio.gather(*(fetch(int(a), int(b)) for a, b in blocks.spans(indices)))

        def decode() -> dict[str, np.ndarray]:
            try:
                raw = decode_blocked(get_codec(item.codec), buf, blocks, indices, check=True,
                                     where=where)
            except CorruptDataError as err:
                raise ItemFailure(422, str(err)) from None
            return _slice_tile(item, raw)

        big = len(indices) * blocks.block_bytes >= THREAD_BYTES
        return await asyncio.to_thread(decode) if big else decode()


def _needed_blocks(item: TileItem) -> np.ndarray:
    """Indices of the blocks of a blocked tile item that hold its selected cells."""
    assert item.blocks is not None
    sets = [select_positions(s) for s in item.select]
    cell_nbytes = math.prod(item.cell_shape) * np.dtype(item.dtype).itemsize
    ranges = tile_byte_ranges(item.tile_shape, cell_nbytes, item.cell_order, sets)
    return item.blocks.block_span(ranges)


def _slice_tile(item: TileItem, data: Any) -> dict[str, np.ndarray]:
    if len(memoryview(data).cast("B")) != item.tile_bytes:
        raise ItemFailure(422, f"{item.array}/{item.key} bytes {item.offset}.."
                               f"{item.offset + item.length}: the decoded tile has "
                               f"{len(data)} bytes, not {item.tile_bytes} (shape "
                               f"{item.tile_shape}, dtype {item.dtype})")
    tile = tile_view(data, item.dtype, item.tile_shape, item.cell_shape, item.cell_order)
    idx = [s.as_index() for s in item.select]
    if all(isinstance(i, slice) for i in idx):
        picked = tile[tuple(idx)]
    else:
        picked = tile[np.ix_(*[select_positions(s) for s in item.select])]
    return {"cells": np.ascontiguousarray(picked)}


def _select_cells(item: CellsItem, coords_raw: Any, values_raw: list[Any],
                  ) -> dict[str, np.ndarray]:
    where = f"{item.array}/{item.coords.key} (data tile at {item.coords.offset})"
    cdt = np.dtype(item.coords_dtype)
    raw = memoryview(coords_raw).cast("B")
    if len(raw) % (cdt.itemsize * item.ndim):
        raise ItemFailure(422, f"{where}: coordinates do not fit {item.ndim} dimensions")
    coords = np.frombuffer(raw, cdt).reshape(-1, item.ndim)
    box = item.box
    keep = SparseSelection(box.lo, box.hi, box.hi_open,
                           tuple(None if m is None else np.asarray(m) for m in box.members)
                           ).mask(coords)
    out = {"coords": np.ascontiguousarray(coords[keep])}
    for (name, attr), data in zip(item.attrs, values_raw, strict=True):
        dt = np.dtype(attr.dtype)
        per = dt.itemsize * int(np.prod(attr.cell_shape, dtype=np.int64))
        buf = memoryview(data).cast("B")
        if len(buf) != per * len(coords):
            raise ItemFailure(422, f"{where}: attribute {name!r} holds {len(buf)} bytes for "
                                   f"{len(coords)} cells")
        values = np.frombuffer(buf, dt).reshape((len(coords), *attr.cell_shape))
        out[f"attr:{name}"] = np.ascontiguousarray(values[keep])
    return out
