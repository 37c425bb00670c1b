"""Range refinement (Algorithm 1), method choice and request merging."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera import ConfigError
from tessera.format.decompose import tile_byte_ranges
from tessera.query.cost import DEFAULT_PROFILES, CostModel, StoreProfile
from tessera.query.refine import TileNeed, plan_requests, plan_tiles, refine_ranges

CLOUD = DEFAULT_PROFILES["cloud"]
PUSHY = StoreProfile("pushy", ((1, 25e6), (8, 90e6), (32, 100e6)), 0.03, 32,
                     pushdown_alpha_s_per_byte=1e-10, pushdown_beta_s=0.002)
MiB = 1 << 20


@st.composite
def sorted_ranges(draw):
    n = draw(st.integers(1, 12))
    gaps = draw(st.lists(st.integers(1, 5000), min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(1, 5000), min_size=n, max_size=n))
    out, pos = [], 0
    for g, s in zip(gaps, sizes, strict=True):
        pos += g
        out.append([pos, pos + s])
        pos += s
    return np.array(out, dtype=np.int64)


@settings(max_examples=200, deadline=None)
@given(sorted_ranges(), st.floats(0, 1e-3), st.floats(0, 1e-6))
def test_groups_cover_every_range_once(ranges, per_request, per_byte) -> None:
    def cost(reqs):
        return len(reqs) * per_request + sum(b - a for a, b in reqs) * per_byte

    groups = refine_ranges(ranges, cost)
    assert groups == sorted(groups)
    assert all(a < b for a, b in groups)
    assert all(g1[1] <= g2[0] for g1, g2 in itertools.pairwise(groups))
    for a, b in ranges.tolist():  # every range lies inside exactly one group
        assert sum(ga <= a and b <= gb for ga, gb in groups) == 1


def test_extreme_costs_give_one_request_or_exact_ranges() -> None:
    ranges = np.array([[0, 10], [100, 110], [1000, 1010]])
    assert refine_ranges(ranges, lambda reqs: len(reqs)) == [(0, 1010)]
    exact = refine_ranges(ranges, lambda reqs: sum(b - a for a, b in reqs),
                          min_split_bytes=10)
    assert exact == [(0, 10), (100, 110), (1000, 1010)]


def test_largest_gap_is_split_first() -> None:
    seen = []

    def cost(reqs):
        seen.append(sorted(reqs))
        return 0.0  # never split: we only look at the first proposal

    refine_ranges(np.array([[0, 1], [2, 3], [50, 51], [52, 53]]), cost)
    assert [(0, 3), (50, 53)] in seen


def _column_needs(tiles: int = 4) -> list[TileNeed]:
    r = tile_byte_ranges((1024, 1024), 4, "row-major", [np.arange(1024), np.arange(10, 20)])
    return [TileNeed(f"t{i}", "obj", i * 4 * MiB, 4 * MiB, True, r, 1024 * 10 * 4)
            for i in range(tiles)]


@pytest.mark.parametrize("method", ["get", "merge", "fetch"])
def test_forced_methods(method) -> None:
    needs = _column_needs()
    choices = plan_tiles(needs, CostModel(CLOUD, "s3"), method, cell_nbytes=4)
    for c in choices:
        if method == "get":
            assert c.method == "get" and c.requests.tolist() == [[c.need.offset,
                                                                  c.need.offset + 4 * MiB]]
        elif method == "merge":
            assert c.method == "range" and len(c.requests) == 1
            assert c.requests[0, 0] == c.need.offset + 40
        else:
            assert c.method == "range" and len(c.requests) == 1024


def test_compressed_tiles_are_fetched_whole_or_pushed_down() -> None:
    need = TileNeed("z", "obj", 0, MiB, False, np.empty((0, 2), np.int64), 100)
    for method in ("auto", "merge", "fetch", "get"):
        assert plan_tiles([need], CostModel(CLOUD, "s3"), method)[0].method == "get"
    assert plan_tiles([need], CostModel(PUSHY, "s3"))[0].method == "pushdown"
    with pytest.raises(ConfigError, match="pushdown server"):
        plan_tiles([need], CostModel(CLOUD, "s3"), "pushdown")
    with pytest.raises(ConfigError, match="unknown read method"):
        plan_tiles([need], CostModel(CLOUD, "s3"), "teleport")


def test_phi_trades_time_for_dollars() -> None:
    needs = _column_needs(8)
    fast = plan_tiles(needs, CostModel(CLOUD, "s3", phi=0.0), cell_nbytes=4)
    cheap = plan_tiles(needs, CostModel(CLOUD, "s3", phi=1e7), cell_nbytes=4)
    model = CostModel(CLOUD, "s3")
    total = [sum((c.mix for c in plan), start=type(plan[0].mix)()) for plan in (fast, cheap)]
    assert model.estimate(total[0]).seconds <= model.estimate(total[1]).seconds
    assert model.estimate(total[1]).dollars <= model.estimate(total[0]).dollars


def test_neighbouring_tiles_share_a_request_when_it_pays() -> None:
    needs = [TileNeed(f"t{i}", "obj", i * 16384, 16384, True, np.array([[0, 15360]]), 15360)
             for i in range(3)]  # each tile needs its first 15 KiB: 1 KiB gaps between
    model = CostModel(CLOUD, "s3", phi=1e6)
    choices = plan_tiles(needs, model, cell_nbytes=4)
    assert [c.method for c in choices] == ["range"] * 3
    requests = plan_requests(choices, model)
    assert len(requests) == 1 and requests[0].tiles == (0, 1, 2)
    assert (requests[0].start, requests[0].stop) == (0, 2 * 16384 + 15360)
    assert len(plan_requests(choices, model, merge_neighbours=False)) == 3


@pytest.mark.parametrize("profile", [CLOUD, DEFAULT_PROFILES["local"]])
def test_merged_requests_stay_within_the_limits(profile: StoreProfile) -> None:
    """Neighbour merging stops at max_request_bytes and at twice the bandwidth-delay
    product: a full read of contiguous 4 MiB tiles on a local store stays one get per tile
    (merged, it became a single 1 GiB request, 2x slower)."""
    for tile in (64 << 10, 4 * MiB):
        needs = [TileNeed(f"t{i}", "obj", i * tile, tile, True, np.array([[0, tile]]), tile)
                 for i in range(64)]
        model = CostModel(profile, "s3")
        choices = plan_tiles(needs, model, cell_nbytes=4)
        limit = 2 * profile.min_range_bytes
        for cap in (1 << 40, 256 << 10):
            requests = plan_requests(choices, model, max_request_bytes=cap)
            assert sorted(t for r in requests for t in r.tiles) == list(range(64))
            assert all(r.stop - r.start <= max(tile, min(cap, limit)) for r in requests)
            if tile < min(cap, limit) // 2:
                assert len(requests) < 64  # small tiles are still merged
    assert 2 * DEFAULT_PROFILES["local"].min_range_bytes < 4 * MiB


def test_max_request_bytes_is_configurable_and_checked(monkeypatch) -> None:
    from tessera.config import PlannerConfig

    monkeypatch.setenv("TESSERA_PLANNER_MAX_REQUEST_BYTES", "1048576")
    assert PlannerConfig.from_env().max_request_bytes == MiB
    with pytest.raises(ConfigError, match="max_request_bytes"):
        PlannerConfig(max_request_bytes=0)


def test_pushdown_that_only_pays_for_the_whole_read_is_found() -> None:
    """Eight 4 MiB compressed tiles, a profile like the emulated link's: against the rest
    of the plan, switching one tile to pushdown costs more (its wave of server time) than
    the transfer it saves, though all eight pushed down are much cheaper (the fetches share
    the link). Tile-by-tile descent stops at all-get; the planner also descends from
    all-pushdown and keeps the cheaper plan."""
    from tessera.query.refine import _descend, _total_cost

    prof = StoreProfile("link", ((1, 98e6), (32, 95e6)), 0.037, 32,
                        pushdown_alpha_s_per_byte=1.65e-9, pushdown_beta_s=0.040)
    model = CostModel(prof, "s3")
    needs = [TileNeed(f"t{i}", "obj", i * 4 * MiB, 4 * MiB, False, np.empty((0, 2), np.int64),
                      4 * MiB // 25) for i in range(8)]
    stuck = _descend(needs, model, "auto", True, 4, 3, None)
    assert [c.method for c in stuck] == ["get"] * 8
    chosen = plan_tiles(needs, model, cell_nbytes=4)
    assert [c.method for c in chosen] == ["pushdown"] * 8
    assert _total_cost(chosen, model) < _total_cost(stuck, model) / 3  # past the margin


def test_a_marginal_all_pushdown_plan_is_not_taken(monkeypatch) -> None:
    """Descending from all-pushdown must win by GLOBAL_PUSHDOWN_MARGIN: with server time
    that makes all-pushdown only slightly cheaper, plain descent's plan stays."""
    from tessera.query import refine
    from tessera.query.refine import _descend, _total_cost

    prof = StoreProfile("link", ((1, 98e6), (32, 95e6)), 0.037, 32,
                        pushdown_alpha_s_per_byte=1.65e-9, pushdown_beta_s=0.040)
    model = CostModel(prof, "s3")
    needs = [TileNeed(f"t{i}", "obj", i * 4 * MiB, 4 * MiB, False, np.empty((0, 2), np.int64),
                      4 * MiB // 25) for i in range(8)]
    descent = _total_cost(_descend(needs, model, "auto", True, 4, 3, None), model)
    pushed = _total_cost(plan_tiles(needs, model, cell_nbytes=4), model)
    ratio = descent / pushed
    assert ratio > refine.GLOBAL_PUSHDOWN_MARGIN
    monkeypatch.setattr(refine, "GLOBAL_PUSHDOWN_MARGIN", ratio * 1.01)
    assert [c.method for c in plan_tiles(needs, model, cell_nbytes=4)] == ["get"] * 8


def test_a_tile_is_refined_again_only_when_the_rest_of_the_plan_changed(monkeypatch) -> None:
    """Coordinate descent re-chooses a tile only if its context changed since its last
    choice: a one-tile read runs Algorithm 1 once, not once per sweep."""
    from tessera.query import algorithm1

    real = algorithm1.refine_ranges
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(algorithm1, "refine_ranges", counted)
    ranges = tile_byte_ranges((1024, 1024), 4, "row-major",
                              [np.arange(100, 120), np.arange(200, 220)])
    need = TileNeed("t", "obj", 0, 4 * MiB, True, ranges, 20 * 20 * 4)
    chosen = plan_tiles([need], CostModel(CLOUD, "s3"), cell_nbytes=4)
    assert chosen[0].method == "range" and len(calls) == 1


def test_tiles_cut_alike_are_chosen_once(monkeypatch) -> None:
    """The 8 tiles of a full-height column need the same ranges at different offsets: in a
    given context Algorithm 1 runs for one of them and the others take its answer, moved
    to their own offsets."""
    from tessera.query import algorithm1, refine

    real = algorithm1.refine_ranges
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    ranges = tile_byte_ranges((1024, 1024), 4, "row-major",
                              [np.arange(1024), np.arange(300, 382)])
    needs = [TileNeed(f"t{i}", "obj", i * 4 * MiB, 4 * MiB, True, ranges, 1024 * 82 * 4)
             for i in range(8)]
    model = CostModel(PUSHY, "s3")
    expected = refine._descend(needs, model, "auto", True, 4, 3, None)  # no memo
    monkeypatch.setattr(algorithm1, "refine_ranges", counted)
    chosen = refine._descend(needs, model, "auto", True, 4, 3, None, {})
    assert [(c.method, c.requests.tolist()) for c in chosen] == \
        [(c.method, c.requests.tolist()) for c in expected]
    assert all(c.need is n for c, n in zip(chosen, needs, strict=True))
    for i, c in enumerate(chosen):
        if c.method == "range":
            assert c.requests[0, 0] >= i * 4 * MiB + ranges[0, 0]
    # each distinct context costs one run; without the memo every choice ran it
    calls.clear()
    refine._descend(needs, model, "auto", True, 4, 3, None, {})
    memoised = len(calls)
    calls.clear()
    refine._descend(needs, model, "auto", True, 4, 3, None)
    assert memoised < len(calls)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(sorted_ranges(), st.integers(0, 3)), min_size=1, max_size=6),
       st.sampled_from(["auto", "get", "merge", "fetch", "pushdown"]),
       st.sampled_from([CLOUD, PUSHY]), st.floats(0, 1e4))
