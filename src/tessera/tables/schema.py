"""The one physical schema of a tensor table (format version 1), tensor ids, and the Parquet
writer settings chosen by measurement.

Every tensor of every format lives in one Delta table: a **header** row per write (id,
write id, format, dtype, shape, non-zeros, format fields, small ``aux`` arrays, user
metadata) and its **data** rows (``part``, ``chunk_index``, the leading-index range
``lo..hi``, the positions ``start..stop``, and ``indices``/``values`` blobs of raw
little-endian numbers). A tensor's visible rows are those of its newest header. The table's
Delta metadata carries the marker: name ``tessera.tensor_table`` and a JSON description
with the format version. Plain ``deltalake``/pyarrow, DuckDB, Polars or Spark read it as any
Delta table (docs/tables.md documents decoding a row by hand).

Writer settings (docs/tables.md, measured through an emulated link): explicit
compression (an empty ``WriterProperties()`` writes uncompressed with untruncated
statistics), statistics and dictionaries off on the blob columns (statistics of 4 MiB
blobs bloat footers and prune nothing), and row groups of about ``chunk_bytes`` so a read
of one chunk moves about one chunk.

>>> check_id("faces/000123")
'faces/000123'
>>> sql_string("it's")
"'it''s'"
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pyarrow as pa

from tessera.config import TABLE_CODECS
from tessera.errors import InvalidTensorIdError
from tessera.tables.layouts.base import DataRow, Encoded, aux_layout

FORMAT_NAME = "tessera.tensor_table"
FORMAT_VERSION = 1
DESCRIPTION = json.dumps({"format": "tensor-table", "version": FORMAT_VERSION})

SCHEMA = pa.schema([
    ("id", pa.string()), ("write_id", pa.string()), ("kind", pa.string()),
    ("layout", pa.string()), ("dtype", pa.string()), ("dense_shape", pa.list_(pa.int64())),
    ("dim_count", pa.int32()), ("nnz", pa.int64()), ("chunk_dim_count", pa.int32()),
    ("flattened_shape", pa.list_(pa.int64())), ("block_shape", pa.list_(pa.int64())),
    ("aux", pa.binary()), ("aux_layout", pa.string()), ("metadata", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")), ("part", pa.string()),
    ("chunk_index", pa.int64()), ("lo", pa.int64()), ("hi", pa.int64()),
    ("start", pa.int64()), ("stop", pa.int64()), ("count", pa.int64()),
    ("indices", pa.binary()), ("values", pa.binary()),
])
#: Columns a header listing reads (not ``aux``: it is read with the tensor).
HEADER_COLUMNS = ["id", "write_id", "kind", "layout", "dtype", "dense_shape", "nnz",
                  "chunk_dim_count", "flattened_shape", "block_shape", "aux_layout",
                  "metadata", "created_at"]
DATA_COLUMNS = ["id", "write_id", "kind", "part", "chunk_index", "lo", "hi", "start", "stop",
                "count", "indices", "values"]
BLOB_COLUMNS = ("aux", "indices", "values")
ID_PATTERN = re.compile(r"^[A-Za-z0-9._/-]{1,256}$")


def check_id(tensor_id: Any) -> str:
    """``tensor_id`` if it is a valid id (``[A-Za-z0-9._/-]{1,256}``, no leading ``/``, no
    ``..`` segment), else an ``InvalidTensorIdError`` giving the pattern."""
    if not isinstance(tensor_id, str) or not ID_PATTERN.match(tensor_id) \
            or tensor_id.startswith("/") or ".." in tensor_id.split("/"):
        raise InvalidTensorIdError(
            f"tensor id {tensor_id!r} is not allowed: ids are 1 to 256 characters of "
            "A-Z a-z 0-9 . _ / -, without a leading '/' or a '..' segment")
    return tensor_id


def sql_string(value: str) -> str:
    """``value`` as a SQL string literal (quotes doubled): the only way ids enter a
    predicate."""
    return "'" + value.replace("'", "''") + "'"


def rows_table(tensors: list[tuple[str, str, str, str, tuple[int, ...], int, Encoded,
                                   dict[str, str]]], created: dt.datetime) -> pa.Table:
    """One Arrow table of the header and data rows of ``tensors`` (id, write id, format,
    dtype, shape, nnz, encoding, metadata), sorted by (id, write id, part, chunk index)."""
    cols: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}

    def add(**values: Any) -> None:
        for name in SCHEMA.names:
            cols[name].append(values.get(name))

    for tensor_id, write_id, layout, dtype, shape, nnz, enc, metadata in sorted(
            tensors, key=lambda t: (t[0], t[1])):
        aux, aux_json = aux_layout(enc.aux, enc.params)
        add(id=tensor_id, write_id=write_id, kind="header", layout=layout, dtype=dtype,
            dense_shape=list(shape), dim_count=len(shape), nnz=nnz,
            chunk_dim_count=enc.chunk_dim_count,
            flattened_shape=None if enc.flattened_shape is None else list(enc.flattened_shape),
            block_shape=None if enc.block_shape is None else list(enc.block_shape),
            aux=aux, aux_layout=aux_json, metadata=json.dumps(metadata), created_at=created)
        for row in sorted(enc.rows, key=lambda r: (r.part, r.chunk_index)):
            add(id=tensor_id, write_id=write_id, kind="data", layout=layout, **_data(row))
    return pa.table(cols, schema=SCHEMA)


def _data(row: DataRow) -> dict[str, Any]:
    return {"part": row.part, "chunk_index": row.chunk_index, "lo": row.lo, "hi": row.hi,
            "start": row.start, "stop": row.stop, "count": row.count,
            "indices": row.indices, "values": row.values}


def writer_properties(codec: str, rows_per_group: int) -> Any:
    """delta-rs writer settings: ``codec`` on every column, row groups of
    ``rows_per_group`` rows, statistics (truncated to 64 bytes) on the key columns only."""
    from deltalake import ColumnProperties, WriterProperties

    blobs = {name: ColumnProperties(dictionary_enabled=False, statistics_enabled="NONE")
             for name in BLOB_COLUMNS}
    return WriterProperties(compression=TABLE_CODECS[codec.lower()],  # type: ignore[arg-type]
                            max_row_group_size=max(1, rows_per_group),
                            statistics_truncate_length=64, column_properties=blobs)
