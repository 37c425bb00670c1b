"""Reading a tensor table's Parquet files through Tessera's own store: footers once per
process (a data file never changes), row groups chosen from their statistics, and only the
column chunks a read needs fetched as byte ranges (neighbours merged into one request), so
every data request is retried, counted in ``IOStats`` and priced like an array's.

delta-rs keeps the control plane (the log, commits); this module is the data plane.

>>> spans = merge_ranges([(0, 10), (10, 5), (100, 4)], gap=16)
>>> spans
[(0, 15), (100, 4)]
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tessera._sync import run_sync
from tessera.cache import LRUCache, ProcessCache
from tessera.config import CacheConfig
from tessera.format.decompose import merge_ranges as merge_spans
from tessera.storage.stats import IOStats
from tessera.storage.store import AsyncStore
from tessera.storage.window import ByteWindow
from tessera.tables.layouts.base import KEYS, Need

#: Bytes read from a file's end in one request to get its footer (most footers fit).
TAIL_BYTES = 64 << 10
#: Column chunks closer than this are fetched in one request.
MERGE_GAP = 64 << 10


class SparseFile(io.RawIOBase):
    """A read-only file of ``size`` bytes of which only ``pieces`` (offset -> bytes) are
    known; reading elsewhere is an error (a read plan missed a range)."""

    def __init__(self, size: int, pieces: Mapping[int, bytes | memoryview]) -> None:
        self.size, self.pos = size, 0
        self._starts = sorted(pieces)
        self._pieces = pieces

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 \
            else self.size + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self.size - self.pos)
        if want <= 0:
            return 0
        for start in reversed(self._starts):
            if start <= self.pos:
                data = self._pieces[start]
                if self.pos + want <= start + len(data):
                    view = memoryview(data)[self.pos - start:self.pos - start + want]
                    buffer[:want] = view
                    self.pos += want
                    return want
                break
        raise OSError(f"bytes {self.pos}..{self.pos + want - 1} of the file were not fetched")


#: Parsed footers of Parquet files, per process (``TESSERA_FOOTERS_CACHE_BYTES``, 16 MiB of
#: serialized footers), keyed by (store URL, key): data files are written once, so an entry
#: never goes stale. ``FOOTERS()`` is the cache.
FOOTERS: ProcessCache[tuple[str, str], pq.FileMetaData] = ProcessCache(lambda: LRUCache(
    "Parquet footers", CacheConfig.from_env().footers_cache_bytes,
    size=lambda meta: int(meta.serialized_size)))


@dataclasses.dataclass(frozen=True)
class DataFile:
    """A data file of the table's snapshot (from its add action)."""

    path: str
    size: int
    min_id: str | None
    max_id: str | None

    def may_hold(self, tensor_id: str) -> bool:
        """From the add action's statistics (a file without them may hold anything)."""
        if self.min_id is None or self.max_id is None:
            return True
        return self.min_id <= tensor_id <= self.max_id


@dataclasses.dataclass(frozen=True)
class RowGroupRead:
    """Row groups of one file and the byte ranges of the column chunks a read takes."""

    file: DataFile
    row_groups: tuple[int, ...]
    ranges: tuple[tuple[int, int], ...]

    @property
    def nbytes(self) -> int:
        return sum(n for _, n in self.ranges)


@dataclasses.dataclass
class TableRead:
    """What a read did: the requests of its data plane (``stats``, an ``IOStats``), and the
    files, row groups and byte ranges it read. delta-rs's own traffic (opening the log,
    commits) is not in ``stats``."""

    stats: IOStats | None = None
    reads: list[RowGroupRead] = dataclasses.field(default_factory=list)

    @property
    def row_groups(self) -> int:
        return sum(len(r.row_groups) for r in self.reads)


#: A read of a file's footer as steps: it yields the ``(offset, length)`` it needs next and
#: is sent those bytes; it returns the footer.
FooterSteps = Generator[tuple[int, int], bytes, pq.FileMetaData]


def _footer_steps(f: DataFile) -> FooterSteps:
    """The file's footer, one request when it fits the last 64 KiB (else a second one)."""
    tail_len = min(f.size, TAIL_BYTES)
    tail = yield (f.size - tail_len, tail_len)
    length = int.from_bytes(tail[-8:-4], "little") + 8
    if length > len(tail):
        tail = yield (f.size - length, length)
    return pq.read_metadata(pa.PythonFile(SparseFile(f.size, {f.size - len(tail): tail})))


