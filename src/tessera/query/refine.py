"""Range refinement and method selection (the ArrayMorph paper, section 4.2, Algorithm 1).

For each tile a read needs, :func:`plan_tiles` chooses among

- **get**: the whole stored tile in one request;
- **range**: the decomposed byte ranges grouped into requests by Algorithm 1 (only for
  range-readable tiles: raw, or compressed in blocks, whose needed blocks are fetched);
- **pushdown**: one call to the pushdown server, which returns just the selected cells
  (only when the profile has pushdown figures and the caller allows it).

Costs are the paper's ``T + phi * F`` (:mod:`tessera.query.cost`), always evaluated for the
**whole read**: a tile's alternatives are compared as *context + alternative*, where the
context is the rest of the plan (all other tiles' current choices). This accounts for the
interdependence the paper notes (requests of all tiles share the link, and ``BW`` depends on
how many are in flight): splitting a range may pay off alone yet not when a hundred other
requests already fill the link. The heuristic starts from one request per tile for its
selected bytes, then re-chooses the tiles one at a time against the plan as it stands
(coordinate descent: no step raises the estimated cost of the whole read), and sweeps again
until no choice changes (at most ``rounds`` sweeps); tiles whose needs have the same shape
(sizes and gaps, wherever the tile lies) are chosen once per context, and a read of many
tiles descends over groups of such tiles, one choice per group (:func:`_descend_groups`).
Finally, range requests of neighbouring tiles of the same object are merged left to right
while that lowers the cost of the whole plan (:func:`plan_requests`; tiles lie in the global
order, so neighbours are neighbouring bytes; over many requests with array operations,
:mod:`tessera.query.merge`).

>>> import numpy as np
>>> from tessera.query.cost import CostModel, DEFAULT_PROFILES
>>> model = CostModel(DEFAULT_PROFILES["cloud"], "s3")
>>> need = TileNeed("t", "frag/v.data", 0, 1 << 20, True, np.array([[0, 4096]]), 4096)
>>> plan_tiles([need], model)[0].method
'range'
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np

from tessera.errors import ConfigError
from tessera.query import merge
from tessera.query.algorithm1 import refine_ranges as refine_ranges  # the paper's Algorithm 1
from tessera.query.cost import CostModel, RequestMix
from tessera.query.methods import ChoiceContext, ReadMethod, methods, read_method, read_mode
from tessera.query.need import TileNeed as TileNeed


@dataclasses.dataclass(frozen=True, slots=True)
class TileChoice:
    """The method chosen for one tile and the requests it issues.

    ``requests``: ``[start, stop)`` byte ranges of the object (absolute offsets); for a
    ``get`` the whole tile, for a ``pushdown`` the tile it reads on the server.
    """

    need: TileNeed
    method: str
    requests: np.ndarray
    mix: RequestMix


def _only_get(need: TileNeed, method: str, allow_pushdown: bool) -> bool:
    """True if ``_choose`` can only answer "get" for ``need`` (whatever the rest of the
    plan): under ``auto``, when no method but a get competes for it."""
    if method != "auto":
        return method == "get"
    return sum(m.competes(need, allow_pushdown) for m in methods()) == 1


def _same(a: TileChoice, b: TileChoice) -> bool:
    return a.method == b.method and np.array_equal(a.requests, b.requests)


#: Choices made within one plan, relative to their tile: a tile's choice depends only on
#: the shape of its need (sizes and gaps of its ranges, not where the tile lies), the rest
#: of the plan and the choice it keeps, so tiles cut alike by a box (the 8 tiles of a
#: full-height column) in the same context are chosen once.
ChoiceMemo = dict[tuple[object, ...], tuple[str, np.ndarray, RequestMix]]


def _need_shape(need: TileNeed) -> tuple[object, ...]:
    return (need.length, need.raw, need.selected_bytes, need.pushdown_read_bytes,
            need.ranges.shape, need.ranges.tobytes())


def _choose(need: TileNeed, method: str, model: CostModel, context: RequestMix,
            allow_pushdown: bool, cell_nbytes: int, keep: TileChoice | None = None,
            memo: ChoiceMemo | None = None) -> TileChoice:
    """The cheapest choice for ``need`` on top of ``context`` (see :func:`_choose_new`),
    looked up in ``memo`` first when given."""
    if memo is None:
        return _choose_new(need, method, model, context, allow_pushdown, cell_nbytes, keep)
    kept = None if keep is None else (keep.method, (keep.requests - need.offset).tobytes())
    key = (_need_shape(need), method, context, allow_pushdown, cell_nbytes, kept)
    hit = memo.get(key)
    if hit is None:
        new = _choose_new(need, method, model, context, allow_pushdown, cell_nbytes, keep)
        memo[key] = (new.method, new.requests - need.offset, new.mix)
        return new
    chosen, relative, mix = hit
    return TileChoice(need, chosen, relative + need.offset, mix)


def _choose_new(need: TileNeed, method: str, model: CostModel, context: RequestMix,
                allow_pushdown: bool, cell_nbytes: int, keep: TileChoice | None = None,
                ) -> TileChoice:
    candidates = _candidates(need, method, model, context, allow_pushdown, cell_nbytes, keep)
    if len(candidates) == 1:
        return candidates[0]
    return _cheapest(candidates, model, context, 1)


def _candidates(need: TileNeed, method: str, model: CostModel, context: RequestMix,
                allow_pushdown: bool, cell_nbytes: int, keep: TileChoice | None = None,
                ) -> list[TileChoice]:
    """The choices that compete for ``need`` on top of ``context``: the one a forced mode
    makes, or every competing method's (and ``keep``, the choice the tile has)."""
    ctx = ChoiceContext(model, context, cell_nbytes)

    def choice(m: ReadMethod, reqs: list[tuple[int, int]]) -> TileChoice:
        return TileChoice(need, m.name, np.array(reqs, dtype=np.int64).reshape(-1, 2),
                          m.mix(reqs, need))

    mode = read_mode(method)
    if mode.method is not None:  # a forced mode
        forced = read_method(mode.method)
        why = forced.unavailable(allow_pushdown)
        if why is not None:
            raise ConfigError(why)
        if forced.whole_tile or need.raw:
            return [choice(forced, (mode.requests or forced.requests)(need, ctx))]
        # A tile that cannot be read in parts is fetched whole.
        get = read_method("get")
        return [choice(get, get.requests(need, ctx))]
    # Every competing method's candidate, in registration order (a get first: on a tie it
    # wins, and a whole tile is checked against its checksum).
    candidates = [choice(m, m.requests(need, ctx)) for m in methods()
                  if m.competes(need, allow_pushdown)]
    if keep is not None and not any(_same(c, keep) for c in candidates):
        candidates.append(keep)  # never worse than the choice this tile already has
    return candidates


