"""The micro-profiler measures, saves per endpoint, and plans pick the saved profile up."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tessera
from tessera.query.profiler import endpoint_id, load_profile, profile_dir, save_profile


def test_quick_profile_is_measured_saved_and_reused(store_url, tmp_path) -> None:
    url, options = store_url
    steps = []
    prof = tessera.profile_store(url, quick=True, progress=lambda s, f: steps.append(f),
                                 **options)
    assert [n for n, _ in prof.bandwidth] == [1, 2, 4, 8, 16, 32]
    assert all(b > 0 for _, b in prof.bandwidth) and prof.request_latency_s > 0
    assert steps[-1] == pytest.approx(1.0)
    store = tessera.open_store(url, **options)
    # N_max: the most requests still within 90% of the peak (which level that is depends
    # on the machine's moment: on a loaded one the peak can fall at 16 or 32 requests)
    assert prof.concurrency == min(prof.n_max, store.config.max_concurrency)
    assert load_profile(store) == prof
    # Of a memory or folder store, the calling thread's requests are timed apart.
    assert (prof.now_request_s is not None) == store.aio.reads_now
    assert not [o for o in store.list() if "__tessera_profile" in o.key]  # scratch gone
    arr = tessera.from_numpy(f"{url.rstrip('/')}/p", np.zeros((8, 8)), storage_options=options)
    assert arr.profile == prof
    assert arr.explain((0, 0)).profile == prof.name


def test_endpoints_are_told_apart() -> None:
    a = tessera.open_store("s3://bucket/x", endpoint="http://127.0.0.1:1", allow_http=True,
                           region="us-east-1", skip_signature=True)
    b = tessera.open_store("s3://bucket/y", endpoint="http://127.0.0.1:2", allow_http=True,
                           region="us-east-1", skip_signature=True)
    assert endpoint_id(a) != endpoint_id(b)
    assert endpoint_id(tessera.open_store("file:///tmp/a")) == endpoint_id(
        tessera.open_store("file:///tmp/b")) == "file"


def test_damaged_or_foreign_profiles_are_ignored(tmp_path) -> None:
    store = tessera.open_store("memory://prof-damaged")
    prof = tessera.profile_store(store, quick=True, save=False)
    path = save_profile(prof, endpoint_id(store))
    assert path.parent == profile_dir() and load_profile(store) == prof
    path.write_text("{not json")
    assert load_profile(store) is None
    path.write_text(json.dumps({"format": "tessera.profile", "version": 99}))
    assert load_profile(store) is None


def test_pushdown_profiling_of_an_unreachable_server_names_it() -> None:
    from tessera.errors import PushdownError
    from tessera.testing.pushdown import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PushdownError, match=url.replace(".", r"\.")):
        tessera.profile_store("memory://x", pushdown=url, quick=True, save=False)


def test_pushdown_fit_follows_the_median_of_each_size() -> None:
    from tessera.query.profiler import _fit_pushdown

    # T = 2 ns/B * size + 25 ms, three samples per size, one of them stalled by 40 ms.
    line = [(size, 25e-3 + 2e-9 * size) for size in (64 << 10, 1 << 20, 3 << 20)]
    timings = [(n, t) for n, t in line for _ in range(3)]
    timings[-1] = (timings[-1][0], timings[-1][1] + 40e-3)
    alpha, beta = _fit_pushdown(timings)
    assert alpha == pytest.approx(2e-9, rel=1e-6) and beta == pytest.approx(25e-3, rel=1e-6)
    # A plain least-squares line through every sample would be tilted by the stall.
    sizes, secs = np.array(timings, dtype=np.float64).T
    assert np.polyfit(sizes, secs, 1)[0] > 4e-9


def test_pushdown_fit_of_one_size_and_of_lines_it_clips() -> None:
    from tessera.query.profiler import _fit_pushdown

    assert _fit_pushdown([(4096, 0.03), (4096, 0.01), (4096, 0.02)]) == (0.0, 0.02)
    # Times that fall with size: no negative alpha.
    assert _fit_pushdown([(1000, 0.004), (2000, 0.002)]) == (0.0, pytest.approx(0.006))
    # A line that would cross zero above size 0 (negative beta) goes through the origin.
    alpha, beta = _fit_pushdown([(1000, 0.001), (2000, 0.004)])
    assert alpha == pytest.approx(9.0 / 5e6) and beta == 1e-6


def test_the_client_work_is_measured_through_the_reader_and_kept(tmp_path) -> None:
    from tessera.array.calibrate import measure_calls
    from tessera.query.cost import DEFAULT_PROFILES

    store = tessera.open_store((tmp_path / "s").as_uri())
    seen = []

    def calls(s, prof):
        seen.append(prof)
        return measure_calls(s, prof, reads=5)

    prof = tessera.profile_store(store, quick=True, save=False, calls=calls)
    assert seen and seen[0].request_latency_s == prof.request_latency_s
    assert prof.call_s >= 0 and prof.tile_s >= 0
    assert not list((tmp_path / "s").iterdir())  # the scratch array and its folders went
    plain = tessera.profile_store(store, quick=True, save=False)  # the kind's defaults stay
    local = DEFAULT_PROFILES["local"]
    assert (plain.call_s, plain.tile_s) == (local.call_s, local.tile_s) and local.call_s > 0
    # A profile saved before the client's work was measured reads with the defaults.
    path = save_profile(prof, endpoint_id(store))
    doc = json.loads(path.read_text())
    del doc["profile"]["call_s"], doc["profile"]["tile_s"]
    path.write_text(json.dumps(doc))
    loaded = load_profile(store)
    assert loaded is not None and (loaded.call_s, loaded.tile_s) == (local.call_s, local.tile_s)


def test_a_plans_estimate_counts_the_client_work() -> None:
    import dataclasses

    from tessera.query.cost import DEFAULT_PROFILES

    arr = tessera.from_numpy("memory://prof-client", np.zeros((64, 64), np.int32),
                             tile=(16, 16))
    io = dataclasses.replace(DEFAULT_PROFILES["local"], call_s=0.0, tile_s=0.0)
    arr.profile = io
    bare = arr.explain((slice(0, 20), slice(0, 20))).estimate  # 4 tiles
    arr.profile = dataclasses.replace(io, call_s=1e-3, tile_s=1e-4)
    full = arr.explain((slice(0, 20), slice(0, 20))).estimate
    assert full.seconds == pytest.approx(bare.seconds + 1e-3 + 4e-4)
    assert full.dollars == bare.dollars