async def footer(store: AsyncStore, f: DataFile) -> pq.FileMetaData:
    """The file's footer (cached; one request when it fits the last 64 KiB)."""
    return await _footer(store, f, store.get_range)


def footer_now(store: AsyncStore, f: DataFile) -> pq.FileMetaData:
    """:func:`footer` on the calling thread, for stores that ``reads_now`` (memory, folders):
    the same steps, each range read where it is asked for, so the coroutine never waits and
    runs to its end without an event loop."""
    async def now(key: str, offset: int, length: int) -> Any:
        return store.read_range_now(key, offset, length)

    coro = _footer(store, f, now)
    try:
        coro.send(None)
    except StopIteration as done:
        meta: pq.FileMetaData = done.value
        return meta
    coro.close()
    raise AssertionError("a footer read on the calling thread waited")  # pragma: no cover


async def _footer(store: AsyncStore, f: DataFile,
                  read: Callable[[str, int, int], Awaitable[Any]]) -> pq.FileMetaData:
    key = (str(store.url), f.path)
    cached = FOOTERS().get(key)
    if cached is not None:
        return cached
    steps = _footer_steps(f)
    try:
        want = next(steps)
        while True:
            want = steps.send(bytes(await read(f.path, *want)))
    except StopIteration as done:
        meta: pq.FileMetaData = done.value
    FOOTERS().put(key, meta)
    return meta


def _columns(meta: pq.FileMetaData) -> dict[str, list[int]]:
    """Top-level column name -> its leaf column indices."""
    out: dict[str, list[int]] = {}
    for i in range(meta.num_columns):
        name = meta.schema.column(i).path.split(".")[0]
        out.setdefault(name, []).append(i)
    return out


def _range(meta: pq.FileMetaData, column: str, group: int, index: dict[str, list[int]]
           ) -> tuple[Any, Any] | None:
    """(min, max) statistics of ``column`` in row group ``group``, or None."""
    leaves = index.get(column)
    if not leaves:
        return None
    stats = meta.row_group(group).column(leaves[0]).statistics
    if stats is None or not stats.has_min_max:
        return None
    return stats.min, stats.max


def select_row_groups(meta: pq.FileMetaData, *, tensor_id: str, kind: str,
                      write_id: str | None = None, need: Need | None = None) -> list[int]:
    """Row groups whose statistics may hold rows of ``tensor_id`` of ``kind`` (and
    ``write_id``, and rows ``need`` asks for); without statistics a row group is kept."""
    index = _columns(meta)
    groups = []
    for g in range(meta.num_row_groups):
        if not _within(_range(meta, "id", g, index), tensor_id) or not _within(
                _range(meta, "kind", g, index), kind):
            continue
        if write_id is not None and not _within(_range(meta, "write_id", g, index), write_id):
            continue
        if need is not None:
            if not _within(_range(meta, "part", g, index), need.part):
                continue
            lo_col, hi_col = KEYS[need.key]
            lo, hi = _range(meta, lo_col, g, index), _range(meta, hi_col, g, index)
            if lo is not None and hi is not None:
                top = hi[1] - 1 if need.key == "pos" else hi[1]
                if not need.wants(int(lo[0]), int(top)):
                    continue
        groups.append(g)
    return groups


def select_header_groups(meta: pq.FileMetaData) -> list[int]:
    """Row groups that may hold header rows."""
    index = _columns(meta)
    return [g for g in range(meta.num_row_groups)
            if _within(_range(meta, "kind", g, index), "header")]


def _within(bounds: tuple[Any, Any] | None, value: Any) -> bool:
    return bounds is None or bounds[0] <= value <= bounds[1]


def chunk_ranges(meta: pq.FileMetaData, groups: Sequence[int], columns: Sequence[str]
                 ) -> list[tuple[int, int]]:
    """``(offset, length)`` of the column chunks of ``columns`` in ``groups``."""
    index = _columns(meta)
    out = []
    for g in groups:
        rg = meta.row_group(g)
        for name in columns:
            for leaf in index.get(name, []):
                col = rg.column(leaf)
                start = col.data_page_offset
                if col.has_dictionary_page and col.dictionary_page_offset is not None \
                        and 0 < col.dictionary_page_offset < start:
                    start = col.dictionary_page_offset
                out.append((int(start), int(col.total_compressed_size)))
    return out