def _cheapest(candidates: list[TileChoice], model: CostModel, context: RequestMix,
              times: int) -> TileChoice:
    """The candidate whose ``times`` copies add least to the cost of ``context`` (the rest
    of the plan); a method with a margin (ranges) must beat the others by it (see
    ReadMethod.margin). On a tie, the first."""
    base = model.estimate(context).cost

    def marginal(c: TileChoice) -> float:
        extra = model.estimate(context + (c.mix if times == 1 else c.mix * times)).cost - base
        margin = read_method(c.method).margin
        if margin == 1.0:
            return extra
        # more requests can raise BW(N) enough to make the extra negative: the margin must
        # still count against the range plan
        return extra * margin if extra >= 0 else extra / margin

    costs = [marginal(c) for c in candidates]
    return candidates[costs.index(min(costs))]  # the first of the cheapest, as np.argmin


#: How much cheaper (by the estimate) a plan found by descending from all-pushdown must be
#: than plain descent's to be taken. Measured on the evaluation's link (one pushdown server
#: on 2 cores): a vertical box estimated 7x cheaper pushed down ran 3.4x faster, 64 BERT
#: tiles estimated 10x cheaper ran 2.6x faster than the best fetch plan, while 80-100 crop
#: tiles estimated 1.06-1.6x cheaper pushed down ran 2.2x slower.
GLOBAL_PUSHDOWN_MARGIN = 2.0


