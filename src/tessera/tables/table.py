"""Tensor tables (the Delta Tensor paper): dense and sparse tensors, each with an id, in one
Delta Lake table on any store, written from numpy/PyTorch/scipy, read slice by slice.

>>> import numpy as np, tempfile
>>> url = "file://" + tempfile.mkdtemp() + "/t"
>>> tt = TensorTable.create(url)
>>> tt.write("emb/0", np.arange(12, dtype=np.float32).reshape(3, 4)).layout
'ftsf'
>>> sparse = np.zeros((50, 40)); sparse[3, 7] = 2.5
>>> info = tt.write("counts", sparse)
>>> info.layout, info.nnz
('bsgs', 1)
>>> tt["emb/0"][1:], tt["counts"][3, 5:9].tolist()
(array([[ 4.,  5.,  6.,  7.],
       [ 8.,  9., 10., 11.]], dtype=float32), [0.0, 0.0, 2.5, 0.0])
>>> sorted(tt.ids()), tt.version
(['counts', 'emb/0'], 2)
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from tessera._sync import run_sync
from tessera.config import Config, TablesConfig
from tessera.errors import (
    CommitConflictError,
    FormatError,
    HistoryVacuumedError,
    InvalidArgumentError,
    ObjectNotFoundError,
    ReadOnlyError,
    SchemaError,
    TableExistsError,
    TableNotFoundError,
    TableVersionError,
    TensorExistsError,
    TensorNotFoundError,
    UnsupportedStoreError,
)
from tessera.query.plan import Plan
from tessera.storage.blocking import Store, open_store
from tessera.storage.forkguard import note_io
from tessera.storage.stats import IOStats, collect_stats
from tessera.tables.append import append, can_append
from tessera.tables.catalog import (
    candidate_files,
    file_header_rows,
    header_of,
    log_changes,
    newest_rows,
)
from tessera.tables.encode import checked_metadata, encode_tensor
from tessera.tables.face import TableFace
from tessera.tables.layouts import get_layout
from tessera.tables.layouts.base import DataRow, Header, Need, parse_aux
from tessera.tables.options import create_only_works, delta_location, table_settings
from tessera.tables.reader import (
    DataFile,
    RowGroupRead,
    TableRead,
    chunk_ranges,
    footers,
    gather,
    groups_of,
    merge_ranges,
    select_row_groups,
)
from tessera.tables.ref import TensorRef
from tessera.tables.schema import (
    BLOB_COLUMNS,
    DATA_COLUMNS,
    DESCRIPTION,
    FORMAT_NAME,
    FORMAT_VERSION,
    HEADER_COLUMNS,
    SCHEMA,
    check_id,
    rows_table,
    sql_string,
    writer_properties,
)
from tessera.tables.versions import checked_version
from tessera.when import At, first_commit_error, moment, positional_at, renamed

WRITE_MODES = ("error", "overwrite", "ignore")
#: A checkpoint is written at every version that is a multiple of this (Delta's default
#: ``delta.checkpointInterval``), after Tessera's own appends as delta-rs does after its.
CHECKPOINT_EVERY = 100
#: Commit attempts delta-rs makes for one write before giving up (appends retry safely).
COMMIT_RETRIES = 1000
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """What a write stored.

    Attributes:
        id, layout, reason, shape, dtype, nnz: the tensor, its format and why.
        encoded_bytes: bytes of the tensor's rows (blobs and aux arrays) before Parquet
            compression: what the format costs, for comparing formats.
        stored_bytes: bytes of the data files the write's commit added, from the Delta log's
            add actions (after Parquet compression; a commit of several tensors,
            :meth:`TensorTable.write_many`, reports its files' total on each of them).
        version: the table version the commit created.
    """

    id: str
    layout: str
    reason: str
    shape: tuple[int, ...]
    dtype: str
    nnz: int
    encoded_bytes: int
    stored_bytes: int
    version: int


@dataclasses.dataclass(frozen=True)
class TableStats:
    """A version's size (:meth:`TensorTable.stats`).

    Attributes:
        version: the table version.
        tensors: tensors visible.
        files: data files.
        stored_bytes: bytes of those files (after Parquet compression).
        encoded_bytes: bytes of the rows' blob columns (aux, indices, values) in those files
            before Parquet compression, from the files' footers.
    """

    version: int
    tensors: int
    files: int
    stored_bytes: int
    encoded_bytes: int


class TensorTable(TableFace):
    """A tensor table. Make one with :meth:`create`, open one with :meth:`open`.

    >>> import tempfile, numpy as np, tessera
    >>> table = tessera.create_table(tempfile.mkdtemp() + "/tensors")
    >>> _ = table.write("weights", np.ones((2, 3), np.float32))
    >>> table.ids(), table["weights"][1].tolist()
    (['weights'], [1.0, 1.0, 1.0])
    """

    def __init__(self, url: str, options: dict[str, Any] | None, mode: str,
                 version: int | str | dt.datetime | None, config: Config) -> None:
        if mode not in ("r", "w"):
            raise InvalidArgumentError(f"mode must be 'r' or 'w', got {mode!r}")
        self.url, self.mode = url, mode
        self.settings = config
        self.config: TablesConfig = config.tables
        self._options = dict(options or {})
        self._uri, self._delta_options = delta_location(url, self._options, config.store)
        self.store: Store = open_store(url, config=config.store, **self._options)
        self._pinned = version is not None
        self._dt = self._load(version)
        #: The version this handle's own appends reached, while delta-rs has not read them.
        self._ahead: int | None = None
        self._catalog: dict[str, Header] | None = None
        #: Headers looked up one by one at this version (None: no such tensor).
        self._found: dict[str, Header | None] = {}
        self._found_at = -1
        self._files: tuple[int, list[DataFile]] | None = None  # (version, its data files)
        self.last_read: TableRead | None = None

    # -- create / open -----------------------------------------------------------------------
    @classmethod
    def create(cls, url: str, *, storage_options: dict[str, Any] | None = None,
               allow_unsafe_single_writer: bool = False,
               config: Config | TablesConfig | None = None) -> TensorTable:
        """A new, empty tensor table at ``url`` (which must hold nothing yet).

        Delta commits are create-only puts: on a store that ignores them, concurrent
        writers would overwrite each other's commits without an error. ``create`` checks
        the store and refuses such a store unless ``allow_unsafe_single_writer=True``
        (only ever one writer). ``config``: a :class:`~tessera.config.Config` snapshot (its
        ``tables`` and ``store`` parts), or just the tables' settings; default: read from the
        environment once, now."""
        settings = table_settings(config)
        uri, delta_options = delta_location(url, storage_options, settings.store)
        store = open_store(url, config=settings.store, **(storage_options or {}))
        found = store.list()
        if found:
            raise TableExistsError(f"{url} is not empty ({len(found)} object(s), e.g. "
                                   f"{found[0].key}); a tensor table needs an empty place")
        if not create_only_works(store) and not allow_unsafe_single_writer:
            raise UnsupportedStoreError(
                f"{url}: the store accepted a second create-only put of one key, so Delta "
                "commits (create-only puts) from concurrent writers could be lost silently; "
                "use a store with conditional puts, or pass allow_unsafe_single_writer=True "
                "if only one process will ever write")
        note_io()
        from deltalake import DeltaTable

        DeltaTable.create(uri, SCHEMA, name=FORMAT_NAME, description=DESCRIPTION,
                          storage_options=delta_options or None)
        return cls(url, storage_options, "w", None, settings)

    @classmethod
    def open(cls, url: str, mode: str = "r", *legacy: Any,
             storage_options: dict[str, Any] | None = None,
             config: Config | TablesConfig | None = None, at: At = None,
             version: int | str | dt.datetime | None = None) -> TensorTable:
        """The tensor table at ``url``, read-only unless ``mode="w"``. ``at`` opens it as it
        was then: a version number, a datetime or an ISO-8601 string (``history()`` lists
        them; ``version=`` is its older name); a time before the table was created raises
        :class:`~tessera.errors.BeforeFirstCommitError`. ``config``: as :meth:`create`'s."""
        at = positional_at("TensorTable.open", legacy, at)
        when = moment(renamed("version", "at", version, at),
                      "at" if version is None else "version")
        if when is not None and mode == "w":
            raise InvalidArgumentError("a table opened at a past version is read-only: "
                                       "open it with mode='r'")
        return cls(url, storage_options, mode, when, table_settings(config))

    def _load(self, version: int | str | dt.datetime | None) -> Any:
        note_io()
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError
        from deltalake.exceptions import TableNotFoundError as DeltaNotFound

        try:
            table = DeltaTable(self._uri, storage_options=self._delta_options or None)
        except DeltaNotFound:
            raise TableNotFoundError(f"no tensor table at {self.url}; make one with "
                                     "TensorTable.create") from None
        meta = table.metadata()
        if meta.name != FORMAT_NAME:
            raise SchemaError(f"{self.url} holds a Delta table that is not a tensor table "
                              f"(its name is {meta.name!r}, not {FORMAT_NAME!r})")
        try:
            stored = int(json.loads(meta.description or "{}").get("version", 0))
        except (ValueError, AttributeError):
            raise SchemaError(f"{self.url}: the table's description is not a tensor-table "
                              "marker") from None
        if stored > FORMAT_VERSION:
            raise SchemaError(f"{self.url} has tensor-table format version {stored}, newer "
                              f"than this Tessera understands ({FORMAT_VERSION}); upgrade")
        if isinstance(version, dt.datetime):
            first = dt.datetime.fromtimestamp(table.history()[-1]["timestamp"] / 1e3,
                                              dt.UTC)
            if version < first:
                raise first_commit_error(f"tensor table {self.url}", first, version)
        if version is not None:
            latest = table.version()
            version = checked_version(version, latest, self.url)
            try:
                table.load_as_version(version)
            except (DeltaError, ValueError, TypeError) as err:
                raise TableVersionError(f"{self.url} has no version {version!r} (versions "
                                        f"0..{latest}): {err}") from None
        return table

    # -- the snapshot --------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The table version this handle reads."""
        return self._ahead if self._ahead is not None else int(self._dt.version())

    @property
    def _delta(self) -> Any:
        """The delta-rs table, first brought up to date if this handle's own appends went
        ahead of it (delta-rs reads them then, once, for any operation of its own)."""
        if self._ahead is not None:
            ahead, self._ahead = self._ahead, None
            note_io()
            self._dt.update_incremental()
            if self.version != ahead:  # others committed since: made again when needed
                self._catalog = None
        return self._dt

    def refresh(self) -> None:
        """See the newest version (a handle opened at a version keeps it)."""
        if not self._pinned:
            note_io()
            self._moved(self.version)

    def _moved(self, old: int, changes: Mapping[str, Header | None] | None = None,
               new: int | None = None) -> None:
        """Bring the handle from version ``old`` to the newest; what it knows moves
        along: its data files by the log entries in between, its catalogue and looked-up
        headers by ``changes`` (what this handle's own commit wrote, id -> header, or
        deleted, id -> None) when that commit is the only one in between; otherwise they
        are made again when next needed."""
        known = self._files
        if new is None:
            self._ahead = None
            note_io()
            self._dt.update_incremental()
            new = self.version
        else:  # this handle's own append: delta-rs reads it when next needed
            self._ahead = new
        if new == old:
            return
        self._files = None
        if known is not None and known[0] == old:
            got = self._run(log_changes(self.store.aio, old, new))
            if got is not None:
                adds, removes = got
                self._files = (new, [f for f in known[1] if f.path not in removes] + adds)
        if changes is None or new != old + 1:
            self._catalog, self._found = None, {}
            return
        if self._found_at == old:
            self._found.update(changes)
            self._found_at = new
        if self._catalog is not None:
            fresh = any(i not in self._catalog for i, h in changes.items() if h is not None)
            for i, h in changes.items():
                if h is None:
                    self._catalog.pop(i, None)
                else:
                    self._catalog[i] = h
            if fresh:  # keep it sorted by id
                self._catalog = dict(sorted(self._catalog.items()))

    def files(self) -> list[DataFile]:
        """The data files of this version (path, size, id range from the log; made once
        per version: a version's files never change)."""
        version = self.version
        if self._files is not None and self._files[0] == version:
            return list(self._files[1])
        adds = pa.table(self._delta.get_add_actions(flatten=True))
        names = adds.column_names
        rows = adds.to_pylist()
        files = [DataFile(r["path"], int(r["size_bytes"]),
                          r.get("min.id") if "min.id" in names else None,
                          r.get("max.id") if "max.id" in names else None) for r in rows]
        self._files = (version, files)
        return list(files)

    def stats(self) -> TableStats:
        """The size of this version: its tensors, its data files and their bytes on storage
        (from the Delta log's add actions), and the bytes of their tensor rows before Parquet
        compression (from the files' footers, read once per process)."""
        files = self.files()
        metas = self._mapped(lambda: footers(self.store.aio, files))
        encoded = 0
        for meta in metas:
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                for c in range(group.num_columns):
                    column = group.column(c)
                    if column.path_in_schema in BLOB_COLUMNS:
                        encoded += int(column.total_uncompressed_size)
        return TableStats(self.version, len(self._headers()), len(files),
                          sum(f.size for f in files), encoded)

    def _headers(self) -> dict[str, Header]:
        """The visible header of every tensor at this version (its newest write)."""
        if self._catalog is not None:
            return self._catalog
        files = self.files()
        tables = self._run(gather(*(file_header_rows(self.store.aio, f) for f in files)))
        self._catalog = {i: header_of(row) for i, row in sorted(newest_rows(tables).items())}
        return self._catalog

    def _lookup(self, ids: set[str]) -> dict[str, Header]:
        """The headers of those of ``ids`` that exist at this version, from the catalogue if
        it is made, else from the header rows of the files whose id statistics hold them
        (remembered for this version)."""
        if self._catalog is not None:
            return {i: self._catalog[i] for i in ids if i in self._catalog}
        if self._found_at != self.version:
            self._found, self._found_at = {}, self.version
        todo = {i for i in ids if i not in self._found}
        if todo:
            files = candidate_files(self.files(), todo)
            tables = self._run(gather(*(file_header_rows(self.store.aio, f) for f in files)))
            rows = newest_rows(tables, todo)
            for i in todo:
                self._found[i] = header_of(rows[i]) if i in rows else None
        return {i: h for i in ids if (h := self._found.get(i)) is not None}

    def _run(self, coro: Any) -> Any:
        return self._mapped(lambda: run_sync(coro))

    def _mapped(self, read: Callable[[], T]) -> T:
        """``read()``, a missing data file of a pinned version named as vacuumed."""
        try:
            return read()
        except ObjectNotFoundError as err:
            if self._pinned:
                raise HistoryVacuumedError(
                    f"{self.url} version {self.version}: a data file of it is gone "
                    f"(vacuumed): {err}") from None
            raise

    # -- listing -------------------------------------------------------------------------------
    def ids(self, prefix: str | None = None) -> list[str]:
        """The ids of the tensors, sorted (those starting with ``prefix``)."""
        return [i for i in self._headers() if prefix is None or i.startswith(prefix)]

    def __len__(self) -> int:
        return len(self._headers())

    def __contains__(self, tensor_id: object) -> bool:
        return isinstance(tensor_id, str) and bool(self._lookup({tensor_id}))

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids())

    def header(self, tensor_id: str) -> Header:
        """The stored header of ``tensor_id`` (``TensorNotFoundError`` naming close ids)."""
        check_id(tensor_id)
        found = self._lookup({tensor_id})
        if tensor_id not in found:
            import difflib

            headers = self._headers()

            close = difflib.get_close_matches(tensor_id, list(headers), n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise TensorNotFoundError(f"no tensor {tensor_id!r} in {self.url} at version "
                                      f"{self.version}{hint}")
        return found[tensor_id]

    def __getitem__(self, tensor_id: str) -> TensorRef:
        """A lazy reference to ``tensor_id``: nothing is read until it is sliced."""
        return TensorRef(self, self.header(tensor_id))

    def explain(self, tensor_id: str, sel: Any = ()) -> Plan:
        """The files, row groups and byte ranges a read of ``sel`` of ``tensor_id`` takes
        (:meth:`TensorRef.explain`)."""
        return self[tensor_id].explain(sel)

    # -- writing ---------------------------------------------------------------------------------
    def write(self, tensor_id: str, x: Any, format: str = "auto", *, mode: str = "error",
              metadata: Mapping[str, str] | None = None, **options: Any) -> TensorInfo:
        """Store ``x`` as ``tensor_id`` (one commit). ``format``: ``auto`` (the paper's 10%
        rule, see :mod:`tessera.tables.auto`) or a name of
        :data:`~tessera.tables.layouts.LAYOUTS` (``ftsf``, ``coo``, ``csr``, ``csc``, ``csf``,
        ``bsgs``, and any registered since); ``mode``: ``error`` (refuse an existing id),
        ``overwrite``, ``ignore`` (keep the existing one). ``options``: ``chunk_dim``,
        ``block_shape``, ``flatten_at``, ``mode_order``, ``optimize_for``,
        ``sparsity_threshold``."""
        infos = self.write_many({tensor_id: x}, format, mode=mode, metadata=metadata,
                                **options)
        if not infos:  # mode="ignore" and the id exists
            h = self.header(tensor_id)
            return TensorInfo(h.id, h.layout, "exists (mode='ignore')", h.shape, h.dtype,
                              h.nnz, 0, 0, self.version)
        return infos[0]

    def write_many(self, tensors: Mapping[str, Any], format: str = "auto", *,
                   mode: str = "error", metadata: Mapping[str, str] | None = None,
                   **options: Any) -> list[TensorInfo]:
        """Store several tensors in **one** commit (all or none become visible)."""
        if self.mode != "w":
            raise ReadOnlyError(f"{self.url} is open read-only; open it with mode='w'")
        if format != "auto":
            get_layout(format)  # the registry is the list of formats (FormatError names it)
        if mode not in WRITE_MODES:
            raise InvalidArgumentError(f"mode must be one of {WRITE_MODES}, got {mode!r}")
        meta = checked_metadata(metadata)
        for tensor_id in tensors:
            check_id(tensor_id)
        existing = self._lookup(set(tensors))
        todo: list[tuple[str, Any]] = []
        for tensor_id, x in tensors.items():
            if tensor_id in existing and mode == "error":
                raise TensorExistsError(f"tensor {tensor_id!r} exists in {self.url}; write "
                                        "with mode='overwrite' to replace it")
            if tensor_id in existing and mode == "ignore":
                continue
            todo.append((tensor_id, x))
        if not todo:
            return []
        rows, infos = [], []
        created = dt.datetime.now(dt.UTC)
        for tensor_id, x in todo:
            layout, reason, tensor, enc = encode_tensor(x, format, options, self.config)
            rows.append((tensor_id, uuid.uuid4().hex, layout, tensor.dtype, tensor.shape,
                         tensor.nnz, enc, meta))
            infos.append((tensor_id, layout, reason, tensor.shape, tensor.dtype, tensor.nnz,
                          enc.encoded_bytes))
        table = rows_table(rows, created)
        replaced = [t for t, _ in todo if t in existing]
        before = {f.path for f in self.files()}
        self._commit(table, replaced, sum(i[6] for i in infos))
        added = sum(f.size for f in self.files() if f.path not in before)
        version = self.version
        return [TensorInfo(*i, stored_bytes=added, version=version) for i in infos]

    def _commit(self, table: pa.Table, replaced: list[str], blob_bytes: int) -> None:
        note_io()
        from deltalake import CommitProperties, write_deltalake
        from deltalake.exceptions import CommitFailedError

        # row groups of about one sparse row: big rows get a group each (a read takes
        # exactly its rows), small rows (many small tensors) share one
        data_rows = max(1, table.num_rows)
        per_group = max(1, self.config.sparse_row_bytes // max(1, blob_bytes // data_rows))
        props = writer_properties(self.config.codec, per_group)
        # An append never conflicts in Delta: under many writers delta-rs retries its commit
        # at the next version; its default of 15 tries ran out with 8 processes writing.
        commit = CommitProperties(max_commit_retries=COMMIT_RETRIES)
        old = self.version
        protocol = self._dt.protocol()  # as of ``old``: append() checks later ones
        heads = table.filter(pc.equal(table.column("kind"), "header")).select(HEADER_COLUMNS)
        wrote = {r["id"]: header_of(r) for r in heads.to_pylist()}
        if not replaced and can_append(protocol.min_writer_version, protocol.writer_features):
            version, _ = self._run(append(self.store.aio, table, old, self.config.codec,
                                          per_group, COMMIT_RETRIES))
            self._moved(old, wrote, version)
            if version % CHECKPOINT_EVERY == 0:  # as delta-rs does after its own commits
                self._delta.create_checkpoint()
            return
        delta = self._delta  # caught up with this handle's own appends first
        old = self.version
        try:
            if replaced:  # one commit replaces the old rows; every new row must match
                predicate = "id IN (" + ", ".join(
                    sql_string(i) for i in sorted(set(table.column("id").to_pylist()))) + ")"
                write_deltalake(delta, table, mode="overwrite", predicate=predicate,
                                writer_properties=props, commit_properties=commit,
                                target_file_size=self.config.target_file_bytes)
            else:
                write_deltalake(delta, table, mode="append", writer_properties=props,
                                commit_properties=commit,
                                target_file_size=self.config.target_file_bytes)
        except CommitFailedError as err:
            raise CommitConflictError(f"{self.url}: the write conflicted with a concurrent "
                                      f"commit ({err}); retry it") from None
        self._moved(old, wrote)

    def delete(self, tensor_id: str | None = None, *, prefix: str | None = None) -> int:
        """Remove a tensor (or every tensor whose id starts with ``prefix``) in one commit;
        returns how many. Files holding other tensors too are rewritten without it."""
        if self.mode != "w":
            raise ReadOnlyError(f"{self.url} is open read-only; open it with mode='w'")
        if (tensor_id is None) == (prefix is None):
            raise InvalidArgumentError("delete needs exactly one of an id or prefix=")
        if tensor_id is not None:
            self.header(tensor_id)  # TensorNotFoundError if absent
            gone = [tensor_id]
        else:
            assert prefix is not None
            if prefix:
                check_id(prefix.rstrip("/") or "x")
            gone = self.ids(prefix)
        if not gone:
            return 0
        note_io()
        from deltalake.exceptions import CommitFailedError

        delta = self._delta  # caught up with this handle's own appends first
        old = self.version
        try:
            delta.delete("id IN (" + ", ".join(sql_string(i) for i in gone) + ")")
        except CommitFailedError as err:
            raise CommitConflictError(f"{self.url}: delete conflicted with a concurrent "
                                      f"commit ({err}); retry it") from None
        self._moved(old, dict.fromkeys(gone))
        return len(gone)

    # -- history and maintenance -------------------------------------------------------------------
    def restore(self, version: int | str | dt.datetime) -> None:
        """Make ``version``'s contents the newest version (one commit; history is kept)."""
        if self.mode != "w":
            raise ReadOnlyError(f"{self.url} is open read-only; open it with mode='w'")
        note_io()
        self._delta.restore(checked_version(version, self._dt.version(), self.url))
        self._dt.update_incremental()
        self._catalog = None

    def optimize(self, target_file_bytes: int | None = None) -> dict[str, Any]:
        """Compact small files into files of about ``target_file_bytes`` (one commit)."""
        if self.mode != "w":
            raise ReadOnlyError(f"{self.url} is open read-only; open it with mode='w'")
        note_io()
        metrics = self._delta.optimize.compact(
            target_size=target_file_bytes or self.config.target_file_bytes,
            writer_properties=writer_properties(self.config.codec, 1))
        self._dt.update_incremental()
        self._catalog = None
        return dict(metrics)

    def vacuum(self, retention_hours: float = 168, *, dry_run: bool = True,
               force: bool = False) -> list[str]:
        """Files no version younger than ``retention_hours`` needs (deleted unless
        ``dry_run``). Below Delta's 168 hours only with ``force=True``: reads of older
        versions then fail with ``HistoryVacuumedError``."""
        if self.mode != "w" and not dry_run:
            raise ReadOnlyError(f"{self.url} is open read-only; open it with mode='w'")
        if retention_hours < 168 and not force:
            raise InvalidArgumentError(f"retention_hours={retention_hours} is under Delta's "
                                       "168-hour minimum; pass force=True to vacuum anyway")
        note_io()
        return list(self._delta.vacuum(retention_hours=int(retention_hours), dry_run=dry_run,
                                    enforce_retention_duration=not force))

    # -- reading rows -------------------------------------------------------------------
    def plan(self, header: Header, needs: list[Need]) -> list[tuple[DataFile, Any, list[int]]]:
        files = [f for f in self.files() if f.may_hold(header.id)]
        metas = self._mapped(lambda: footers(self.store.aio, files))
        out = []
        for f, meta in zip(files, metas, strict=True):
            groups = sorted({g for need in needs for g in select_row_groups(
                meta, tensor_id=header.id, kind="data", write_id=header.write_id, need=need)})
            if groups:
                out.append((f, meta, groups))
        return out

    def read_rows(self, header: Header, need: Need, report: TableRead) -> list[DataRow]:
        """The data rows of ``header``'s write that ``need`` asks for (exactly)."""
        plan = self.plan(header, [need])
        tables = self._mapped(lambda: groups_of(self.store.aio, plan, DATA_COLUMNS,
                                                self.settings.reads.window_bytes))
        for f, meta, groups in plan:
            report.reads.append(RowGroupRead(f, tuple(groups), tuple(merge_ranges(
                chunk_ranges(meta, groups, DATA_COLUMNS)))))
        rows = []
        for table in tables:
            for r in table.to_pylist():
                if r["id"] != header.id or r["write_id"] != header.write_id \
                        or r["kind"] != "data" or r["part"] != need.part:
                    continue
                row = DataRow(r["part"], r["chunk_index"], r["lo"], r["hi"], r["start"],
                              r["stop"], r["count"], r["indices"], r["values"])
                key = {"lead": (row.lo, row.hi), "chunk": (row.chunk_index, row.chunk_index),
                       "pos": (row.start, row.stop - 1)}[need.key]
                if need.wants(*key):
                    rows.append(row)
        return rows

    def aux(self, header: Header) -> Header:
        """``header`` with its ``aux`` arrays (read from its header row, once)."""
        if not header.needs_aux:
            return header
        found: bytes | None = None
        files = [f for f in self.files() if f.may_hold(header.id)]
        metas = self._mapped(lambda: footers(self.store.aio, files))
        for f, meta in zip(files, metas, strict=True):
            groups = select_row_groups(meta, tensor_id=header.id, kind="header",
                                       write_id=header.write_id)
            table = self._mapped(functools.partial(
                groups_of, self.store.aio, [(f, meta, groups)], ["id", "write_id", "kind",
                                                                 "aux"]))[0]
            for r in table.to_pylist():
                if (r["id"], r["write_id"], r["kind"]) == (header.id, header.write_id,
                                                           "header"):
                    found = r["aux"]
        if found is None:
            raise FormatError(f"tensor {header.id!r}: its header row's aux arrays are "
                              "missing; the table is damaged")
        arrays, _ = parse_aux(found, header.aux_layout)
        full = dataclasses.replace(header, aux=arrays)
        if self._catalog is not None and self._catalog.get(header.id) is header:
            self._catalog[header.id] = full
        return full

    def collecting(self) -> contextlib.AbstractContextManager[IOStats]:
        """A context collecting the data plane's requests."""
        return collect_stats()


def create_table(url: str, *, storage_options: dict[str, Any] | None = None,
                 config: Config | TablesConfig | None = None,
                 allow_unsafe_single_writer: bool = False) -> TensorTable:
    """A new, empty tensor table at ``url`` (:meth:`TensorTable.create`).

    >>> import tempfile, tessera
    >>> table = tessera.create_table(tempfile.mkdtemp() + "/tensors")
    >>> table.version, table.ids()
    (0, [])
    """
    return TensorTable.create(url, storage_options=storage_options, config=config,
                              allow_unsafe_single_writer=allow_unsafe_single_writer)


def open_table(url: str, mode: str = "r", *legacy: Any,
               storage_options: dict[str, Any] | None = None,
               config: Config | TablesConfig | None = None, at: At = None,
               version: int | str | dt.datetime | None = None) -> TensorTable:
    """The tensor table at ``url`` (:meth:`TensorTable.open`).

    >>> import tempfile, numpy as np, tessera
    >>> url = tempfile.mkdtemp() + "/tensors"
    >>> _ = tessera.create_table(url).write("a", np.zeros(3))
    >>> tessera.open_table(url).ids(), tessera.open_table(url, at=0).ids()
    (['a'], [])
    """
    return TensorTable.open(url, mode, *legacy, storage_options=storage_options,
                            config=config, at=at, version=version)
