"""Fetching tiles: :class:`TileFetcher` (each tile once, whole or from the plan's ranges,
verified and decoded), single pieces (:func:`fetch_piece`) and sparse data tiles
(:func:`fetch_cells`, inline ones decoded once per handle)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import numpy as np

from tessera.array.sparse import coords_dtype
from tessera.errors import CorruptDataError, InvalidRangeError, ObjectNotFoundError
from tessera.format.blocks import decode_blocked
from tessera.format.codecs import get_codec
from tessera.format.layout import (
    tile_from_bytes,
    tile_nbytes,
)
from tessera.format.schema import ArraySchema, Attr
from tessera.format.tile import (
    CellTileRead,
    Piece,
    TileRead,
    check_length,
    verify_piece,
)
from tessera.query.methods import read_method
from tessera.query.plan import Plan
from tessera.query.refine import PlannedRequest
from tessera.storage.store import AsyncStore
from tessera.storage.window import ByteWindow


class TileFetcher:
    """Fetches and decodes the tiles of a read as its plan says, each once.

    ``reads[i]`` is fetched whole (a get, checked against its crc32) or, when the plan says
    ``range`` or shares a request with neighbouring tiles, assembled from the planned
    requests (each issued once, its bytes dropped once every tile made from it is made).

    A consumer takes a tile with :meth:`tile` and gives it back with :meth:`release` once
    placed; the tile is kept until its last consumer (see :meth:`expect`) gave it back.
    With a ``window`` (:class:`~tessera.storage.window.ByteWindow`) each tile takes its
    bytes (:meth:`held_bytes`) from the window before its request is issued and returns
    them when released, so the read holds at most the window beside its outputs.
    """

    def __init__(self, store: AsyncStore, schema: ArraySchema, reads: list[TileRead],
                 plan: Plan | None, array_url: str, limit: asyncio.Semaphore | None = None,
                 window: ByteWindow | None = None) -> None:
        self.store, self.schema, self.reads, self.plan = store, schema, reads, plan
        self.array_url = array_url
        self.limit = limit or asyncio.Semaphore(store.config.max_concurrency)
        self.window = window
        self._tiles: dict[int, asyncio.Task[np.ndarray]] = {}
        self._uses: dict[int, int] = {}
        self._charged: dict[int, int] = {}
        self._requests: dict[RequestId, asyncio.Task[Any]] = {}
        self._request_users: dict[RequestId, int] = {}

    def expect(self, position: int, uses: int = 1) -> None:
        """Announce ``uses`` more consumers of tile ``position`` (default: one each)."""
        self._uses[position] = self._uses.get(position, 0) + uses

    def decoded_bytes(self, position: int) -> int:
        """About how many bytes decoding tile ``position`` makes as its plan fetches it:
        the whole decoded tile for a get, the fetched part of it for planned ranges."""
        read = self.reads[position]
        whole = tile_nbytes(self.schema, self.schema.attr(read.attr))
        plan = self.plan
        if plan is None or not from_requests(plan, position):
            return max(whole, read.length)
        fetched = self._fetched_bytes(position)
        return fetched if read.length >= whole else fetched * whole // max(1, read.length)

    def held_bytes(self, position: int) -> int:
        """The bytes tile ``position`` holds from its request to its placing: its fetched
        bytes, plus its decoded bytes unless decoding gives a view of them (a raw tile got
        whole)."""
        read = self.reads[position]
        plan = self.plan
        if plan is None or not from_requests(plan, position):
            raw = read.codec is None and read.blocks is None
            return read.length + (0 if raw else self.decoded_bytes(position))
        return self._fetched_bytes(position) + self.decoded_bytes(position)

    def _fetched_bytes(self, position: int) -> int:
        """The bytes of tile ``position`` its planned requests fetch."""
        assert self.plan is not None
        read = self.reads[position]
        end = read.offset + read.length
        return sum(max(0, min(r.stop, end) - max(r.start, read.offset))
                   for r in self.plan.requests_for(position))

    async def tile(self, position: int, threaded: bool = False) -> np.ndarray:
        """The decoded tile ``position`` (shape ``tile_shape + cell_shape``); give it back
        with :meth:`release` once placed."""
        task = self._tiles.get(position)
        if task is None:
            task = asyncio.ensure_future(self._fetch(position, threaded))
            self._tiles[position] = task
        return await task

    def release(self, position: int) -> None:
        """One consumer of tile ``position`` is done with it; after the last, the tile is
        dropped and its bytes return to the window."""
        left = self._uses.get(position, 1) - 1
        self._uses[position] = left
        if left <= 0:
            self._tiles.pop(position, None)
            self._give_back(position)

    def _give_back(self, position: int) -> None:
        charged = self._charged.pop(position, 0)
        if charged and self.window is not None:
            self.window.release(charged)

    async def cancel(self) -> None:
        """Cancel every fetch still running."""
        pending = [*self._tiles.values(), *self._requests.values()]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _fetch(self, position: int, threaded: bool) -> np.ndarray:
        if self.window is not None:
            need = self.held_bytes(position)
            await self.window.acquire(need)
            self._charged[position] = need
        try:
            return await self._fetch_tile(position, threaded)
        except BaseException as err:
            self._give_back(position)  # a failed or cancelled fetch holds nothing
            if isinstance(err, CorruptDataError):  # say which tile, as fields and in words
                annotate(err, self.array_url, self.reads[position])
            raise

    async def _fetch_tile(self, position: int, threaded: bool) -> np.ndarray:
        read = self.reads[position]
        where = tile_where(self.array_url, read)
        plan = self.plan
        if plan is not None and from_requests(plan, position):
            requests = plan.requests_for(position)
            idents = request_idents(read, requests)
            if not self._request_users:
                self._count_request_users(plan)
            for ident in idents:  # issue them all before waiting for any
                if ident not in self._requests:
                    self._requests[ident] = asyncio.ensure_future(
                        self._fetch_request(*ident, where))
            fetched = {ident: await self._requests[ident] for ident in idents}
            for ident in idents:  # the last tile made from a request drops its bytes
                left = self._request_users.get(ident, 1) - 1
                self._request_users[ident] = left
                if left <= 0:
                    self._requests.pop(ident, None)

            def assemble() -> np.ndarray:
                return tile_from_requests(self.schema, read, requests, fetched, where)

            return await asyncio.to_thread(assemble) if threaded else assemble()
        async with self.limit:
            data = await fetch_bytes(self.store, read.piece, where)

        def decode() -> np.ndarray:
            return verified_tile(self.schema, read, data, where)

        return await asyncio.to_thread(decode) if threaded else decode()

    def _count_request_users(self, plan: Plan) -> None:
        """How many tiles are made from each planned request (counted once, when the first
        tile made from requests is fetched)."""
        for position, read in enumerate(self.reads):
            if from_requests(plan, position):
                for ident in request_idents(read, plan.requests_for(position)):
                    self._request_users[ident] = self._request_users.get(ident, 0) + 1

    async def _fetch_request(self, key: str, start: int, stop: int, where: str) -> Any:
        async with self.limit:
            return await fetch_span(self.store, key, start, stop, where)


#: A planned request's identity: ``(key, start, stop)``.
RequestId = tuple[str, int, int]


def from_requests(plan: Plan, position: int) -> bool:
    """True if tile ``position`` is assembled from the plan's requests (parts of it, or a
    request shared with neighbouring tiles) rather than fetched whole by a get of its own."""
    return reads_parts(plan.choices[position].method) or position in plan.shared_tiles


def request_idents(read: TileRead, requests: list[PlannedRequest]) -> list[RequestId]:
    """The requests a tile is assembled from: the first that holds the whole tile (a get
    shared with neighbours), else every one of them (parts of the tile)."""
    end = read.offset + read.length
    within = [r for r in requests if r.start <= read.offset and r.stop >= end]
    return [(r.key, r.start, r.stop) for r in (within[:1] or requests)]


def tile_from_requests(schema: ArraySchema, read: TileRead, requests: list[PlannedRequest],
                       fetched: Mapping[RequestId, Any], where: str) -> np.ndarray:
    """A tile made from the bytes of its planned requests (``fetched``, as
    :func:`request_idents` names them). A request that holds the whole tile gives a view of
    its buffer, checked and decoded like a get; otherwise the parts of a raw or blocked tile
    are placed in a tile buffer: the selected cells all lie in them (of a blocked tile: in
    the blocks they cover, each checked against its own checksum and decoded alone)."""
    attr = schema.attr(read.attr)
    end = read.offset + read.length
    idents = request_idents(read, requests)
    if len(idents) == 1 and idents[0][1] <= read.offset and idents[0][2] >= end:
        start = idents[0][1]
        data = memoryview(fetched[idents[0]])[read.offset - start:end - start]
        return verified_tile(schema, read, data, where)
    buf = np.empty(read.length, dtype=np.uint8)
    spans = []
    for key, start, stop in idents:
        got = np.frombuffer(memoryview(fetched[(key, start, stop)]), np.uint8)
        lo, hi = max(start, read.offset), min(stop, end)
        buf[lo - read.offset:hi - read.offset] = got[lo - start:hi - start]
        spans.append((lo - read.offset, hi - read.offset))
    if read.blocks is None:
        return decode_tile(schema, attr, buf.data, where)
    raw = decode_blocked(get_codec(read.codec), buf, read.blocks, read.blocks.covered(spans),
                         check=True, where=where)
    return decode_tile(schema, attr, raw.data, where)


def annotate(err: CorruptDataError, array_url: str, read: TileRead) -> None:
    """Name the damaged tile in ``err``'s fields (unless an inner step named one)."""
    if err.tile is None:
        err.array, err.fragment, err.attr = array_url, read.fragment, read.attr
        err.tile, err.key = tuple(int(i) for i in read.tile_index), read.key


