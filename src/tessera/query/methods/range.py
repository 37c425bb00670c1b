"""``range``: only the byte ranges holding the selected cells, grouped into requests by
Algorithm 1 (:mod:`tessera.query.algorithm1`); for raw tiles and compressed tiles stored in
blocks (the blocks holding the cells). Forced as ``merge`` (one request spanning the tile's
cells) or ``fetch`` (every decomposed range)."""

from __future__ import annotations

from tessera.query import algorithm1
from tessera.query.cost import RequestMix
from tessera.query.methods.registry import ChoiceContext, ReadMethod, ReadMode, Requests
from tessera.query.need import TileNeed

#: Factor on the estimated extra cost of range plans when they compete with a get: a get is
#: checked against the tile's checksum and needs no reassembly on the client, costs the
#: model does not count.
RANGE_MARGIN = 1.02


class Range(ReadMethod):
    """Range requests for the needed bytes."""

    name = "range"
    whole_tile = False
    margin = RANGE_MARGIN

    def competes(self, need: TileNeed, allow_pushdown: bool) -> bool:
        """For tiles readable in parts, unless every stored byte is needed (then ranges
        would be a get)."""
        return need.raw and not need.every_byte

    def requests(self, need: TileNeed, ctx: ChoiceContext) -> Requests:
        """Algorithm 1's grouping, each split costed against the whole plan."""
        def cost(reqs: Requests) -> float:
            return ctx.model.estimate(ctx.context + self.mix(reqs, need)).cost

        cell = ctx.cell_nbytes
        step = max(cell, (ctx.model.profile.min_range_bytes // cell) * cell)
        return [(a + need.offset, b + need.offset)
                for a, b in algorithm1.refine_ranges(need.ranges, cost, step)]

    def mix(self, requests: Requests, need: TileNeed) -> RequestMix:
        """One range request per range."""
        return RequestMix(range_requests=len(requests),
                          range_bytes=sum(b - a for a, b in requests))


def span(need: TileNeed, ctx: ChoiceContext) -> Requests:
    """One request from the first needed byte to the last."""
    r = need.ranges
    return [(need.offset + int(r[0, 0]), need.offset + int(r[-1, 1]))]


def every_range(need: TileNeed, ctx: ChoiceContext) -> Requests:
    """One request per decomposed range."""
    return [(need.offset + int(a), need.offset + int(b)) for a, b in need.ranges.tolist()]


METHOD = Range()
MODES = (ReadMode("merge", "range", span), ReadMode("fetch", "range", every_range))
