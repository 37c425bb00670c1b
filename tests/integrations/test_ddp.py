"""Distributed data-parallel training on this machine: 2 ranks (gloo, spawned processes) train
on an image-column set and on a tensor table from the S3 test server with
DistributedGroupSampler (examples/ddp_train.py). Each rank reads its own groups only, the
ranks together read every sample once per epoch, and the trained weights equal one
process's trained over the same global batches."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))

import ddp_train  # noqa: E402

import tessera  # noqa: E402
from tessera.images import ImageColumns  # noqa: E402
from tessera.tables import TensorTable  # noqa: E402
from tessera.testing.pushdown import free_port  # noqa: E402

N_IMAGES, GROUP, ROWS = 16, 4, 24


@pytest.fixture
def job(s3_server, monkeypatch) -> ddp_train.Job:
    options = {k: str(v) for k, v in s3_server.storage_options().items()}
    images_url = s3_server.unique_url("ddp-images")
    cols = ImageColumns.create(images_url, size=(32, 64), group=GROUP, storage_options=options)
    rng = np.random.default_rng(0)
    cols.append(rng.integers(0, 256, (N_IMAGES, 32, 64, 3), dtype=np.uint8),
                labels=[i % 3 for i in range(N_IMAGES)])
    table_url = s3_server.unique_url("ddp-table")
    monkeypatch.setenv("TESSERA_TABLES_CHUNK_BYTES", "256")  # 4 rows of 64 B per row group
    # Groups of these tiny images are a few KB: the planner would merge a rank's two groups
    # into one request across the group between them (a cloud request costs more than the
    # gap); reads of every needed range alone make the bytes each rank fetched its own.
    monkeypatch.setenv("TESSERA_PLANNER_METHOD", "fetch")
    tt = TensorTable.create(table_url, storage_options=options)
    tt.write("x", rng.normal(size=(ROWS, 16)).astype(np.float32))
    return ddp_train.Job(images_url, table_url, options, epochs=2)


def test_two_ranks_read_disjoint_shards_and_train_as_one_process(job, tmp_path) -> None:
    ddp_train.spawn(job, 2, free_port(), str(tmp_path))
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    expected = ddp_train.replay(job, 2)
    for name, group_of, total in (("images", lambda p: p // GROUP, N_IMAGES),
                                  ("table", lambda p: p // 4, ROWS)):
        seen = [ranks[r][name]["seen"].tolist() for r in range(2)]
        per_epoch = [len(s) // job.epochs for s in seen]
        for epoch in range(job.epochs):
            parts = [s[epoch * n:(epoch + 1) * n] for s, n in zip(seen, per_epoch,
                                                                   strict=True)]
            assert sorted(parts[0] + parts[1]) == list(range(total))  # every sample, once
            assert not {group_of(p) for p in parts[0]} & {group_of(p) for p in parts[1]}
        for r in range(2):
            assert (ranks[r][name]["requests"] > 0).all()
            for key, value in expected[name].items():  # DDP keeps the ranks equal
                torch.testing.assert_close(ranks[r][name]["weights"][key], value,
                                           rtol=1e-5, atol=1e-6)
    # Each rank's first epoch fetched its own groups: about half of what one process reading
    # every image once fetches, and the two halves add up to it.
    whole = ddp_train.FrequencyDataset(job.images_url, k=8, scale=job.scale, cache_bytes=0,
                                       storage_options=job.storage_options)
    with tessera.collect_stats() as stats:
        whole.__getitems__(list(range(N_IMAGES)))
    once = stats.by_method["range"].bytes_received  # the image data, without bookkeeping
    first = [int(ranks[r]["images"]["bytes"][0]) for r in range(2)]
    assert all(b == pytest.approx(once / 2, rel=0.10) for b in first), (first, once)
    assert sum(first) == pytest.approx(once, rel=0.05)