async def fetch_bytes(store: AsyncStore, piece: Piece, where: str) -> Any:
    """One encoded tile's stored bytes (not yet verified); inline pieces need no request."""
    if piece.inline is not None:
        return piece.inline
    try:
        return (await store.get_range(piece.key, piece.offset, piece.length)
                if piece.length else b"")
    except (ObjectNotFoundError, InvalidRangeError) as err:
        return unread(err, piece.key, where)


def unread(err: Exception, key: str, where: str) -> bytes:
    """What a tile's read that failed with ``err`` yields: a missing data object raises
    ``CorruptDataError``; an object ending before the tile starts gives no bytes (the length
    check then names it truncated)."""
    if isinstance(err, ObjectNotFoundError):
        raise CorruptDataError(f"{where}: data object {key} is missing") from None
    return b""


async def fetch_span(store: AsyncStore, key: str, start: int, stop: int, where: str) -> Any:
    """The bytes ``[start, stop)`` of ``key`` (a planned request), all of them or an error
    naming ``where``."""
    piece = Piece(key, start, stop - start, None, 0)
    data = await fetch_bytes(store, piece, where)
    check_length(data, piece, where)
    return data


async def fetch_piece(store: AsyncStore, piece: Piece, where: str) -> Any:
    """One encoded tile's bytes, verified against its checksum and decoded."""
    return verify_piece(await fetch_bytes(store, piece, where), piece, where)


