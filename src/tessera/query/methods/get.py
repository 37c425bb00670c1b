"""``get``: the whole stored tile in one request, checked against its checksum. Always a
candidate; the only one for a compressed tile without blocks when no server may compete."""

from __future__ import annotations

from tessera.query.cost import RequestMix
from tessera.query.methods.registry import ChoiceContext, ReadMethod, ReadMode, Requests
from tessera.query.need import TileNeed


class Get(ReadMethod):
    """A whole-tile get."""

    name = "get"

    def competes(self, need: TileNeed, allow_pushdown: bool) -> bool:
        """Always."""
        return True

    def requests(self, need: TileNeed, ctx: ChoiceContext) -> Requests:
        """The tile's stored bytes."""
        return [(need.offset, need.offset + need.length)]

    def mix(self, requests: Requests, need: TileNeed) -> RequestMix:
        """One get request per range (a plan's gets are one per tile)."""
        return RequestMix(get_requests=len(requests), get_bytes=sum(b - a for a, b in requests))


METHOD = Get()
MODES = (ReadMode("get", "get"),)
