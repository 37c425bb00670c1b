"""The stored-tile description every floor above shares: :class:`Piece` (a byte range of a
stored object holding one encoded tile, with its checksum and codec), its verification
(:func:`verify_piece`), :class:`TileRead` (one tile of one attribute of one fragment that a
read needs: the seam between the planner and the executor), :class:`CellTileRead` (one data
tile of a sparse fragment), and :func:`tile_cells`, which cells of a tile a selection takes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tessera.errors import CorruptDataError
from tessera.format.blocks import TileBlocks, decode_blocked
from tessera.format.checksum import checksum
from tessera.format.codecs import get_codec
from tessera.format.layout import Box
from tessera.format.selection import Selection


@dataclasses.dataclass(frozen=True)
class Piece:
    """A byte range of an object holding one encoded tile, and its CRC (``crc32``) of the
    variant ``checksum`` names (:mod:`tessera.format.checksum`)."""

    key: str
    offset: int
    length: int
    codec: str | None
    crc32: int
    inline: bytes | None = None  # the bytes themselves, for tiles kept in the bookkeeping
    #: A blocked compressed tile's block table (decoded block by block).
    blocks: TileBlocks | None = dataclasses.field(default=None, compare=False)
    checksum: str = "crc32"



@dataclasses.dataclass(frozen=True)
class CellTileRead:
    """One data tile of a sparse (or delete) fragment that may hold selected cells: its
    coordinates and, unless it holds tombstones, its attribute values."""

    fragment: str
    rank: int
    kind: str
    tile: int
    mbr: Box
    coords: Piece
    attrs: dict[str, Piece]
    #: The fragment's cache of decoded inline tiles (fragments are immutable, so an open
    #: handle decodes each small update once).
    cache: dict[Any, Any] | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def inline(self) -> bool:
        """True if every piece lives in the fragment's bookkeeping (no request needed)."""
        return self.coords.inline is not None and all(
            p.inline is not None for p in self.attrs.values())


class StoredTileFields:
    """What a description that names a stored tile by its fields (``key``, ``offset``,
    ``length``, ``codec``, ``crc32``, ``blocks``, ``checksum``; :class:`TileRead`, the
    wire's ``TileItem``) derives from it: the :class:`Piece` those fields describe."""

    __slots__ = ()  # its subclasses may keep their fields in slots (a read holds 10^5 or more)

    key: str
    offset: int
    length: int
    codec: str | None
    crc32: int
    blocks: TileBlocks | None
    checksum: str

    @property
    def piece(self) -> Piece:
        """The stored bytes these fields describe."""
        return Piece(self.key, self.offset, self.length, self.codec, self.crc32,
                     blocks=self.blocks, checksum=self.checksum)


@dataclasses.dataclass(frozen=True, slots=True)
class TileRead(StoredTileFields):
    """One tile of one attribute of one fragment that a read needs.

    Attributes:
        fragment: fragment name; ``rank`` orders fragments (higher = newer, wins).
        attr: attribute name.
        key: the data object holding the tile.
        offset, length: the tile's bytes in that object.
        codec: codec spec (``None``: raw, range-readable).
        crc32: CRC of the stored bytes, of the variant ``checksum`` names
            (:mod:`tessera.format.checksum`).
        tile_index: the space tile's index; ``tile_origin`` its first coordinate.
        region: inclusive box of cells this read contributes (tile x fragment x selection).
        blocks: for a blocked compressed tile, its block table (a reader may fetch and
            decode only some blocks); ``None`` otherwise.
        checksum: the checksum algorithm of ``crc32`` (and of the blocks').
    """

    fragment: str
    rank: int
    attr: str
    key: str
    offset: int
    length: int
    codec: str | None
    crc32: int
    tile_index: tuple[int, ...]
    tile_origin: tuple[int, ...]
    region: Box
    blocks: TileBlocks | None = dataclasses.field(default=None, compare=False)
    checksum: str = "crc32"

    @property
    def range_readable(self) -> bool:
        """True if part of the tile can be fetched and decoded: raw or blocked tiles."""
        return self.codec is None or self.blocks is not None

    def stored_ranges(self, raw_ranges: np.ndarray) -> np.ndarray:
        """The stored byte ranges (relative to the tile) holding the decoded byte ranges
        ``raw_ranges`` of its cells: the same ranges of a raw tile, the blocks holding them
        of a blocked one, none of a tile that can only be fetched whole."""
        if not self.range_readable:
            return np.empty((0, 2), dtype=np.int64)
        return raw_ranges if self.blocks is None else self.blocks.encoded_ranges(raw_ranges)