def plan_tiles(needs: list[TileNeed], model: CostModel, method: str = "auto", *,
               allow_pushdown: bool | None = None, cell_nbytes: int = 1,
               rounds: int = 3) -> list[TileChoice]:
    """Choose a method and requests for every tile of a read (see the module docs).

    Args:
        needs: the tiles and what is needed from each.
        model: the cost model (profile, prices, phi).
        method: ``auto`` (default), or a forced ``get``, ``merge`` (one range per tile
            covering its cells), ``fetch`` (every decomposed range) or ``pushdown``.
            Compressed tiles without blocks can only be fetched whole or pushed down.
        allow_pushdown: whether pushdown may be chosen (default: the profile has it).
        cell_nbytes: bytes per cell; single ranges are halved at cell boundaries.
        rounds: most sweeps over the tiles (each re-chooses every tile in turn).
    """
    read_mode(method)  # ConfigError naming the choices for an unknown one
    can_push = model.profile.has_pushdown if allow_pushdown is None else allow_pushdown
    if not needs:
        return []
    memo: ChoiceMemo | None = {} if len(needs) > 1 else None  # one tile: nothing to share
    descend = _descend if len(needs) < BULK_DESCENT_TILES else _descend_groups
    plan = descend(needs, model, method, can_push, cell_nbytes, rounds, None, memo)
    if method == "auto" and can_push and len(needs) > 1:
        # Tile-by-tile steps miss plans that only pay as a whole: the first pushdown pays a
        # full wave of server time, the next ones share it, while every tile fetched shares
        # the link. So also descend from "push every tile down", and take that plan when it
        # wins clearly: it rests on the model's assumption that a wave of pushdowns runs in
        # parallel on the server (true of the paper's lambdas, not of one small server).
        start = [_choose(n, "pushdown", model, RequestMix(), True, cell_nbytes, memo=memo)
                 for n in needs]
        other = descend(needs, model, method, can_push, cell_nbytes, rounds, start, memo)
        if _total_cost(other, model) * GLOBAL_PUSHDOWN_MARGIN < _total_cost(plan, model):
            plan = other
    return plan


def _total_cost(choices: list[TileChoice], model: CostModel) -> float:
    return model.estimate(sum((c.mix for c in choices), RequestMix())).cost


def _descend(needs: list[TileNeed], model: CostModel, method: str, can_push: bool,
             cell_nbytes: int, rounds: int, start: list[TileChoice] | None,
             memo: ChoiceMemo | None = None) -> list[TileChoice]:
    """Coordinate descent: each tile in turn takes its cheapest choice against the rest of
    the plan as it stands; every step lowers (or keeps) the whole read's cost, so it
    settles. ``start``: initial choices (default: none, each tile costed as one range)."""
    choices: list[TileChoice | None] = list(start) if start is not None else [None] * len(needs)
    current = [c.mix if c is not None else
               RequestMix(range_requests=1, range_bytes=n.selected_bytes)
               for c, n in zip(choices, needs, strict=True)]
    total = sum(current, RequestMix())
    fixed = [_only_get(n, method, can_push) for n in needs]
    seen: list[RequestMix | None] = [None] * len(needs)  # the context each was chosen in
    for sweep in range(max(1, rounds)):
        changed = False
        for i, need in enumerate(needs):
            if sweep and fixed[i]:
                continue  # its one candidate does not depend on the rest of the plan
            context = total - current[i]
            if context == seen[i]:
                continue  # the rest of the plan is as it was: the choice would be the same
            seen[i] = context
            old = choices[i]
            new = _choose(need, method, model, context, can_push, cell_nbytes, old, memo)
            if old is None or not _same(old, new):
                changed = True
            choices[i] = new
            current[i] = new.mix
            total = context + new.mix
        if not changed or method != "auto":
            break
    return [c for c in choices if c is not None]


