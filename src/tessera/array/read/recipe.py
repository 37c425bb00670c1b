"""Recipes for small reads: what the planner decided for one box read, kept so that a read of
the same footprint elsewhere in the array is planned by arithmetic instead of again.

A training loop reads crops of one size at places that change from step to step. The plan
of such a read (which requests, which method per tile) depends only on the *shape* of what
each tile needs (:mod:`tessera.query.plan_cache`: sizes, gaps and distances, never where
they lie); for a box over raw tiles that shape is fixed by the box's footprint
(:func:`footprint`): per dimension, the number of tiles the box spans, its length, and
where it starts in its first tile when it spans several (the split between tiles changes
what each needs). A :class:`Recipe` is kept per footprint: the plan's template, each tile
read's needed byte ranges and the stored layout they were made on. A read of the same
footprint gets its tile reads from the fragment's tables, its needs by moving the
recipe's ranges by the box's move inside its tile, and its plan rebuilt from the
template: equal to what :func:`~tessera.array.read.tiles.plan_tile_reads`,
:func:`~tessera.query.plan.tile_needs` and the planner make for it (tested against them).

:func:`run` reads the box that way on the calling thread: the recipe's requests moved,
made, and the cells copied out of the fetched bytes through a strided view; the tile reads
and plan (:func:`apply`) are made only when the read's report is asked for
(:func:`recipe_report`). A recipe applies only where the argument above holds, checked on
every read: the box lies inside one dense fragment, the newest to touch it; every tile is
raw (no codec, no blocks) with the recipe's stored length; the tiles lie at the recipe's
distances from each other in the same objects; and the ranges read from one object are of
cells of one size (so they move alike; :func:`make_recipe` refuses other plans). Anything
else is planned the general way.

>>> from tessera.format.schema import ArraySchema, Dim, Attr
>>> schema = ArraySchema([Dim("y", (0, 999), 256), Dim("x", (0, 999), 256)],
...                      [Attr("v", "i4")])
>>> footprint(schema, (10, 300), (29, 319))   # 20 x 20 inside one tile
(((1, 20), (1, 20)), (0, 1), (10, 44))
>>> footprint(schema, (250, 300), (269, 319))[0]  # two tiles down: where the split lies
((2, 250, 20), (1, 20))
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tessera.array.fragment import AttrTiles, FragmentMeta
from tessera.array.read.fetch import request_idents
from tessera.array.read.fragment_index import fragment_index
from tessera.array.read.report import ReadReport
from tessera.array.read.tiles import tile_read
from tessera.errors import InvalidRangeError, ObjectNotFoundError
from tessera.format.checksum import checksum
from tessera.format.layout import Box, intersect, tile_box, tile_position
from tessera.format.schema import ArraySchema, Attr
from tessera.format.tile import TileRead
from tessera.query.need import TileNeed
from tessera.query.plan import Plan, tile_need
from tessera.query.plan_cache import Template, rebuild, template_of
from tessera.storage.stats import IOStats
from tessera.storage.store import AsyncStore

#: Per dimension ``(tiles, length)`` for a box inside one tile, ``(tiles, start in the first
#: tile, length)`` for a box spanning several.
Footprint = tuple[tuple[int, ...], ...]


def footprint(schema: ArraySchema, lo: tuple[int, ...], hi: tuple[int, ...],
              ) -> tuple[Footprint, tuple[int, ...], tuple[int, ...]]:
    """The footprint of the inclusive box ``lo..hi``, the index of its first tile and where
    it starts in that tile, per dimension."""
    sig = []
    first = []
    starts = []
    for a, b, low, e in zip(lo, hi, schema.lower, schema.tile_shape, strict=True):
        t0, t1 = (a - low) // e, (b - low) // e
        s = a - low - t0 * e
        sig.append((1, b - a + 1) if t0 == t1 else (t1 - t0 + 1, s, b - a + 1))
        first.append(t0)
        starts.append(s)
    return tuple(sig), tuple(first), tuple(starts)


def in_tile_strides(schema: ArraySchema, cell_nbytes: int) -> tuple[int, ...]:
    """Bytes between neighbouring cells of a raw tile along each dimension."""
    ext = list(schema.tile_shape)
    order = range(len(ext)) if schema.cell_order == "col-major" else reversed(range(len(ext)))
    strides = [0] * len(ext)
    step = cell_nbytes
    for d in order:
        strides[d] = step
        step *= ext[d]
    return tuple(strides)


def newest_cover(schema: ArraySchema, metas: list[FragmentMeta], box: Box) -> int | None:
    """The rank of the newest fragment touching ``box`` when it is dense and holds all of
    it (every older fragment is then hidden under it), else ``None`` (through the list's
    :class:`~tessera.array.read.fragment_index.FragmentIndex`)."""
    return fragment_index(metas, schema).newest_cover(box)


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What the planner decided for a box read over raw tiles (see the module docs).

    Attributes:
        template: the plan, relative to its tiles' anchors.
        tiles: per tile read (in :func:`~tessera.array.read.tiles.plan_tile_reads`' order)
            the tile's index relative to the box's first tile and the attribute.
        starts: where the recipe's box started in its first tile, per dimension.
        ranges: per tile read, the needed byte ranges relative to the tile.
        strides: per tile read, bytes between neighbouring cells along each dimension.
        selected: per tile read, bytes of the selected cells.
        lengths: per tile read, the stored length of its tile.
        layout: per tile read, which object (by first appearance) and the distance of its
            tile from the first tile read in that object, in bytes.
        requests: per planned request, a tile read in the object it reads and its parts:
            per part the tile read it is for, its start and stop relative to the first tile
            read in that object for a box starting at the first cell of its first tile, and
            per dimension the bytes a step of the box's start there moves the part (ranges
            move by the tile's strides; whole tiles do not: zeros). The request spans its
            parts (as :func:`~tessera.query.plan_cache.rebuild` makes it).
        holders: per tile read, the requests its bytes come in: one that holds the whole
            tile (then checked against the tile's checksum), else every part.
        dtypes: per tile read, its attribute's dtype (its cells' shape and strides are in
            ``places``).
        outputs: per attribute read, its name, dtype and cell shape.
        shape: the box's shape (the footprint fixes it).
        places: per tile read, where its cells go, fixed by the footprint: the shape of its
            part of the box (with the cell shape), that part's place in the output, the
            strides of a cell there (with the cell's own), and per dimension the bytes one
            step of the box's start in its first tile moves the part's first byte (the
            tile's stride where the tile is the box's first along that dimension, else 0:
            the part starts at the tile's edge).
        fragments: what :func:`run` worked out of each fragment it followed the recipe in
            (``None``: it cannot be followed there), by fragment name.
    """

    template: Template
    tiles: tuple[tuple[tuple[int, ...], str], ...]
    starts: tuple[int, ...]
    ranges: tuple[np.ndarray, ...]
    strides: tuple[tuple[int, ...], ...]
    selected: tuple[int, ...]
    lengths: tuple[int, ...]
    layout: tuple[tuple[int, int], ...]
    requests: tuple[tuple[int, tuple[tuple[int, int, int, tuple[int, ...]], ...]], ...]
    holders: tuple[tuple[bool, tuple[int, ...]], ...]
    dtypes: tuple[np.dtype[Any], ...]
    outputs: tuple[tuple[str, np.dtype[Any], tuple[int, ...]], ...]
    shape: tuple[int, ...]
    places: tuple[Place, ...]
    fragments: dict[str, InFragment | None] = dataclasses.field(default_factory=dict,
                                                                compare=False, repr=False)


