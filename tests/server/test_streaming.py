"""Streamed ``/v1/read`` answers: the framing's records decode however the bytes are cut and
in whatever order items complete; the server sends each item as soon as it is answered,
holds its slot until the stream ends, and stops at its timeout leaving the rest to the
client; the client places what arrived and fetches the rest itself."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera
from tessera.config import ServerConfig
from tessera.errors import ProtocolError
from tessera.pushdown.client import PushdownClient
from tessera.pushdown.framing import (
    ItemError,
    StreamDecoder,
    encode_record,
    stream_end,
    stream_prefix,
)
from tessera.pushdown.read_items import Index, Slice, TileItem, encode_read_request
from tessera.server.app import create_app

TOKEN = "stream-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

results_st = st.lists(st.one_of(
    st.builds(ItemError, st.sampled_from([404, 422, 500]), st.text(max_size=20)),
    st.builds(lambda n, dt: {"cells": np.arange(n, dtype=dt)},
              st.integers(0, 300), st.sampled_from(["<i4", "<f8", "|u1"]))), min_size=1,
    max_size=12)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, ItemError) or isinstance(b, ItemError):
        return bool(a == b)
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype
                                        for k in a)


@settings(max_examples=60, deadline=None)
@given(results_st, st.randoms(use_true_random=False), st.lists(st.integers(1, 200),
                                                               max_size=30))
def test_records_decode_in_any_order_and_any_cut(results: list[Any], rnd: Any,
                                                 cuts: list[int]) -> None:
    order = list(range(len(results)))
    rnd.shuffle(order)
    body = b"".join(bytes(c) for c in [*stream_prefix(),
                                       *(c for i in order for c in encode_record(i,
                                                                                 results[i])),
                                       *stream_end(0.5, len(results))])
    dec, got, at = StreamDecoder(len(results)), [], 0
    for size in [*cuts, len(body)]:
        got += dec.feed(body[at:at + size])
        at += size
    assert [i for i, _ in got] == order  # each once, as they came
    done = dec.finish()
    assert dec.ended and done.server_s == 0.5
    assert all(_same(a, b) for a, b in zip(done.results, results, strict=True))


def test_a_stream_cut_short_names_what_it_did_not_carry() -> None:
    body = b"".join(bytes(c) for c in [*stream_prefix(),
                                       *encode_record(1, {"cells": np.ones(4, "<i4")})])
    dec = StreamDecoder(3)
    assert [i for i, _ in dec.feed(body[:-3])] == []  # the record is not whole yet
    assert [i for i, _ in dec.feed(body[-3:])] == [1]
    done = dec.finish()
    assert not dec.ended
    assert [type(r).__name__ for r in done.results] == ["ItemError", "dict", "ItemError"]
    assert done.results[0].status == 502 and "stopped before" in done.results[0].error


@pytest.mark.parametrize("body, message", [
    (b"TSPD\x01\x00\x00\x00", "not a streamed"),
    (b"".join(bytes(c) for c in [*stream_prefix(), *encode_record(5, ItemError(404, "x"))]),
     "out of range"),
    (b"".join(bytes(c) for c in [*stream_prefix(), *encode_record(0, ItemError(404, "x")),
                                 *encode_record(0, ItemError(404, "x"))]), "repeated"),
    (b"".join(bytes(c) for c in [*stream_prefix(), *stream_end(0.1, 2)]), "ended with 0"),
    (b"".join(bytes(c) for c in [*stream_prefix(), *encode_record(0, ItemError(404, "x")),
                                 *encode_record(1, ItemError(404, "x")),
                                 *stream_end(0.1, 2)]) + b"!", "after its end"),
])
def test_malformed_streams_are_protocol_errors(body: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        StreamDecoder(2).feed(body)


@pytest.fixture
def served(tmp_path: Path) -> tuple[Any, tessera.Array, np.ndarray]:
    root = tmp_path / "root"
    data = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
    arr = tessera.from_numpy((root / "arr").as_uri(), data, tile=(16, 16))
    app = create_app(tessera.open_store(root.as_uri()), token=TOKEN,
                     config=ServerConfig(request_timeout_s=5))
    return app, arr, data


def _items(arr: tessera.Array) -> list[TileItem]:
    arr.read((slice(None), 5))  # four tiles down column 5
    return [TileItem("arr", r.key, r.offset, r.length, None, r.crc32, "<i4", (), (16, 16),
                     "row-major", (Slice(0, 16, 1), Index((5,))), checksum=r.checksum)
            for r in arr.last_read.tile_reads]


def _post(app: Any, body: bytes) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app),
                                     base_url="http://pushdown") as c:
            return await c.post("/v1/read", content=body, headers=AUTH)

    return asyncio.run(go())


def test_a_streamed_answer_carries_what_a_whole_one_does(served: Any) -> None:
    app, arr, data = served
    items = _items(arr)
    streamed = _post(app, encode_read_request(items, stream=True))
    assert streamed.status_code == 200 and streamed.content[:4] == b"TSPS"
    dec = StreamDecoder(len(items))
    dec.feed(streamed.content)
    assert dec.ended
    for k, res in enumerate(dec.finish().results):
        assert np.array_equal(res["cells"][:, 0], data[16 * k:16 * (k + 1), 5])
    state = app.state.pushdown
    assert (state.in_flight, state.active) == (0, 0)  # the slot went back after the stream
    assert state.metrics.items == 4


def test_items_go_out_as_they_complete(served: Any) -> None:
    """The first tile's read waits until every other tile was answered: its record comes
    last, after the others' (records go out in the order items complete, not item order)."""
    app, arr, _ = served
    items = _items(arr)
    service = app.state.pushdown.service
    real = service._read
    others_answered = asyncio.Event()

    async def read(full_key: str, offset: int, length: int, where: str) -> Any:
        if offset == items[0].offset:
            await asyncio.wait_for(others_answered.wait(), 5)
        return await real(full_key, offset, length, where)

    service._read = read
    real_answers = service.answers

    answered: set[int] = set()

    async def answers(its: Any) -> Any:
        async for index, result in real_answers(its):
            yield index, result
            answered.add(index)
            # every other item out (they may complete in any order among themselves)
            if answered >= set(range(1, len(items))):
                others_answered.set()

    service.answers = answers
    got = _post(app, encode_read_request(items, stream=True))
    dec = StreamDecoder(len(items))
    order = [i for i, _ in dec.feed(got.content)]
    assert order[-1] == 0 and sorted(order) == [0, 1, 2, 3] and dec.ended