def test_memoised_choices_match_fresh_ones(tiles, method, profile, phi) -> None:
    """Whatever the needs (some alike, at other offsets), a plan chosen with the memo is
    the plan chosen without it."""
    from tessera.query import refine

    if method == "pushdown" and not profile.has_pushdown:
        method = "auto"
    needs = []
    for i, (ranges, raw) in enumerate(tiles):
        length = int(ranges[-1, 1]) + 7
        needs.append(TileNeed(f"t{i}", f"obj{raw % 2}", i * 100_000, length, raw != 3,
                              ranges if raw != 3 else np.empty((0, 2), np.int64),
                              int((ranges[:, 1] - ranges[:, 0]).sum())))
        if raw == 0:  # a tile cut like the one before, elsewhere
            needs.append(dataclasses.replace(needs[-1], tile=f"t{i}b",
                                             offset=i * 100_000 + 50_000))
    model = CostModel(profile, "s3", phi)
    push = profile.has_pushdown
    fresh = refine._descend(needs, model, method, push, 4, 3, None)
    memo = refine._descend(needs, model, method, push, 4, 3, None, {})
    assert [(c.method, c.requests.tolist(), c.mix) for c in memo] == \
        [(c.method, c.requests.tolist(), c.mix) for c in fresh]


@settings(max_examples=300, deadline=None)
@given(sorted_ranges(), st.data())
def test_plain_and_vectorised_splits_agree(ranges, data) -> None:
    """Algorithm 1 splits a few ranges in plain Python and many with numpy: both pick the
    same range after the widest gap, ties going to the gap nearest the middle."""
    from tessera.query.algorithm1 import _widest_gap, _widest_gap_np

    if len(ranges) < 2:
        return
    i = data.draw(st.integers(0, len(ranges) - 2))
    j = data.draw(st.integers(i + 1, len(ranges) - 1))
    if data.draw(st.booleans()):  # equal gaps: ties decide
        sizes = ranges[:, 1] - ranges[:, 0]
        starts = np.concatenate(([0], np.cumsum(sizes[:-1] + 100)))
        ranges = np.stack((starts, starts + sizes), axis=1)
    assert _widest_gap(ranges.tolist(), i, j) == _widest_gap_np(ranges, i, j)
