"""A read holds at most its output plus its window (ReadConfig.window_bytes): tiles take
their bytes before their request and give them back once placed, on every store that
reads through the event loop; results are those of an unbounded read."""

from __future__ import annotations

import dataclasses
import uuid

import numpy as np
import pytest

import tessera
from tessera.array.read import direct
from tessera.array.read.fetch import TileFetcher
from tessera.config import ReadConfig
from tessera.errors import ConfigError


@pytest.fixture(params=["memory", "s3"])
def remote_url(request: pytest.FixtureRequest,
               monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict[str, str]]:
    """Stores read through the event loop's fetcher (a folder store reads large reads in
    per-thread batches of one tile at a time instead; small reads of memory run on the
    calling thread, one tile at a time, unless made to take the loop as here)."""
    monkeypatch.setattr(direct, "NOW_BYTES", 0)
    if request.param == "memory":
        return f"memory://window-{uuid.uuid4().hex[:12]}", {}
    server = request.getfixturevalue("s3_server")
    return server.unique_url(), dict(server.storage_options())


def _array(url: str, options: dict[str, str], codec: str | None) -> tuple[tessera.Array,
                                                                            np.ndarray]:
    data = np.random.default_rng(3).normal(0, 100, (600, 600)).astype(np.float32)
    arr = tessera.from_numpy(f"{url.rstrip('/')}/w-{codec}", data, tile=(100, 100),
                             codec=codec, storage_options=options)
    return arr, data


def _charges(arr: tessera.Array) -> list[int]:
    report = arr.last_read
    assert report is not None
    fetcher = TileFetcher(None, arr.schema, report.tile_reads, report.plan, arr.uri,  # type: ignore[arg-type]
                          limit=object())  # type: ignore[arg-type]
    return [fetcher.held_bytes(i) for i in range(len(report.tile_reads))]


@pytest.mark.parametrize("codec", [None, "zstd"])
@pytest.mark.parametrize("sel", [(slice(None), slice(None)), (slice(None), slice(150, 232)),
                                 (slice(5, 590, 3), slice(None))])
def test_a_read_holds_at_most_its_window(remote_url, codec, sel) -> None:
    arr, data = _array(*remote_url, codec)
    np.testing.assert_array_equal(arr[sel], data[sel])  # the default window
    unbounded_peak = arr.last_read.window_peak_bytes
    charges = _charges(arr)
    assert unbounded_peak <= sum(charges)
    window = 3 * max(charges)
    arr.reads = dataclasses.replace(arr.reads, window_bytes=window)
    np.testing.assert_array_equal(arr[sel], data[sel])
    assert 0 < arr.last_read.window_peak_bytes <= window
    arr.reads = dataclasses.replace(arr.reads, window_bytes=1)  # one tile at a time
    np.testing.assert_array_equal(arr[sel], data[sel])
    assert arr.last_read.window_peak_bytes == max(charges)


def test_a_tile_charges_its_encoded_and_decoded_bytes(remote_url) -> None:
    raw, _ = _array(*remote_url, None)
    raw.read(method="get")
    assert set(_charges(raw)) == {100 * 100 * 4}  # a raw tile is a view of its bytes
    packed, _ = _array(*remote_url, "zstd")
    packed.read(method="get")
    lengths = [r.length for r in packed.last_read.tile_reads]
    assert _charges(packed) == [n + 100 * 100 * 4 for n in lengths]


def test_points_and_unions_take_the_window(remote_url) -> None:
    arr, data = _array(*remote_url, "zstd")
    arr.reads = dataclasses.replace(arr.reads, window_bytes=1)
    pts = np.array([[0, 0], [599, 599], [250, 120], [250, 121]])
    got = arr.read(tessera.Points(tuple(pts.T)))
    np.testing.assert_array_equal(got, data[tuple(pts.T)])
    assert arr.last_read.window_peak_bytes > 0
    boxes = [(slice(0, 300), slice(0, 300)), (slice(250, 600), slice(250, 600))]
    for out, box in zip(arr.read(tessera.Hyperslabs(boxes)), boxes, strict=True):
        np.testing.assert_array_equal(out, data[box])
    assert 0 < arr.last_read.window_peak_bytes <= max(_charges(arr))


def test_window_bytes_is_checked() -> None:
    for bad in (0, -5, True, 1.5, "8"):
        with pytest.raises(ConfigError, match="window_bytes must be a whole number"):
            ReadConfig(window_bytes=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="TESSERA_READ_WINDOW_BYTES"):
        ReadConfig.from_env({"TESSERA_READ_WINDOW_BYTES": "lots"})
