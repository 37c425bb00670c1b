"""A table's catalogue grows by its commits: what a writing handle knows after each commit
(its files moved by the log's entries, its headers by what it wrote) is what a fresh handle
reads; a header is found through the files whose id statistics hold it."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.errors import TensorNotFoundError
from tessera.storage.stats import collect_stats
from tessera.tables import TensorTable
from tessera.tables.catalog import HEADER_ROWS, candidate_files
from tessera.tables.reader import DataFile


def _same_as_fresh(t: TensorTable, url: str, options: dict) -> None:
    fresh = TensorTable.open(url, storage_options=options)
    assert fresh.version == t.version
    assert sorted((f.path, f.size, f.min_id, f.max_id) for f in t.files()) == sorted(
        (f.path, f.size, f.min_id, f.max_id) for f in fresh.files())
    assert t.ids() == fresh.ids()
    for i in fresh.ids():
        assert t.header(i) == fresh.header(i)


def test_a_writing_handle_knows_what_a_fresh_one_reads(table_url) -> None:
    url, options = table_url
    t = TensorTable.create(url, storage_options=options)
    rng = np.random.default_rng(0)
    model: dict[str, np.ndarray] = {}
    t.ids()  # the catalogue is made: commits then move it along
    for step in range(12):
        batch = {f"b{step % 5}/{i}": rng.random((3, 4)).astype(np.float32) for i in range(3)}
        t.write_many(batch, mode="overwrite")
        model.update(batch)
        if step % 4 == 3:
            gone = sorted(model)[0]
            t.delete(gone)
            del model[gone]
        _same_as_fresh(t, url, options)
    assert t.ids() == sorted(model)
    for i, x in model.items():
        np.testing.assert_array_equal(t[i][:], x)


def test_commits_without_a_catalogue_look_up_headers_one_by_one(table_url) -> None:
    url, options = table_url
    t = TensorTable.create(url, storage_options=options)
    x = np.ones((2, 2), np.float32)
    for c in range(6):
        t.write_many({f"c{c}/{i}": x * c for i in range(3)})
    assert t._catalog is None  # never needed
    with pytest.raises(Exception, match="exists"):
        t.write("c2/1", x)
    t.write("c2/1", x * 9, mode="overwrite")
    assert "c2/1" in t and "c9/9" not in t
    with pytest.raises(TensorNotFoundError, match="did you mean"):
        t.header("c2/7")
    np.testing.assert_array_equal(t["c2/1"][:], x * 9)
    _same_as_fresh(t, url, options)


def test_a_cold_header_reads_only_the_files_that_may_hold_it(table_url) -> None:
    url, options = table_url
    t = TensorTable.create(url, storage_options=options)
    for c in range(8):
        t.write_many({f"id{c}/{i}": np.full(3, c, np.float32) for i in range(4)})
    HEADER_ROWS().clear()
    fresh = TensorTable.open(url, storage_options=options)
    assert len(fresh.files()) == 8
    with collect_stats() as stats:
        h = fresh.header("id5/2")
    assert h.id == "id5/2"
    # one file's footer and header rows, not eight files'
    assert 1 <= stats.requests <= 3, stats.by_method


def test_candidate_files() -> None:
    files = [DataFile("a", 1, "a", "c"), DataFile("b", 1, "d", "f"), DataFile("n", 1, None, None)]
    assert [f.path for f in candidate_files(files, {"e"})] == ["b", "n"]
    assert [f.path for f in candidate_files(files, {"b", "z"})] == ["a", "n"]
    assert candidate_files(files, set()) == []


def test_own_appends_are_delta_commits_that_delta_rs_reads(tmp_path) -> None:
    from deltalake import DeltaTable

    url = (tmp_path / "t").as_uri()
    a = TensorTable.create(url)
    b = TensorTable.open(url, "w")  # a second writer at the same version
    a.write_many({f"a/{i}": np.full(4, i, np.float32) for i in range(3)})
    b.write_many({f"b/{i}": np.full(4, -i, np.float32) for i in range(2)})  # takes version 2
    assert (a.version, b.version) == (1, 2)
    delta = DeltaTable(str(tmp_path / "t"))
    assert delta.version() == 2
    assert [h["operation"] for h in delta.history()][:2] == ["WRITE", "WRITE"]
    rows = delta.to_pyarrow_table(columns=["id", "kind"]).to_pylist()
    assert sorted(r["id"] for r in rows if r["kind"] == "header") == [
        "a/0", "a/1", "a/2", "b/0", "b/1"]
    fresh = TensorTable.open(url)
    np.testing.assert_array_equal(fresh["b/1"][:], np.full(4, -1, np.float32))
    a.refresh()
    assert a.ids() == fresh.ids()
    a.delete("a/1")  # delta-rs's own commit after Tessera's: it reads them first
    assert TensorTable.open(url).ids() == ["a/0", "a/2", "b/0", "b/1"]


def test_an_append_refuses_to_pass_a_schema_change(tmp_path) -> None:
    from deltalake import DeltaTable

    from tessera.errors import CommitConflictError
    from tessera.tables.append import _changes_table

    url = (tmp_path / "t").as_uri()
    t = TensorTable.create(url)
    DeltaTable(str(tmp_path / "t")).alter.set_table_properties({"delta.logRetentionDuration":
                                                                "interval 31 days"})
    with pytest.raises(CommitConflictError, match="protocol or schema"):
        t.write("x", np.ones(2, np.float32))
    assert _changes_table(b'{"commitInfo":{}}\n{"metaData":{"id":"x"}}\n')
    assert not _changes_table(b'{"add":{"path":"p"}}\n')
    t.refresh()
    t.write("x", np.ones(2, np.float32))  # at the new version: committed
    assert "x" in TensorTable.open(url)


def test_appends_checkpoint_every_hundred_versions(tmp_path) -> None:
    url = (tmp_path / "t").as_uri()
    t = TensorTable.create(url)
    for c in range(100):
        t.write(f"c/{c:03d}", np.full(2, c, np.float32))
    assert (tmp_path / "t" / "_delta_log" / "00000000000000000100.checkpoint.parquet").exists()
    fresh = TensorTable.open(url)
    assert len(fresh) == 100 and fresh.version == 100
    np.testing.assert_array_equal(fresh["c/042"][:], np.full(2, 42, np.float32))


def test_an_append_whose_answer_was_lost_is_committed_once(tmp_path) -> None:
    """A create-only put that succeeded but answered "exists" (a retry after a lost answer,
    inside the client) is this append's own entry: committed at that version, not again."""
    import asyncio

    import pyarrow as pa

    import tessera
    from tessera.errors import ObjectExistsError
    from tessera.tables.append import append

    store = tessera.open_store((tmp_path / "s").as_uri()).aio
    real = store.put

    async def put_then_say_exists(key, data, **kw):
        await real(key, data, **kw)
        if kw.get("mode") == "create":
            raise ObjectExistsError("exists", url="file://x", key=key, op="put")

    store.put = put_then_say_exists  # type: ignore[method-assign]
    table = pa.table({"id": ["a"], "write_id": ["w"], "kind": ["header"], "part": [None]})
    version, added = asyncio.run(append(store, table, 0, "zstd", 10, 5))
    assert version == 1 and added.min_id == "a"
    assert [i.key for i in tessera.open_store((tmp_path / "s").as_uri()).list("_delta_log")] \
        == ["_delta_log/00000000000000000001.json"]
