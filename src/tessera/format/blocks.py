"""Blocked tiles: compressed dense tiles as runs of independently encoded blocks.

A compressed tile can only be decoded whole, so a reader that needs 80 rows of a 4 MiB tile
would fetch and decompress all of it. As TileDB splits each tile into *chunks* for its filter
pipeline, Tessera encodes a compressed dense tile as consecutive blocks of ``block_bytes``
decoded bytes each (the last may be shorter), each compressed on its own and laid end to end.
The fragment's bookkeeping keeps every block's encoded size and CRC, so a reader can map the
byte ranges of the cells it needs (decomposition, as for raw tiles) to the blocks holding
them, fetch just those blocks with range requests, check each against its own checksum and
decode only them. A whole tile is still one get, checked against the tile's checksum.

>>> import numpy as np
>>> from tessera.format.codecs import get_codec
>>> raw = np.arange(40_000, dtype=np.int32).tobytes()   # 160,000 bytes: 3 blocks
>>> encoded, blocks = encode_blocked(get_codec("zstd"), raw, 65536)
>>> blocks.count, blocks.block_span(np.array([[70_000, 70_004]])).tolist()
(3, [1])
>>> rng = blocks.encoded_ranges(np.array([[70_000, 70_004]]))   # block 1's encoded bytes
>>> rng.tolist() == [[int(blocks.sizes[0]), int(blocks.sizes[0] + blocks.sizes[1])]]
True
>>> bytes(decode_blocked(get_codec("zstd"), encoded, blocks)) == raw
True
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from typing import Any

import numpy as np

from tessera.errors import CorruptDataError
from tessera.format import decompose
from tessera.format.checksum import DEFAULT_CHECKSUM, checksum
from tessera.format.codecs import Codec
from tessera.format.decompose import merge_ranges

#: Default decoded bytes per block of a compressed dense tile (TileDB's default chunk size;
#: writers take theirs from :class:`~tessera.config.WriteConfig`). A read that needs part of
#: a tile fetches whole blocks: smaller blocks waste fewer bytes at the edges of what is
#: needed, larger ones compress a little better and cost less bookkeeping. Writers record
#: the size they used, so readers follow each fragment's own.
BLOCK_BYTES = 64 << 10


@dataclasses.dataclass(frozen=True, eq=False)
class TileBlocks:
    """How one encoded tile splits into blocks.

    Attributes:
        block_bytes: decoded bytes per block (the last block may hold fewer).
        raw_nbytes: decoded bytes of the whole tile.
        sizes: encoded bytes of each block, in order (``int64``).
        crc32: CRC of each block's encoded bytes (``uint32``), of the variant ``checksum``
            names (:mod:`tessera.format.checksum`).
    """

    block_bytes: int
    raw_nbytes: int
    sizes: np.ndarray
    crc32: np.ndarray
    checksum: str = "crc32"

    @property
    def count(self) -> int:
        """Number of blocks."""
        return len(self.sizes)

    @functools.cached_property
    def starts(self) -> np.ndarray:
        """Encoded offset of each block in the tile, and the tile's length at the end."""
        return np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

    @functools.cached_property
    def start_list(self) -> list[int]:
        """:attr:`starts` as Python integers (for the plain-Python paths of small reads)."""
        return [int(v) for v in self.starts.tolist()]

    def block_span(self, raw_ranges: np.ndarray) -> np.ndarray:
        """Indices of the blocks holding any byte of the decoded ``[start, stop)`` ranges."""
        if len(raw_ranges) <= decompose.PLAIN_PYTHON_MAX:
            # A few ranges (a small box): plain Python (see PLAIN_PYTHON_MAX).
            found: set[int] = set()
            per = self.block_bytes
            for a, b in np.asarray(raw_ranges, dtype=np.int64).reshape(-1, 2).tolist():
                if b > a:
                    found.update(range(a // per, (b - 1) // per + 1))
            return np.array(sorted(found), dtype=np.int64)
        r = np.asarray(raw_ranges, dtype=np.int64).reshape(-1, 2)
        r = r[r[:, 1] > r[:, 0]]
        if not len(r):
            return np.empty(0, dtype=np.int64)
        first = r[:, 0] // self.block_bytes
        last = (r[:, 1] - 1) // self.block_bytes
        marks = np.zeros(self.count + 1, dtype=np.int64)
        np.add.at(marks, first, 1)
        np.add.at(marks, last + 1, -1)
        return np.flatnonzero(np.cumsum(marks)[:-1] > 0)

    def encoded_ranges(self, raw_ranges: np.ndarray) -> np.ndarray:
        """The encoded ``[start, stop)`` ranges (relative to the tile, sorted, merged where
        blocks are neighbours) a reader fetches to decode the decoded ``raw_ranges``."""
        return self.spans(self.block_span(raw_ranges))

    def spans(self, indices: np.ndarray) -> np.ndarray:
        """The encoded ``[start, stop)`` ranges of sorted block ``indices``, one per run of
        neighbouring blocks (relative to the tile)."""
        idx = np.asarray(indices, dtype=np.int64)
        if not len(idx):
            return np.empty((0, 2), dtype=np.int64)
        if len(idx) <= decompose.PLAIN_PYTHON_MAX:
            starts = self.start_list
            runs: list[list[int]] = []
            previous = -2
            for i in idx.tolist():
                if i == previous + 1:
                    runs[-1][1] = starts[i + 1]
                else:
                    runs.append([starts[i], starts[i + 1]])
                previous = i
            return np.array(runs, dtype=np.int64)
        new = np.ones(len(idx), dtype=bool)
        new[1:] = idx[1:] != idx[:-1] + 1
        first = idx[new]
        last = idx[np.concatenate((new[1:], [True]))]
        return np.stack((self.starts[first], self.starts[last + 1]), axis=1)

    def covered(self, ranges: list[tuple[int, int]]) -> np.ndarray:
        """Indices of the blocks lying wholly inside the encoded ``ranges`` (relative to the
        tile; may overlap and come in any order)."""
        if not ranges:
            return np.empty(0, dtype=np.int64)
        if len(ranges) <= decompose.PLAIN_PYTHON_MAX:
            joined: list[list[int]] = []
            for a, b in sorted((int(a), int(b)) for a, b in ranges):
                if joined and a <= joined[-1][1]:
                    joined[-1][1] = max(joined[-1][1], b)
                else:
                    joined.append([a, b])
            starts, count = self.start_list, self.count
            inside = []
            for a, b in joined:
                i = bisect.bisect_left(starts, a, 0, count)
                while i < count and starts[i + 1] <= b:
                    inside.append(i)
                    i += 1
            return np.array(inside, dtype=np.int64)
        merged = merge_ranges(np.array(ranges, dtype=np.int64).reshape(-1, 2))
        lo, hi = self.starts[:-1], self.starts[1:]
        k = np.searchsorted(merged[:, 0], lo, side="right") - 1
        ok = (k >= 0) & (merged[np.maximum(k, 0), 1] >= hi)
        return np.flatnonzero(ok)


def blocks_per_tile(tile_bytes: int, block_bytes: int) -> int:
    """How many blocks of ``block_bytes`` decoded bytes hold a tile of ``tile_bytes``."""
    return -(-tile_bytes // block_bytes)


def encode_blocked(codec: Codec, raw: Any, block_bytes: int = BLOCK_BYTES,
                   algorithm: str = DEFAULT_CHECKSUM) -> tuple[bytes, TileBlocks]:
    """Encode one tile's decoded bytes block by block; returns the encoded tile (blocks end to
    end) and its block table (checksums of the named ``algorithm``)."""
    view = memoryview(raw).cast("B")
    pieces = [codec.encode(block) for block in _blocks_of(view, block_bytes)]
    return b"".join(pieces), _table(pieces, block_bytes, len(view), algorithm)


def raw_block_table(raw: Any, block_bytes: int = BLOCK_BYTES,
                    algorithm: str = DEFAULT_CHECKSUM) -> TileBlocks:
    """The block table of a tile stored as its ``raw`` bytes: blocks of ``block_bytes``
    bytes, each as long as its raw bytes, with their checksums. A fragment keeps one row
    per tile, so a tile its codec did not shrink (stored raw) still has one; readers do not
    use it (such a tile is read as a raw tile)."""
    view = memoryview(raw).cast("B")
    return _table(_blocks_of(view, block_bytes), block_bytes, len(view), algorithm)


def _blocks_of(view: memoryview, block_bytes: int) -> list[memoryview]:
    """A tile's decoded bytes cut into blocks of ``block_bytes`` (the last may be shorter)."""
    return [view[i:i + block_bytes] for i in range(0, len(view), block_bytes)]


def _table(pieces: list[Any], block_bytes: int, raw_nbytes: int, algorithm: str,
           ) -> TileBlocks:
    """The block table of a tile stored as ``pieces``, one per block, in order."""
    sizes = np.array([len(p) for p in pieces], dtype=np.int64)
    crcs = np.array([checksum(p, algorithm) for p in pieces], dtype=np.uint32)
    return TileBlocks(block_bytes, raw_nbytes, sizes, crcs, algorithm)


def decode_blocked(codec: Codec, encoded: Any, blocks: TileBlocks,
                   indices: np.ndarray | None = None, *, check: bool = False,
                   where: str = "tile") -> np.ndarray:
    """Decode the blocks of one encoded tile into a buffer of its decoded size (``uint8``).

    ``encoded`` holds the tile's encoded bytes at their offsets (bytes of blocks not decoded
    may be anything); ``indices`` picks the blocks to decode (default: all); the rest of the
    buffer is left uninitialised. With ``check``, each decoded block is first checked
    against its own checksum (a tile fetched whole is checked once, against the tile's)."""
    src = memoryview(encoded).cast("B")
    if len(src) != int(blocks.starts[-1]):
        raise CorruptDataError(f"{where}: the encoded tile has {len(src)} bytes, its blocks "
                               f"{int(blocks.starts[-1])}")
    # (block tables are checked where they are read: fragment bookkeeping, pushdown items)
    raw_nbytes = blocks.raw_nbytes
    out = np.empty(raw_nbytes, dtype=np.uint8)
    todo = range(blocks.count) if indices is None else indices
    for i in todo:
        i = int(i)
        piece = src[int(blocks.starts[i]):int(blocks.starts[i + 1])]
        if check and checksum(piece, blocks.checksum) != int(blocks.crc32[i]):
            raise CorruptDataError(f"{where}: checksum mismatch in block {i}; the stored "
                                   "bytes are damaged")
        lo = i * blocks.block_bytes
        hi = min(lo + blocks.block_bytes, raw_nbytes)
        try:
            codec.decode_into(piece, out[lo:hi])
        except Exception as err:  # the codec's own error for bytes it cannot decode
            raise CorruptDataError(f"{where}: block {i} does not decode with {codec.spec}: "
                                   f"{err}") from None
    return out