def check_length(data: Any, piece: Piece, where: str) -> None:
    if len(data) != piece.length:
        raise truncated(piece, len(data), where)


def truncated(piece: Piece, got: int, where: str) -> CorruptDataError:
    return CorruptDataError(f"{where}: data object {piece.key} is truncated (wanted "
                            f"{piece.length} bytes at {piece.offset}, got {got})")


def damaged(piece: Piece, where: str) -> CorruptDataError:
    return CorruptDataError(f"{where}: checksum mismatch in {piece.key}; the stored bytes "
                            "are damaged")


def verify_piece(data: Any, piece: Piece, where: str) -> Any:
    """Check a piece's length and checksum, then decode it with its codec."""
    check_length(data, piece, where)
    if checksum(data, piece.checksum) != piece.crc32:
        raise damaged(piece, where)
    if piece.blocks is not None and piece.codec:
        return decode_blocked(get_codec(piece.codec), data, piece.blocks, where=where).data
    return get_codec(piece.codec).decode(memoryview(data)) if piece.codec else data



def tile_cells(read: TileRead, sel: Selection,
               ) -> tuple[list[slice | np.ndarray], list[slice | np.ndarray]] | None:
    """Which cells of a tile a selection takes: per dimension, where they lie in the tile and
    in the output (slices where they are runs, else position arrays in the selection's order,
    repeats kept); ``None`` when the tile gives none. The one answer to that question, used
    by the planner (the byte ranges to fetch), the executor (where cells land) and the
    pushdown wire (what the server cuts out).

    >>> import numpy as np
    >>> from tessera.format.schema import ArraySchema, Attr, Dim
    >>> from tessera.format.selection import normalize_selection
    >>> schema = ArraySchema([Dim("y", (0, 7), 4), Dim("x", (0, 7), 4)], [Attr("v", "<i4")])
    >>> sel = normalize_selection((slice(2, 6), [5, 1, 5]), schema)
    >>> read = TileRead("f", 0, "v", "k", 0, 64, None, 0, (0, 1), (0, 4), ((2, 4), (3, 5)))
    >>> tile_cells(read, sel)  # rows 2-3 of the tile; column 5 (tile column 1) twice
    ([slice(2, 4, None), array([1, 1])], [slice(0, 2, None), array([0, 2])])
    """
    src: list[slice | np.ndarray] = []
    dst: list[slice | np.ndarray] = []
    for d, lo, hi, origin in zip(sel.dims, read.region[0], read.region[1], read.tile_origin,
                                 strict=True):
        if d.ascending_run:  # a plain slice: the region's cells, found without a search
            src.append(slice(lo - origin, hi - origin + 1))
            dst.append(slice(lo - d.lo, hi - d.lo + 1))
            continue
        coords, pos = d.within(lo, hi)
        if len(coords) == 0:
            return None
        src.append(run_or_positions(coords - origin))
        dst.append(run_or_positions(pos))
    return src, dst


def run_or_positions(arr: np.ndarray) -> slice | np.ndarray:
    """A slice when ``arr`` is a run of consecutive integers (basic indexing, no copy)."""
    if len(arr) == 1 or (len(arr) > 1 and arr[-1] - arr[0] == len(arr) - 1
                         and bool(np.all(np.diff(arr) == 1))):
        return slice(int(arr[0]), int(arr[-1]) + 1)
    return arr


def positions(i: slice | np.ndarray) -> np.ndarray:
    return np.arange(i.start, i.stop) if isinstance(i, slice) else i
