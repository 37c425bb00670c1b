"""What a read needs from one stored tile (:class:`TileNeed`): the planner's input per tile,
built from the engine's tile reads (:func:`tessera.query.plan.tile_needs`)."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True, slots=True)
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
