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