def merge_ranges(ranges: Sequence[tuple[int, int]], gap: int = MERGE_GAP
                 ) -> list[tuple[int, int]]:
    """``(offset, length)`` ranges sorted and merged where at most ``gap`` bytes apart
    (:func:`tessera.format.decompose.merge_ranges`, the engine's one range merger)."""
    spans = np.array([(o, o + n) for o, n in ranges], dtype=np.int64).reshape(-1, 2)
    return [(int(a), int(b - a)) for a, b in merge_spans(spans, gap)]


#: Row groups whose column chunks add up to at least this many bytes are decoded on a worker
#: thread, beside the downloads still running (smaller ones on the event loop).
THREAD_BYTES = 1 << 20


async def read_groups(store: AsyncStore, f: DataFile, meta: pq.FileMetaData,
                      groups: Sequence[int], columns: Sequence[str],
                      window: ByteWindow | None = None) -> pa.Table:
    """Columns ``columns`` of row groups ``groups``, fetching only their column chunks.

    With a ``window`` the chunks' bytes are taken from it before they are requested and
    given back once decoded (a read of many files holds at most the window of fetched,
    undecoded bytes); a large decode runs on a worker thread, overlapped with the other
    files' downloads.
    """
    spans = merge_ranges(chunk_ranges(meta, groups, columns)) if groups else []
    nbytes = sum(n for _, n in spans)
    if window is not None and nbytes:
        await window.acquire(nbytes)
    try:
        got = await store.get_ranges(f.path, spans) if spans else []
        if nbytes >= THREAD_BYTES:
            return await asyncio.to_thread(_groups_table, f, meta, groups, columns, spans, got)
        return _groups_table(f, meta, groups, columns, spans, got)
    finally:
        if window is not None and nbytes:
            window.release(nbytes)


def read_groups_now(store: AsyncStore, f: DataFile, meta: pq.FileMetaData,
                    groups: Sequence[int], columns: Sequence[str]) -> pa.Table:
    """:func:`read_groups` on the calling thread, for stores that ``reads_now``."""
    spans = merge_ranges(chunk_ranges(meta, groups, columns)) if groups else []
    got = [store.read_range_now(f.path, o, n) for o, n in spans]
    return _groups_table(f, meta, groups, columns, spans, got)


def _groups_table(f: DataFile, meta: pq.FileMetaData, groups: Sequence[int],
                  columns: Sequence[str], spans: list[tuple[int, int]],
                  got: Sequence[Any]) -> pa.Table:
    if not groups:
        return pa.table({name: [] for name in columns})
    pieces = {offset: memoryview(data) for (offset, _), data in zip(spans, got, strict=True)}
    source = pa.PythonFile(SparseFile(f.size, pieces))
    return pq.ParquetFile(source, metadata=meta).read_row_groups(list(groups),
                                                                 columns=list(columns))


def footers(store: AsyncStore, files: Sequence[DataFile]) -> list[pq.FileMetaData]:
    """The footers of ``files``: read on the calling thread for stores that never wait on a
    network (no trip to the event loop per read), else on the loop, concurrently."""
    if store.reads_now:
        return [footer_now(store, f) for f in files]
    return run_sync(gather(*(footer(store, f) for f in files)))


def groups_of(store: AsyncStore, plan: Sequence[tuple[DataFile, pq.FileMetaData, list[int]]],
              columns: Sequence[str], window_bytes: int | None = None) -> list[pa.Table]:
    """Columns ``columns`` of the planned row groups of each file (read as :func:`footers`
    reads; on the loop, at most ``window_bytes`` of fetched, undecoded column chunks at
    once, see :func:`read_groups`)."""
    if store.reads_now:
        return [read_groups_now(store, f, meta, groups, columns) for f, meta, groups in plan]

    async def run() -> list[pa.Table]:
        window = ByteWindow(window_bytes) if window_bytes is not None else None
        return await gather(*(read_groups(store, f, meta, groups, columns, window)
                              for f, meta, groups in plan))

    return run_sync(run())


async def gather(*coros: Any) -> list[Any]:
    """``asyncio.gather`` of ``coros`` (results in order)."""
    return list(await asyncio.gather(*coros))
