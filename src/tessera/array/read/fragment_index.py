"""Fragments indexed by space: which fragments meet a box, and which meet each tile.

A read asks, per tile, which fragments hold cells there and which newer dense fragments hide
them. Testing every tile of every fragment against every newer fragment costs
tiles x fragments^2; an array written by a streaming job has thousands of small fragments.
The index keeps every fragment's bounding box in two integer arrays (built once per list of
fragments and kept while that list is in use), so the fragments meeting a box are one
vectorised comparison and the fragments meeting each tile of a read are enumerated once,
fragment by fragment over the tiles each one spans: the work grows with the pairs
(fragment, tile) that exist, not with their product. As TileDB keeps each fragment's
non-empty domain in its fragment metadata and prunes fragments by it before looking at
tiles.

>>> import numpy as np, tessera
>>> from tessera._sync import run_sync
>>> arr = tessera.from_numpy("memory://doc-findex", np.zeros((8, 8), np.int32), tile=(4, 4))
>>> arr[0:2, 0:2] = np.ones((2, 2), np.int32)
>>> index = fragment_index(run_sync(arr._visible_metas()), arr.schema)
>>> index.meeting(((0, 0), (1, 1))), index.meeting(((6, 6), (7, 7)))
([0, 1], [0])
>>> index.newest_cover(((0, 0), (1, 1))), index.newest_cover(((1, 1), (2, 2)))
(1, None)
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict

import numpy as np

from tessera.array.fragment import FragmentMeta
from tessera.format.layout import Box, intersect, tile_spans
from tessera.format.schema import ArraySchema

#: Lists of fragments whose index is kept (a handle reads with one list at a time; a few
#: handles on one process share this).
KEPT = 16

#: A fragment spanning more space tiles than this is not put in the per-tile buckets.
BUCKET_TILES = 64

#: Below this many fragments a plain Python scan beats a numpy call (a call costs
#: microseconds; a small read between training steps should not pay for one).
SCAN_BELOW = 24


class FragmentIndex:
    """The bounding boxes of a list of fragments (oldest first) on the integer grid.

    Attributes:
        lo: ``(fragments, ndim)`` first cell of each fragment's box.
        hi: ``(fragments, ndim)`` last cell (inclusive).
        boxes: the same boxes as tuples of Python ints, for per-tile arithmetic.
    """

    def __init__(self, metas: list[FragmentMeta], tile_shape: tuple[int, ...],
                 lower: tuple[int, ...]) -> None:
        self.tile_shape = tile_shape
        self.lower = lower
        self.boxes: list[Box] = [meta_box(m) for m in metas]
        shape = (len(self.boxes), len(lower))
        self.lo = np.array([b[0] for b in self.boxes], dtype=np.int64).reshape(shape)
        self.hi = np.array([b[1] for b in self.boxes], dtype=np.int64).reshape(shape)
        self._dense = [m.is_dense for m in metas]
        self._buckets: dict[tuple[int, ...], list[int]] | None = None
        self._wide: list[int] = []

    def _bucketed(self) -> dict[tuple[int, ...], list[int]]:
        """Per space tile, the ranks (ascending) of the fragments spanning at most
        :data:`BUCKET_TILES` tiles that meet it; wider fragments are in ``_wide`` (few in
        practice: the base and consolidated fragments). Built on first use."""
        if self._buckets is None:
            buckets: dict[tuple[int, ...], list[int]] = {}
            wide = []
            for rank, box in enumerate(self.boxes):
                spans = tile_spans(self.lower, self.tile_shape, box)
                if math.prod(len(s) for s in spans) > BUCKET_TILES:
                    wide.append(rank)
                    continue
                for tile in itertools.product(*spans):
                    buckets.setdefault(tile, []).append(rank)
            self._buckets, self._wide = buckets, wide
        return self._buckets

    def _candidates(self, box: Box) -> list[int] | None:
        """Ranks (ascending) of fragments that may meet ``box`` (a superset), from the
        buckets of the tiles it spans; ``None`` when it spans too many tiles for that to
        pay (then scan)."""
        spans = tile_spans(self.lower, self.tile_shape, box)
        if math.prod(len(s) for s in spans) > BUCKET_TILES:
            return None
        buckets = self._bucketed()
        found = set(self._wide)
        for tile in itertools.product(*spans):
            found.update(buckets.get(tile, ()))
        return sorted(found)

    def _meets(self, rank: int, box: Box) -> bool:
        flo, fhi = self.boxes[rank]
        return all(a <= f1 and b >= f0
                   for a, b, f0, f1 in zip(box[0], box[1], flo, fhi, strict=True))

    def __len__(self) -> int:
        return len(self.boxes)

    def meeting(self, box: Box) -> list[int]:
        """Ranks (ascending) of the fragments whose box meets ``box``: a plain scan of a
        few fragments, the buckets of the tiles a small box spans, else one vectorised
        comparison."""
        if len(self.boxes) < SCAN_BELOW:
            return [r for r in range(len(self.boxes)) if self._meets(r, box)]
        cands = self._candidates(box)
        if cands is not None:
            return [r for r in cands if self._meets(r, box)]
        lo = np.asarray(box[0], dtype=np.int64)
        hi = np.asarray(box[1], dtype=np.int64)
        hit = np.all((self.lo <= hi) & (self.hi >= lo), axis=1)
        return [int(r) for r in np.flatnonzero(hit)]

    def newer_dense(self, box: Box, rank: int) -> list[Box]:
        """The boxes of the dense fragments newer than ``rank`` that meet ``box``."""
        return [self.boxes[r] for r in self.meeting(box) if r > rank and self._dense[r]]

    def newest_cover(self, box: Box) -> int | None:
        """The rank of the newest fragment touching ``box`` when it is dense and holds all
        of it (every older fragment is then hidden under it), else ``None``."""
        ranks: list[int] | None = None
        if len(self.boxes) >= SCAN_BELOW:
            cands = self._candidates(box)
            ranks = None if cands is None else cands[::-1]
        if ranks is None:
            ranks = list(range(len(self.boxes) - 1, -1, -1))
        lo, hi = box
        for rank in ranks:
            flo, fhi = self.boxes[rank]
            touches = holds = True
            for a, b, f0, f1 in zip(lo, hi, flo, fhi, strict=True):
                if a > f1 or b < f0:
                    touches = False
                    break
                if a < f0 or b > f1:
                    holds = False
            if not touches:
                continue
            return rank if holds and self._dense[rank] else None
        return None

    def per_tile(self, ranks: list[int], clip: Box) -> dict[tuple[int, ...], list[int]]:
        """For each space tile that fragments ``ranks`` (ascending) meet inside ``clip``,
        those ranks, newest first: one pass per fragment over the tiles its box spans."""
        out: dict[tuple[int, ...], list[int]] = {}
        for rank in reversed(ranks):
            part = intersect(self.boxes[rank], clip)
            if part is None:
                continue
            for index in itertools.product(*tile_spans(self.lower, self.tile_shape, part)):
                got = out.get(index)
                if got is None:
                    out[index] = [rank]
                else:
                    got.append(rank)
        return out


_KEPT: OrderedDict[tuple[int, ...], tuple[list[FragmentMeta], FragmentIndex]] = OrderedDict()

#: The list an index was last asked for, and its index. A list is not changed once made
#: (reads take a new one when the fragments change); this one is held, so its identity is
#: never reused while it is here.
_LAST: list[tuple[list[FragmentMeta], FragmentIndex] | None] = [None]


def fragment_index(metas: list[FragmentMeta], schema: ArraySchema) -> FragmentIndex:
    """The index of ``metas``, built once while that list of fragments is in use (fragments
    never change; the index holds the list so its identity stays meaningful). The list
    read with last is recognised by identity; another by the identities of its
    fragments."""
    last = _LAST[0]
    if last is not None and last[0] is metas:
        return last[1]
    key = tuple(map(id, metas))
    got = _KEPT.get(key)
    if got is not None:
        _KEPT.move_to_end(key)
        _LAST[0] = (metas, got[1])
        return got[1]
    index = FragmentIndex(metas, schema.tile_shape, schema.lower)
    _KEPT[key] = (list(metas), index)
    _LAST[0] = (metas, index)
    while len(_KEPT) > KEPT:
        _KEPT.popitem(last=False)
    return index


def meta_box(meta: FragmentMeta) -> Box:
    """A fragment's subarray on the integer grid, computed once per handle."""
    box = meta.decoded.get("int_box")
    if box is None:
        box = meta.decoded["int_box"] = int_box(meta.subarray)
    return box


def int_box(box: Box) -> Box:
    """A sparse fragment's MBR on an integer grid (bounds of an empty fragment stay empty)."""
    lo, hi = box
    if all(type(v) is int for v in (*lo, *hi)):  # a dense fragment's box: integers already
        return tuple(lo), tuple(hi)
    return (tuple(int(np.floor(v)) for v in lo), tuple(int(np.ceil(v)) for v in hi))
