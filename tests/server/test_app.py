"""The pushdown app in-process (httpx's ASGI transport): one test per security and limit
rule, asserting the status code and that nothing outside the served root was read; a fuzz
test of the endpoint; metrics, cache and logs."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from tessera.config import ServerConfig
from tessera.pushdown.framing import decode_response
from tessera.pushdown.read_items import Index, Slice, TileItem, encode_read_request
from tessera.server.app import create_app

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def served(tmp_path: Path) -> tuple[Any, tessera.Array, Path]:
    """A file store root holding one array, a secret file beside (outside) the root, and
    the app serving the root."""
    root = tmp_path / "root"
    data = np.arange(32 * 32, dtype=np.int32).reshape(32, 32)
    arr = tessera.from_numpy((root / "arr").as_uri(), data, tile=(16, 16))
    (tmp_path / "secret").write_bytes(b"do not read" * 10)
    store = tessera.open_store(root.as_uri())
    app = create_app(store, token=TOKEN, config=ServerConfig(max_concurrency=2, queue=1,
                                                             request_timeout_s=5))
    return app, arr, tmp_path


def call(app: Any, method: str, path: str, **kw: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app),
                                     base_url="http://pushdown") as c:
            return await c.request(method, path, **kw)

    return asyncio.run(go())


def item_for(arr: tessera.Array, **change: Any) -> TileItem:
    read = arr.last_read.tile_reads[0] if arr.last_read else None
    if read is None:
        arr.read((slice(0, 16), slice(0, 16)))
        read = arr.last_read.tile_reads[0]  # type: ignore[union-attr]
    base = dict(array="arr", key=read.key, offset=read.offset, length=read.length,
                codec=None, crc32=read.crc32, checksum=read.checksum, dtype="<i4",
                cell_shape=(), tile_shape=(16, 16),
                cell_order="row-major", select=(Slice(2, 5, 1), Index((7, 0))))
    base.update(change)
    return TileItem(**base)


def read_body(*items: TileItem) -> bytes:
    return encode_read_request(list(items))


def server_reads(app: Any) -> int:
    return int(app.state.pushdown.store.stats.requests)


def test_a_read_returns_exactly_the_selected_cells(served: Any) -> None:
    app, arr, _ = served
    r = call(app, "POST", "/v1/read", content=read_body(item_for(arr)), headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/x-tessera-pushdown"
    out = decode_response(r.content, 1).results[0]
    expected = arr[0:16, 0:16][2:5][:, [7, 0]]
    assert np.array_equal(out["cells"], expected)  # type: ignore[index]
    assert len(r.headers["x-request-id"]) == 16


def test_health_needs_no_token_but_everything_else_does(served: Any) -> None:
    app, arr, _ = served
    assert call(app, "GET", "/v1/health").json() == {"status": "ok"}
    for method, path in (("GET", "/v1/info"), ("GET", "/metrics"), ("POST", "/v1/read")):
        r = call(app, method, path, content=read_body(item_for(arr)))
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        assert call(app, method, path, content=read_body(item_for(arr)),
                    headers={"Authorization": "Bearer wrong-token-0123456789"}
                    ).status_code == 401
        assert call(app, method, path, content=read_body(item_for(arr)),
                    headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    assert server_reads(app) == 0


def test_info_describes_the_server(served: Any) -> None:
    app, _, tmp = served
    info = call(app, "GET", "/v1/info", headers=AUTH).json()
    assert info["protocol"] == 1 and info["handlers"] == ["read"] and info["auth"] is True
    assert info["root"] == (tmp / "root").as_uri()
    assert info["limits"]["max_concurrency"] == 2 and info["version"] == tessera.__version__


@pytest.mark.parametrize("key", ["../secret", "/etc/passwd", "arr/../../secret",
                                 "s3://other-bucket/secret", "%2e%2e/secret", "..\\secret",
                                 "file:///etc/passwd"])
def test_keys_outside_the_root_are_forbidden_and_not_read(served: Any, key: str) -> None:
    app, arr, _ = served
    body = json.loads(read_body(item_for(arr)))
    body["reads"][0]["key"] = key
    r = call(app, "POST", "/v1/read", content=json.dumps(body), headers=AUTH)
    assert r.status_code == 403, r.text
    assert "error" in r.json()
    body["reads"][0]["key"] = "secret"  # the key alone is fine; the array part escapes
    body["reads"][0]["array"] = "../"
    assert call(app, "POST", "/v1/read", content=json.dumps(body),
                headers=AUTH).status_code == 403
    assert server_reads(app) == 0


def test_missing_object_inside_the_root_is_an_item_error(served: Any) -> None:
    app, arr, _ = served
    r = call(app, "POST", "/v1/read", headers=AUTH,
             content=read_body(item_for(arr), item_for(arr, key="no/such.data")))
    results = decode_response(r.content, 2).results
    assert isinstance(results[0], dict)
    assert results[1].status == 404  # type: ignore[union-attr]


def test_item_errors_are_logged_as_warnings_and_counted_by_status(
        served: Any, caplog: pytest.LogCaptureFixture) -> None:
    app, arr, _ = served
    damaged = item_for(arr, crc32=(item_for(arr).crc32 + 1) % (1 << 32))
    with caplog.at_level(logging.WARNING, logger="tessera.server"):
        r = call(app, "POST", "/v1/read", headers={**AUTH, "X-Request-ID": "errs-1"},
                 content=read_body(item_for(arr), item_for(arr, key="no/such.data"),
                                   item_for(arr, key="no/other.data"), damaged))
    assert r.status_code == 200
    warned = [json.loads(rec.getMessage()) for rec in caplog.records
              if rec.levelno == logging.WARNING]
    assert len(warned) == 1
    assert {"event": "item_errors", "request_id": "errs-1", "count": 3,
            "items": 4}.items() <= warned[0].items()
    assert any("checksum mismatch" in e for e in warned[0]["errors"])
    text = call(app, "GET", "/metrics", headers=AUTH).text
    assert 'tessera_item_errors_total{status="404"} 2' in text
    assert 'tessera_item_errors_total{status="422"} 1' in text
    assert "tessera_items_total 4" in text


def test_live_and_ready_are_told_apart(served: Any, tmp_path: Path) -> None:
    app, _, _ = served
    assert call(app, "GET", "/v1/health/live").json() == {"status": "live"}
    assert "tessera_ready -1" in call(app, "GET", "/metrics", headers=AUTH).text
    r = call(app, "GET", "/v1/health/ready")
    assert (r.status_code, r.json()) == (200, {"status": "ready"})
    assert "tessera_ready 1" in call(app, "GET", "/metrics", headers=AUTH).text
    # A server whose root cannot be read is live, not ready, and says why (no token needed).
    gone = create_app(tessera.open_store((tmp_path / "no-such-root").as_uri()), token=TOKEN)
    assert call(gone, "GET", "/v1/health/live").status_code == 200
    assert call(gone, "GET", "/v1/health").json() == {"status": "ok"}
    r = call(gone, "GET", "/v1/health/ready")
    assert r.status_code == 503 and r.json()["status"] == "not ready"
    assert "no-such-root" in r.json()["reason"] and "not a folder" in r.json()["reason"]
    assert "tessera_ready 0" in call(gone, "GET", "/metrics", headers=AUTH).text


def test_readiness_is_probed_at_most_once_per_interval(served: Any) -> None:
    app, _, _ = served
    readiness = app.state.pushdown.readiness
    assert readiness.cache_s == 5.0
    readiness.cache_s = 3600.0  # so that a slow machine cannot make the answer expire
    before = server_reads(app)
    for _ in range(5):
        assert call(app, "GET", "/v1/health/ready").status_code == 200
    assert server_reads(app) - before == 1  # one listing, then the answer is reused
    readiness.cache_s = 0.0
    call(app, "GET", "/v1/health/ready")
    call(app, "GET", "/v1/health/ready")
    assert server_reads(app) - before == 3


def test_damaged_tile_is_an_item_error_naming_it(served: Any) -> None:
    app, arr, _ = served
    item = item_for(arr, crc32=(item_for(arr).crc32 + 1) % (1 << 32))
    r = call(app, "POST", "/v1/read", content=read_body(item), headers=AUTH)
    err = decode_response(r.content, 1).results[0]
    assert err.status == 422 and "checksum mismatch" in err.error  # type: ignore[union-attr]


def test_size_limits_answer_413(served: Any, tmp_path: Path) -> None:
    app, arr, _ = served
    small = create_app(app.state.pushdown.store, token=TOKEN,
                       config=ServerConfig(max_body_bytes=2000, max_items=2,
                                           max_output_bytes=40, max_tile_bytes=512))
    r = call(small, "POST", "/v1/read", content=b"x" * 2001, headers=AUTH)
    assert r.status_code == 413 and "2001 bytes" in r.json()["error"]
    r = call(small, "POST", "/v1/read", headers=AUTH,
             content=read_body(*[item_for(arr, select=(Slice(0, 1, 1), Slice(0, 1, 1)))] * 3))
    assert r.status_code == 413 and "3 reads" in r.json()["error"]
    r = call(small, "POST", "/v1/read", content=read_body(item_for(arr)), headers=AUTH)
    assert r.status_code == 413  # a 16 x 16 int32 tile is 1024 bytes > 512
    r = call(small, "POST", "/v1/read", headers=AUTH, content=read_body(
        item_for(arr, select=(Slice(0, 4, 1), Slice(0, 4, 1)))))
    assert r.status_code == 413
    assert server_reads(small) == 0


def test_chunked_body_over_the_limit_is_413(served: Any) -> None:
    app, _, _ = served
    small = create_app(app.state.pushdown.store, token=TOKEN,
                       config=ServerConfig(max_body_bytes=100))

    async def chunks() -> Any:
        for _ in range(10):
            yield b"x" * 50

    assert call(small, "POST", "/v1/read", content=chunks(), headers=AUTH).status_code == 413


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"protocol": 1}', b"\xff\xfe",
                                     b'{"protocol": 1, "reads": [{"kind": "tile"}]}'])
def test_malformed_requests_answer_400(served: Any, content: bytes) -> None:
    app, _, _ = served
    r = call(app, "POST", "/v1/read", content=content, headers=AUTH)
    assert r.status_code == 400 and r.json()["error"]


def test_unknown_routes_and_methods(served: Any) -> None:
    app, _, _ = served
    assert call(app, "GET", "/v1/nothing", headers=AUTH).status_code == 404
    assert call(app, "GET", "/v1/read", headers=AUTH).status_code in (404, 405)


def slow_service(app: Any, seconds: float) -> None:
    service = app.state.pushdown.service
    real = service.read

    async def slow(items: Any) -> Any:
        await asyncio.sleep(seconds)
        return await real(items)

    service.read = slow


def test_beyond_concurrency_and_queue_requests_get_503_with_retry_after(served: Any) -> None:
    app, arr, _ = served  # 2 served at once, 1 waiting
    service, metrics = app.state.pushdown.service, app.state.pushdown.metrics
    real = service.read

    async def held(items: Any) -> Any:
        # Held until the three requests beyond the limit were turned away, however slowly a
        # loaded machine runs the six (no race against a fixed sleep).
        for _ in range(3000):
            if metrics.rejections["busy"] >= 3:
                break
            await asyncio.sleep(0.01)
        return await real(items)

    service.read = held
    body = read_body(item_for(arr))

    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app),
                                     base_url="http://pushdown") as c:
            return list(await asyncio.gather(*(c.post("/v1/read", content=body, headers=AUTH)
                                               for _ in range(6))))

    answers = asyncio.run(go())
    codes = sorted(r.status_code for r in answers)
    assert codes == [200, 200, 200, 503, 503, 503]
    busy = [r for r in answers if r.status_code == 503]
    assert all(r.headers["retry-after"] == "1" for r in busy)
    metrics = call(app, "GET", "/metrics", headers=AUTH).text
    assert 'tessera_rejections_total{reason="busy"} 3' in metrics


def test_requests_over_the_timeout_get_504(served: Any) -> None:
    app, arr, _ = served
    quick = create_app(app.state.pushdown.store, token=TOKEN,
                       config=ServerConfig(request_timeout_s=0.05))
    slow_service(quick, 1.0)
    r = call(quick, "POST", "/v1/read", content=read_body(item_for(arr)), headers=AUTH)
    assert r.status_code == 504 and "0.05 s" in r.json()["error"]


def test_cache_serves_hot_tiles_and_metrics_count(served: Any) -> None:
    app, arr, _ = served
    body = read_body(item_for(arr), item_for(arr, select=(Slice(0, 16, 4), Slice(1, 2, 1))))
    for _ in range(3):
        assert call(app, "POST", "/v1/read", content=body, headers=AUTH).status_code == 200
    assert server_reads(app) == 1  # one distinct tile: read once, then from the cache
    text = call(app, "GET", "/metrics", headers=AUTH).text
    assert "tessera_cache_hits_total 2" in text and "tessera_cache_misses_total 1" in text
    assert 'tessera_requests_total{path="/v1/read",status="200"} 3' in text
    assert "tessera_read_seconds_count 3" in text and "tessera_items_total 6" in text
    assert "tessera_store_requests_total 1" in text


def test_logs_are_json_lines_with_the_request_id(served: Any,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    app, arr, _ = served
    with caplog.at_level(logging.INFO, logger="tessera.server"):
        r = call(app, "POST", "/v1/read", content=read_body(item_for(arr)),
                 headers={**AUTH, "X-Request-ID": "abc-123"})
        call(app, "GET", "/v1/info", headers={**AUTH, "X-Request-ID": "bad id\n"})
    assert r.headers["x-request-id"] == "abc-123"
    records = [json.loads(m) for m in caplog.messages]
    assert {"event": "request", "request_id": "abc-123", "path": "/v1/read",
            "status": 200}.items() <= records[0].items()
    assert records[1]["request_id"] != "bad id\n"


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=400),
       headers=st.dictionaries(
           st.sampled_from(["content-type", "x-request-id", "content-encoding", "accept",
                            "authorization", "x-other"]),
           st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
           max_size=4),
       with_token=st.booleans())
def test_fuzz_the_endpoint_never_answers_500(served: Any, body: bytes,
                                             headers: dict[str, str],
                                             with_token: bool) -> None:
    app, _, _ = served
    if with_token:
        headers = {**headers, **AUTH}
    r = call(app, "POST", "/v1/read", content=body, headers=headers)
    assert r.status_code in (200, 400, 401, 403, 413), (r.status_code, r.text)
    assert server_reads(app) == 0


@pytest.fixture
def echo_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second handler, registered as a plug-in would register it: one module and one
    registration line (removed after the test)."""
    import sys
    import types

    from starlette.responses import Response

    from tessera.errors import ProtocolError
    from tessera.server import handlers

    def build(ctx: Any) -> Any:
        async def echo(body: bytes, request_id: str) -> Response:
            if body == b"bad":
                raise ProtocolError("echo wants anything but 'bad'")
            if body == b"slow":
                await asyncio.sleep(5)
            return Response(body[::-1] + f" {ctx.config.max_items}".encode())

        return echo

    module = types.ModuleType("tessera_test_echo")
    module.HANDLER = handlers.Handler(  # type: ignore[attr-defined]
        "echo", "/v1/echo", build, timeout_advice="echo less")
    monkeypatch.setitem(sys.modules, "tessera_test_echo", module)
    monkeypatch.setattr(handlers, "KNOWN_HANDLERS", dict(handlers.KNOWN_HANDLERS))
    handlers.register_handler("echo", "tessera_test_echo:HANDLER")


