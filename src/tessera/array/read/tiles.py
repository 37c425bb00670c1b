"""Planning a read's tiles: selection x fragments -> the dense :class:`TileRead` list and the
sparse data tiles (:class:`CellTileRead`) it needs, newer dense fragments hiding what lies
under them. This list is the seam the planner (:mod:`tessera.query.plan`) and the executor
(:mod:`tessera.array.read.execute`) share."""

from __future__ import annotations

import itertools

import numpy as np

from tessera.array.fragment import AttrTiles, FragmentMeta
from tessera.format.layout import (
    Box,
    covered,
    intersect,
    tile_box,
    tile_position,
)
from tessera.format.schema import ArraySchema
from tessera.format.selection import Selection
from tessera.format.tile import (
    CellTileRead,
    Piece,
    TileRead,
)

#: What :func:`plan_tile_reads` returns: the dense tile reads, the sparse data-tile reads and
#: the number of fragments skipped.
TileReads = tuple[list[TileRead], list[CellTileRead], int]


def plan_tile_reads(schema: ArraySchema, sel: Selection, metas: list[FragmentMeta],
                    attrs: list[str]) -> TileReads:
    """Tile reads for ``sel`` over ``metas`` (oldest first). Tiles whose contribution is fully
    covered by newer dense fragments are left out. Returns the dense tile reads, the sparse
    data-tile reads and the number of fragments skipped."""
    if sel.empty:
        return [], [], len(metas)
    plain = all(d.contiguous for d in sel.dims)  # every cell inside the bounds is selected
    bbox = sel.bounds()
    boxes: list[Box | None] = [intersect(meta_box(m), bbox) for m in metas]
    reads: list[TileRead] = []
    cell_reads: list[CellTileRead] = []
    skipped = 0
    # Only dense fragments hide what lies under them; sparse ones hold scattered cells.
    newer_dense: list[list[Box]] = [[] for _ in metas]
    acc: list[Box] = []
    for rank in range(len(metas) - 1, -1, -1):
        newer_dense[rank] = acc
        fb = boxes[rank]
        if fb is not None and metas[rank].is_dense:
            acc = [fb, *acc]
    for rank, (meta, fbox) in enumerate(zip(metas, boxes, strict=True)):
        if fbox is None:
            skipped += 1
            continue
        newer = newer_dense[rank]
        if newer and covered(fbox, newer):
            skipped += 1
            continue
        if not meta.is_dense:
            found = plan_cells(meta, rank, fbox, newer, attrs)
            cell_reads.extend(found)
            skipped += 0 if found else 1
            continue
        # Plain Python on these few numbers: a read of one small box should not pay for
        # numpy calls (each costs tens of microseconds when its code is out of the cache,
        # as it is between the steps of a training loop).
        ext = schema.tile_shape
        low = schema.lower
        spans = [range((int(a) - lw) // e, (int(b) - lw) // e + 1)
                 for a, b, lw, e in zip(fbox[0], fbox[1], low, ext, strict=True)]
        used = False
        for index in itertools.product(*spans):
            tb = tile_box(schema, index)
            region = intersect(tb, fbox)
            if region is None or (not plain and not _selects_any(sel, region)):
                continue
            if newer and covered(region, newer):
                continue
            pos = tile_position(schema, meta.tile_lo, meta.tile_hi, index)
            used = True
            reads.extend(tile_read(meta, rank, name, pos, index, tb[0], region)
                         for name in attrs)
        skipped += 0 if used else 1
    return reads, cell_reads, skipped


def tile_read(meta: FragmentMeta, rank: int, name: str, pos: int, index: tuple[int, ...],
              origin: tuple[int, ...], region: Box) -> TileRead:
    """The read of the tile at position ``pos`` of fragment ``meta`` (of ``rank``) for
    attribute ``name``: space tile ``index`` starting at ``origin``, its cells ``region``."""
    at = meta.attrs[name]
    return TileRead(meta.name, rank, name, at.key, int(at.offsets[pos]), int(at.sizes[pos]),
                    at.tile_codec(pos), int(at.crc32[pos]), index, origin, region,
                    at.blocks(pos), at.checksum)


def meta_box(meta: FragmentMeta) -> Box:
    """A fragment's subarray on the integer grid, computed once per handle."""
    box = meta.decoded.get("int_box")
    if box is None:
        box = meta.decoded["int_box"] = int_box(meta.subarray)
    return box


def int_box(box: Box) -> Box:
    """A sparse fragment's MBR on an integer grid (bounds of an empty fragment stay empty)."""
    return (tuple(int(np.floor(v)) for v in box[0]), tuple(int(np.ceil(v)) for v in box[1]))


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
