"""Planning reads of many whole tiles in columns.

A read of a large box lying on tile boundaries (a whole array, a slab of whole tiles) needs
every one of its tiles whole: each tile's need is its stored bytes, and tiles of one
attribute differ only in where they lie and, compressed, in their lengths. Describing each
tile by an object (its need, its choice) costs microseconds a tile, seconds for the 10^6
tiles of an array of a few TB in MB tiles. Here the tiles are columns (:class:`WholeNeeds`:
object, offset, length, whether it can be read in parts, its decoded bytes), the planner
chooses once per group of tiles alike (:func:`~tessera.query.refine.descend_shapes`, the
same descent :func:`~tessera.query.refine.plan_tiles` makes over the groups of a read of
many tiles), and neighbouring requests merge with array operations
(:func:`~tessera.query.refine.merge_rows`). The choices come out as
:class:`ChoiceColumns`, a sequence that makes a tile's
:class:`~tessera.query.refine.TileChoice` only when asked for it; the requests are the same
:class:`~tessera.query.refine.PlannedRequest` list a tile-by-tile plan has, and equal to it
(the tests compare both ways).

>>> import numpy as np
>>> from tessera.query.cost import CostModel, DEFAULT_PROFILES
>>> n = 1024
>>> needs = WholeNeeds(("v.data",), np.zeros(n, np.int64), np.arange(n) * 100,
...                    np.full(n, 100), np.ones(n, bool), np.full(n, 100), "t{}".format,
...                    np.full(n, -1))
>>> choices, requests, totals = choose_whole(needs, CostModel(DEFAULT_PROFILES["local"]),
...                                          "auto", 1, 16 << 20)
>>> choices.method_counts(), [(r.method, r.start, r.stop, len(r.tiles)) for r in requests]
({'get': 1024}, [('range', 0, 102400, 1024)])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from tessera._lazy import MadeOnDemand
from tessera.errors import InvalidArgumentError
from tessera.query import refine
from tessera.query.cost import CostModel, RequestMix
from tessera.query.methods import read_method
from tessera.query.need import TileNeed
from tessera.query.refine import (
    PlannedRequest,
    TileChoice,
    descend_shapes,
    merge_rows,
)


@dataclasses.dataclass(frozen=True)
class WholeNeeds:
    """Tiles a read needs whole, one row each.

    Attributes:
        keys: the objects holding the tiles; ``key_of``: each tile's index into ``keys``.
        offsets, lengths: each tile's stored bytes in its object.
        raw: True where a tile can be read in parts (stored raw, or compressed in blocks).
        selected: each tile's decoded bytes (all of its cells are selected).
        label: how a plan names tile ``i``.
        pushed: the stored bytes a pushdown server would read of each tile (of a tile
            compressed in blocks: all of its blocks), -1 where it reads the tile whole
            (the need's ``pushdown_read_bytes`` is then ``None``).
    """

    keys: tuple[str, ...]
    key_of: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    raw: np.ndarray
    selected: np.ndarray
    label: Callable[[int], str]
    pushed: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets)

    def need(self, i: int) -> TileNeed:
        """Tile ``i``'s need, as :func:`~tessera.query.plan.tile_needs` makes it for a tile
        read whole: its stored bytes, all of them needed when it can be read in parts."""
        length = int(self.lengths[i])
        raw = bool(self.raw[i])
        ranges = np.array([[0, length]] if raw else [], dtype=np.int64).reshape(-1, 2)
        pushed = int(self.pushed[i])
        return TileNeed(self.label(i), self.keys[int(self.key_of[i])], int(self.offsets[i]),
                        length, raw, ranges, int(self.selected[i]),
                        None if pushed < 0 else pushed)

    def least_bytes(self) -> int:
        """Bytes any plan without pushdown moves at least: every tile's stored bytes (all
        of them are needed)."""
        return int(self.lengths.sum())


class ChoiceColumns(MadeOnDemand[TileChoice]):
    """The planner's choices for :class:`WholeNeeds`, one per group of tiles alike: tile
    ``i`` belongs to group ``group_of[i]``, whose choice (method, requests relative to the
    tile, request mix) it shares. Indexing makes a tile's
    :class:`~tessera.query.refine.TileChoice`."""

    def __init__(self, needs: WholeNeeds, group_of: np.ndarray, chosen: list[TileChoice]):
        self.needs = needs
        self.group_of = group_of
        self.chosen = chosen
        self.relative = [c.requests - c.need.offset for c in chosen]

    def __len__(self) -> int:
        return len(self.group_of)

    def _item(self, i: int) -> TileChoice:
        g = int(self.group_of[i])
        c = self.chosen[g]
        need = self.needs.need(i)
        return TileChoice(need, c.method, self.relative[g] + need.offset, c.mix)

    def method_counts(self) -> dict[str, int]:
        """Tiles per chosen method."""
        per = np.bincount(self.group_of, minlength=len(self.chosen))
        out: dict[str, int] = {}
        for c, n in zip(self.chosen, per.tolist(), strict=True):
            out[c.method] = out.get(c.method, 0) + n
        return out

    def selected_bytes(self) -> int:
        """Bytes of the selected cells of every tile."""
        return int(self.needs.selected.sum())

    def methods_of_tiles(self) -> np.ndarray:
        """Each tile's method, as an array of names."""
        names: np.ndarray = np.asarray([c.method for c in self.chosen], dtype=object)
        out: np.ndarray = names[self.group_of]
        return out