#: Reads of at least this many tiles are planned a group at a time: tiles whose needs have
#: the same shape (the interior tiles of a box, the tiles of one edge) take one choice
#: together (:func:`_descend_groups`), so planning costs grow with the groups, not the tiles.
BULK_DESCENT_TILES = 256


def _descend_groups(needs: list[TileNeed], model: CostModel, method: str, can_push: bool,
                    cell_nbytes: int, rounds: int, start: list[TileChoice] | None,
                    memo: ChoiceMemo | None = None) -> list[TileChoice]:
    """Coordinate descent over groups of tiles whose needs have one shape
    (:func:`descend_shapes`), each group's choice then given to every member (moved to its
    offset). ``start``: initial choices (alike within a group, as pushdowns are)."""
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, need in enumerate(needs):
        groups.setdefault(_need_shape(need), []).append(i)
    members = list(groups.values())
    chosen = descend_shapes([needs[g[0]] for g in members], [len(g) for g in members], model,
                            method, can_push, cell_nbytes, rounds,
                            None if start is None else [start[g[0]] for g in members])
    out: list[TileChoice | None] = [None] * len(needs)
    for c, idx in zip(chosen, members, strict=True):
        # Every member's requests in one array (the choice's, moved to each tile's offset);
        # each tile's choice holds a view of its rows.
        offsets = np.fromiter((needs[i].offset for i in idx), np.int64, len(idx))
        moved = (c.requests - c.need.offset)[None] + offsets[:, None, None]
        for i, rows in zip(idx, moved, strict=True):
            out[i] = TileChoice(needs[i], c.method, rows, c.mix)
    return [c for c in out if c is not None]


def descend_shapes(reps: list[TileNeed], counts: list[int], model: CostModel, method: str,
                   can_push: bool, cell_nbytes: int, rounds: int = 3,
                   start: list[TileChoice] | None = None) -> list[TileChoice]:
    """Coordinate descent over groups of tiles whose needs have one shape: ``reps[g]`` is
    one tile of group ``g`` (in the order the groups first appear in the read) and
    ``counts[g]`` its tiles. Each group in turn takes the choice whose copies for all its
    tiles add least to the rest of the plan (its candidates built as for one tile among the
    others), until no group changes; returns each group's choice, made for its ``reps``
    tile. The plan of many tiles alike is then homogeneous, where tile-by-tile descent
    could split it; ``start``: initial choices of the groups."""
    fixed = [_only_get(n, method, can_push) for n in reps]
    if start is None and all(fixed):  # nothing to weigh: every group's one candidate
        return [_candidates(n, method, model, RequestMix(), can_push, cell_nbytes)[0]
                for n in reps]
    chosen: list[TileChoice | None] = (list(start) if start is not None
                                       else [None] * len(reps))
    one = [c.mix if c is not None else RequestMix(range_requests=1, range_bytes=n.selected_bytes)
           for c, n in zip(chosen, reps, strict=True)]
    total = sum((m * k for m, k in zip(one, counts, strict=True)), RequestMix())
    for sweep in range(max(1, rounds)):
        changed = False
        for g, need in enumerate(reps):
            if sweep and fixed[g]:
                continue
            others = total - one[g] * counts[g]
            old = chosen[g]
            cands = _candidates(need, method, model, others + one[g] * (counts[g] - 1),
                                can_push, cell_nbytes, old)
            new = cands[0] if len(cands) == 1 else _cheapest(cands, model, others, counts[g])
            if old is None or not _same(old, new):
                changed = True
            chosen[g] = new
            one[g] = new.mix
            total = others + new.mix * counts[g]
        if not changed or method != "auto":
            break
    return [c for c in chosen if c is not None]


