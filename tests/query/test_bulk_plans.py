"""Plans of many tiles: neighbour merging with array operations (:mod:`tessera.query.merge`)
builds the runs the request-by-request merge builds, on any mix of gets, ranges and
pushdowns; descent by groups of alike tiles makes the choices tile-by-tile descent makes
when the tiles are alike."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.query import refine
from tessera.query.cost import DEFAULT_PROFILES, CostModel, RequestMix, StoreProfile
from tessera.query.refine import PlannedRequest, TileChoice, TileNeed, plan_requests, plan_tiles

PUSHY = StoreProfile("pushy", ((1, 25e6), (8, 90e6), (32, 100e6)), 0.03, 32,
                     pushdown_alpha_s_per_byte=1e-10, pushdown_beta_s=0.002)
MODELS = [CostModel(DEFAULT_PROFILES["local"]), CostModel(DEFAULT_PROFILES["cloud"], "s3"),
          CostModel(DEFAULT_PROFILES["cloud"], "s3", phi=1e6), CostModel(PUSHY, "s3"),
          CostModel(DEFAULT_PROFILES["local"].calling_thread())]


def _choice(i: int, key: str, offset: int, length: int, method: str,
            parts: list[tuple[int, int]]) -> TileChoice:
    need = TileNeed(f"t{i}", key, offset, length, True, np.array([[0, length]]), length)
    if method == "get":
        reqs, mix = [(offset, offset + length)], RequestMix(get_requests=1, get_bytes=length)
    elif method == "range":
        reqs = [(offset + a, offset + b) for a, b in parts]
        mix = RequestMix(range_requests=len(reqs), range_bytes=sum(b - a for a, b in parts))
    else:
        reqs = [(offset, offset + length)]
        mix = RequestMix(pushdowns=1, pushdown_bytes=length // 4, pushdown_tile_bytes=length)
    return TileChoice(need, method, np.array(reqs, np.int64).reshape(-1, 2), mix)


@st.composite
def plans(draw: st.DrawFn) -> list[TileChoice]:
    """Tiles of up to three objects in stored order, each fetched whole, in ranges (up to
    three, with gaps) or pushed down; sizes from 1 byte to 600 KB, gaps 0 to 200 KB."""
    n = draw(st.integers(1, 300))
    keys = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=n, max_size=n))
    out, pos = [], {"a": 0, "b": 0, "c": 0}
    for i, key in enumerate(keys):
        length = draw(st.sampled_from([1, 256, 4096, 65536, 150_000, 600_000]))
        offset = pos[key] + draw(st.sampled_from([0, 0, 0, 10, 5000, 200_000]))
        pos[key] = offset + length
        method = draw(st.sampled_from(["get", "get", "range", "pushdown"]))
        parts = [(0, length)]
        if method == "range" and length >= 16:
            cuts = sorted(draw(st.sets(st.integers(1, length - 1), min_size=2, max_size=5)))
            parts = [(a, b) for a, b in zip(cuts[::2], cuts[1::2], strict=False)]
        out.append(_choice(i, key, offset, length, method, parts))
    return out


def _sequential(choices: list[TileChoice], model: CostModel, cap: int,
                monkeypatch: pytest.MonkeyPatch) -> list[PlannedRequest]:
    with monkeypatch.context() as m:
        m.setattr(refine, "BULK_MERGE_TILES", 1 << 60)
        return plan_requests(choices, model, max_request_bytes=cap)


@settings(max_examples=150, deadline=None)
@given(choices=plans(), which=st.integers(0, len(MODELS) - 1),
       cap=st.sampled_from([16 << 20, 100_000, 1]))
def test_bulk_merging_builds_the_runs_of_the_sequential_merge(
        choices: list[TileChoice], which: int, cap: int) -> None:
    model = MODELS[which]
    with pytest.MonkeyPatch.context() as mp:
        expected = _sequential(choices, model, cap, mp)
    got = refine._plan_requests_bulk(choices, model, cap)
    assert got == expected


def test_a_whole_read_of_many_small_tiles_is_merged_up_to_the_limit() -> None:
    """10,000 contiguous 256-byte tiles: runs of the limit's length, every tile once."""
    choices = [_choice(i, "k", i * 256, 256, "get", []) for i in range(10_000)]
    model = MODELS[0]
    got = plan_requests(choices, model)
    limit = 2 * model.profile.min_range_bytes
    assert sorted(t for r in got for t in r.tiles) == list(range(10_000))
    assert all(r.stop - r.start <= limit for r in got)
    assert len(got) == -(-10_000 * 256 // (limit // 256 * 256))


@pytest.mark.parametrize("which", range(len(MODELS)))
@pytest.mark.parametrize("cut", [65536, 40000, 4096])
def test_groups_of_alike_tiles_choose_as_tile_by_tile_descent(
        which: int, cut: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 tiles of 64 KiB, each needing its first ``cut`` bytes (all of it: gets; a part:
    ranges or pushdowns), beside 30 tiles needing less: the same choice per tile either way,
    and the grouped plan is made by the group path (planning calls per group, not tile)."""
    model = MODELS[which]
    tile = 65536
    needs = [TileNeed(f"t{i}", "obj", i * tile, tile, True,
                      np.array([[0, cut if i >= 30 else 1024]]), cut if i >= 30 else 1024)
             for i in range(2030)]
    calls = []
    real = refine._candidates
    monkeypatch.setattr(refine, "_candidates", lambda *a, **k: calls.append(1) or real(*a, **k))
    grouped = plan_tiles(needs, model, cell_nbytes=4)
    assert len(calls) <= 2 * 3 * 2  # (two groups) x (three sweeps) x (two descents at most)
    monkeypatch.setattr(refine, "BULK_DESCENT_TILES", 1 << 60)
    single = plan_tiles(needs, model, cell_nbytes=4)
    assert [(c.method, c.requests.tolist()) for c in grouped] == [
        (c.method, c.requests.tolist()) for c in single]
