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
(sizes and gaps, wherever the tile lies) are chosen once per context. Finally, range
requests of neighbouring tiles of the same object are merged left to right while that
lowers the cost of the whole plan (:func:`plan_requests`; tiles lie in the global order,
so neighbours are neighbouring bytes).

>>> import numpy as np
>>> from tessera.query.cost import CostModel, DEFAULT_PROFILES
>>> model = CostModel(DEFAULT_PROFILES["cloud"], "s3")
>>> need = TileNeed("t", "frag/v.data", 0, 1 << 20, True, np.array([[0, 4096]]), 4096)
>>> plan_tiles([need], model)[0].method
'range'
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable

import numpy as np

from tessera.config import READ_METHODS
from tessera.errors import ConfigError
from tessera.format import decompose
from tessera.query.cost import CostModel, RequestMix

METHODS = READ_METHODS
#: Factor on the estimated cost of range plans when they compete with a get (see _choose).
RANGE_MARGIN = 1.02
#: Least fraction of the cost a split must save in Algorithm 1 (see refine_ranges).
SPLIT_GAIN = 0.05


@dataclasses.dataclass(frozen=True)
class TileNeed:
    """What a read needs from one stored tile.

    Attributes:
        tile: a label for the tile (e.g. fragment, attribute and tile index).
        key: the object holding it; ``offset``, ``length``: the tile's stored bytes there.
        raw: True if parts of the tile can be fetched: raw tiles, and compressed tiles
            stored in blocks (:mod:`tessera.format.blocks`).
        ranges: the ``[start, stop)`` byte ranges *relative to the tile* that hold the
            selected cells, sorted and merged (see :mod:`tessera.format.decompose`); of a
            blocked tile, the encoded blocks holding them; empty for other compressed tiles.
        selected_bytes: bytes of the selected cells (what a pushdown returns).
        pushdown_read_bytes: stored bytes a pushdown server reads for it (default: the
            whole tile; of a blocked tile, only the blocks holding the cells).
    """

    tile: str
    key: str
    offset: int
    length: int
    raw: bool
    ranges: np.ndarray
    selected_bytes: int
    pushdown_read_bytes: int | None = None

    @property
    def every_byte(self) -> bool:
        """True if the selected cells lie in every stored byte (ranges would be a get)."""
        r = self.ranges
        return len(r) == 1 and int(r[0, 1] - r[0, 0]) == self.length


@dataclasses.dataclass(frozen=True)
class TileChoice:
    """The method chosen for one tile and the requests it issues.

    ``requests``: ``[start, stop)`` byte ranges of the object (absolute offsets); for a
    ``get`` the whole tile, for a ``pushdown`` the tile it reads on the server.
    """

    need: TileNeed
    method: str
    requests: np.ndarray
    mix: RequestMix