def verified_tile(schema: ArraySchema, read: TileRead, data: Any, where: str) -> np.ndarray:
    """A whole tile's stored bytes, checked against its checksum and decoded."""
    return decode_tile(schema, schema.attr(read.attr), verify_piece(data, read.piece, where),
                        where)


def decode_tile(schema: ArraySchema, attr: Attr, raw: Any, where: str) -> np.ndarray:
    try:
        return tile_from_bytes(raw, schema, attr)
    except ValueError as err:
        raise CorruptDataError(f"{where}: decoded tile has the wrong size: {err}") from None


async def fetch_cells(store: AsyncStore, schema: ArraySchema, read: CellTileRead,
                      array_url: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The coordinates ``(n, ndim)`` and attribute values of one sparse data tile."""
    if read.inline:
        return inline_cells(schema, read, array_url)
    where = f"array {array_url}, fragment {read.fragment}, data tile {read.tile}"
    pieces = [fetch_piece(store, read.coords, f"{where}, coordinates")]
    pieces += [fetch_piece(store, p, f"{where}, attribute {n!r}") for n, p in read.attrs.items()]
    return _parse_cells(schema, read, await asyncio.gather(*pieces), where)


def inline_cells(schema: ArraySchema, read: CellTileRead, array_url: str,
                 ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """:func:`fetch_cells` for a data tile kept inline: verified and decoded once per handle,
    then served from the fragment's cache."""
    key = (read.tile, tuple(read.attrs))
    if read.cache is not None and key in read.cache:
        coords, values = read.cache[key]
        return coords, dict(values)
    where = f"array {array_url}, fragment {read.fragment}, data tile {read.tile}"
    raw = [verify_piece(read.coords.inline, read.coords, f"{where}, coordinates")]
    raw += [verify_piece(p.inline, p, f"{where}, attribute {n!r}")
            for n, p in read.attrs.items()]
    coords, values = _parse_cells(schema, read, raw, where)
    if read.cache is not None:
        read.cache[key] = (coords, values)
    return coords, dict(values)


def _parse_cells(schema: ArraySchema, read: CellTileRead, raw: list[Any], where: str,
                 ) -> tuple[np.ndarray, dict[str, np.ndarray]]:

    try:
        coords = np.frombuffer(memoryview(raw[0]), coords_dtype(schema)).reshape(-1, schema.ndim)
        values = {}
        for (name, _), data in zip(read.attrs.items(), raw[1:], strict=True):
            if name.startswith("__"):  # internal per-cell flags, e.g. tombstones
                values[name] = np.frombuffer(memoryview(data), np.uint8)
                continue
            attr = schema.attr(name)
            values[name] = np.frombuffer(memoryview(data), attr.np_dtype).reshape(
                (len(coords), *attr.cell_shape))
    except ValueError as err:
        raise CorruptDataError(f"{where}: decoded tile has the wrong size: {err}") from None
    return coords, values


def tile_where(array_url: str, read: TileRead) -> str:
    return (f"array {array_url}, fragment {read.fragment}, attribute {read.attr!r}, "
            f"tile {read.tile_index}")


def reads_parts(method: str) -> bool:
    """True if tiles given ``method`` are assembled from byte requests for parts of the tile
    (``range``) rather than fetched whole."""
    m = read_method(method)
    return m.store_bytes and not m.whole_tile
