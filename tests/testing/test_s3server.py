"""The S3 test server: its own process, fast ranges that stay exact, clean shutdown."""

from __future__ import annotations

import os

import pytest

import tessera
from tessera.testing import S3TestServer


def test_server_runs_in_its_own_process(s3_server) -> None:
    assert s3_server.running
    assert s3_server._proc is not None and s3_server._proc.pid != os.getpid()


def test_ranged_reads_are_exact_on_a_large_object(s3_server) -> None:
    store = tessera.open_store(s3_server.unique_url("ranges"), **s3_server.storage_options())
    data = os.urandom(12 << 20)  # larger than moto's in-memory spool, so it lives on disk
    store.put("big", data)
    for offset, length in [(0, 1), (1, 1023), (6 << 20, 4096), ((12 << 20) - 10, 10),
                           ((12 << 20) - 10, 100), (123_457, 1 << 20)]:
        assert bytes(store.get_range("big", offset, length)) == data[offset:offset + length]
    assert bytes(store.get("big")) == data
    with pytest.raises(tessera.InvalidRangeError):
        store.get_range("big", 12 << 20, 1)


def test_stock_mode_and_clean_shutdown() -> None:
    server = S3TestServer(bucket="stock-bucket", stock=True).start()
    try:
        store = tessera.open_store(server.url("p"), **server.storage_options())
        store.put("k", b"0123456789")
        assert bytes(store.get_range("k", 2, 3)) == b"234"
        server.create_bucket("second")
        other = tessera.open_store("s3://second", **server.storage_options())
        other.put("x", b"1")
        assert [o.key for o in other.list()] == ["x"]
    finally:
        server.stop()
    assert not server.running
    server.stop()  # idempotent


def _raw_get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One signed GET on a fresh connection: status, lower-cased headers, body."""
    import http.client

    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    req = AWSRequest(method="GET", url=f"http://127.0.0.1:{port}{path}", headers=headers)
    S3SigV4Auth(Credentials("testing", "testing"), "s3", "us-east-1").add_auth(req)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=dict(req.headers.items()))
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
    finally:
        conn.close()


@pytest.mark.parametrize("size", [1000, 12 << 20])  # in moto's memory spool, and on disk
def test_plain_gets_answer_exactly_what_moto_answers(s3_server, size: int) -> None:
    """The fast path for plain GETs sends moto's status, headers and bytes: compared with the
    same request sent through moto's dispatch (an If-Match header sends it there)."""
    store = tessera.open_store(s3_server.unique_url("fast"), **s3_server.storage_options())
    data = os.urandom(size)
    store.put("obj", data)
    path = f"/{s3_server.bucket}/{store.url.prefix}/obj"
    etag = store.head("obj").etag
    assert etag
    for rng in (None, "bytes=0-0", f"bytes=10-{size // 2}", f"bytes={size - 7}-",
                f"bytes=5-{size * 3}"):
        headers = {"Range": rng} if rng else {}
        fast = _raw_get(s3_server.port, path, headers)
        moto = _raw_get(s3_server.port, path, {**headers, "If-Match": etag})
        assert fast[0] == moto[0] == (206 if rng else 200)
        assert fast[2] == moto[2]
        assert fast[1].get("x-tessera-test-server") == "fast-get"
        assert "x-tessera-test-server" not in moto[1]
        assert fast[1]["x-amzn-requestid"] != moto[1]["x-amzn-requestid"]  # fresh per request
        drop = {"date", "server", "connection", "transfer-encoding", "x-amzn-requestid",
                "x-tessera-test-server"}
        assert {k: v for k, v in fast[1].items() if k not in drop} == \
            {k: v for k, v in moto[1].items() if k not in drop}, rng


def test_errors_and_unusual_gets_still_come_from_moto(s3_server) -> None:
    store = tessera.open_store(s3_server.unique_url("err"), **s3_server.storage_options())
    store.put("k", b"0123456789")
    base = f"/{s3_server.bucket}/{store.url.prefix}"
    status, headers, body = _raw_get(s3_server.port, f"{base}/missing", {})
    assert status == 404 and b"NoSuchKey" in body
    assert "x-tessera-test-server" not in headers
    status, _, body = _raw_get(s3_server.port, f"{base}/k", {"Range": "bytes=50-60"})
    assert status == 416 and b"InvalidRange" in body
    status, _, body = _raw_get(s3_server.port, f"{base}/k", {"Range": "bytes=-3"})
    assert (status, body) == (206, b"789")  # suffix range: moto's own handling
    status, _, body = _raw_get(s3_server.port, f"{base}/k", {"If-None-Match": '"nope"'})
    assert (status, body) == (200, b"0123456789")
    store.put("a key with spaces/ü", b"x")  # escaped path: moto parses it
    assert bytes(store.get("a key with spaces/ü")) == b"x"


def test_connections_are_kept_alive(s3_server) -> None:
    from tessera.testing import EmulatedLink

    url = s3_server.unique_url("ka")
    tessera.open_store(url, **s3_server.storage_options()).put("k", b"x" * 4096)
    with EmulatedLink(s3_server.port) as link:
        through = tessera.open_store(url, **s3_server.storage_options(link.endpoint))
        for _ in range(10):
            assert bytes(through.get_range("k", 100, 10)) == b"x" * 10
        through.list()
        assert link.counters().requests == 11
        assert link.counters().connections == 1


def test_chunked_upload_without_content_length_is_stored_whole(s3_server) -> None:
    """Uploads sent with Transfer-Encoding: chunked (TileDB's AWS SDK does) keep their body."""
    import http.client

    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    url = s3_server.unique_url("chunked")
    prefix = tessera.open_store(url, **s3_server.storage_options()).url.prefix
    path = f"/{s3_server.bucket}/{prefix}/up"
    body = os.urandom(300_000)
    req = AWSRequest(method="PUT", url=f"http://127.0.0.1:{s3_server.port}{path}", data=body)
    S3SigV4Auth(Credentials("testing", "testing"), "s3", "us-east-1").add_auth(req)
    headers = {k: v for k, v in req.headers.items() if k.lower() != "content-length"}
    conn = http.client.HTTPConnection("127.0.0.1", s3_server.port, timeout=30)
    try:
        conn.request("PUT", path, body=iter([body[:100_000], body[100_000:]]), headers=headers,
                     encode_chunked=True)
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200
    finally:
        conn.close()
    assert bytes(tessera.open_store(url, **s3_server.storage_options()).get("up")) == body
