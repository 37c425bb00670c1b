"""Appends committed by Tessera itself, so that a commit costs the same in a table of 100
tensors as in one of 100,000.

delta-rs rebuilds its view of every data file on each write: measured on this project's
machine, an append of 10 small rows took 9 ms in a new table and 51 ms after 300 appends,
growing with the files in the snapshot. An append that adds tensors (no id replaced, no
file removed) is the simplest commit the Delta transaction log protocol knows, a blind
append: one new Parquet file and one JSON entry ``_delta_log/<version>.json`` holding its
``add`` action (path, size, statistics) and a ``commitInfo``. Tessera writes those two
objects itself, the entry create-only (a concurrent writer took the version: take the next
one; appends never conflict), and leaves every other commit (overwrites, deletes, restores,
compaction, checkpoints) to delta-rs, which reads these entries as its own. Only tables
whose protocol needs no writer feature beyond the basics (writer version 2 or lower) take
this path; any other falls back to delta-rs.

The data file is written as delta-rs writes it for this table (the same codec, row groups,
and statistics on every column but the blobs); the add action's statistics hold the row
count and each key column's minimum, maximum and null count, as Delta readers expect
(columns without statistics are simply not pruned on).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tessera._version import __version__
from tessera.errors import CommitConflictError, ObjectExistsError
from tessera.storage.store import AsyncStore
from tessera.tables.catalog import LOG
from tessera.tables.reader import DataFile
from tessera.tables.schema import BLOB_COLUMNS

#: The highest Delta writer protocol version whose tables take this path.
MAX_WRITER_VERSION = 2
#: Columns whose minimum and maximum the add action's statistics carry.
STATS_COLUMNS = ("id", "write_id", "kind", "part")


def can_append(min_writer_version: int, writer_features: Any) -> bool:
    """Whether a table of this protocol takes Tessera's own appends."""
    return min_writer_version <= MAX_WRITER_VERSION and not writer_features


def parquet_bytes(table: pa.Table, codec: str, rows_per_group: int) -> bytes:
    """``table`` as one Parquet file: ``codec`` on every column, row groups of
    ``rows_per_group`` rows, statistics and dictionaries on all but the blob columns."""
    sink = io.BytesIO()
    plain = [c for c in table.column_names if c not in BLOB_COLUMNS]
    pq.write_table(table, sink, compression=codec.lower(),
                   row_group_size=max(1, rows_per_group), write_statistics=plain,
                   use_dictionary=plain)
    return sink.getvalue()


def add_stats(table: pa.Table) -> dict[str, Any]:
    """The statistics of an add action: rows, and per key column min, max and nulls."""
    lo: dict[str, Any] = {}
    hi: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in STATS_COLUMNS:
        col = table.column(name)
        nulls[name] = col.null_count
        if col.null_count < len(col):
            got = pc.min_max(col)
            lo[name], hi[name] = got["min"].as_py(), got["max"].as_py()
    return {"numRecords": table.num_rows, "minValues": lo, "maxValues": hi,
            "nullCount": nulls}


def _changes_table(entry: bytes) -> bool:
    """Whether a log entry changes the table's protocol or metadata (schema, settings)."""
    for line in entry.splitlines():
        if line.strip():
            action = json.loads(line)
            if isinstance(action, dict) and ("protocol" in action or "metaData" in action):
                return True
    return False


async def append(store: AsyncStore, table: pa.Table, after: int, codec: str,
                 rows_per_group: int, retries: int) -> tuple[int, DataFile]:
    """Commit ``table`` as a blind append at the first free version after ``after`` (the
    version whose protocol the caller checked): its data file first, then the log entry
    (create-only). Returns the version committed and the file added."""
    codec_name = codec.lower()
    data = parquet_bytes(table, codec_name, rows_per_group)
    path = f"part-00000-{uuid.uuid4()}-c000.{codec_name}.parquet"
    await store.put(path, data)
    stats = add_stats(table)
    now = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    entry = "\n".join(json.dumps(a, separators=(",", ":")) for a in (
        {"add": {"path": path, "partitionValues": {}, "size": len(data),
                 "modificationTime": now, "dataChange": True,
                 "stats": json.dumps(stats, separators=(",", ":"), default=str)}},
        {"commitInfo": {"timestamp": now, "operation": "WRITE",
                        "operationParameters": {"mode": "Append"},
                        "clientVersion": f"tessera-{__version__}", "isBlindAppend": True}},
    )).encode() + b"\n"
    version = after + 1
    for _ in range(retries):
        try:
            await store.put(f"{LOG}/{version:020d}.json", entry, mode="create")
        except ObjectExistsError:
            found = bytes(await store.get(f"{LOG}/{version:020d}.json"))
            if found == entry:  # this very entry: a retry whose first answer was lost
                break
            # Another writer committed this version: appends commute, unless it changed
            # the table's protocol or schema (what this append was checked against).
            if _changes_table(found):
                raise CommitConflictError(
                    f"{store.url}: a concurrent commit (version {version}) changed the "
                    "table's protocol or schema; nothing was committed (the data file "
                    f"{path} is left for vacuum): open the table again and retry") from None
            version += 1
            continue
        break
    else:
        raise CommitConflictError(f"{store.url}: {retries} versions in a row were taken by "
                                  "concurrent commits; the append was not committed (its "
                                  f"data file {path} is left for vacuum); retry it")
    return version, DataFile(path, len(data), stats["minValues"].get("id"),
                             stats["maxValues"].get("id"))
