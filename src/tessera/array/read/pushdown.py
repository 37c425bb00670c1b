"""Reads through a pushdown server: the tile reads a plan assigned to ``pushdown`` become
batches of :class:`~tessera.pushdown.read_items.TileItem` (sparse data tiles: ``CellsItem``),
the server returns only the selected cells, and whatever it cannot answer (the whole batch
on a connection error, timeout or refusal; single items on a damaged or missing tile) is
fetched directly instead, as the ArrayMorph paper's executor falls back from a lambda to Get.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tessera.array.sparse import coords_dtype
from tessera.errors import PushdownError
from tessera.format.schema import ArraySchema
from tessera.format.selection import Selection, SparseSelection
from tessera.format.tile import CellTileRead, Piece, TileRead, positions, tile_cells
from tessera.pushdown.fleet import PushdownServer
from tessera.pushdown.framing import ItemError, ItemResult
from tessera.pushdown.read_items import (
    CellAttr,
    CellBox,
    CellsItem,
    Index,
    ReadItem,
    TileItem,
    dim_select,
)
from tessera.storage.stats import RequestRecord
from tessera.storage.url import StoreURL

log = logging.getLogger("tessera.pushdown")


@dataclasses.dataclass
class PushdownReader:
    """A pushdown server as one read uses it.

    Attributes:
        client: the server's client.
        array_path: the array's path below the server's root (see :meth:`resolve`); while
            ``None``, every item falls back.
        record: where each request's accounting goes (the array store's stats).
        memory_gb: memory billed per pushdown second (the profile's ``M_lambda``).
        array_url: the array's store URL (a :class:`~tessera.storage.url.StoreURL`).
        fallbacks: items of this read fetched directly because the server failed them.
        reasons: those items by reason (a short phrase such as ``"server unreachable"``
            or ``"tile failed on the server (HTTP 500)"``).
        details: the first full message seen for each reason.
        last_error: the last full message.
        servers: requests of this read per server URL (several with a fleet).
    """

    client: PushdownServer
    array_path: str | None
    record: Callable[[RequestRecord], None] | None = None
    memory_gb: float = 1.0
    fallbacks: int = 0
    last_error: str | None = None
    array_url: StoreURL | None = None
    reasons: dict[str, int] = dataclasses.field(default_factory=dict)
    details: dict[str, str] = dataclasses.field(default_factory=dict)
    servers: dict[str, int] = dataclasses.field(default_factory=dict)
    _resolving: asyncio.Future[str] | None = dataclasses.field(default=None, repr=False)
    _unresolved: PushdownError | None = dataclasses.field(default=None, repr=False)

    def _count(self, rec: RequestRecord) -> None:
        """Count a request by its server, then record it as the store's."""
        server = rec.key.rsplit("/v1/", 1)[0]
        self.servers[server] = self.servers.get(server, 0) + 1
        if self.record is not None:
            self.record(rec)

    def fell_back(self, items: int, reason: str, detail: str) -> None:
        """Note ``items`` fetched directly for ``reason`` (``detail``: the full message)."""
        self.fallbacks += items
        self.reasons[reason] = self.reasons.get(reason, 0) + items
        self.details.setdefault(reason, detail)
        self.last_error = detail

    async def resolve(self) -> str | None:
        """Find the array's path below the server's root, once per reader (the first
        batch asks the server; a plan without pushdown never does). ``None`` when the
        server cannot be asked or does not serve the array (``last_error`` says why)."""
        if self.array_path is not None:
            return self.array_path
        if self.array_url is None:
            self._unresolved = PushdownError("pushdown reads need the array's path below the "
                                             "server's root or its URL; neither was given")
            self.last_error = str(self._unresolved)
            return None
        if self._resolving is None:
            self._resolving = asyncio.ensure_future(self.client.array_path(self.array_url))
        try:
            self.array_path = await asyncio.shield(self._resolving)
        except PushdownError as err:
            self.last_error = str(err)
            self._unresolved = err
        return self.array_path

    def batches(self, sizes: list[int]) -> list[list[int]]:
        """Positions grouped into requests of at most ``batch_items`` items and
        ``batch_bytes`` selected bytes each (an item larger than that goes alone). Answers
        asked for whole are also spread over at least ``batch_parallel`` requests when there
        are that many items, so the server's work on one batch overlaps the transfer of
        another; a streamed answer overlaps them within one request (measured with the
        S3 test server, an 82-column slab of 8 tiles through a cold server: one streamed
        request 0.031-0.055 s against 0.051-0.081 s for four, benchmarks/streaming.py)."""
        out: list[list[int]] = []
        cur: list[int] = []
        cur_bytes = 0
        cfg = self.client.config
        parallel = 1 if cfg.stream else cfg.batch_parallel
        per = min(cfg.batch_items, -(-len(sizes) // max(1, min(len(sizes), parallel))))
        for i, size in enumerate(sizes):
            if cur and (len(cur) >= per or cur_bytes + size > cfg.batch_bytes):
                out.append(cur)
                cur, cur_bytes = [], 0
            cur.append(i)
            cur_bytes += size
        if cur:
            out.append(cur)
        return out

    async def read(self, items: Sequence[ReadItem],
                   place: Callable[[int, dict[str, np.ndarray]], None] | None = None,
                   ) -> list[dict[str, np.ndarray] | None]:
        """One result per item; ``None`` where the caller must fetch the tile itself.
        Items built before the array's path was known carry ``""``; they get it here.

        With ``place``, each answer that fits its item is handed to ``place(index, result)``
        as soon as it arrives (a streamed answer: while the server still works on the
        others), and exactly once; then every entry that is not ``None`` has been placed."""
        path = await self.resolve()
        if path is None:
            err = self._unresolved
            self.fell_back(len(items), "server unreachable or not serving this array"
                           if err is None or err.status is None
                           else f"server refused (HTTP {err.status})",
                           self.last_error or "the server was not asked")
            return [None] * len(items)
        items = [i if i.array == path else dataclasses.replace(i, array=path) for i in items]
        placed: set[int] = set()

        def arrived(index: int, res: ItemResult) -> None:
            if (place is not None and not isinstance(res, ItemError)
                    and _mismatch(items[index], res) is None and index not in placed):
                placed.add(index)
                place(index, res)

        try:
            response = await self.client.read(items, self._count, self.memory_gb,
                                              arrived if place is not None else None)
        except PushdownError as err:
            self.fell_back(len(items), "request failed (no answer)" if err.status is None
                           else f"request failed (HTTP {err.status})", str(err))
            log.debug("pushdown failed, fetching %d tiles directly: %s", len(items), err)
            return [None] * len(items)
        out: list[dict[str, np.ndarray] | None] = []
        for item, res in zip(items, response.results, strict=True):
            if isinstance(res, ItemError):
                self.fell_back(1, f"tile failed on the server (HTTP {res.status})", res.error)
                out.append(None)
            elif (problem := _mismatch(item, res)) is not None:
                self.fell_back(1, "the server's answer did not fit the request", problem)
                out.append(None)
            else:
                out.append(res)
        return out


def _mismatch(item: ReadItem, res: dict[str, np.ndarray]) -> str | None:
    """Why an answer does not fit its item (``None`` when it does): a server of another
    version or a broken one must not put wrong cells into the output."""
    if isinstance(item, TileItem):
        cells = res.get("cells")
        if cells is None or cells.shape != item.out_shape or cells.dtype != np.dtype(
                item.dtype):
            return (f"pushdown answer for {item.key} has shape "
                    f"{None if cells is None else cells.shape}, expected {item.out_shape}")
        return None
    coords = res.get("coords")
    if coords is None or coords.ndim != 2 or coords.shape[1] != item.ndim:
        return f"pushdown answer for {item.coords.key} has no {item.ndim}-D coordinates"
    for name, attr in item.attrs:
        values = res.get(f"attr:{name}")
        if values is None or values.shape != (len(coords), *attr.cell_shape):
            return f"pushdown answer for {item.coords.key} lacks values of {name!r}"
    return None


def tile_item(schema: ArraySchema, read: TileRead, sel: Selection, array_path: str | None,
              ) -> TileItem:
    """The pushdown item for a dense tile read: the tile and the cells ``sel`` takes from it,
    in the order the output wants them."""
    attr = schema.attr(read.attr)
    found = tile_cells(read, sel)
    select = (tuple(dim_select(positions(i)) for i in found[0]) if found is not None
              else tuple(Index(()) for _ in sel.dims))
    return TileItem(array_path or "", read.key, read.offset, read.length, read.codec, read.crc32,
                    attr.np_dtype.str, attr.cell_shape, schema.tile_shape,
                    schema.cell_order, select, read.blocks, read.checksum)


def _piece(p: Piece) -> Piece:
    """A piece as the wire carries it (its inline bytes stay here)."""
    return Piece(p.key, p.offset, p.length, p.codec, p.crc32, checksum=p.checksum)


def cells_item(schema: ArraySchema, read: CellTileRead, box: SparseSelection,
               array_path: str | None,
               ) -> CellsItem:
    """The pushdown item for a sparse data tile: its cells inside ``box``
    (a :class:`~tessera.format.selection.SparseSelection`)."""
    attrs = []
    for name, piece in read.attrs.items():
        if name.startswith("__"):
            attrs.append((name, CellAttr(_piece(piece), "|u1", ())))
        else:
            a = schema.attr(name)
            attrs.append((name, CellAttr(_piece(piece), a.np_dtype.str, a.cell_shape)))
    members = tuple(None if m is None else tuple(np.asarray(m).tolist()) for m in box.members)
    return CellsItem(array_path or "", _piece(read.coords), coords_dtype(schema).str, schema.ndim,
                     tuple(attrs),
                     CellBox(tuple(_plain(v) for v in box.lo), tuple(_plain(v) for v in box.hi),
                             tuple(bool(b) for b in box.hi_open), members))


def _plain(v: Any) -> float:
    return v.item() if isinstance(v, np.generic) else v  # type: ignore[no-any-return]