def layout_of(reads: list[TileRead]) -> tuple[tuple[int, int], ...]:
    """Each tile read's object (numbered by first appearance) and distance in bytes from the
    start of the first tile read in that object."""
    keys: dict[str, int] = {}
    base: dict[str, int] = {}
    return tuple((keys.setdefault(r.key, len(keys)), r.offset - base.setdefault(r.key, r.offset))
                 for r in reads)


def make_recipe(schema: ArraySchema, reads: list[TileRead], needs: list[TileNeed],
                plan: Plan, first: tuple[int, ...], starts: tuple[int, ...],
                shape: tuple[int, ...]) -> Recipe | None:
    """The recipe of a box read planned the general way (its ``reads``, ``needs`` and
    ``plan``; the box's first tile, its start there and its shape), or ``None`` where a
    recipe would not hold: a plan kept by exact position (:mod:`~tessera.query.plan_cache`),
    a tile that is not raw, no tiles, ranges read from one object of cells of several
    sizes."""
    template = template_of(plan, needs)
    if template is None or template.exact or not reads or any(
            r.codec is not None or r.blocks is not None or not n.raw
            for r, n in zip(reads, needs, strict=True)):
        return None
    base: dict[str, int] = {}
    for r in reads:
        base.setdefault(r.key, r.offset)
    position = {(r.key, r.start, r.stop): i for i, r in enumerate(plan.requests)}
    requests = []
    strides = tuple(in_tile_strides(schema, schema.attr(r.attr).cell_nbytes) for r in reads)
    for req, rt in zip(plan.requests, template.requests, strict=True):
        parts = []
        for t, j in rt.parts:
            a, b = (int(v) - base[req.key] for v in plan.choices[t].requests[j])
            moves = strides[t] if not template.choices[t].whole else (0,) * len(starts)
            at = sum(s * w for s, w in zip(starts, moves, strict=True))  # the box's own
            parts.append((t, a - at, b - at, moves))
        requests.append((req.tiles[0], tuple(parts)))
    moving: dict[str, set[tuple[int, ...]]] = {}
    for read, st, c in zip(reads, strides, template.choices, strict=True):
        if not c.whole:
            moving.setdefault(read.key, set()).add(st)
    if any(len(v) > 1 for v in moving.values()):
        # Ranges of cells of several sizes in one object (attributes sharing it) move apart
        # as the box moves: the gaps the planner saw change.
        return None
    holders = []
    for t, read in enumerate(reads):
        idents = request_idents(read, plan.requests_for(t))  # as the general executor's
        whole = len(idents) == 1 and idents[0][1] <= read.offset \
            and idents[0][2] >= read.offset + read.length
        holders.append((whole, tuple(position[i] for i in idents)))
    return Recipe(
        template,
        tuple((tuple(i - f for i, f in zip(r.tile_index, first, strict=True)), r.attr)
              for r in reads),
        starts,
        tuple(n.ranges for n in needs),
        strides,
        tuple(n.selected_bytes for n in needs),
        tuple(r.length for r in reads),
        layout_of(reads),
        tuple(requests),
        tuple(holders),
        tuple(schema.attr(r.attr).np_dtype for r in reads),
        tuple((n, schema.attr(n).np_dtype, schema.attr(n).cell_shape)
              for n in dict.fromkeys(r.attr for r in reads)),
        shape,
        tuple(_place(schema, r, st, first, starts, shape) for r, st in
              zip(reads, strides, strict=True)))