@dataclasses.dataclass(frozen=True)
class PlannedRequest:
    """One request of a plan: ``method`` on ``key`` bytes ``[start, stop)``, serving the
    tiles at positions ``tiles`` of the choice list (several when neighbours were merged)."""

    method: str
    key: str
    start: int
    stop: int
    tiles: tuple[int, ...]


def plan_requests(choices: list[TileChoice], model: CostModel,
                  merge_neighbours: bool = True,
                  max_request_bytes: int = 16 << 20) -> list[PlannedRequest]:
    """The requests of a plan. With ``merge_neighbours``, byte requests (gets and ranges)
    of neighbouring tiles of one object are merged left to right where that lowers the
    cost of the whole plan with request handling charged per request
    (:meth:`CostModel.smooth_cost`): a merge pays for the gap's bytes and saves a request's
    share of a wave. A merged request is a ``range`` serving several tiles, never longer
    than ``max_request_bytes`` nor twice the bandwidth-delay product
    (:attr:`StoreProfile.min_range_bytes`): past that, the request handling a merge saves is
    small beside the transfer, while one large request holds its bytes in memory and
    delays decoding until its last byte (the cost model sees neither: without these
    limits, a full read of a local array became one 1 GiB request, 2x slower than gets)."""
    if merge_neighbours and len(choices) >= BULK_MERGE_TILES:
        return _plan_requests_bulk(choices, model, max_request_bytes)
    reqs = [PlannedRequest(c.method, c.need.key, int(a), int(b), (i,))
            for i, c in enumerate(choices) for a, b in c.requests]
    if not merge_neighbours:
        return reqs
    fetched = sorted((r for r in reqs if read_method(r.method).store_bytes),
                     key=lambda r: (r.key, r.start))
    others = [r for r in reqs if not read_method(r.method).store_bytes]
    if len(fetched) < 2:
        return others + fetched  # nothing to merge
    total = sum((c.mix for c in choices), RequestMix())
    limit = min(max_request_bytes, 2 * model.profile.min_range_bytes)
    # Each merged request as [method, key, start, stop, its tiles in order of offset]: a
    # run of merges appends to one list (a tuple rebuilt per merge was quadratic in the
    # run's length: a whole read of 30,000 small tiles spent 3 s there).
    runs: list[tuple[PlannedRequest, list[int]]] = []
    for r in fetched:
        if runs:
            prev, tiles = runs[-1]
            (i,) = r.tiles
            if (prev.key == r.key and prev.stop <= r.start and r.stop - prev.start <= limit
                    and (len(tiles) > 1 or tiles[0] != i)):
                trial = _merge_mix(total, prev, r, choices)
                if model.smooth_cost(trial) < model.smooth_cost(total):
                    if tiles[-1] != i:
                        tiles.append(i)
                    runs[-1] = (PlannedRequest("range", r.key, prev.start, r.stop,
                                               (tiles[0],)), tiles)
                    total = trial
                    continue
        runs.append((r, list(r.tiles)))
    merged = [r if len(tiles) == 1 else dataclasses.replace(r, tiles=tuple(sorted(set(tiles))))
              for r, tiles in runs]
    return others + merged


#: Plans of at least this many tiles merge neighbours with array operations
#: (:mod:`tessera.query.merge`); smaller ones request by request (the same runs, without
#: the arrays' fixed cost).
BULK_MERGE_TILES = 64