def test_a_stream_stops_at_the_timeout_and_the_client_fetches_the_rest(tmp_path: Path,
                                                                        served: Any) -> None:
    app, arr, data = served
    quick = create_app(app.state.pushdown.store, token=TOKEN,
                       config=ServerConfig(request_timeout_s=0.5))
    items = _items(arr)
    service = quick.state.pushdown.service
    real = service._read

    async def read(full_key: str, offset: int, length: int, where: str) -> Any:
        if offset != items[0].offset:
            await asyncio.sleep(30)  # never within the timeout
        return await real(full_key, offset, length, where)

    service._read = read
    got = _post(quick, encode_read_request(items, stream=True))
    dec = StreamDecoder(len(items))
    dec.feed(got.content)
    done = dec.finish()
    assert not dec.ended and isinstance(done.results[0], dict)
    assert [isinstance(r, ItemError) and r.status == 502 for r in done.results] == [
        False, True, True, True]
    assert quick.state.pushdown.metrics.rejections["timeout"] == 1
    assert (quick.state.pushdown.in_flight, quick.state.pushdown.active) == (0, 0)
    # Through the array: the tile that came is placed, the others fetched directly.
    arr.pushdown = PushdownClient("http://pushdown", token=TOKEN,
                                  transport=httpx.ASGITransport(quick))
    with pytest.warns(tessera.PushdownFallbackWarning):
        out = arr.read((slice(None), 5), method="pushdown")
    assert np.array_equal(out, data[:, 5])
    assert arr.last_read.pushdown_fallbacks == 3