def refine_ranges(ranges: np.ndarray, cost: Callable[[list[tuple[int, int]]], float],
                  min_split_bytes: int = 1, min_gain: float = SPLIT_GAIN,
                  ) -> list[tuple[int, int]]:
    """Algorithm 1: group sorted, disjoint ranges into range requests.

    Start with one request covering everything; take a group and split it at its largest gap
    (ties: the most even split), or a single range in half; keep the split if it lowers the
    cost, else assign the group as it is. Costs are always of the tile's whole current set
    of requests (the other groups, assigned or pending, included), so that the model sees
    how many requests share the link.

    Args:
        ranges: ``(n, 2)`` sorted, disjoint ``[start, stop)`` ranges.
        cost: estimated cost of issuing a list of ``(start, stop)`` requests.
        min_split_bytes: a single range is only halved into pieces of at least this many
            bytes, at multiples of it (pass the larger of the cell size and the profile's
            :attr:`~tessera.query.cost.StoreProfile.min_range_bytes`).
        min_gain: a split is kept only if it lowers the cost by at least this fraction
            (every extra request has costs the model does not see: connection set-up,
            client work), so that splits are made for real savings only.
    """
    r = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    if not len(r):
        return []
    # A few ranges (a small box's) are split in plain Python (see PLAIN_PYTHON_MAX).
    small = r.tolist() if len(r) <= decompose.PLAIN_PYTHON_MAX else None
    assigned: list[tuple[int, int]] = []
    pending: deque[tuple[int, int, int, int]] = deque([(0, len(r) - 1, int(r[0, 0]),
                                                        int(r[-1, 1]))])
    while pending:
        i, j, start, stop = pending.popleft()
        if i == j:
            size = stop - start
            half = (size // 2 // min_split_bytes) * min_split_bytes
            if half < min_split_bytes or half <= 0:
                assigned.append((start, stop))
                continue
            sg1 = (i, i, start, start + half)
            sg2 = (i, i, start + half, stop)
        else:
            k = _widest_gap(small, i, j) if small is not None else _widest_gap_np(r, i, j)
            sg1 = (i, k - 1, start, int(r[k - 1, 1]))
            sg2 = (k, j, int(r[k, 0]), stop)
        others = assigned + [(p[2], p[3]) for p in pending]
        if cost([*others, (sg1[2], sg1[3]), (sg2[2], sg2[3])]) < (1 - min_gain) * cost(
                [*others, (start, stop)]):
            pending.extend([sg1, sg2])
        else:
            assigned.append((start, stop))
    return sorted(assigned)


def _widest_gap(r: list[list[int]], i: int, j: int) -> int:
    """Where Algorithm 1 splits ranges ``i..j``: the first range after the widest gap
    (ties: the gap nearest the middle, the earlier one on an equal distance)."""
    middle = (i + j + 1) / 2
    best, best_gap, best_off = i + 1, -1, 0.0
    for k in range(i + 1, j + 1):
        gap = r[k][0] - r[k - 1][1]
        off = abs(k - middle)
        if gap > best_gap or (gap == best_gap and off < best_off):
            best, best_gap, best_off = k, gap, off
    return best


def _widest_gap_np(r: np.ndarray, i: int, j: int) -> int:
    """:func:`_widest_gap` on an ``(n, 2)`` array, vectorised for many ranges."""
    gaps = r[i + 1:j + 1, 0] - r[i:j, 1]
    widest = np.flatnonzero(gaps == gaps.max()) + i + 1  # candidates: first of sg2
    middle = (i + j + 1) / 2
    return int(widest[np.argmin(np.abs(widest - middle))])


def _mix(method: str, requests: list[tuple[int, int]], need: TileNeed) -> RequestMix:
    nbytes = sum(b - a for a, b in requests)
    if method == "get":
        return RequestMix(get_requests=1, get_bytes=need.length)
    if method == "pushdown":
        read = need.length if need.pushdown_read_bytes is None else need.pushdown_read_bytes
        return RequestMix(pushdowns=1, pushdown_bytes=need.selected_bytes,
                          pushdown_tile_bytes=read)
    return RequestMix(range_requests=len(requests), range_bytes=nbytes)


def _only_get(need: TileNeed, method: str, allow_pushdown: bool) -> bool:
    """True if ``_choose`` can only answer "get" for ``need`` (whatever the rest of the
    plan): a tile that must be fetched whole, or whose every stored byte is needed, when
    pushdown may not compete."""
    return method == "get" or (method == "auto" and not allow_pushdown
                               and (not need.raw or need.every_byte))


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
    whole = [(need.offset, need.offset + need.length)]

    def choice(m: str, reqs: list[tuple[int, int]]) -> TileChoice:
        return TileChoice(need, m, np.array(reqs, dtype=np.int64).reshape(-1, 2),
                          _mix(m, reqs, need))

    if method == "pushdown":
        if not allow_pushdown:
            raise ConfigError("method='pushdown' needs a pushdown server and a profile with "
                              "its alpha and beta (tessera.profile_store(url, pushdown=...))")
        return choice("pushdown", whole)
    if method == "get" or not need.raw:
        candidates = [choice("get", whole)]
        if method == "auto" and allow_pushdown:
            candidates.append(choice("pushdown", whole))
    elif method == "merge":
        r = need.ranges
        return choice("range", [(need.offset + int(r[0, 0]), need.offset + int(r[-1, 1]))])
    elif method == "fetch":
        return choice("range", [(need.offset + int(a), need.offset + int(b))
                                for a, b in need.ranges.tolist()])
    else:
        def cost(reqs: list[tuple[int, int]]) -> float:
            return model.estimate(context + _mix("range", reqs, need)).cost

        step = max(cell_nbytes, (model.profile.min_range_bytes // cell_nbytes) * cell_nbytes)
        # A get first: on a tie it wins, and a whole tile is checked against its checksum.
        candidates = [choice("get", whole)]
        if not need.every_byte:
            # (needing every stored byte, ranges are a get; of a blocked tile, a few cells
            # in every block may still be cheaper pushed down)
            candidates.append(choice("range", [(a + need.offset, b + need.offset)
                                               for a, b in refine_ranges(need.ranges, cost,
                                                                         step)]))
        if allow_pushdown:
            candidates.append(choice("pushdown", whole))
    if keep is not None and not any(_same(c, keep) for c in candidates):
        candidates.append(keep)  # never worse than the choice this tile already has
    if len(candidates) == 1:
        return candidates[0]
    # Each candidate's marginal cost on top of the rest of the plan; ranges must beat a get
    # by RANGE_MARGIN: a get is checked against the tile's checksum and needs no reassembly
    # on the client, costs the model does not count.
    base = model.estimate(context).cost

    def marginal(c: TileChoice) -> float:
        extra = model.estimate(context + c.mix).cost - base
        if c.method != "range":
            return extra
        # more requests can raise BW(N) enough to make the extra negative: the margin must
        # still count against the range plan
        return extra * RANGE_MARGIN if extra >= 0 else extra / RANGE_MARGIN

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
    if method not in METHODS:
        raise ConfigError(f"unknown read method {method!r}; choose one of {', '.join(METHODS)}")
    can_push = model.profile.has_pushdown if allow_pushdown is None else allow_pushdown
    if not needs:
        return []
    memo: ChoiceMemo | None = {} if len(needs) > 1 else None  # one tile: nothing to share
    plan = _descend(needs, model, method, can_push, cell_nbytes, rounds, None, memo)
    if method == "auto" and can_push and len(needs) > 1:
        # Tile-by-tile steps miss plans that only pay as a whole: the first pushdown pays a
        # full wave of server time, the next ones share it, while every tile fetched shares
        # the link. So also descend from "push every tile down", and take that plan when it
        # wins clearly: it rests on the model's assumption that a wave of pushdowns runs in
        # parallel on the server (true of the paper's lambdas, not of one small server).
        start = [_choose(n, "pushdown", model, RequestMix(), True, cell_nbytes) for n in needs]
        other = _descend(needs, model, method, can_push, cell_nbytes, rounds, start, memo)
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
    reqs = [PlannedRequest(c.method, c.need.key, int(a), int(b), (i,))
            for i, c in enumerate(choices) for a, b in c.requests]
    if not merge_neighbours:
        return reqs
    fetched = sorted((r for r in reqs if r.method in ("get", "range")),
                     key=lambda r: (r.key, r.start))
    others = [r for r in reqs if r.method not in ("get", "range")]
    if len(fetched) < 2:
        return others + fetched  # nothing to merge
    total = sum((c.mix for c in choices), RequestMix())
    limit = min(max_request_bytes, 2 * model.profile.min_range_bytes)
    merged: list[PlannedRequest] = []
    for r in fetched:
        prev = merged[-1] if merged else None
        if (prev is not None and prev.key == r.key and prev.stop <= r.start
                and r.stop - prev.start <= limit
                and set(prev.tiles) != set(r.tiles)):
            trial = _merge_mix(total, prev, r)
            if model.smooth_cost(trial) < model.smooth_cost(total):
                merged[-1] = PlannedRequest("range", r.key, prev.start, r.stop,
                                            tuple(sorted(set(prev.tiles) | set(r.tiles))))
                total = trial
                continue
        merged.append(r)
    return others + merged


def _merge_mix(total: RequestMix, a: PlannedRequest, b: PlannedRequest) -> RequestMix:
    """``total`` after requests ``a`` and ``b`` become one range covering both."""
    out = total
    for r in (a, b):
        size = r.stop - r.start
        out = out - (RequestMix(get_requests=1, get_bytes=size) if r.method == "get"
                     else RequestMix(range_requests=1, range_bytes=size))
    return out + RequestMix(range_requests=1, range_bytes=b.stop - a.start)
