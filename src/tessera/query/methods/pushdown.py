"""``pushdown``: one call to the pushdown server beside the store, which reads the tile
(of a blocked tile: the blocks holding the cells) and returns just the selected cells. A
candidate only when the profile has the server's figures and the caller allows it."""

from __future__ import annotations

from tessera.query.cost import RequestMix
from tessera.query.methods.registry import ChoiceContext, ReadMethod, ReadMode, Requests
from tessera.query.need import TileNeed


class Pushdown(ReadMethod):
    """A pushdown call per tile."""

    name = "pushdown"
    store_bytes = False
    on_server = True

    def competes(self, need: TileNeed, allow_pushdown: bool) -> bool:
        """When a server may compete."""
        return allow_pushdown

    def requests(self, need: TileNeed, ctx: ChoiceContext) -> Requests:
        """The tile the server reads."""
        return [(need.offset, need.offset + need.length)]

    def mix(self, requests: Requests, need: TileNeed) -> RequestMix:
        """One pushdown returning the selected bytes, reading the tile's (needed) bytes."""
        read = need.length if need.pushdown_read_bytes is None else need.pushdown_read_bytes
        return RequestMix(pushdowns=1, pushdown_bytes=need.selected_bytes,
                          pushdown_tile_bytes=read)

    def unavailable(self, allow_pushdown: bool) -> str | None:
        """Without a server and its figures, it cannot be forced."""
        if allow_pushdown:
            return None
        return ("method='pushdown' needs a pushdown server and a profile with its alpha and "
                "beta (tessera.profile_store(url, pushdown=...))")


METHOD = Pushdown()
MODES = (ReadMode("pushdown", "pushdown"),)