def _plan_requests_bulk(choices: list[TileChoice], model: CostModel,
                        max_request_bytes: int) -> list[PlannedRequest]:
    """:func:`plan_requests` with merging, its runs found by :func:`merge.run_starts`."""
    names = [c.method for c in choices]
    fetches = {m: read_method(m).store_bytes for m in set(names)}
    others = [PlannedRequest(c.method, c.need.key, int(a), int(b), (i,))
              for i, c in enumerate(choices) if not fetches[c.method]
              for a, b in c.requests.tolist()]
    rest = sum((c.mix for c in choices if not fetches[c.method]), RequestMix())
    picked = [i for i, m in enumerate(names) if fetches[m]]
    if not picked:
        return others
    key_ids = {k: i for i, k in enumerate(sorted({choices[i].need.key for i in picked}))}
    parts = [choices[i].requests for i in picked]
    counts = np.fromiter((len(p) for p in parts), np.int64, len(parts))
    spans = np.concatenate(parts).reshape(-1, 2).astype(np.int64)
    tiles = np.repeat(np.asarray(picked, np.int64), counts)
    keys = np.repeat(np.fromiter((key_ids[choices[i].need.key] for i in picked), np.int64,
                                 len(picked)), counts)
    is_get = np.repeat(np.fromiter((names[i] == "get" for i in picked), bool, len(picked)),
                       counts)
    return others + merge_rows(keys, spans, tiles, is_get, list(key_ids), names.__getitem__,
                               model, max_request_bytes, rest)


def merge_rows(keys: np.ndarray, spans: np.ndarray, tiles: np.ndarray, is_get: np.ndarray,
               key_names: list[str], method_of: Callable[[int], str], model: CostModel,
               max_request_bytes: int, rest: RequestMix | None = None,
               ) -> list[PlannedRequest]:
    """The requests of byte requests given as rows (``keys``: an index into the sorted
    ``key_names``; ``spans``: ``[start, stop)``; ``tiles``: the tile each serves;
    ``is_get``: a whole-tile get, else a range), neighbours merged into runs by
    :func:`merge.run_starts`: a run of one row keeps its tile's method (``method_of``), a
    longer one is a ``range`` serving its tiles. ``rest``: the plan's requests that store
    no bytes (pushdowns)."""
    if len(keys) > 1 and not ((keys[1:] > keys[:-1]) | (
            (keys[1:] == keys[:-1]) & (spans[1:, 0] >= spans[:-1, 0]))).all():
        order = np.lexsort((spans[:, 0], keys))  # (rows in the objects' order need none)
        spans, tiles, keys, is_get = spans[order], tiles[order], keys[order], is_get[order]
    limit = min(max_request_bytes, 2 * model.profile.min_range_bytes)
    first = merge.run_starts(keys, spans[:, 0], spans[:, 1], is_get, tiles, model, limit,
                             rest)
    bounds = np.append(first, len(spans)).tolist()
    starts, stops, tile_list = spans[:, 0].tolist(), spans[:, 1].tolist(), tiles.tolist()
    keys_l = keys.tolist()
    # where each row's tile follows the row before's (a run of such rows: its tiles as
    # they are, no sorting; a tile read in several ranges repeats, a range split out of
    # order steps back)
    rising = np.diff(tiles) > 0
    out = []
    for a, b in itertools.pairwise(bounds):
        if b - a == 1:
            t = tile_list[a]
            out.append(PlannedRequest(method_of(t), key_names[keys_l[a]], starts[a], stops[a],
                                      (t,)))
        else:
            served = (sorted(set(tile_list[a:b])) if b - a < 64
                      else tile_list[a:b] if rising[a:b - 1].all()
                      else np.unique(tiles[a:b]).tolist())
            out.append(PlannedRequest("range", key_names[keys_l[a]], starts[a], stops[b - 1],
                                      tuple(served)))
    return out


def _merge_mix(total: RequestMix, a: PlannedRequest, b: PlannedRequest,
               choices: list[TileChoice]) -> RequestMix:
    """``total`` after requests ``a`` and ``b`` become one range covering both."""
    out = total
    for r in (a, b):
        out = out - read_method(r.method).mix([(r.start, r.stop)], choices[r.tiles[0]].need)
    merged = read_method("range")
    return out + merged.mix([(a.start, b.stop)], choices[b.tiles[0]].need)
