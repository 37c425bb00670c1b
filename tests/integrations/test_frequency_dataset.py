"""tessera.torch.FrequencyDataset and GroupShuffleSampler over image columns: items equal
the set's reads, k per phase (set_k, a schedule), a batch read in one call (one request per
group), the sampler's group order, and forkserver workers seeing the pinned snapshot."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tessera.images import ImageColumns
from tessera.query.cost import DEFAULT_PROFILES
from tessera.torch import FrequencyDataset, GroupShuffleSampler


@pytest.fixture
def image_set(tmp_path):
    url = (tmp_path / "images").as_uri()
    cols = ImageColumns.create(url, size=(32, 64), group=4)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (16, 32, 64, 3), dtype=np.uint8)
    cols.append(images, labels=list(range(16)))
    return url, cols


def test_items_equal_the_set_and_follow_k(image_set) -> None:
    url, cols = image_set
    ds = FrequencyDataset(url, k=4)
    x, y = ds[5]
    assert x.dtype == torch.uint8 and x.shape == (3, 32, 64) and y == 5
    assert np.array_equal(x.numpy().transpose(1, 2, 0), cols.read([5], k=4)[0])
    ds.set_k(63)
    assert np.array_equal(ds[5][0].numpy().transpose(1, 2, 0), cols.read([5], k=63)[0])
    scheduled = FrequencyDataset(url, k=lambda epoch: 1 + 3 * epoch, output="coefficients",
                                 labels=False)
    assert scheduled[0].shape == (3, 1, 2, 1)
    scheduled.set_epoch(2)  # k = 7: T(7) = 28 coefficients
    assert scheduled.k == 7 and scheduled[0].shape == (3, 1, 2, 28)
    small = FrequencyDataset(url, k=8, scale=1 / 4, labels=False)
    assert small[0].shape == (3, 8, 16)
    cached = FrequencyDataset(url, k=2, labels=False, cache_bytes=1 << 20)
    first = cached[3]
    cached.set_k(5)  # only diagonals 2..4 of image 3's group are fetched
    assert np.array_equal(cached[3].numpy().transpose(1, 2, 0), cols.read([3], k=5)[0])
    assert {r.attr for r in cached.columns.last_read.tile_reads} == {"d02", "d03", "d04"}
    assert first.shape == (3, 32, 64)


def test_a_batch_is_one_call_and_one_request_per_group(image_set) -> None:
    url, _ = image_set
    ds = FrequencyDataset(url, k=8)
    ds.columns.coeffs.profile = DEFAULT_PROFILES["cloud"]
    batch = ds.__getitems__([4, 5, 6, 7, 8, 9])  # groups 1 and 2
    assert [y for _, y in batch] == [4, 5, 6, 7, 8, 9]
    stats = ds.columns.last_read.stats
    assert set(stats.by_method) <= {"get", "range"}  # the snapshot was listed at open
    # one request per group, or one for the two neighbouring groups merged
    assert 1 <= sum(stats.by_method[m].requests for m in stats.by_method) <= 2


def test_the_sampler_keeps_groups_together_and_reshuffles_per_epoch() -> None:
    ids = np.arange(64)
    sampler = GroupShuffleSampler(ids, group=8, buffer_groups=2, seed=1)
    first = list(sampler)
    assert sorted(first) == list(range(64)) and len(sampler) == 64
    for start in range(0, 64, 16):  # each window of 16 draws holds exactly two groups
        assert len({p // 8 for p in first[start:start + 16]}) == 2
    sampler.set_epoch(1)
    assert list(sampler) != first
    sampler.set_epoch(0)
    assert list(sampler) == first


def test_loader_workers_read_the_snapshot(image_set) -> None:
    url, cols = image_set
    ds = FrequencyDataset(url, k=2)
    cols.append(np.zeros((4, 32, 64, 3), np.uint8), labels=[99] * 4)  # after the snapshot
    seen = []
    for x, y in ds.loader(batch_size=4, num_workers=2, buffer_groups=1):
        assert x.shape == (4, 3, 32, 64)
        seen += y.tolist()
    assert sorted(seen) == list(range(16))  # every image once; the later append unseen


def test_a_schedule_that_is_a_lambda_reaches_spawned_workers_as_its_k(image_set) -> None:
    url, _ = image_set
    ds = FrequencyDataset(url, k=lambda epoch: 1 if epoch == 0 else 8, output="coefficients")
    ds.set_epoch(1)
    shapes = {tuple(x.shape) for x, _ in ds.loader(batch_size=4, num_workers=1,
                                                   buffer_groups=1)}
    assert shapes == {(4, *ds[0][0].shape)}  # the workers read at epoch 1's k
    assert ds[0][0].shape[-1] == ds.columns.fmt.kept(8)
