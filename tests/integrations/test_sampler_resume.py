"""DistributedGroupSampler states resume exactly: a legitimate state continues where it
stopped, in any epoch; a state saved with another setup is refused with a message instead
of repeating or skipping samples; a forged state raises Tessera's error."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from tessera.errors import InvalidArgumentError, TesseraError, TesseraWarning
from tessera.torch import DistributedGroupSampler


def _sampler(keys, **kw) -> DistributedGroupSampler:
    kw.setdefault("num_replicas", 2)
    kw.setdefault("rank", 0)
    return DistributedGroupSampler(keys=keys, **kw)


def test_a_state_of_a_later_epoch_is_checked_against_that_epoch():
    """1,032 images in groups of 32 on 2 ranks: the epochs differ in length (33 groups
    dealt to 2 ranks), and a state of epoch 1, 3 or 4 was checked against epoch 0's."""
    keys = [i // 32 for i in range(1032)]
    refused = []
    for epoch in range(6):
        s = _sampler(keys, seed=0)
        s.set_epoch(epoch)
        whole = list(s)
        state = s.state_dict(consumed=len(whole) - 1)
        fresh = _sampler(keys, seed=0)
        try:
            fresh.load_state_dict(json.loads(json.dumps(state)))
        except InvalidArgumentError:
            refused.append(epoch)
            continue
        assert list(fresh) == whole[-1:]
    assert refused == []


@settings(max_examples=150, deadline=None)
@given(group_sizes=st.lists(st.integers(1, 9), min_size=1, max_size=24),
       world=st.integers(1, 4), epoch=st.integers(0, 6), seed=st.integers(0, 3),
       shuffle=st.booleans(), drop_last=st.booleans(), buffer_groups=st.integers(1, 5),
       data=st.data())
def test_a_legitimate_resume_continues_exactly(group_sizes, world, epoch, seed, shuffle,
                                               drop_last, buffer_groups, data):
    keys = [g for g, n in enumerate(group_sizes) for _ in range(n)]
    setup = dict(seed=seed, shuffle=shuffle, drop_last=drop_last, buffer_groups=buffer_groups,
                 num_replicas=world)
    rank = data.draw(st.integers(0, world - 1))
    s = DistributedGroupSampler(keys=keys, rank=rank, **setup)
    s.set_epoch(epoch)
    whole = list(s)
    consumed = data.draw(st.integers(0, len(whole)))
    state = s.state_dict(consumed=consumed)
    resumed = DistributedGroupSampler(keys=keys, rank=rank, **setup)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert resumed.epoch == epoch
    assert whole[:consumed] + list(resumed) == whole or consumed == len(whole)


@pytest.mark.parametrize("change, field", [
    (dict(keys=[i // 8 for i in range(8 * 17)]), "size"),        # grown by one group
    (dict(keys=[i // 4 for i in range(8 * 16)]), "groups"),      # regrouped
    (dict(keys=[(i % 16) for i in range(8 * 16)]), "fingerprint"),  # same counts, other groups
    (dict(buffer_groups=4), "buffer_groups"),
    (dict(shuffle=False), "shuffle"),
    (dict(drop_last=True), "drop_last"),
    (dict(seed=1), "seed"),
    (dict(num_replicas=4), "num_replicas"),
])
def test_a_changed_setup_is_refused(change, field):
    base = dict(keys=[i // 8 for i in range(8 * 16)], seed=0, shuffle=True, drop_last=False,
                buffer_groups=16, num_replicas=2)
    s = DistributedGroupSampler(**{**base, "rank": 0})
    s.set_epoch(1)
    state = s.state_dict(consumed=10)
    other = DistributedGroupSampler(**{**base, **change, "rank": 0})
    with pytest.raises(InvalidArgumentError, match=f"saved with {field}="):
        other.load_state_dict(state)


@pytest.mark.parametrize("field, value", [
    ("epoch", "x"), ("epoch", None), ("epoch", -1), ("epoch", True), ("epoch", 1.5),
    ("consumed", float("nan")), ("consumed", None), ("consumed", -3), ("consumed", 10**9),
    ("version", 99), ("version", True),
])
def test_forged_states_raise_tesseras_error(field, value):
    s = _sampler(list(range(40)))
    state = {**s.state_dict(), field: value}
    with pytest.raises(InvalidArgumentError) as err:
        s.load_state_dict(state)
    assert isinstance(err.value, TesseraError) and isinstance(err.value, ValueError)
    assert s.epoch == 0 and s.consumed == 0   # nothing changed


def test_a_state_of_the_older_format_loads_with_a_warning():
    s = _sampler([i // 2 for i in range(40)], seed=3)
    s.set_epoch(2)
    whole = list(s)
    old = {"version": 1, "epoch": 2, "seed": 3, "num_replicas": 2, "rank": 0, "consumed": 4}
    resumed = _sampler([i // 2 for i in range(40)], seed=3)
    with pytest.warns(TesseraWarning, match="older Tessera"):
        resumed.load_state_dict(old)
    assert list(resumed) == whole[4:]
