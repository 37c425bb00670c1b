"""Plans rebuilt from a template (``tessera.query.plan_cache``) equal the plans the planner
makes afresh, for every shape of box, codec, profile and method; and the cache keeps its
bounds."""

from __future__ import annotations

import dataclasses
import uuid

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from tessera.config import Config
from tessera.query.cost import DEFAULT_PROFILES
from tessera.query.plan import Plan
from tessera.query.plan_cache import PlanCache


def _plain(plan: Plan) -> tuple[object, ...]:
    return (plan.method, plan.phi, plan.profile, plan.pricing,
            [(c.need.tile, c.method, c.requests.tolist(), c.mix) for c in plan.choices],
            plan.requests, plan.totals, plan.estimate)


@st.composite
def cases(draw: st.DrawFn):
    ndim = draw(st.integers(1, 3))
    tile = [draw(st.sampled_from([4, 8, 16])) for _ in range(ndim)]
    shape = [t * draw(st.integers(1, 3)) + draw(st.integers(0, 3)) for t in tile]
    codec = draw(st.sampled_from([None, "zstd"]))
    block = draw(st.sampled_from([0, 64]))
    boxes = []
    for _ in range(4):
        extent = [draw(st.integers(1, n)) for n in shape]
        boxes.append([(draw(st.integers(0, n - e)), e) for n, e in zip(shape, extent,
                                                                        strict=True)])
        # the same box moved by a few cells: the cache's reason to be
        boxes.append([(min(n - e, a + draw(st.integers(0, 3))), e)
                      for (a, e), n in zip(boxes[-1], shape, strict=True)])
    return (tuple(shape), tuple(tile), codec, block, boxes,
            draw(st.sampled_from(["local", "cloud"])),
            draw(st.sampled_from(["auto", "get", "merge", "fetch"])),
            draw(st.sampled_from([0.0, 100.0])), draw(st.booleans()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_rebuilt_plans_equal_fresh_ones(case) -> None:
    shape, tile, codec, block, boxes, profile, method, phi, two = case
    data = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    url = f"memory://plan-cache-{uuid.uuid4().hex}"
    config = Config.from_env({"TESSERA_WRITE_BLOCK_BYTES": str(block)})
    arr = tessera.from_numpy(url, data, tile=tile, codec=codec, config=config)
    if two:  # a second fragment over part of the array: tiles of two fragments
        arr.write({"data": data[tuple(slice(0, max(1, n // 2)) for n in shape)]},
                  origin=(0,) * len(shape))
    fresh = tessera.open_array(url, config=dataclasses.replace(
        config, planner=dataclasses.replace(config.planner, plan_cache_bytes=0)))
    cached = tessera.open_array(url, config=config)
    for h in (fresh, cached):
        h.profile = DEFAULT_PROFILES[profile]
    for box in boxes:
        sel = tuple(slice(a, a + e) for a, e in box)
        assert _plain(cached.explain(sel, method=method, phi=phi)) == \
            _plain(fresh.explain(sel, method=method, phi=phi))
        np.testing.assert_array_equal(cached.read(sel, method=method, phi=phi), data[sel]
                                      if not two else fresh.read(sel, method=method, phi=phi))
    assert fresh._plans.hits == 0


def test_a_moved_crop_reuses_the_plan_and_the_cache_stays_bounded() -> None:
    data = np.zeros((512, 512), np.int32)
    arr = tessera.from_numpy("memory://plan-cache-moved", data, tile=(256, 256))
    for r in range(0, 200, 10):  # plans (reads of a footprint read before take its recipe)
        arr.explain((slice(r, r + 20), slice(30, 50)))
    assert arr._plans.hits == 19
    small = PlanCache(2000)
    plan = arr.explain((slice(0, 20), slice(0, 20)))
    needs = [c.need for c in plan.choices]
    for width in range(1, 40):
        moved = [dataclasses.replace(n, ranges=n.ranges[:, :1] + [[0, width]]) for n in needs]
        small.plan(moved, ("auto",), lambda _, p=plan: p)
    assert small._cache.nbytes <= 2000