@pytest.mark.parametrize("stream", [True, False])
def test_reads_place_the_same_cells_streamed_or_whole(served: Any, stream: bool) -> None:
    app, arr, data = served
    client = PushdownClient("http://pushdown", token=TOKEN,
                            transport=httpx.ASGITransport(app))
    client.config = dataclasses.replace(client.config, stream=stream)
    arr.pushdown = client
    for sel in [(slice(None), 5), (slice(3, 60, 2), slice(10, 50, 3)), (slice(None),)]:
        assert np.array_equal(arr.read(sel, method="pushdown"), data[sel])
        assert arr.last_read.pushdown_fallbacks == 0


def test_a_real_server_streams_and_releases_its_slots(tmp_path: Path) -> None:
    """Through uvicorn (true streaming, chunked): reads equal numpy, a client that goes away
    mid-answer costs the server nothing that stays."""
    from tessera.testing import PushdownTestServer

    root = tmp_path / "root"
    data = np.random.default_rng(0).integers(0, 1000, (256, 256)).astype(np.int32)
    arr = tessera.from_numpy((root / "arr").as_uri(), data, tile=(32, 32))
    # one slot: a stream that kept its slot after its client left would hold every later
    # read in the queue until the request timeout (then 504: fallbacks below)
    with PushdownTestServer(root.as_uri(), extra_args=["--max-concurrency", "1", "--queue", "4",
                                                       "--request-timeout", "20"]) as server:
        arr.pushdown = PushdownClient(server.url, token=server.token)
        assert np.array_equal(arr.read((slice(None), slice(7, 90)), method="pushdown"),
                              data[:, 7:90])
        assert arr.last_read.pushdown_fallbacks == 0
        items = [TileItem("arr", r.key, r.offset, r.length, None, r.crc32, "<i4", (),
                          (32, 32), "row-major", (Slice(0, 32, 1), Slice(0, 32, 1)),
                          checksum=r.checksum) for r in arr.last_read.tile_reads]

        async def go_away() -> None:
            async with httpx.AsyncClient(base_url=server.url,
                                         headers={"Authorization": f"Bearer {server.token}"},
                                         ) as c:
                req = c.build_request("POST", "/v1/read",
                                      content=encode_read_request(items, stream=True))
                response = await c.send(req, stream=True)
                async for _ in response.aiter_raw():
                    break  # the first bytes, then gone
                await response.aclose()

        asyncio.run(go_away())
        for _ in range(3):  # the server still answers fully, through its one slot
            assert np.array_equal(arr.read((slice(None), slice(7, 90)), method="pushdown"),
                                  data[:, 7:90])
            assert arr.last_read.pushdown_fallbacks == 0


def test_a_stream_flag_that_is_not_a_boolean_is_refused() -> None:
    """Both requests that may ask for a streamed answer refuse a flag that is not true or
    false, naming it (400), before any work."""
    import json

    from tessera.pushdown.framing import Limits
    from tessera.pushdown.infer_items import (
        InferRequest,
        encode_infer_request,
        parse_infer_request,
    )
    from tessera.pushdown.read_items import parse_read_request

    item = TileItem("arr", "k", 0, 16, None, 0, "<i4", (), (2, 2), "row-major",
                    (Slice(0, 2, 1), Index((1,))))
    doc = json.loads(encode_read_request([item]))
    for bad in ("yes", 1, None):
        with pytest.raises(ProtocolError, match="'stream' must be true or false"):
            parse_read_request(json.dumps({**doc, "stream": bad}).encode(), Limits())
    infer = json.loads(encode_infer_request(InferRequest("r18", 2, "imgs", (1,))))
    with pytest.raises(ProtocolError, match="stream must be true or false"):
        parse_infer_request(json.dumps({**infer, "stream": "yes"}).encode(), Limits(), 8)
