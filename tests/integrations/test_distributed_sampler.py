"""DistributedGroupSampler: ranks get disjoint groups, together every sample once per epoch
(padding or cutting only to equal lengths, with a rank's own samples), the same lengths on
every rank, a new order per epoch from one seed, and a restarted job resumes mid-epoch with
the remaining samples only. Datasets say their groups."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import tessera  # noqa: E402
from tessera.errors import InvalidArgumentError  # noqa: E402
from tessera.torch import (  # noqa: E402
    ArrayDataset,
    DistributedGroupSampler,
    RegionDataset,
    TensorTableDataset,
)


def _ranks(keys, world, **kw):
    return [list(DistributedGroupSampler(keys=keys, num_replicas=world, rank=r, **kw))
            for r in range(world)]


@settings(max_examples=150, deadline=None)
@given(keys=st.lists(st.integers(0, 12), max_size=80), world=st.integers(1, 4),
       drop_last=st.booleans(), shuffle=st.booleans(), seed=st.integers(0, 5),
       buffer_groups=st.integers(1, 5))
def test_ranks_share_groups_never_and_cover_every_sample(keys, world, drop_last, shuffle,
                                                         seed, buffer_groups) -> None:
    parts = _ranks(keys, world, drop_last=drop_last, shuffle=shuffle, seed=seed,
                   buffer_groups=buffer_groups)
    assert len({len(p) for p in parts}) <= 1  # equal lengths on every rank
    if len(set(keys)) < world:  # a rank without a group repeats the first rank's
        if not drop_last:
            assert {i for p in parts for i in p} == set(range(len(keys)))
        return
    groups = [{keys[i] for i in p} for p in parts]
    for a in range(world):
        for b in range(a + 1, world):
            assert not groups[a] & groups[b]  # no group fetched by two ranks
    seen = [i for p in parts for i in p]
    if not drop_last:
        assert set(seen) == set(range(len(keys)))  # every sample (padding repeats some)
    distinct = sum(len(set(p)) for p in parts)
    assert distinct == len(set(seen))  # a rank pads with its own samples only
    if not drop_last and len({len(set(p)) for p in parts}) == 1 and distinct == len(keys):
        assert sorted(seen) == list(range(len(keys)))  # equal shares: no padding


def test_epochs_reshuffle_from_one_seed_and_the_plain_sampler_still_works() -> None:
    keys = [i // 4 for i in range(64)]
    s = DistributedGroupSampler(keys=keys, num_replicas=2, rank=0, seed=7)
    first = list(s)
    s.set_epoch(1)
    second = list(s)
    assert first != second  # groups dealt anew each epoch
    again = DistributedGroupSampler(keys=keys, num_replicas=2, rank=0, seed=7)
    assert list(again) == first  # the same seed and epoch: the same order on every run
    assert len(s) == 32
    ordered = DistributedGroupSampler(keys=keys, num_replicas=2, rank=1, shuffle=False)
    assert list(ordered)[:4] == [4, 5, 6, 7]  # group 1, in order
    plain = torch.utils.data.DistributedSampler(range(64), num_replicas=2, rank=0)
    assert len(list(plain)) == 32


def test_resume_mid_epoch_hands_out_the_rest_only() -> None:
    keys = [i // 3 for i in range(30)]
    s = DistributedGroupSampler(keys=keys, num_replicas=2, rank=1, seed=3)
    s.set_epoch(2)
    whole = list(s)
    s2 = DistributedGroupSampler(keys=keys, num_replicas=2, rank=1, seed=3)
    s2.set_epoch(2)
    it = iter(s2)
    done = [next(it) for _ in range(5)]
    state = s2.state_dict()
    assert state["consumed"] == 5 and state["epoch"] == 2
    restarted = DistributedGroupSampler(keys=keys, num_replicas=2, rank=1, seed=3)
    restarted.load_state_dict(state)
    rest = list(restarted)
    assert done + rest == whole
    assert list(restarted) == whole  # the epoch done, iterating again starts it over
    trained = s2.state_dict(consumed=2)  # what the training loop used, not what was drawn
    restarted.load_state_dict(trained)
    assert list(restarted) == whole[2:]
    with pytest.raises(InvalidArgumentError, match="num_replicas=2"):
        DistributedGroupSampler(keys=keys, num_replicas=4, rank=1, seed=3).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match=r"rank must be 0\.\.1"):
        DistributedGroupSampler(keys=keys, num_replicas=2, rank=2)
    with pytest.raises(InvalidArgumentError, match="not a DistributedGroupSampler state"):
        restarted.load_state_dict({"epoch": 1})
    with pytest.raises(InvalidArgumentError, match="not a DistributedGroupSampler state"):
        restarted.load_state_dict({"version": 1, "epoch": 1})  # a truncated checkpoint


def test_datasets_say_their_groups(tmp_path, monkeypatch) -> None:
    data = np.zeros((10, 4), np.float32)
    url = (tmp_path / "a").as_uri()
    tessera.from_numpy(url, data, tile=(4, 4))
    assert ArrayDataset(url).group_keys() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    regions = RegionDataset(url, [(9, (slice(0, 2),)), (1, (0,)), (5, ())])
    assert regions.group_keys() == [2, 0, 1]
    table_url = (tmp_path / "t").as_uri()
    from tessera.tables import TensorTable

    monkeypatch.setenv("TESSERA_TABLES_CHUNK_BYTES", "64")  # 4 leads of 16 bytes a group
    tt = TensorTable.create(table_url)
    tt.write("x", np.zeros((10, 4), np.float32))
    keys = TensorTableDataset(table_url).group_keys()
    assert keys[:5] == [("x", 0)] * 4 + [("x", 1)]
    sampler = DistributedGroupSampler(ArrayDataset(url), num_replicas=2, rank=0)
    assert len(sampler) == 6  # groups of 4, 4 and 2 samples: 4 + 2 on one rank, padded


def test_a_job_killed_after_k_batches_resumes_with_the_rest_of_its_epoch(tmp_path) -> None:
    from tessera.images import ImageColumns
    from tessera.torch import FrequencyDataset

    url = (tmp_path / "im").as_uri()
    cols = ImageColumns.create(url, size=(32, 32), group=4)
    cols.append(np.random.default_rng(0).integers(0, 256, (24, 32, 32, 3), dtype=np.uint8))
    ds = FrequencyDataset(url, k=2, labels=False)

    def loader(sampler):
        batches = list(torch.utils.data.BatchSampler(sampler, 3, drop_last=False))
        return batches, torch.utils.data.DataLoader(ds, batch_sampler=batches)

    whole = DistributedGroupSampler(ds, num_replicas=2, rank=1, seed=5)
    whole.set_epoch(3)
    everything = [p for b in loader(whole)[0] for p in b]
    job = DistributedGroupSampler(ds, num_replicas=2, rank=1, seed=5)
    job.set_epoch(3)
    batches, dl = loader(job)
    trained = []
    for k, (positions, images) in enumerate(zip(batches, dl, strict=True)):
        assert images.shape == (len(positions), 3, 32, 32)
        trained += positions
        if k == 1:  # killed after 2 batches; the checkpoint says what training used
            state = job.state_dict(consumed=len(trained))
            break
    restarted = DistributedGroupSampler(ds, num_replicas=2, rank=1, seed=5)
    restarted.load_state_dict(state)
    rest = [p for b in loader(restarted)[0] for p in b]
    assert trained + rest == everything and len(rest) == len(everything) - 6
