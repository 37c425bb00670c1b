"""tessera.torch.TensorTableDataset: samples per leading index or per tensor, one read per
tensor a batch touches (only its rows), a pinned version, shards by id hash, and spawned
workers that read the same samples."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tessera.tables import TensorTable  # noqa: E402
from tessera.torch import TensorTableDataset  # noqa: E402


@pytest.fixture
def table(tmp_path):
    url = (tmp_path / "t").as_uri()
    tt = TensorTable.create(url)
    tt.config = type(tt.config)(chunk_bytes=64, sparse_row_bytes=64)  # a row per group
    rng = np.random.default_rng(0)
    tt.write_many({"emb/a": rng.random((20, 8)), "emb/b": rng.random((5, 8))})
    sparse = np.zeros((6, 30, 30), np.float32)
    sparse[2, 3, 4] = 1.5
    tt.write("counts", sparse)
    return url, tt


def test_samples_and_batches(table) -> None:
    url, tt = table
    ds = TensorTableDataset(url, ids="emb/")
    assert len(ds) == 25 and ds.index[20] == ("emb/b", 0)
    batch = ds.__getitems__([3, 4, 22, 7])
    assert torch.equal(batch[0], torch.from_numpy(tt["emb/a"][3]))
    assert torch.equal(batch[2], torch.from_numpy(tt["emb/b"][2]))
    sparse = TensorTableDataset(url, ids=["counts"])
    assert sparse[2].is_sparse and sparse[2].to_dense()[3, 4] == 1.5
    assert TensorTableDataset(url, ids=["counts"], dense=True)[2][3, 4] == 1.5
    whole = TensorTableDataset(url, whole_tensors=True)
    assert len(whole) == 3 and whole[0].shape == (6, 30, 30)


def test_a_batch_reads_only_its_rows(table) -> None:
    url, _ = table
    ds = TensorTableDataset(url, ids=["emb/a"])
    ds.__getitems__([1, 2, 15])
    report = ds.table.last_read
    assert report.row_groups == 3 and report.stats.requests >= 1  # rows 1, 2 and 15 only


def test_version_is_pinned_and_shards_split_by_id(table) -> None:
    url, tt = table
    ds = TensorTableDataset(url)
    tt.write("emb/c", np.ones((3, 8)))
    assert "emb/c" not in ds.ids and len(TensorTableDataset(url).ids) == 4
    shards = [set(ds.shard(r, 2).ids) for r in range(2)]
    assert shards[0] | shards[1] == set(ds.ids) and not shards[0] & shards[1]
    assert shards == [set(ds.shard(r, 2).ids) for r in range(2)]  # deterministic


def test_spawned_workers_read_the_same_samples(table) -> None:
    url, _ = table
    ds = TensorTableDataset(url, ids="emb/")
    here = torch.cat(list(ds.loader(batch_size=5)))
    there = torch.cat(list(ds.loader(batch_size=5, num_workers=2)))
    assert torch.equal(here, there)
