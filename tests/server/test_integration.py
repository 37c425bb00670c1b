"""``tessera serve`` as its own process on a free loopback port, serving the S3 test server:
reads through it equal direct reads (dense raw and compressed, sparse, unions, updates);
a server that goes away makes reads fall back; the CLI's start-up rules; profiling."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

import tessera
from tessera.testing import PushdownTestServer, S3TestServer

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def pushdown(s3_server: S3TestServer) -> Iterator[PushdownTestServer]:
    with PushdownTestServer(s3_server.url(""), storage_options=s3_server.storage_options()
                            ) as server:
        yield server


def random_selection(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[Any, ...]:
    sel: list[Any] = []
    for n in shape:
        kind = rng.integers(0, 4)
        if kind == 0:
            sel.append(int(rng.integers(0, n)))
        elif kind == 1:
            a, b = sorted(rng.integers(0, n + 1, 2))
            sel.append(slice(int(a), int(max(b, a + 1)), int(rng.integers(1, 4))))
        elif kind == 2:
            sel.append(sorted(set(rng.integers(0, n, int(rng.integers(1, 6))).tolist())))
        else:
            sel.append(slice(None))
    return tuple(sel)


@pytest.mark.parametrize("codec", [None, "zstd", "lz4"])
def test_random_selections_through_the_server_equal_direct_reads(
        s3_server: S3TestServer, pushdown: PushdownTestServer, codec: str | None) -> None:
    opts = s3_server.storage_options()
    uri = s3_server.unique_url("pd")
    rng = np.random.default_rng(7)
    data = rng.integers(-1000, 1000, (90, 70)).astype(np.int32)
    tessera.from_numpy(uri, data, tile=(32, 16), codec=codec, storage_options=opts)
    arr = tessera.open_array(uri, storage_options=opts, pushdown=pushdown.client())
    direct = tessera.open_array(uri, storage_options=opts)
    for _ in range(25):
        sel = random_selection(rng, data.shape)
        got = arr.read(sel, method="pushdown")
        assert np.array_equal(got, data[sel]), sel
        assert np.array_equal(got, direct.read(sel))
        report = arr.last_read
        assert report.pushdown_fallbacks == 0, report.pushdown_error
        assert report.plan.methods == {"pushdown": len(report.tile_reads)}
        assert report.stats.by_method["pushdown"].requests >= 1
        assert "range" not in report.stats.by_method and "get" not in {
            k for k, m in report.stats.by_method.items() if m.requests > 1}


def test_vector_cells_col_major_and_updates_through_the_server(
        s3_server: S3TestServer, pushdown: PushdownTestServer) -> None:
    opts = s3_server.storage_options()
    uri = s3_server.unique_url("pd-vec")
    schema = tessera.ArraySchema(
        [tessera.Dim("y", (0, 39), 16), tessera.Dim("x", (0, 29), 8)],
        [tessera.Attr("rgb", "3u1", 0, "zstd"), tessera.Attr("v", "<f8", -1.0, None)],
        cell_order="col-major")
    arr = tessera.create_array(uri, schema, storage_options=opts)
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 255, (40, 30, 3)).astype(np.uint8)
    v = rng.normal(size=(40, 30))
    arr.write({"rgb": rgb, "v": v})
    arr[5:9, 2:20] = {"rgb": np.zeros((4, 18, 3), np.uint8), "v": np.ones((4, 18))}
    rgb[5:9, 2:20] = 0
    v[5:9, 2:20] = 1
    arr.write_cells(([1, 30], [2, 3]), {"rgb": np.full((2, 3), 9, np.uint8),
                                        "v": np.array([7.0, 8.0])})
    rgb[[1, 30], [2, 3]] = 9
    v[[1, 30], [2, 3]] = [7.0, 8.0]
    reader = tessera.open_array(uri, storage_options=opts, pushdown=pushdown.client())
    for sel in [(slice(None), slice(None)), (slice(3, 33, 3), [2, 3, 29]), (30, slice(None))]:
        got = reader.read(sel, method="pushdown")
        assert np.array_equal(got["rgb"], rgb[sel]) and np.array_equal(got["v"], v[sel])
        assert reader.last_read.pushdown_fallbacks == 0
    boxes = tessera.Hyperslabs([(slice(0, 20), slice(0, 10)), (slice(10, 40), slice(5, 6))])
    got_boxes = reader.read(boxes, attrs=["v"], method="pushdown")
    assert np.array_equal(got_boxes[0]["v"], v[0:20, 0:10])
    assert np.array_equal(got_boxes[1]["v"], v[10:40, 5:6])


def test_sparse_reads_through_the_server_equal_direct_reads(
        s3_server: S3TestServer, pushdown: PushdownTestServer) -> None:
    opts = s3_server.storage_options()
    uri = s3_server.unique_url("pd-sparse")
    schema = tessera.ArraySchema([tessera.Dim("i", (0, 9999), 1000),
                                  tessera.Dim("j", (0, 9999), 1000)],
                                 [tessera.Attr("w", "<f4", 0, "zstd")], sparse=True,
                                 capacity=500)
    arr = tessera.create_array(uri, schema, storage_options=opts)
    rng = np.random.default_rng(3)
    for _ in range(3):  # several fragments, big enough to live in data objects
        ij = rng.integers(0, 10000, (2, 20000))
        arr.write_cells((ij[0], ij[1]), rng.normal(size=20000).astype(np.float32))
    arr.delete_cells((ij[0][:50], ij[1][:50]))
    reader = tessera.open_array(uri, storage_options=opts, pushdown=pushdown.client())
    direct = tessera.open_array(uri, storage_options=opts)
    for sel in [(slice(100, 3000), slice(None)), (slice(None), slice(5000, 5100)),
                ([int(ij[0][60]), int(ij[0][61])], slice(None)), ...]:
        got = reader.read(sel, method="pushdown")
        want = direct.read(sel)
        assert len(got) == len(want)
        assert all(np.array_equal(a, b) for a, b in zip(got.coords, want.coords, strict=True))
        assert np.array_equal(got.values["w"], want.values["w"])
        assert reader.last_read.pushdown_fallbacks == 0
        assert reader.last_read.stats.by_method["pushdown"].requests >= 1
    # Only the cells in the box cross the link: far fewer bytes than the tiles hold.
    reader.read((slice(0, 200), slice(0, 200)), method="pushdown")
    pushed = reader.last_read.stats.by_method["pushdown"].bytes_received
    direct.read((slice(0, 200), slice(0, 200)))
    assert pushed < direct.last_read.stats.bytes_received / 5


def test_reads_fall_back_when_the_server_goes_away(s3_server: S3TestServer) -> None:
    opts = s3_server.storage_options()
    uri = s3_server.unique_url("pd-down")
    data = np.arange(64 * 64, dtype=np.int64).reshape(64, 64)
    tessera.from_numpy(uri, data, tile=(16, 16), codec="zstd", storage_options=opts)
    server = PushdownTestServer(s3_server.url(""), storage_options=opts).start()
    arr = tessera.open_array(uri, storage_options=opts, pushdown=server.client())
    assert np.array_equal(arr.read((slice(None), 3), method="pushdown"), data[:, 3])
    assert arr.last_read.pushdown_fallbacks == 0
    # SIGTERM: uvicorn shuts down gracefully, then re-raises the signal
    assert server.stop() in (0, -signal.SIGTERM)
    assert '"event": "stop"' in server.logs()
    got = arr.read((slice(None), slice(3, 5)), method="pushdown")
    assert np.array_equal(got, data[:, 3:5])
    assert arr.last_read.pushdown_fallbacks == 4
    assert server.url in (arr.last_read.pushdown_error or "")
    # for a while after that, auto plans leave the unreachable server out, and say nothing
    # of it: they do not wait on it again
    arr.profile = tessera.StoreProfile("slow", ((1, 1e6),), 0.02, 8, 1e-9, 0.002)
    assert np.array_equal(arr.read((slice(None), 9)), data[:, 9])
    assert "pushdown" not in arr.last_read.plan.methods
    assert arr.last_read.pushdown_fallbacks == 0
    # a server that does not serve the array: every tile fetched directly, reason given
    with PushdownTestServer(s3_server.url("elsewhere"), storage_options=opts) as other:
        arr.pushdown = other.client()
        assert np.array_equal(arr.read((1, slice(None)), method="pushdown"), data[1])
        assert "does not hold the array" in (arr.last_read.pushdown_error or "")


def test_a_wrong_token_falls_back_and_says_so(s3_server: S3TestServer,
                                              pushdown: PushdownTestServer) -> None:
    opts = s3_server.storage_options()
    uri = s3_server.unique_url("pd-token")
    tessera.from_numpy(uri, np.ones((8, 8)), tile=(4, 4), storage_options=opts)
    arr = tessera.open_array(uri, storage_options=opts, pushdown=pushdown.url,
                             pushdown_token="not-the-right-token")
    assert arr.read(method="pushdown").sum() == 64
    assert "401" in (arr.last_read.pushdown_error or "")


def test_auto_pushes_down_narrow_columns_of_big_tiles(
        s3_server: S3TestServer, pushdown: PushdownTestServer) -> None:
    opts = s3_server.storage_options()
    uri = s3_server.unique_url("pd-auto")
    data = np.arange(512 * 512, dtype=np.int32).reshape(512, 512)
    tessera.from_numpy(uri, data, tile=(256, 256), codec="zstd", storage_options=opts)
    arr = tessera.open_array(uri, storage_options=opts, pushdown=pushdown.client())
    arr.profile = tessera.StoreProfile("slow link", ((1, 10e6), (8, 10e6)), 0.02, 8, 1e-9,
                                       0.002)
    plan = arr.explain((slice(None), 7))
    assert plan.methods == {"pushdown": 2}
    assert np.array_equal(arr[:, 7], data[:, 7])
    assert arr.last_read.stats.bytes_received < 3 * 512 * 4 + 2 * 4096  # cells + metadata


def test_profiling_measures_alpha_and_beta(s3_server: S3TestServer,
                                           pushdown: PushdownTestServer) -> None:
    opts = s3_server.storage_options()
    url = s3_server.unique_url("pd-prof")
    prof = tessera.profile_store(url, pushdown=pushdown.client(), quick=True, **opts)
    assert prof.has_pushdown
    assert prof.pushdown_alpha_s_per_byte is not None and prof.pushdown_beta_s is not None
    assert prof.pushdown_alpha_s_per_byte >= 0 and prof.pushdown_beta_s > 0
    assert tessera.load_profile(tessera.open_store(url, **opts)) == prof
    assert not [o for o in tessera.open_store(url, **opts).list()]  # scratch removed


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tessera.cli.main", *args],
                          capture_output=True, text=True, timeout=60)


def test_serve_refuses_to_start_without_a_token(tmp_path: Any) -> None:
    done = run_cli("serve", tmp_path.as_uri(), "--port", "1")
    assert done.returncode == 1 and "--token-file" in done.stderr
    done = run_cli("serve", tmp_path.as_uri(), "--insecure-no-auth", "--host", "0.0.0.0")
    assert done.returncode == 1 and "loopback" in done.stderr
    short = tmp_path / "token"
    short.write_text("short")
    done = run_cli("serve", tmp_path.as_uri(), "--token-file", str(short))
    assert done.returncode == 1 and "at least 16" in done.stderr
    done = run_cli("serve", tmp_path.as_uri(), "--token-file", str(tmp_path / "none"))
    assert done.returncode == 1 and "cannot read token file" in done.stderr


def test_insecure_mode_serves_loopback_and_logs_json(tmp_path: Any) -> None:
    data = np.arange(100.0).reshape(10, 10)
    tessera.from_numpy((tmp_path / "a").as_uri(), data, tile=(5, 5))
    with PushdownTestServer(tmp_path.as_uri(), insecure=True) as server:
        arr = tessera.open_array((tmp_path / "a").as_uri(), pushdown=server.url)
        assert np.array_equal(arr.read((slice(None), 2), method="pushdown"), data[:, 2])
        assert arr.last_read.pushdown_fallbacks == 0
        server.stop()
        logs = server.logs()
    assert '"event": "start"' in logs and '"auth": false' in logs
    assert '"path": "/v1/read"' in logs and '"request_id"' in logs


def test_the_server_reads_image_columns_unchanged(s3_server: S3TestServer,
                                                  pushdown: PushdownTestServer) -> None:
    """Tile-major fragments (image columns) through the pushdown server: one image's Sf_k
    sliced out of its group's tiles beside the store, equal to the direct read."""
    from tessera.images import ImageColumns

    opts = s3_server.storage_options()
    url = s3_server.unique_url("pd-images")
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (6, 64, 64, 3), dtype=np.uint8)
    ImageColumns.create(url, size=(64, 64), group=4, storage_options=opts,
                        cache=None).append(images)
    cols = ImageColumns.open(url, storage_options=opts, cache=None)
    direct = cols.read([1, 5], k=10, output="coefficients")
    cols.coeffs.pushdown = pushdown.client()
    names = [f"d{d:02d}" for d in range(10)]
    got = cols.coeffs.read(([1, 5], slice(None), slice(None), slice(None)), attrs=names,
                           method="pushdown")
    assert np.array_equal(np.concatenate([got[n] for n in names], axis=-1), direct)
    assert set(cols.coeffs.last_read.plan.methods) == {"pushdown"}


def test_workers_serve_one_port_from_several_processes(tmp_path: Any) -> None:
    data = np.arange(400.0).reshape(20, 20)
    tessera.from_numpy((tmp_path / "a").as_uri(), data, tile=(5, 5))
    with PushdownTestServer(tmp_path.as_uri(), extra_args=["--workers", "2"],
                            start_timeout_s=90) as server:
        pids = set()
        for _ in range(400):  # a fresh connection each: the kernel picks a process for each
            got = httpx.get(f"{server.url}/v1/info",
                            headers={"Authorization": f"Bearer {server.token}"})
            assert got.status_code == 200
            pids.add(got.json()["pid"])
            if len(pids) == 2:
                break
        assert len(pids) == 2 and server.pid not in pids  # two workers, not the parent
        arr = tessera.open_array((tmp_path / "a").as_uri(), pushdown=server.client())
        for _ in range(3):
            assert np.array_equal(arr.read((slice(None), 7), method="pushdown"), data[:, 7])
            assert arr.last_read.pushdown_fallbacks == 0
        server.stop()
        logs = server.logs()
    assert '"workers": 2' in logs and logs.count('"event": "worker_start"') == 2
