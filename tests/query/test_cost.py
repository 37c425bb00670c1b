"""The cost model follows the paper's formulas."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tessera import ConfigError
from tessera.query.cost import DEFAULT_PROFILES, CostModel, RequestMix, StoreProfile
from tessera.storage.pricing import get_pricing

PROFILE = StoreProfile("test", ((1, 10e6), (8, 80e6), (32, 100e6)), request_latency_s=0.02,
                       concurrency=16, pushdown_alpha_s_per_byte=1e-8, pushdown_beta_s=0.1,
                       pushdown_memory_gb=2.0)


def test_bandwidth_is_interpolated_and_clamped() -> None:
    assert PROFILE.bw(1) == 10e6
    assert PROFILE.bw(4.5) == pytest.approx(45e6)
    assert PROFILE.bw(0) == 10e6
    assert PROFILE.bw(1000) == PROFILE.bw(16)  # never more in flight than the client allows
    assert (PROFILE.n_min, PROFILE.n_max) == (32, 32)
    flat = StoreProfile("f", ((1, 50e6), (8, 95e6), (64, 100e6), (256, 60e6)), 0.01)
    assert (flat.n_min, flat.n_max) == (8, 64)


def test_time_and_fees_match_the_formulas() -> None:
    model = CostModel(PROFILE, "s3", phi=10.0)
    mix = RequestMix(get_requests=2, get_bytes=4_000_000, range_requests=20,
                     range_bytes=1_000_000, pushdowns=3, pushdown_bytes=30_000,
                     pushdown_tile_bytes=3 * 8_000_000)
    n = 25
    t_lambda = 1e-8 * 8_000_000 + 0.1
    seconds = (5_030_000 / PROFILE.bw(n) + 0.02 * math.ceil(22 / 16)
               + t_lambda * math.ceil(3 / 16))
    s3 = get_pricing("s3")
    dollars = (s3.request_fee("get", 2) + s3.request_fee("range", 20)
               + s3.request_fee("pushdown", 3) + s3.egress_usd(5_030_000)
               + s3.compute_usd(2.0 * t_lambda * 3))
    est = model.estimate(mix)
    assert est.seconds == pytest.approx(seconds)
    assert est.dollars == pytest.approx(dollars)
    assert est.cost == pytest.approx(seconds + 10.0 * dollars)
    assert model.estimate(RequestMix()).seconds == 0.0


def test_profile_and_model_validation() -> None:
    with pytest.raises(ConfigError, match="ascending"):
        StoreProfile("x", ((8, 1e6), (1, 1e6)), 0.01)
    with pytest.raises(ConfigError, match="positive"):
        StoreProfile("x", ((1, 0.0),), 0.01)
    with pytest.raises(ConfigError, match="phi"):
        CostModel(PROFILE, "s3", phi=-1)
    for bad in (-1e-6, float("nan")):
        with pytest.raises(ConfigError, match="now_request_s must be >= 0"):
            StoreProfile("x", ((1, 1e6),), 0.01, now_request_s=bad)


def test_a_calling_thread_read_is_estimated_one_request_after_another() -> None:
    prof = StoreProfile("x", ((1, 1e6), (4, 4e6)), 0.01, concurrency=4, now_request_s=1e-4)
    model = CostModel(prof, "local")
    mix = RequestMix(range_requests=4, range_bytes=4000)
    assert model.seconds(mix) == pytest.approx(4000 / 4e6 + 0.01)  # one wave of four
    now = CostModel(prof.calling_thread(), "local")  # one request after another
    assert now.seconds(mix) == pytest.approx(4000 / 1e6 + 4 * 1e-4)
    plain = StoreProfile("y", ((1, 1e6),), 0.01)  # no now_request_s: T_R
    assert CostModel(plain.calling_thread(), "local").seconds(mix) == pytest.approx(
        4000 / 1e6 + 0.04)
    assert not DEFAULT_PROFILES["cloud"].has_pushdown
    assert DEFAULT_PROFILES["cloud"].pushdown_s(1e6) == math.inf
    assert DEFAULT_PROFILES["cloud"].min_range_bytes == int(25e6 * 0.03)


def test_calling_thread_requests_have_their_own_figures() -> None:
    prof = StoreProfile("x", ((1, 1e9), (2, 2e9)), 5e-6, concurrency=2, now_request_s=1e-5,
                        now_bytes_per_s=1e10)
    now = prof.calling_thread()
    assert (now.concurrency, now.bandwidth, now.request_latency_s) == (1, ((1, 1e10),), 1e-5)
    assert not now.has_pushdown and now.name == prof.name
    mix = RequestMix(range_requests=2, range_bytes=20_000)
    assert CostModel(now, "local").seconds(mix) == pytest.approx(2e-5 + 2e-6)
    # Without calling-thread figures: T_R per request, bytes at BW(1).
    plain = StoreProfile("y", ((1, 1e9), (2, 2e9)), 5e-6).calling_thread()
    assert (plain.request_latency_s, plain.bandwidth) == (5e-6, ((1, 1e9),))
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ConfigError, match="now_bytes_per_s must be > 0"):
            StoreProfile("x", ((1, 1e6),), 0.01, now_bytes_per_s=bad)


def test_a_read_made_on_the_calling_thread_is_planned_for_it() -> None:
    """Requests made one after another gain nothing from a range halved for concurrency:
    a plan small enough for the calling thread is made under the profile it sees there.
    (Under a measured folder profile, 20 x 20 crops were read as two halves of one range,
    ~1.4x the time of one.)"""
    import numpy as np

    from tessera.query.need import TileNeed
    from tessera.query.plan import plan_needs
    from tessera.storage.url import parse_store_url

    # A 19.5 KiB range of a 256 KiB tile, on a link where two requests move twice the bytes.
    prof = StoreProfile("fast", ((1, 1e9), (2, 2e9)), 5e-6, concurrency=2,
                        now_request_s=8e-6, now_bytes_per_s=1e10)
    need = TileNeed("t", "k", 0, 1 << 18, True, np.array([[0, 19_536]]), 1600)
    url = parse_store_url("memory://plan-now")
    loop = plan_needs([need], url=url, profile=prof)
    assert len(loop.requests) == 2  # the loop's model halves it
    now = plan_needs([need], url=url, profile=prof, now_bytes=1 << 20)
    assert len(now.requests) == 1 and now.totals.nbytes == 19_536
    assert now.estimate.seconds == pytest.approx(8e-6 + 19_536 / 1e10)
    # Too large for the calling thread: the loop's plan stands.
    assert len(plan_needs([need], url=url, profile=prof, now_bytes=1000).requests) == 2


def test_a_small_read_is_planned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read small enough for the calling thread is planned only for it (planning was
    the most of a first read of a 4-tile crop: 2.5 ms for two plans, ~1 ms for one); a
    read too large for it is planned for the thread, then for the loop."""
    import numpy as np

    import tessera.query.plan as plan_mod
    from tessera.query.need import TileNeed
    from tessera.storage.url import parse_store_url

    models: list[float] = []
    real = plan_mod._choose

    def counted(needs: Any, model: CostModel, *a: Any) -> Any:
        models.append(model.profile.request_latency_s)
        return real(needs, model, *a)

    monkeypatch.setattr(plan_mod, "_choose", counted)
    prof = StoreProfile("fast", ((1, 1e9), (2, 2e9)), 5e-6, concurrency=2,
                        now_request_s=8e-6, now_bytes_per_s=1e10)
    need = TileNeed("t", "k", 0, 1 << 18, True, np.array([[0, 19_536]]), 1600)
    url = parse_store_url("memory://plan-once")
    plan_mod.plan_needs([need], url=url, profile=prof, now_bytes=1 << 20)
    assert models == [8e-6]  # the calling thread's model only
    models.clear()
    plan_mod.plan_needs([need], url=url, profile=prof, now_bytes=5000)
    assert models == [8e-6, 5e-6]  # the thread's plan moves too much: the loop's too
    models.clear()
    plan_mod.plan_needs([need], url=url, profile=prof, now_bytes=1000)
    assert models == [5e-6]  # its 1600 selected bytes alone are too many: the loop's only
    models.clear()
    plan_mod.plan_needs([need], url=url, profile=prof)
    assert models == [5e-6]


def test_a_small_read_of_two_tiles_makes_two_requests() -> None:
    """At the calling thread's cost per request (10 us by default), two tiles' ranges stay
    apart: at the loop's 150 us, with one request in flight, they were merged across the
    120 KiB between them."""
    import uuid

    import numpy as np

    import tessera

    arr = tessera.from_numpy(f"memory://plan-two-tiles/{uuid.uuid4().hex}",
                             np.zeros((1000, 1000), np.int32), tile=(256, 256))
    plan = arr.explain((slice(10, 30), slice(250, 270)))
    assert len(plan.requests) == 2 and plan.totals.nbytes < 40_000
    assert plan.estimate.seconds < 1e-4