def _place(schema: ArraySchema, read: TileRead, strides: tuple[int, ...],
           first: tuple[int, ...], starts: tuple[int, ...], shape: tuple[int, ...]) -> Place:
    """Where a tile read's cells go in the box's outputs (:attr:`Recipe.places`), for
    every box of the footprint: a box in one tile along a dimension has that tile's part
    all along it wherever it starts; one spanning tiles has the start the footprint
    names."""
    attr = schema.attr(read.attr)
    part, dst, per_start = [], [], []
    for d, (t, f, s, n, e) in enumerate(zip(read.tile_index, first, starts, shape,
                                            schema.tile_shape, strict=True)):
        a = 0 if t == f else (t - f) * e - s  # the part's first cell, in the box
        b = min((t - f + 1) * e - s, n)  # past its last
        part.append(b - a)
        dst.append(slice(a, b))
        per_start.append(strides[d] if t == f else 0)
    return ((*part, *attr.cell_shape), tuple(dst), strides + _cell_strides(attr),
            tuple(per_start))


def _grid(schema: ArraySchema, meta: FragmentMeta) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A fragment's first tile index and the step of a tile's position per dimension
    (:func:`~tessera.format.layout.tile_position` as a dot product), once per handle."""
    got = meta.decoded.get("recipe_grid")
    if got is None:
        lo = tuple(int(v) for v in meta.tile_lo)
        counts = [int(h) - int(v) + 1 for v, h in zip(meta.tile_lo, meta.tile_hi, strict=True)]
        steps = [0] * len(counts)
        step = 1
        order = (range(len(counts)) if schema.tile_order != "row-major"
                 else reversed(range(len(counts))))
        for d in order:
            steps[d] = step
            step *= counts[d]
        got = meta.decoded["recipe_grid"] = (lo, tuple(steps))
    return got


def _cell_strides(attr: Attr) -> tuple[int, ...]:
    """Bytes between neighbouring elements of a cell along each of its dimensions (a cell
    is stored C-contiguous)."""
    out = []
    step = attr.np_dtype.itemsize
    for n in reversed(attr.cell_shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _raw_length(meta: FragmentMeta, name: str) -> int | None:
    """The stored length every tile of an attribute of a fragment has when all are raw and
    alike (no codec, no blocks), else ``None``; once per handle."""
    key = ("recipe_raw", name)
    if key not in meta.decoded:
        tiles = meta.attrs[name]
        sizes = tiles.sizes
        raw = tiles.codec is None or (tiles.stored_raw is not None
                                      and bool(tiles.stored_raw.all()))
        alike = raw and len(sizes) > 0 and bool((sizes == sizes[0]).all())
        meta.decoded[key] = int(sizes[0]) if alike else None
    return meta.decoded[key]  # type: ignore[no-any-return]


def _objects(meta: FragmentMeta, names: tuple[str, ...]) -> tuple[int, ...]:
    """Which object holds each attribute's tiles in a fragment, numbered by first
    appearance (attributes may share one: ``attr_layout="tile-major"``)."""
    key = ("recipe_objects", names)
    got = meta.decoded.get(key)
    if got is None:
        keys: dict[str, int] = {}
        got = meta.decoded[key] = tuple(keys.setdefault(meta.attrs[n].key, len(keys))
                                        for n in names)
    return got


_UNSEEN: Any = object()

#: Of a tile read of a recipe: the shape of its part of the box with the cell shape, that
#: part's place in the output, the strides of a cell there with the cell's own, and per
#: dimension the bytes a step of the box's start moves the part's first byte.
Place = tuple[tuple[int, ...], tuple[slice, ...], tuple[int, ...], tuple[int, ...]]

#: Of a recipe in one fragment: its first tile index and the step of a tile's position per
#: dimension, each tile read's position relative to the box's first tile, and its
#: attribute's tile table.
InFragment = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[AttrTiles, ...]]


def _in_fragment(recipe: Recipe, schema: ArraySchema, meta: FragmentMeta,
                 attrs: list[str]) -> InFragment | None:
    """What :func:`run` needs of ``meta`` to follow ``recipe`` there, or ``None`` when it
    cannot (attributes in other objects, tiles not raw or of another length); once per
    recipe and fragment (fragments never change)."""
    # Each attribute in the object it was in where the recipe was made (the first tile's
    # reads are one per attribute, in order).
    if _objects(meta, tuple(attrs)) != tuple(obj for obj, _ in recipe.layout[:len(attrs)]):
        return None
    tile_lo, steps = _grid(schema, meta)
    if any(_raw_length(meta, name) != length
           for (_, name), length in zip(recipe.tiles, recipe.lengths, strict=True)):
        return None
    rel_pos = tuple(sum(r * st for r, st in zip(rel, steps, strict=True))
                    for rel, _ in recipe.tiles)
    return tile_lo, steps, rel_pos, tuple(meta.attrs[name] for _, name in recipe.tiles)


def run(recipe: Recipe, store: AsyncStore, schema: ArraySchema, meta: FragmentMeta,
        first: tuple[int, ...], starts: tuple[int, ...], drop: tuple[bool, ...],
        attrs: list[str]) -> dict[str, np.ndarray] | None:
    """Read a box of the recipe's footprint (its first tile ``first`` and its start there
    ``starts``) from fragment ``meta`` as the recipe's plan says, on this thread: the
    same requests (recorded in the store's stats) and checks as the general executor; the
    outputs with the dimensions ``drop`` says taken out. ``None`` when the tiles there are
    not laid out as the recipe's, or a request or check fails (the general path then reads
    and reports it)."""
    found = recipe.fragments.get(meta.name, _UNSEEN)
    if found is _UNSEEN:
        found = recipe.fragments[meta.name] = _in_fragment(recipe, schema, meta, attrs)
    if found is None:
        return None
    tile_lo, steps, rel_pos, tables = found
    p0 = 0
    for f, t, st in zip(first, tile_lo, steps, strict=True):
        p0 += (f - t) * st
    offsets: list[int] = []
    pos: list[int] = []
    base: list[int] = []  # per object, its first tile read's start
    for table, rp, (obj, dist) in zip(tables, rel_pos, recipe.layout, strict=True):
        pos.append(p0 + rp)
        offsets.append(off := int(table.offsets[p0 + rp]))
        if obj == len(base):
            base.append(off)
        if off - base[obj] != dist:
            return None
    fetched = []
    try:
        for t0, spans in recipe.requests:
            at = base[recipe.layout[t0][0]]
            start = stop = -1
            for _, a, b, moves in spans:
                shift = at
                for s, w in zip(starts, moves, strict=True):
                    shift += s * w
                if start < 0 or a + shift < start:
                    start = a + shift
                if b + shift > stop:
                    stop = b + shift
            data = store.read_range_now(tables[t0].key, start, stop - start)
            if len(data) != stop - start:
                return None
            fetched.append((start, data))
    except (ObjectNotFoundError, InvalidRangeError):
        return None
    shape = recipe.shape
    outputs = {name: np.empty(shape + cell_shape, dtype)
               for name, dtype, cell_shape in recipe.outputs}
    for t, ((_, name), (whole, parts), (part, dst, strides, per_start)) in enumerate(
            zip(recipe.tiles, recipe.holders, recipe.places, strict=True)):
        off, length = offsets[t], recipe.lengths[t]
        first_byte = 0  # the first byte of the tile's part of the box, in the tile
        for s, w in zip(starts, per_start, strict=True):
            first_byte += s * w
        if len(parts) == 1:
            start, data = fetched[parts[0]]
            if whole:
                raw = memoryview(data)[off - start:off - start + length]
                if checksum(raw, tables[t].checksum) != int(tables[t].crc32[pos[t]]):
                    return None
            # The cells straight from the fetched bytes: a strided view, no tile buffer.
            cells = np.ndarray(part, recipe.dtypes[t], data, off - start + first_byte,
                               strides)
        else:
            buf = np.empty(length, dtype=np.uint8)
            for r in parts:
                start, data = fetched[r]
                a, b = max(start, off), min(start + len(data), off + length)
                buf[a - off:b - off] = np.frombuffer(data, np.uint8, b - a, a - start)
            cells = np.ndarray(part, recipe.dtypes[t], buf.data, first_byte, strides)
        outputs[name][dst] = cells
    if not any(drop):
        return outputs
    keep = tuple(0 if d else slice(None) for d in drop)
    return {n: out[keep] for n, out in outputs.items()}


def apply(recipe: Recipe, schema: ArraySchema, meta: FragmentMeta, rank: int, box: Box,
          first: tuple[int, ...], starts: tuple[int, ...]) -> tuple[list[TileRead], Plan]:
    """The tile reads and plan of a read of ``box`` (of the recipe's footprint, with its
    first tile ``first`` and its start in it ``starts``) in fragment ``meta`` (of ``rank``,
    the newest holding the box, its tiles laid out as the recipe's: :func:`run` checked):
    what :func:`~tessera.array.read.tiles.plan_tile_reads`,
    :func:`~tessera.query.plan.tile_needs` and the planner make for it."""
    reads = []
    for rel, name in recipe.tiles:
        index = tuple(f + r for f, r in zip(first, rel, strict=True))
        tb = tile_box(schema, index)
        region = intersect(tb, box)
        assert region is not None  # the footprint's tiles all meet the box
        pos = tile_position(schema, meta.tile_lo, meta.tile_hi, index)
        reads.append(tile_read(meta, rank, name, pos, index, tb[0], region))
    move = tuple(s - s0 for s, s0 in zip(starts, recipe.starts, strict=True))
    needs = []
    for read, ranges, strides, selected in zip(reads, recipe.ranges, recipe.strides,
                                               recipe.selected, strict=True):
        shift = sum(m * s for m, s in zip(move, strides, strict=True))
        needs.append(tile_need(read, ranges + shift if shift else ranges, selected))
    return reads, rebuild(recipe.template, needs)


def recipe_report(recipe: Recipe, schema: ArraySchema, meta: FragmentMeta, rank: int,
                  box: Box, first: tuple[int, ...], starts: tuple[int, ...], stats: IOStats,
                  fragments: int) -> ReadReport:
    """The report of a read :func:`run` made (the same as the general path's): its tile
    reads and plan made by :func:`apply` when first asked for, the I/O ``stats`` measured
    then; ``fragments`` the handle saw (all but ``meta`` skipped)."""
    reads, plan = apply(recipe, schema, meta, rank, box, first, starts)
    return ReadReport(reads, 1, fragments - 1, stats=stats, plan=plan)
