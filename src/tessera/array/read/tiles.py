"""Planning a read's tiles: selection x fragments -> the dense :class:`TileRead` list and the
sparse data tiles (:class:`CellTileRead`) it needs, newer dense fragments hiding what lies
under them. This list is the seam the planner (:mod:`tessera.query.plan`) and the executor
(:mod:`tessera.array.read.execute`) share."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Literal

import numpy as np

from tessera.array.fragment import AttrTiles, FragmentMeta
from tessera.array.read.fragment_index import (
    FragmentIndex,
    fragment_index,
    int_box,
    meta_box,
)
from tessera.format.layout import (
    Box,
    covered,
    intersect,
    subtract,
    tile_box,
    tile_position,
    tile_spans,
)
from tessera.format.schema import ArraySchema
from tessera.format.selection import Selection
from tessera.format.tile import (
    CellTileRead,
    Piece,
    TileRead,
)

__all__ = ["FragmentIndex", "TileReads", "bulk_tile_reads", "int_box", "meta_box", "plan_cells",
           "plan_tile_reads", "tile_grid", "tile_piece", "tile_read"]

#: What :func:`plan_tile_reads` returns: the dense tile reads, the sparse data-tile reads and
#: the number of fragments skipped.
TileReads = tuple[list[TileRead], list[CellTileRead], int]


def plan_tile_reads(schema: ArraySchema, sel: Selection, metas: list[FragmentMeta],
                    attrs: list[str]) -> TileReads:
    """Tile reads for ``sel`` over ``metas`` (oldest first). Tiles whose contribution is fully
    covered by newer dense fragments are left out. Returns the dense tile reads, the sparse
    data-tile reads and the number of fragments skipped.

    The fragments meeting each tile come from the list's :class:`FragmentIndex`; per tile,
    from the newest down, a fragment's part is read if it meets what newer dense fragments
    left uncovered there (the tile's remaining pieces, each newer dense box subtracted
    once): the work grows with the (fragment, tile) pairs that exist."""
    if sel.empty:
        return [], [], len(metas)
    plain = all(d.contiguous for d in sel.dims)  # every cell inside the bounds is selected
    bbox = sel.bounds()
    index = fragment_index(metas, schema)
    ranks = index.meeting(bbox)
    dense = [r for r in ranks if metas[r].is_dense]
    cell_reads: list[CellTileRead] = []
    used: set[int] = set()
    for rank in ranks:
        if metas[rank].is_dense:
            continue
        fbox = intersect(index.boxes[rank], bbox)
        assert fbox is not None
        newer = index.newer_dense(fbox, rank)
        if newer and covered(fbox, newer):
            continue
        found = plan_cells(metas[rank], rank, fbox, newer, attrs)
        cell_reads.extend(found)
        if found:
            used.add(rank)
    per_rank: dict[int, list[tuple[tuple[int, ...], Box]]] = {}
    if len(dense) == 1:  # one fragment: its tiles, nothing above them
        rank = dense[0]
        fbox = intersect(index.boxes[rank], bbox)
        assert fbox is not None
        if plain and math.prod(len(s) for s in tile_spans(schema.lower, schema.tile_shape,
                                                          fbox)) >= BULK_TILES:
            used.add(rank)
            return (bulk_tile_reads(schema, metas[rank], rank, fbox, attrs), cell_reads,
                    len(metas) - len(used))
        per_rank[rank] = [(i, r) for i, r in _tiles_of(schema, fbox)
                          if plain or _selects_any(sel, r)]
    elif dense:
        for tile, cands in index.per_tile(dense, bbox).items():
            region_box = intersect(tile_box(schema, tile), bbox)
            assert region_box is not None
            for rank, region in _visible_parts(index.boxes, cands, region_box):
                if plain or _selects_any(sel, region):
                    per_rank.setdefault(rank, []).append((tile, region))
    reads: list[TileRead] = []
    for rank in sorted(per_rank):
        meta = metas[rank]
        tiles = per_rank[rank]
        if not tiles:
            continue
        if len(dense) > 1:
            tiles.sort()  # each fragment's tiles in the order of its tile spans
        used.add(rank)
        for tile, region in tiles:
            pos = tile_position(schema, meta.tile_lo, meta.tile_hi, tile)
            origin = tuple(int(lw + i * e) for lw, i, e in zip(schema.lower, tile,
                                                               schema.tile_shape, strict=True))
            reads.extend(tile_read(meta, rank, name, pos, tile, origin, region)
                         for name in attrs)
    return reads, cell_reads, len(metas) - len(used)


#: A plain selection of one fragment's tiles meeting at least this many tiles has its tile
#: reads made with array operations (:func:`bulk_tile_reads`), not tile by tile.
BULK_TILES = 256


def bulk_tile_reads(schema: ArraySchema, meta: FragmentMeta, rank: int, box: Box,
                    attrs: list[str]) -> list[TileRead]:
    """The reads of every tile of fragment ``meta`` (of ``rank``) that ``box`` meets, for
    each attribute in ``attrs``, in the order :func:`plan_tile_reads` gives them (the tiles
    in the order of their spans, the attributes of a tile together): tile indices, origins,
    regions and positions in the fragment computed for all tiles at once."""
    spans = tile_spans(schema.lower, schema.tile_shape, box)
    if not spans:  # a 0-d array: its one tile
        return [tile_read(meta, rank, name, 0, (), (), box) for name in attrs]
    idx, pos = tile_grid(schema, meta, spans)
    lower = np.asarray(schema.lower, np.int64)
    extent = np.asarray(schema.tile_shape, np.int64)
    origin = lower + idx * extent
    lo = np.maximum(origin, np.asarray(box[0], np.int64))
    hi = np.minimum(origin + extent - 1, np.asarray(box[1], np.int64))
    keys = [tuple(r) for r in idx.tolist()]
    origins = [tuple(r) for r in origin.tolist()]
    regions = [(tuple(a), tuple(b)) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
    columns = []
    for name in attrs:
        at = meta.attrs[name]
        raw = (np.zeros(len(pos), bool) if at.stored_raw is None
               else np.asarray(at.stored_raw, bool)[pos])
        codecs = [None if r else at.codec for r in raw.tolist()]
        blocks = ([at.blocks(p) for p in pos.tolist()] if at.block_bytes
                  else [None] * len(pos))
        columns.append((name, at.key, at.offsets[pos].tolist(), at.sizes[pos].tolist(),
                        codecs, at.crc32[pos].tolist(), blocks, at.checksum))
    out: list[TileRead] = []
    for i in range(len(pos)):
        out.extend(TileRead(meta.name, rank, name, key, off[i], size[i], codecs[i], crc[i],
                            keys[i], origins[i], regions[i], blocks[i], check)
                   for name, key, off, size, codecs, crc, blocks, check in columns)
    return out


def tile_grid(schema: ArraySchema, meta: FragmentMeta, spans: list[range],
              ) -> tuple[np.ndarray, np.ndarray]:
    """Every space tile of ``spans`` (ranges of tile indices per dimension) in the order of
    the spans, as ``(tiles, ndim)`` indices, and each one's position in fragment ``meta``
    (which must hold them all), with array operations."""
    idx = np.stack(np.meshgrid(*[np.arange(s.start, s.stop, dtype=np.int64) for s in spans],
                               indexing="ij"), axis=-1).reshape(-1, len(spans))
    tlo = np.asarray(meta.tile_lo, np.int64)
    counts = np.asarray(meta.tile_hi, np.int64) - tlo + 1
    order: Literal["C", "F"] = "C" if schema.tile_order == "row-major" else "F"
    pos = np.ravel_multi_index(tuple(idx.T - tlo[:, None]), tuple(counts.tolist()),
                               order=order)
    return idx, pos.astype(np.int64)


def _tiles_of(schema: ArraySchema, box: Box) -> Iterator[tuple[tuple[int, ...], Box]]:
    """The space tiles ``box`` meets (in the order of their spans) and its part of each.
    Plain Python on these few numbers: a read of one small box should not pay for numpy
    calls (each costs tens of microseconds when its code is out of the cache, as it is
    between the steps of a training loop)."""
    spans = tile_spans(schema.lower, schema.tile_shape, box)
    for index in itertools.product(*spans):
        region = intersect(tile_box(schema, index), box)
        if region is not None:
            yield index, region


def _visible_parts(boxes: list[Box], cands: list[int], tile: Box,
                   limit: int = 2048) -> Iterator[tuple[int, Box]]:
    """Of the fragments ``cands`` (newest first) meeting ``tile``, those whose part of it
    is not hidden by newer dense fragments, with that part. Past ``limit`` uncovered
    pieces the subtraction stops (reading more than needed is always safe: newer cells
    are painted over older ones)."""
    remaining = [tile]
    for rank in cands:
        region = intersect(tile, boxes[rank])
        if region is None:
            continue
        if any(intersect(p, region) is not None for p in remaining):
            yield rank, region
        if len(remaining) <= limit:
            remaining = [q for p in remaining for q in subtract(p, boxes[rank])]
            if not remaining:
                return


def tile_read(meta: FragmentMeta, rank: int, name: str, pos: int, index: tuple[int, ...],
              origin: tuple[int, ...], region: Box) -> TileRead:
    """The read of the tile at position ``pos`` of fragment ``meta`` (of ``rank``) for
    attribute ``name``: space tile ``index`` starting at ``origin``, its cells ``region``."""
    at = meta.attrs[name]
    return TileRead(meta.name, rank, name, at.key, int(at.offsets[pos]), int(at.sizes[pos]),
                    at.tile_codec(pos), int(at.crc32[pos]), index, origin, region,
                    at.blocks(pos), at.checksum)


def plan_cells(meta: FragmentMeta, rank: int, fbox: Box, newer: list[Box],
                attrs: list[str]) -> list[CellTileRead]:
    assert meta.mbrs is not None and meta.coords is not None
    lo = np.asarray(fbox[0])
    hi = np.asarray(fbox[1])
    hit = np.all(meta.mbrs[:, 0] <= hi, axis=1) & np.all(meta.mbrs[:, 1] >= lo, axis=1)
    out = []
    names = [] if meta.kind == "delete" else attrs
    for t in np.nonzero(hit)[0]:
        # The static part of a data tile's read, built once per handle (fragments are
        # immutable); only the rank changes from read to read.
        key = ("cell_read", int(t), tuple(names))
        static = meta.decoded.get(key)
        if static is None:
            mbr = int_box((tuple(meta.mbrs[t, 0]), tuple(meta.mbrs[t, 1])))
            static = meta.decoded[key] = (mbr, tile_piece(meta.coords, int(t)),
                                          {n: tile_piece(meta.attrs[n], int(t))
                                           for n in names})
        mbr, coords_piece, attr_pieces = static
        if newer:
            region = intersect(mbr, fbox)
            if region is None or covered(region, newer):
                continue
        out.append(CellTileRead(meta.name, rank, meta.kind, int(t), mbr, coords_piece,
                                attr_pieces, meta.decoded))
    return out


def tile_piece(tiles: AttrTiles, t: int) -> Piece:
    """Tile ``t`` of a fragment's :class:`~tessera.array.fragment.AttrTiles` as a piece."""
    off, size = int(tiles.offsets[t]), int(tiles.sizes[t])
    inline = None if tiles.inline is None else tiles.inline[off:off + size]
    return Piece(tiles.key, off, size, tiles.tile_codec(t), int(tiles.crc32[t]), inline,
                 checksum=tiles.checksum)


def _selects_any(sel: Selection, region: Box) -> bool:
    return all(len(d.within(lo, hi)[0]) > 0
               for d, lo, hi in zip(sel.dims, region[0], region[1], strict=True))
