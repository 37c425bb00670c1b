"""Plans reused across reads whose needs have the same shape.

Planning a small read (choosing a method per tile, grouping ranges, merging neighbours) costs
more than reading it from memory. A loop of 20 x 20 crops at different places asks the
planner the same question again and again: the tiles differ, the crop sits higher or lower
in them, but the sizes and gaps of what each tile needs are the same, and so is every
choice the planner makes (its costs see only sizes, gaps and counts, never where a tile
lies). :class:`PlanCache` keeps a *template* per shape: each tile's method and its requests
relative to an anchor, and each request's parts; a read of the same shape gets the plan
rebuilt on its own tiles, equal to what the planner would have made.

The anchor of a tile's requests is the tile's start for methods that take the whole tile
(``get``, ``pushdown``) and the first needed byte for methods that take ranges. The shape
of a read's needs (:func:`shape_key`) holds, per tile: which object it lies in, its
stored length and kind, the sizes and gaps of its needed ranges, and the distance of its
start and of its first needed byte from those of the first tile in the same object. A
uniform move of the crop inside its tiles changes none of these. Merging neighbours sees
the gaps between requests of one object: between two ranges, or two whole tiles, those
follow from the shape; between a whole tile and a range they also depend on where the
range lies in its tile. A template whose objects mix both kinds is therefore kept under
the exact key (:func:`exact_key`: the shape plus each tile's first needed byte).

>>> import numpy as np
>>> from tessera.query.need import TileNeed
>>> from tessera.query.plan import plan_needs
>>> from tessera.storage.url import parse_store_url
>>> url = parse_store_url("memory://doc")
>>> def need(row):  # 4 rows of 16 bytes, ``row`` rows down a 64 x 64-byte tile
...     ranges = np.array([[(row + i) * 64, (row + i) * 64 + 16] for i in range(4)])
...     return [TileNeed("t", "k", 8192, 4096, True, ranges, 64)]
>>> cache = PlanCache(1 << 20)
>>> plan = lambda n: plan_needs(n, url=url)
>>> a, b = cache.plan(need(3), ("auto",), plan), cache.plan(need(40), ("auto",), plan)
>>> cache.hits, b.requests == plan(need(40)).requests
(1, True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable

import numpy as np

from tessera.cache import LRUCache
from tessera.query.cost import Estimate, RequestMix
from tessera.query.methods import read_method
from tessera.query.need import TileNeed
from tessera.query.plan import Plan
from tessera.query.refine import PlannedRequest, TileChoice


@dataclasses.dataclass(frozen=True)
class _Choice:
    method: str
    whole: bool  # anchored at the tile's start (else at its first needed byte)
    requests: np.ndarray  # relative to the anchor
    mix: RequestMix


@dataclasses.dataclass(frozen=True)
class _Request:
    method: str
    tiles: tuple[int, ...]
    parts: tuple[tuple[int, int], ...]  # (tile, index of the tile's request) it spans


@dataclasses.dataclass(frozen=True)
class Template:
    """A plan with its requests relative to its tiles' anchors (see the module docs)."""

    method: str
    phi: float
    profile: str
    pricing: str
    choices: tuple[_Choice, ...]
    requests: tuple[_Request, ...]
    totals: RequestMix
    estimate: Estimate
    exact: bool  # kept under the exact key

    @property
    def nbytes(self) -> int:
        """About what the template holds in memory."""
        return 256 + sum(128 + c.requests.nbytes for c in self.choices) + 64 * sum(
            1 + len(r.parts) for r in self.requests)


_MIXED = "mixed"  # under a shape key: the templates of that shape are kept by exact key


def _first(need: TileNeed) -> int:
    return int(need.ranges[0, 0]) if len(need.ranges) else 0


def shape_key(needs: list[TileNeed]) -> tuple[object, ...]:
    """What a plan of ``needs`` depends on, wherever the needed bytes lie in their tiles."""
    keys: dict[str, int] = {}
    base: dict[str, tuple[int, int]] = {}
    out: list[object] = []
    for n in needs:
        first = _first(n)
        ordinal = keys.setdefault(n.key, len(keys))
        off0, anchor0 = base.setdefault(n.key, (n.offset, n.offset + first))
        r = n.ranges
        out.append((ordinal, n.offset - off0, n.offset + first - anchor0, n.length, n.raw,
                    n.selected_bytes, n.pushdown_read_bytes, r.shape, (r - first).tobytes()))
    return tuple(out)