def test_a_second_handler_gets_auth_admission_limits_and_metrics_for_free(
        echo_handler: None, served: Any) -> None:
    _, _, tmp_path = served
    store = tessera.open_store((tmp_path / "root").as_uri())
    app = create_app(store, token=TOKEN, config=ServerConfig(request_timeout_s=0.2,
                                                             max_body_bytes=64))
    assert call(app, "GET", "/v1/info", headers=AUTH).json()["handlers"] == ["read", "echo"]
    r = call(app, "POST", "/v1/echo", content=b"olleh", headers=AUTH)
    assert (r.status_code, r.content) == (200, b"hello 256")
    assert call(app, "POST", "/v1/echo", content=b"olleh").status_code == 401
    r = call(app, "POST", "/v1/echo", content=b"bad", headers=AUTH)
    assert r.status_code == 400 and "anything but" in r.json()["error"]
    r = call(app, "POST", "/v1/echo", content=b"x" * 65, headers=AUTH)
    assert r.status_code == 413
    r = call(app, "POST", "/v1/echo", content=b"slow", headers=AUTH)
    assert r.status_code == 504 and "echo less" in r.json()["error"]
    text = call(app, "GET", "/metrics", headers=AUTH).text
    assert 'tessera_requests_total{path="/v1/echo",status="200"} 1' in text
    assert "tessera_echo_seconds_count 5" in text  # every echo request, refused ones too
    assert "tessera_read_seconds_count 0" in text
    assert 'tessera_rejections_total{reason="timeout"} 1' in text


def test_the_handler_registry_refuses_what_it_cannot_serve(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tessera.errors import ConfigError
    from tessera.server import handlers

    monkeypatch.setattr(handlers, "KNOWN_HANDLERS", dict(handlers.KNOWN_HANDLERS))
    with pytest.raises(ConfigError, match="registered already"):
        handlers.register_handler("read", "x:y")
    with pytest.raises(ConfigError, match="no server handler 'nope'"):
        handlers.handler("nope")
    handlers.register_handler("odd", "tessera.server.read_handler:HANDLER")
    with pytest.raises(ConfigError, match="not a Handler named 'odd'"):
        handlers.handler("odd")
