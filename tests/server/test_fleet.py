"""A fleet of pushdown servers (``tessera.pushdown.fleet``), in-process (httpx's ASGI transport
over a memory store): each tile goes to one server by rendezvous hashing (a disjoint, stable
share per server), a server that is unreachable or busy hands its tiles to the next, reads
report requests per server, and with no server left the tiles are fetched directly."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import uuid
from typing import Any

import httpx
import numpy as np
import pytest

import tessera
from tessera.config import PushdownConfig
from tessera.errors import InvalidArgumentError
from tessera.pushdown.client import PushdownClient
from tessera.pushdown.fleet import PushdownFleet
from tessera.server.app import create_app

TOKEN = "fleet-test-token-1234567"


class Server(httpx.AsyncBaseTransport):
    """One in-process server; ``mode`` "up", "down" (connection refused) or "busy" (503)."""

    def __init__(self, app: Any) -> None:
        self.inner = httpx.ASGITransport(app)
        self.tiles: list[tuple[str, int]] = []
        self.mode = "up"
        self.reads_left: int | None = None  # dies (goes "down") after this many reads

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/read" and self.reads_left is not None:
            if self.reads_left == 0:
                self.mode = "down"
            self.reads_left -= 1
        if self.mode == "down":
            raise httpx.ConnectError("connection refused", request=request)
        if self.mode == "busy":
            return httpx.Response(503, json={"error": "busy"}, headers={"Retry-After": "1"})
        if request.url.path == "/v1/read":
            body = json.loads(await request.aread())
            self.tiles += [(r["key"], r["offset"]) for r in body["reads"]]
        return await self.inner.handle_async_request(request)


@pytest.fixture
def fleet() -> tuple[tessera.Array, np.ndarray, list[Server]]:
    root = f"memory://fleet-{uuid.uuid4().hex[:8]}"
    data = np.arange(60 * 60, dtype=np.float32).reshape(60, 60)
    tessera.from_numpy(f"{root}/a", data, tile=(10, 10), codec="zstd")
    servers = [Server(create_app(tessera.open_store(root), token=TOKEN)) for _ in range(3)]
    client = PushdownFleet([f"http://pd{i}" for i in range(3)], token=TOKEN,
                           transports=servers)
    return tessera.open_array(f"{root}/a", pushdown=client), data, servers


def test_each_tile_goes_to_one_server_and_always_the_same(fleet) -> None:
    arr, data, servers = fleet
    np.testing.assert_array_equal(arr.read((slice(None), slice(3, 57)), method="pushdown"),
                                  data[:, 3:57])
    shares = [set(s.tiles) for s in servers]
    assert all(shares)  # 36 tiles: every server got some
    assert sum(len(s) for s in shares) == len(set().union(*shares)) == 36  # disjoint
    report = arr.last_read
    assert report.pushdown_fallbacks == 0
    assert set(report.pushdown_servers) == {f"http://pd{i}" for i in range(3)}
    assert all(n >= 1 for n in report.pushdown_servers.values())
    assert sum(report.pushdown_servers.values()) == report.stats.by_method["pushdown"].requests
    for s in servers:
        s.tiles.clear()
    arr.read((slice(None), slice(3, 57)), method="pushdown")
    assert [set(s.tiles) for s in servers] == shares  # the same share again: caches stay warm


@pytest.mark.parametrize("trouble", ["down", "busy"])
def test_a_server_down_or_busy_hands_its_tiles_to_the_next(fleet, trouble) -> None:
    arr, data, servers = fleet
    servers[1].mode = trouble
    np.testing.assert_array_equal(arr.read((slice(None), slice(None)), method="pushdown"),
                                  data)
    assert arr.last_read.pushdown_fallbacks == 0  # the others answered for it
    assert not servers[1].tiles and len(set(servers[0].tiles) | set(servers[2].tiles)) == 36
    assert arr.last_read.pushdown_servers["http://pd0"] >= 1


def test_with_no_server_left_the_tiles_are_fetched_directly(fleet) -> None:
    arr, data, servers = fleet
    for s in servers:
        s.mode = "busy"
    with pytest.warns(tessera.PushdownFallbackWarning, match="no pushdown server"):
        np.testing.assert_array_equal(arr.read((slice(0, 20), slice(None)),
                                               method="pushdown"), data[:20])
    assert arr.last_read.pushdown_fallbacks == 12
    assert "no pushdown server" in (arr.last_read.pushdown_error or "")


def test_a_fleet_from_urls_and_its_bad_inputs() -> None:
    root = f"memory://fleet-{uuid.uuid4().hex[:8]}"
    tessera.from_numpy(f"{root}/a", np.zeros((4, 4)))
    arr = tessera.open_array(f"{root}/a", pushdown=["http://a:1", "http://b:1"])
    assert isinstance(arr.pushdown, PushdownFleet) and arr.pushdown.url == "http://a:1,http://b:1"
    joined = tessera.open_array(f"{root}/a", pushdown="http://a:1, http://b:1")
    assert isinstance(joined.pushdown, PushdownFleet) and len(joined.pushdown.clients) == 2
    with pytest.raises(InvalidArgumentError, match="at least one"):
        PushdownFleet([])
    with pytest.raises(InvalidArgumentError, match="repeat"):
        PushdownFleet(["http://a:1", "http://a:1"])


def test_two_servers_share_a_large_read_about_evenly() -> None:
    root = f"memory://fleet-{uuid.uuid4().hex[:8]}"
    data = np.arange(200 * 200, dtype=np.int32).reshape(200, 200)
    tessera.from_numpy(f"{root}/a", data, tile=(10, 10))
    servers = [Server(create_app(tessera.open_store(root), token=TOKEN)) for _ in range(2)]
    arr = tessera.open_array(f"{root}/a", pushdown=PushdownFleet(
        ["http://pd0", "http://pd1"], token=TOKEN, transports=servers))
    np.testing.assert_array_equal(arr.read(..., method="pushdown"), data)
    shares = [len(set(s.tiles)) for s in servers]
    assert sum(shares) == 400 and not set(servers[0].tiles) & set(servers[1].tiles)
    assert all(abs(n - 200) <= 40 for n in shares), shares  # within 20% of half each


def test_a_server_dying_mid_read_hands_the_rest_to_the_other(fleet) -> None:
    arr, data, servers = fleet
    arr.pushdown = PushdownFleet([f"http://pd{i}" for i in range(3)], token=TOKEN,
                                 transports=servers,
                                 config=tessera.config.PushdownConfig(batch_items=2))
    servers[0].reads_left = 1  # answers its first batch, then its connections are refused
    np.testing.assert_array_equal(arr.read(..., method="pushdown"), data)
    report = arr.last_read
    assert report.pushdown_fallbacks == 0  # every tile answered by a server
    assert servers[0].mode == "down" and servers[0].tiles  # it served some before dying
    assert report.stats.by_method["pushdown"].failures >= 1  # the refused attempt, counted
    assert len(set().union(*(set(s.tiles) for s in servers))) == 36


def test_a_busy_servers_retry_after_reaches_the_error() -> None:
    import asyncio

    from tessera.errors import PushdownError
    from tessera.pushdown.client import PushdownClient

    busy = Server(create_app(tessera.open_store("memory://fleet-busy"), token=TOKEN))
    busy.mode = "busy"  # 503 with Retry-After: 1
    client = PushdownClient("http://busy", token=TOKEN, transport=busy)
    with pytest.raises(PushdownError) as info:
        asyncio.run(client.info())
    assert info.value.status == 503 and info.value.retry_after_s == 1.0


class SlowServer(Server):
    """A server that stalls (accepts, never answers) or trickles its answer a few bytes
    at a time, slower than any deadline (each bounded, so a test on the old behaviour
    ends too)."""

    def __init__(self, app: Any, how: str) -> None:
        super().__init__(app)
        self.how = how
        self.arrivals = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != "/v1/read":
            return await super().handle_async_request(request)
        self.arrivals += 1
        if self.how == "stalled":
            await asyncio.sleep(30)
            raise httpx.ReadTimeout("stalled", request=request)
        answer = await super().handle_async_request(request)
        body = await answer.aread()

        class Trickle(httpx.AsyncByteStream):
            async def __aiter__(self):  # type: ignore[override]
                for i in range(0, min(len(body), 300), 2):  # 2 bytes per 0.1 s, 15 s at most
                    await asyncio.sleep(0.1)
                    yield body[i:i + 2]

        return httpx.Response(200, headers=answer.headers, stream=Trickle())


def _slow_fleet(how: str, timeout_s: float = 0.5):
    root = f"memory://fleet-{uuid.uuid4().hex[:8]}"
    data = np.arange(60 * 60, dtype=np.float32).reshape(60, 60)
    tessera.from_numpy(f"{root}/a", data, tile=(10, 10), codec="zstd")
    app = create_app(tessera.open_store(root), token=TOKEN)
    servers = [Server(app), SlowServer(app, how), Server(app)]
    config = dataclasses.replace(PushdownConfig.from_env(), timeout_s=timeout_s)
    client = PushdownFleet([f"http://pd{i}" for i in range(3)], token=TOKEN,
                           transports=servers, config=config)
    return tessera.open_array(f"{root}/a", pushdown=client), data, servers, client


@pytest.mark.parametrize("how", ["stalled", "trickle"])
def test_a_stalled_or_trickling_member_costs_one_deadline_then_is_left_out(how) -> None:
    """timeout_s is a deadline for the whole batch (a trickling answer once held a read as
    long as it trickled), and a member that misses it is left out like one that cannot be
    reached (a stopped member once cost the full timeout on every read)."""
    arr, data, servers, fleet = _slow_fleet(how)
    # a stalled member's batch goes to the next server; a trickled answer that began is
    # kept as far as it came, and the rest is fetched directly, with a warning
    with pytest.warns(tessera.errors.PushdownFallbackWarning) if how == "trickle" else \
            contextlib.nullcontext():
        got = arr.read((slice(None), slice(3, 57)), method="pushdown")
    np.testing.assert_array_equal(got, data[:, 3:57])
    assert servers[1].arrivals == 1
    assert not fleet.clients[1].available
    assert fleet.clients[0].available and fleet.clients[2].available
    np.testing.assert_array_equal(arr.read((slice(None), slice(0, 60)), method="pushdown"),
                                  data)
    assert servers[1].arrivals == 1  # not asked again while it is left out


def test_a_trickling_single_server_falls_back_with_a_warning() -> None:
    root = f"memory://fleet-{uuid.uuid4().hex[:8]}"
    data = np.arange(40 * 40, dtype=np.float32).reshape(40, 40)
    tessera.from_numpy(f"{root}/a", data, tile=(10, 10), codec="zstd")
    server = SlowServer(create_app(tessera.open_store(root), token=TOKEN), "trickle")
    config = dataclasses.replace(PushdownConfig.from_env(), timeout_s=0.5)
    client = PushdownClient("http://pd", token=TOKEN, transport=server, config=config)
    arr = tessera.open_array(f"{root}/a", pushdown=client)
    with pytest.warns(tessera.errors.PushdownFallbackWarning):
        out = arr.read((slice(None), slice(0, 40)), method="pushdown")
    np.testing.assert_array_equal(out, data)
    assert arr.last_read.pushdown_fallbacks > 0
    assert not client.available