def exact_key(shape: tuple[object, ...], needs: list[TileNeed]) -> tuple[object, ...]:
    """``shape`` pinned to where each tile's first needed byte lies."""
    return (shape, tuple(_first(n) for n in needs))


def template_of(plan: Plan, needs: list[TileNeed]) -> Template | None:
    """``plan`` (made for ``needs``) relative to its tiles' anchors; ``None`` for a plan
    with a request that spans none of its tiles' own requests (never made by the planner;
    such a plan is not kept)."""
    choices: list[_Choice] = []
    kinds: dict[str, set[bool]] = {}
    for c, n in zip(plan.choices, needs, strict=True):
        whole = read_method(c.method).whole_tile
        anchor = n.offset if whole else n.offset + _first(n)
        choices.append(_Choice(c.method, whole, c.requests - anchor, c.mix))
        kinds.setdefault(n.key, set()).add(whole)
    requests = []
    for r in plan.requests:
        parts = tuple((t, j) for t in r.tiles
                      for j, (a, b) in enumerate(plan.choices[t].requests.tolist())
                      if r.start <= a and b <= r.stop)
        if not parts:
            return None
        requests.append(_Request(r.method, r.tiles, parts))
    return Template(plan.method, plan.phi, plan.profile, plan.pricing, tuple(choices),
                    tuple(requests), plan.totals, plan.estimate,
                    exact=any(len(k) > 1 for k in kinds.values()))


def rebuild(template: Template, needs: list[TileNeed]) -> Plan:
    """The plan ``template`` stands for, on ``needs`` (of the same shape)."""
    choices = []
    for c, n in zip(template.choices, needs, strict=True):
        anchor = n.offset if c.whole else n.offset + _first(n)
        choices.append(TileChoice(n, c.method, c.requests + anchor, c.mix))
    requests = []
    for r in template.requests:
        spans = [choices[t].requests[j] for t, j in r.parts]
        requests.append(PlannedRequest(r.method, needs[r.tiles[0]].key,
                                       int(min(s[0] for s in spans)),
                                       int(max(s[1] for s in spans)), r.tiles))
    return Plan(template.method, template.phi, template.profile, template.pricing, choices,
                requests, template.totals, template.estimate)


#: The least a template holds per tile (see :attr:`Template.nbytes`).
TILE_BYTES = 128


class PlanCache:
    """Templates of the plans made for one array handle, by the shape of their needs and the
    planner's settings; bounded in bytes (``PlannerConfig.plan_cache_bytes``)."""

    def __init__(self, capacity_bytes: int) -> None:
        self._cache: LRUCache[Hashable, Template | str] = LRUCache(
            "plans", capacity_bytes, size=lambda v: v.nbytes if isinstance(v, Template) else 64)
        #: Plans rebuilt from a template.
        self.hits = 0

    def clear(self) -> None:
        """Forget every template (the fragments or the profile changed)."""
        self._cache.clear()

    def plan(self, needs: list[TileNeed], settings: Hashable,
             make: Callable[[list[TileNeed]], Plan]) -> Plan:
        """The plan for ``needs`` under ``settings`` (everything else the planner is given):
        rebuilt from a template of the same shape, or made by ``make`` and kept. A plan
        whose template could not fit in the cache is made and not kept (looking it up would
        cost a key as long as the read, and keeping it would push out every other plan)."""
        if len(needs) * TILE_BYTES > self._cache.capacity_bytes:
            return make(needs)
        shape = (settings, shape_key(needs))
        found = self._cache.get(shape)
        exact = None
        if found == _MIXED:
            exact = exact_key(shape, needs)
            found = self._cache.get(exact)
        if isinstance(found, Template):
            self.hits += 1
            return rebuild(found, needs)
        plan = make(needs)
        template = template_of(plan, needs)
        if template is None:
            return plan
        if template.exact:
            self._cache.put(shape, _MIXED)
            self._cache.put(exact or exact_key(shape, needs), template)
        else:
            self._cache.put(shape, template)
        return plan
