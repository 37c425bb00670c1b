"""The catalogue of a tensor table: which header row is each tensor's newest, found through the
data files whose id statistics hold it, and kept up to date commit by commit.

A table grows by commits of a few tensors; a training table has 10^5 of them. Rebuilding the
whole catalogue after every commit, or reading every file's header rows to find one tensor,
makes building a table O(N^2) and opening one to read a tensor O(N). Instead:

* a tensor's header is looked up in the files whose per-file ``min``/``max`` id statistics
  (Delta's add-action stats) hold its id (:func:`candidate_files`): a table written in id
  order reads one file's header rows, not all;
* the list of data files moves from version to version by the add and remove actions of the
  commits in between (:func:`log_changes`, the Delta transaction log's own JSON entries),
  not by listing every file again;
* a handle's own commit adds the header rows it wrote to what it knows, without reading
  anything back.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from tessera.cache import LRUCache, ProcessCache
from tessera.config import CacheConfig
from tessera.errors import ObjectNotFoundError
from tessera.storage.store import AsyncStore
from tessera.tables.layouts.base import Header
from tessera.tables.reader import DataFile, footer, read_groups, select_header_groups
from tessera.tables.schema import HEADER_COLUMNS

#: Header rows of data files, per process (files never change; ``TESSERA_HEADERS_CACHE_BYTES``,
#: 64 MiB), sized at about :data:`HEADER_ROW_BYTES` a row. ``HEADER_ROWS()`` is the cache.
HEADER_ROW_BYTES = 512
HEADER_ROWS: ProcessCache[tuple[str, str], list[dict[str, Any]]] = ProcessCache(
    lambda: LRUCache("tensor-table header rows", CacheConfig.from_env().headers_cache_bytes,
                     size=lambda rows: HEADER_ROW_BYTES * max(1, len(rows))))

#: Where Delta keeps the table's commits.
LOG = "_delta_log"


async def file_header_rows(store: AsyncStore, f: DataFile) -> list[dict[str, Any]]:
    """The header rows of one data file (read once per process: files never change)."""
    key = (str(store.url), f.path)
    cached = HEADER_ROWS().get(key)
    if cached is not None:
        return cached
    meta = await footer(store, f)
    groups = select_header_groups(meta)
    table = await read_groups(store, f, meta, groups, HEADER_COLUMNS)
    rows = [r for r in table.to_pylist() if r["kind"] == "header"]
    HEADER_ROWS().put(key, rows)
    return rows


def newest_rows(tables: list[list[dict[str, Any]]], only: set[str] | None = None,
                ) -> dict[str, dict[str, Any]]:
    """Per tensor id (of ``only``, if given) its newest header row among ``tables``: the
    latest ``(created_at, write_id)``, as a version's snapshot decides."""
    newest: dict[str, tuple[tuple[Any, str], dict[str, Any]]] = {}
    for rows in tables:
        for row in rows:
            i = row["id"]
            if only is not None and i not in only:
                continue
            key = (row["created_at"], row["write_id"])
            if i not in newest or key > newest[i][0]:
                newest[i] = (key, row)
    return {i: row for i, (_, row) in newest.items()}


def candidate_files(files: list[DataFile], ids: set[str]) -> list[DataFile]:
    """The data files whose id statistics may hold any of ``ids`` (a file without
    statistics may hold anything)."""
    if not ids:
        return []
    lo, hi = min(ids), max(ids)
    out = []
    for f in files:
        if f.min_id is None or f.max_id is None:
            out.append(f)  # a file without statistics may hold anything
        elif f.min_id <= hi and f.max_id >= lo and any(f.min_id <= i <= f.max_id
                                                       for i in ids):
            out.append(f)
    return out


def header_of(row: dict[str, Any]) -> Header:
    """A tensor's :class:`~tessera.tables.layouts.base.Header` from its header row (its aux
    arrays are read later, when a read needs them)."""
    doc = json.loads(row["aux_layout"]) if row.get("aux_layout") else {}
    created = row["created_at"]
    stamp = int(created.timestamp() * 1e6) if created is not None else 0
    return Header(row["id"], row["write_id"], row["layout"], row["dtype"],
                  tuple(int(n) for n in row["dense_shape"] or []), int(row["nnz"] or 0), stamp,
                  row["chunk_dim_count"],
                  None if row["flattened_shape"] is None else tuple(row["flattened_shape"]),
                  None if row["block_shape"] is None else tuple(row["block_shape"]),
                  {}, dict(doc.get("params", {})), json.loads(row["metadata"] or "{}"),
                  row.get("aux_layout"))


async def log_changes(store: AsyncStore, old: int, new: int,
                      ) -> tuple[list[DataFile], set[str]] | None:
    """The data files the commits after version ``old`` up to ``new`` added (with their id
    statistics) and the paths they removed, from the transaction log's JSON entries; ``None``
    when an entry cannot be read (the caller then lists the files of ``new`` whole)."""
    added: dict[str, DataFile] = {}
    removed: set[str] = set()
    for version in range(old + 1, new + 1):
        actions = await log_entry(store, version)
        if actions is None:
            return None
        for action in actions:
            if "remove" in action:
                path = unquote(str(action["remove"]["path"]))
                removed.add(path)
                added.pop(path, None)
            elif "add" in action:
                add = action["add"]
                path = unquote(str(add["path"]))
                lo, hi = _id_stats(add.get("stats"))
                added[path] = DataFile(path, int(add["size"]), lo, hi)
    return list(added.values()), removed


async def log_entry(store: AsyncStore, version: int) -> list[dict[str, Any]] | None:
    """The actions of the transaction log's entry of ``version`` (``commitInfo``, ``add``,
    ``remove``, ...), or ``None`` when it cannot be read (cleaned up after a checkpoint)."""
    try:
        data = bytes(await store.get(f"{LOG}/{version:020d}.json"))
        actions = [json.loads(line) for line in data.splitlines() if line.strip()]
    except (ObjectNotFoundError, ValueError):
        return None
    return actions if all(isinstance(a, dict) for a in actions) else None


def _id_stats(stats: Any) -> tuple[str | None, str | None]:
    """The ``id`` column's min and max from an add action's statistics (JSON text)."""
    if not isinstance(stats, str):
        return None, None
    try:
        doc = json.loads(stats)
        lo, hi = doc["minValues"]["id"], doc["maxValues"]["id"]
    except (ValueError, KeyError, TypeError):
        return None, None
    return (lo, hi) if isinstance(lo, str) and isinstance(hi, str) else (None, None)
