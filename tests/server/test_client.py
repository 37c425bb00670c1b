"""The pushdown client and the read path's use of it, in-process (httpx's ASGI transport
over a memory store): where arrays lie below a server's root, when the server is asked,
and how reads account for it."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import httpx
import numpy as np
import pytest

import tessera
from tessera.pushdown.client import PushdownClient, relative_path
from tessera.server.app import create_app
from tessera.storage.url import parse_store_url

TOKEN = "client-test-token-123456"


@pytest.mark.parametrize("root, target, expected", [
    ("s3://b", "s3://b/arrays/a", "arrays/a"),
    ("s3://b/arrays", "s3://b/arrays/a", "a"),
    ("s3://b/arrays", "s3://b/arrays", ""),
    ("s3://b/arr", "s3://b/arrays/a", None),
    ("s3://b", "s3://c/a", None),
    ("s3://b", "gs://b/a", None),
    ("file:///data", "file:///data/x/y", "x/y"),
    ("file:///data", "file:///database/x", None),
    ("memory://", "memory://m/a", "m/a"),
])
def test_relative_path(root: str, target: str, expected: str | None) -> None:
    assert relative_path(parse_store_url(root), parse_store_url(target)) == expected


class CountingTransport(httpx.AsyncBaseTransport):
    def __init__(self, app: Any) -> None:
        self.inner = httpx.ASGITransport(app)
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return await self.inner.handle_async_request(request)


@pytest.fixture
def served() -> tuple[tessera.Array, np.ndarray, CountingTransport]:
    root = f"memory://client-test-{uuid.uuid4().hex[:8]}"
    data = np.arange(40 * 40, dtype=np.float32).reshape(40, 40)
    tessera.from_numpy(f"{root}/a", data, tile=(10, 10), codec="zstd")
    transport = CountingTransport(create_app(tessera.open_store(root), token=TOKEN))
    client = PushdownClient("http://pushdown", token=f"  {TOKEN}\n", transport=transport)
    return tessera.open_array(f"{root}/a", pushdown=client), data, transport


def test_a_read_that_plans_no_pushdown_never_asks_the_server(served: Any) -> None:
    arr, data, transport = served
    assert np.array_equal(arr.read((slice(0, 10), slice(0, 10)), method="get"), data[:10, :10])
    assert np.array_equal(arr[3:5, 7], data[3:5, 7])  # auto on a fast local profile
    assert "pushdown" not in arr.last_read.plan.methods
    assert transport.paths == []


@pytest.mark.parametrize("stream", [False, True])
def test_forced_pushdown_asks_once_where_the_array_is_then_batches(served: Any,
                                                                   stream: bool) -> None:
    arr, data, transport = served
    arr.pushdown.config = dataclasses.replace(arr.pushdown.config, stream=stream)
    for _ in range(2):
        assert np.array_equal(arr.read((slice(None), 3), method="pushdown"), data[:, 3])
    # whole answers: 4 tiles spread over batch_parallel = 4 requests; a streamed answer
    # overlaps within one; the token was stripped: all 200s
    per_read = 1 if stream else 4
    assert transport.paths == ["/v1/info"] + ["/v1/read"] * (2 * per_read)
    stats = arr.last_read.stats.by_method["pushdown"]
    assert stats.requests == per_read and stats.failures == 0
    assert stats.bytes_received > 40 * 4 and stats.compute_gb_s > 0
    assert arr.last_read.stats.cost_usd("s3") > 0


def test_batches_respect_items_and_bytes(served: Any) -> None:
    arr, data, transport = served
    arr.pushdown = PushdownClient("http://pushdown", token=TOKEN, transport=transport,
                                  config=tessera.config.PushdownConfig(batch_items=3))
    assert np.array_equal(arr.read(method="pushdown"), data)  # 16 tiles: 6 requests
    assert arr.last_read.stats.by_method["pushdown"].requests == 6
    def batches(sizes: list[int], **config: Any) -> list[list[int]]:
        client = PushdownClient("http://pushdown", config=tessera.config.PushdownConfig(
            **{"stream": False, **config}))
        arr.pushdown = client
        reader = arr._pushdown_reader()
        assert reader is not None
        return reader.batches(sizes)

    assert batches([10] * 4, batch_items=3, batch_parallel=1) == [[0, 1, 2], [3]]
    assert batches([10, 10, 30, 5], batch_bytes=25, batch_parallel=1) == [[0, 1], [2], [3]]
    # spread over at least batch_parallel requests, so server work and transfers overlap
    assert batches([10] * 8, batch_parallel=4) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    # a streamed answer overlaps within one request: batch_parallel does not apply
    assert batches([10] * 8, batch_parallel=4, stream=True) == [list(range(8))]
    assert batches([10] * 3, batch_parallel=4) == [[0], [1], [2]]
    assert batches([10] * 9, batch_parallel=2, batch_items=3) == [[0, 1, 2], [3, 4, 5],
                                                                   [6, 7, 8]]


def test_pushdown_setter_checks_its_value(served: Any) -> None:
    arr, _, _ = served
    arr.pushdown = "http://127.0.0.1:1"
    assert isinstance(arr.pushdown, PushdownClient)
    arr.pushdown = None
    with pytest.raises(TypeError, match="pushdown must be"):
        arr.pushdown = 8700
    with pytest.raises(tessera.ConfigError, match="http://"):
        arr.pushdown = "ftp://x"


def test_forced_pushdown_without_a_server_is_a_config_error(served: Any) -> None:
    arr, _, _ = served
    arr.pushdown = None
    with pytest.raises(tessera.ConfigError, match="needs a pushdown server"):
        arr.read((0, 0), method="pushdown")


@pytest.mark.parametrize("stream", [True, False])
def test_answers_that_do_not_fit_their_request_fall_back(served: Any, stream: bool) -> None:
    arr, data, transport = served
    arr.pushdown.config = dataclasses.replace(arr.pushdown.config, stream=stream)
    service = transport.inner.app.state.pushdown.service

    async def wrong(items: Any) -> Any:
        return [{"cells": np.zeros(1, np.float32)} for _ in items], 0.0

    async def wrong_each(items: Any) -> Any:
        for i, _ in enumerate(items):
            yield i, {"cells": np.zeros(1, np.float32)}

    service.read, service.answers = wrong, wrong_each
    assert np.array_equal(arr.read((slice(None), 3), method="pushdown"), data[:, 3])
    assert arr.last_read.pushdown_fallbacks == 4
    assert "expected (10, 1)" in (arr.last_read.pushdown_error or "")


def test_open_array_takes_the_server_and_token_from_the_environment(
        served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    arr, _, _ = served
    monkeypatch.setenv("TESSERA_PUSHDOWN_URL", "http://10.1.2.3:8700/")
    monkeypatch.setenv("TESSERA_PUSHDOWN_TOKEN", "from-the-environment-0001")
    opened = tessera.open_array(arr.uri)
    assert opened.pushdown is not None and opened.pushdown.url == "http://10.1.2.3:8700"
    assert opened.pushdown.config.token == "from-the-environment-0001"
    assert tessera.open_array(arr.uri, pushdown_token="given-token-000000001").pushdown \
        .config.token == "given-token-000000001"  # type: ignore[union-attr]
    monkeypatch.setenv("TESSERA_PUSHDOWN_URL", "10.1.2.3:8700")
    with pytest.raises(tessera.ConfigError, match="http://"):
        tessera.open_array(arr.uri)


def test_fallbacks_are_counted_by_reason_and_warned_about_once_per_handle(
        served: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        ) -> None:
    from tessera.pushdown.framing import ItemError

    arr, data, transport = served
    service = transport.inner.app.state.pushdown.service  # type: ignore[attr-defined]

    async def failing(items: list[Any]) -> tuple[list[Any], float]:
        return [ItemError(502, f"store failed for {i.key}") for i in items], 0.001

    async def failing_each(items: list[Any]) -> Any:  # what a streamed answer asks
        for i, item in enumerate(items):
            yield i, ItemError(502, f"store failed for {item.key}")

    monkeypatch.setattr(service, "read", failing)
    monkeypatch.setattr(service, "answers", failing_each)
    reason = "tile failed on the server (HTTP 502)"
    with caplog.at_level("WARNING", logger="tessera.pushdown"), \
            pytest.warns(tessera.PushdownFallbackWarning) as warned:
        for col in (3, 4, 25):
            got = arr.read((slice(None), col), method="pushdown")
            assert np.array_equal(got, data[:, col])  # right data, fetched directly
            report = arr.last_read
            assert report.pushdown_fallbacks == 4
            assert report.pushdown_fallback_reasons == {reason: 4}
            assert "store failed for" in report.pushdown_fallback_details[reason]
            assert reason in str(report)
    assert len(warned) == 1  # once per handle and reason, not once per read
    message = str(warned[0].message)
    assert reason in message and arr.uri in message and "store failed for" in message
    assert warned[0].filename == __file__  # points at the read, not at Tessera's insides
    assert [r.getMessage() for r in caplog.records if r.name == "tessera.pushdown"] == [
        message]
    # Another reason (the server cannot be reached) is news: warned about once more.
    arr.pushdown = PushdownClient("http://127.0.0.1:1", token=TOKEN)
    with pytest.warns(tessera.PushdownFallbackWarning, match="unreachable"):
        assert np.array_equal(arr.read((slice(None), 5), method="pushdown"), data[:, 5])
    # Another handle on the same array warns for itself.
    other = tessera.open_array(arr.uri, pushdown=PushdownClient(
        "http://pushdown", token=TOKEN, transport=transport))
    with pytest.warns(tessera.PushdownFallbackWarning, match="HTTP 502"):
        other.read((slice(None), 6), method="pushdown")


def test_reads_without_fallbacks_warn_about_nothing(served: Any) -> None:
    import warnings

    arr, data, _ = served
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(arr.read((slice(None), 7), method="pushdown"), data[:, 7])
    assert arr.last_read.pushdown_fallbacks == 0
    assert arr.last_read.pushdown_fallback_reasons == {}
