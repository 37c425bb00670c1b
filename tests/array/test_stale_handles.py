"""A handle opened before another handle (or process) consolidated and vacuumed reads the
same values afterwards, or says that the history it needs is gone: never a report of
damaged storage for objects that were removed on purpose."""

from __future__ import annotations

import numpy as np
import pytest

import tessera
from tessera.errors import HistoryVacuumedError


def _array(tmp_path, sparse: bool = False) -> str:
    url = (tmp_path / "a").as_uri()
    dims = [tessera.Dim("x", (0, 99), 10)]
    tessera.create_array(url, tessera.ArraySchema(dims, [tessera.Attr("v", "i4")],
                                                  sparse=sparse))
    w = tessera.open_array(url, "w")
    for i in range(3):
        if sparse:
            w.write_cells((np.arange(10 * i, 10 * i + 10),), np.full(10, i + 1, np.int32))
        else:
            w.write(np.full(10, i + 1, np.int32), origin=(10 * i,))
    return url


def _maintain(url: str) -> None:
    m = tessera.open_array(url, "w")
    m.consolidate()
    m.vacuum(orphan_grace_s=0, force=True)


@pytest.mark.parametrize("how", ["box", "points", "mask"])
def test_a_handle_at_a_timestamp_lists_again_after_a_vacuum(tmp_path, how):
    url = _array(tmp_path)
    newest = tessera.open_array(url).fragments[-1].timestamp
    old = tessera.open_array(url, at=newest)
    want = np.repeat(np.arange(1, 4), 10).tolist()
    reads = {"box": lambda a: a[0:30].tolist(),
             "points": lambda a: a.vindex[np.arange(30)].tolist(),
             "mask": lambda a: a.oindex[np.arange(100) < 30].tolist()}
    assert reads[how](old) == want
    _maintain(url)
    assert reads[how](old) == want       # was: CorruptDataError "... is missing"
    assert len(old.fragments) == 1


def test_a_sparse_handle_at_a_timestamp_lists_again_after_a_vacuum(tmp_path):
    url = _array(tmp_path, sparse=True)
    newest = tessera.open_array(url).fragments[-1].timestamp
    old = tessera.open_array(url, at=newest)
    before = old[0:30]
    _maintain(url)
    after = old[0:30]
    assert after.values["v"].tolist() == before.values["v"].tolist()


def test_a_handle_inside_the_vacuumed_history_says_so(tmp_path):
    url = _array(tmp_path)
    first = tessera.open_array(url).fragments[0].timestamp
    old = tessera.open_array(url, at=first)
    assert old[0:10].tolist() == [1] * 10
    _maintain(url)
    with pytest.raises(HistoryVacuumedError):
        old[0:10]


def test_a_plain_handle_that_keeps_its_list_reads_on(tmp_path):
    url = _array(tmp_path)
    plain = tessera.open_array(url)
    plain.reads = tessera.ReadConfig(refresh_s=float("inf"))
    assert plain[0:30].tolist() == np.repeat(np.arange(1, 4), 10).tolist()
    _maintain(url)
    assert plain[0:30].tolist() == np.repeat(np.arange(1, 4), 10).tolist()