def columns_pay(tiles: int) -> bool:
    """Whether a read of ``tiles`` tile reads is planned in columns: from as many as the
    tile-by-tile planner plans by groups and merges with array operations (the plan in
    columns is then the one it makes)."""
    return tiles >= max(refine.BULK_DESCENT_TILES, refine.BULK_MERGE_TILES)


def choose_whole(needs: WholeNeeds, model: CostModel, method: str, cell_nbytes: int,
                 max_request_bytes: int,
                 ) -> tuple[ChoiceColumns, list[PlannedRequest], RequestMix]:
    """The planner's choices for ``needs`` under ``model`` (no pushdown competing), their
    requests (neighbours merged under ``auto``) and totals: what
    :func:`~tessera.query.plan.plan_needs` makes of the same tiles' needs one by one, for
    as many tiles as :func:`columns_pay` says."""
    if not columns_pay(len(needs)):
        raise InvalidArgumentError(f"{len(needs)} tiles are planned one by one, not in "
                                   "columns")
    shape = np.stack([needs.lengths, needs.raw, needs.selected, needs.pushed]
                     ).astype(np.int64).T
    if (shape == shape[0]).all():  # tiles all alike (raw ones of one attribute): one group
        first, group_of = np.zeros(1, np.int64), np.zeros(len(shape), np.int64)
        counts, order = np.array([len(shape)]), np.zeros(1, np.int64)
    else:
        _, first, group_of, counts = np.unique(shape, axis=0, return_index=True,
                                               return_inverse=True, return_counts=True)
        order = np.argsort(first, kind="stable")  # the groups in the order they appear
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        group_of = rank[group_of.reshape(-1)]
    chosen = descend_shapes([needs.need(int(first[g])) for g in order],
                            counts[order].tolist(), model, method, False, cell_nbytes)
    choices = ChoiceColumns(needs, group_of, chosen)
    if not all(read_method(c.method).store_bytes for c in chosen):
        raise InvalidArgumentError("whole-tile plans fetch bytes from the store; a server "
                                   "method was chosen")
    # Every tile's requests as rows: its group's requests moved to the tile's offset.
    per = np.asarray([len(r) for r in choices.relative], np.int64)[group_of]
    rows_of = np.repeat(np.arange(len(needs)), per)
    starts = np.concatenate([[0], np.cumsum([len(r) for r in choices.relative])])
    table = np.concatenate(choices.relative).reshape(-1, 2).astype(np.int64)
    within = np.arange(len(rows_of)) - np.repeat(np.cumsum(per) - per, per)
    spans = table[starts[group_of][rows_of] + within] + needs.offsets[rows_of, None]
    is_get = np.asarray([c.method == "get" for c in chosen])[group_of][rows_of]
    names = choices.methods_of_tiles()
    requests: list[PlannedRequest]
    if method == "auto" and len(needs) >= refine.BULK_MERGE_TILES:
        ordered = sorted(needs.keys)  # merge_rows takes the objects in sorted order
        remap = np.asarray([ordered.index(k) for k in needs.keys], np.int64)
        requests = merge_rows(remap[needs.key_of[rows_of]], spans, rows_of, is_get, ordered,
                              lambda t: str(names[t]), model, max_request_bytes)
    else:  # the tiles' own requests, in the order of the tiles
        requests = [PlannedRequest(str(names[t]), needs.keys[k], a, b, (t,)) for t, k, a, b
                    in zip(rows_of.tolist(), needs.key_of[rows_of].tolist(),
                           spans[:, 0].tolist(), spans[:, 1].tolist(), strict=True)]
    totals = sum((read_method(r.method).mix([(r.start, r.stop)], needs.need(r.tiles[0]))
                  for r in requests), RequestMix())
    return choices, requests, totals
