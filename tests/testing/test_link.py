"""The emulated link: delay, bandwidth cap, counters, faults.

The delay and bandwidth checks assert lower bounds only: the emulator must never be faster
than the link it models; noise can only make it slower, so these cannot flake on a busy
machine. How close to the bound it stays is measured by benchmarks/link_check.py.
"""

from __future__ import annotations

import contextlib
import socket
import time

import pytest

import tessera
from tessera.testing import EmulatedLink
from tessera.testing.http_framing import MessageFramer


def _store(server, link) -> tessera.Store:
    return tessera.open_store(server.unique_url("link"),
                              **server.storage_options(endpoint=link.endpoint))


def test_one_way_delay_is_a_lower_bound(s3_server) -> None:
    with EmulatedLink(s3_server.port, one_way_delay_s=0.010) as link:
        store = _store(s3_server, link)
        store.put("k", b"x" * 1024)
        for _ in range(3):
            t0 = time.perf_counter()
            store.get("k")
            assert time.perf_counter() - t0 >= 0.020


def test_bandwidth_cap_is_a_lower_bound(s3_server) -> None:
    store_direct = tessera.open_store(s3_server.unique_url("bw"), **s3_server.storage_options())
    store_direct.put("big", b"\0" * (8 << 20))
    with EmulatedLink(s3_server.port, bandwidth=20e6) as link:
        store = tessera.open_store(str(store_direct.url), **s3_server.storage_options(
            endpoint=link.endpoint))
        t0 = time.perf_counter()
        assert len(store.get("big")) == 8 << 20
        assert time.perf_counter() - t0 >= (8 << 20) / 20e6


def test_counters_match_headers_plus_body(s3_server) -> None:
    with EmulatedLink(s3_server.port) as link:
        store = _store(s3_server, link)
        store.put("k", b"y" * 5000)
        link.reset_counters()
        store.get("k")
        store.get_range("k", 100, 1000)
        store.head("k")
        c = link.counters()
    assert c.requests == 3 and c.responses == 3
    assert c.response_body_bytes == 5000 + 1000  # HEAD has no body
    assert c.bytes_down == c.response_head_bytes + c.response_body_bytes
    assert c.bytes_up == c.request_head_bytes + c.request_body_bytes
    assert c.request_body_bytes == 0
    assert c.status_counts == {200: 2, 206: 1}


def test_counters_never_lag_behind_what_the_client_holds(s3_server, monkeypatch) -> None:
    """The link counts bytes before it hands them to a socket: a link thread that loses the
    CPU right after a write (here: every drain after a write takes 50 ms) must not leave a
    client that already holds the bytes reading a smaller counter."""
    import asyncio

    drain = asyncio.StreamWriter.drain

    async def slow_drain(self: asyncio.StreamWriter) -> None:
        await drain(self)
        await asyncio.sleep(0.05)

    with EmulatedLink(s3_server.port) as link:
        store = _store(s3_server, link)
        store.put("k", b"x" * 6000)
        monkeypatch.setattr(asyncio.StreamWriter, "drain", slow_drain)
        for n in (6000, 1371, 1):
            link.reset_counters()
            assert len(bytes(store.get_range("k", 0, n))) == n
            c = link.counters()  # at once: the client holds every byte of the answer
            assert c.response_body_bytes == n
            assert c.bytes_down == c.response_head_bytes + c.response_body_bytes
            assert c.bytes_up == c.request_head_bytes + c.request_body_bytes


def test_put_body_bytes_counted_upstream(s3_server) -> None:
    with EmulatedLink(s3_server.port) as link:
        store = _store(s3_server, link)
        store.put("k", b"z" * 12345)
        c = link.counters()
    assert c.request_body_bytes == 12345
    assert c.bytes_up == c.request_head_bytes + 12345


def test_first_byte_latency_is_per_request(s3_server) -> None:
    with EmulatedLink(s3_server.port, first_byte_latency_s=0.05) as link:
        store = _store(s3_server, link)
        store.put("k", b"x")
        t0 = time.perf_counter()
        store.get("k")
        assert time.perf_counter() - t0 >= 0.05


def test_configure_at_run_time(s3_server) -> None:
    with EmulatedLink(s3_server.port) as link:
        store = _store(s3_server, link)
        store.put("k", b"x")
        link.configure(one_way_delay_s=0.03)
        t0 = time.perf_counter()
        store.get("k")
        assert time.perf_counter() - t0 >= 0.06
        link.configure(one_way_delay_s=0.0, bandwidth=None)
        assert link.one_way_delay_s == 0.0 and link.bandwidth is None


def test_unreachable_target_closes_client() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    with EmulatedLink(dead_port) as link, socket.create_connection(("127.0.0.1", link.port)) as c:
        c.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            assert c.recv(10) == b""


@pytest.mark.parametrize("chunking", [1, 7, 1000])
def test_framer_covers_every_byte(chunking: int) -> None:
    from collections import deque

    methods: deque[str] = deque()
    req = MessageFramer("request", methods)
    resp = MessageFramer("response", methods)
    up = (b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
          b"PUT /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
          b"HEAD /c HTTP/1.1\r\n\r\n")
    down = (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n")
    segs_up = [s for i in range(0, len(up), chunking) for s in req.feed(up[i:i + chunking])]
    segs_down = [s for i in range(0, len(down), chunking) for s in resp.feed(down[i:i + chunking])]
    assert b"".join(s.data for s in segs_up) == up
    assert b"".join(s.data for s in segs_down) == down
    assert [s.method for s in segs_up if s.starts] == ["GET", "PUT", "HEAD"]
    assert [(s.method, s.status) for s in segs_down if s.starts] == [
        ("GET", 200), ("PUT", 100), ("PUT", 200), ("HEAD", 200)]
    assert sum(s.ends for s in segs_down) == 4


def test_framer_passthrough_on_garbage() -> None:
    f = MessageFramer("response")
    segs = f.feed(b"not http at all\r\n\r\nmore")
    assert b"".join(s.data for s in segs) == b"not http at all\r\n\r\nmore"
    assert f.broken


def test_counters_match_raw_socket_bytes(s3_server) -> None:
    """Independent check: what a raw client sends and receives equals the link's counts."""
    import datetime as dt
    import urllib.parse

    import obstore
    from obstore.store import S3Store

    store = tessera.open_store(s3_server.url(), **s3_server.storage_options())
    store.put("raw/obj", b"r" * 3000)
    with EmulatedLink(s3_server.port) as link:
        signer = S3Store(s3_server.bucket, endpoint=link.endpoint, region="us-east-1",
                         access_key_id="testing", secret_access_key="testing",
                         client_options={"allow_http": True})
        signed = urllib.parse.urlsplit(
            obstore.sign(signer, "GET", "raw/obj", dt.timedelta(minutes=5)))
        request = (f"GET {signed.path}?{signed.query} HTTP/1.1\r\nHost: {signed.netloc}\r\n"
                   "Connection: close\r\n\r\n").encode()
        received = bytearray()
        with socket.create_connection(("127.0.0.1", link.port), timeout=10) as sock:
            sock.sendall(request)
            while chunk := sock.recv(65536):
                received += chunk
        c = link.counters()  # at once: the link counts bytes before it delivers them
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    assert body == b"r" * 3000
    assert c.bytes_up == len(request) == c.request_head_bytes
    assert c.bytes_down == len(received)
    assert c.response_head_bytes == len(head) + 4 and c.response_body_bytes == 3000


def test_bandwidth_is_shared_by_concurrent_connections(s3_server) -> None:
    import concurrent.futures

    size = 4 << 20
    direct = tessera.open_store(s3_server.unique_url("shared"), **s3_server.storage_options())
    direct.put("a", b"a" * size)
    direct.put("b", b"b" * size)
    with EmulatedLink(s3_server.port, bandwidth=20e6) as link:
        stores = [tessera.open_store(str(direct.url), **s3_server.storage_options(
            endpoint=link.endpoint)) for _ in range(2)]
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            sizes = list(pool.map(lambda sk: len(sk[0].get(sk[1])), zip(stores, "ab", strict=True)))
        elapsed = time.perf_counter() - t0
        assert link.counters().connections >= 2
    assert sizes == [size, size]
    assert elapsed >= 2 * size / 20e6  # one line for both, not 20 MB/s each


def test_the_precise_selector_reports_ready_sockets_and_timeouts() -> None:
    """The link's selector (a microsecond wait on the epoll descriptor, then epoll) sees
    what plain epoll sees: a ready socket at once, nothing when a wait times out."""
    import selectors

    from tessera.testing.link import _PreciseEpollSelector

    a, b = socket.socketpair()
    with contextlib.closing(a), contextlib.closing(b), _PreciseEpollSelector() as sel:
        sel.register(a, selectors.EVENT_READ, data="a")
        assert sel.select(0.001) == []
        t0 = time.perf_counter()
        assert sel.select(0.002) == []
        assert time.perf_counter() - t0 >= 0.002  # never returns early
        b.send(b"x")
        ready = sel.select(5.0)
        assert [(key.data, events) for key, events in ready] == [("a", selectors.EVENT_READ)]
        assert [key.data for key, _ in sel.select(None)] == ["a"]  # still unread
        assert [key.data for key, _ in sel.select(0)] == ["a"]


def test_a_chunked_body_s_coding_is_framing_not_payload() -> None:
    """A streamed (chunked) answer: its payload counts as body, the chunk size lines, the
    CRLFs after each chunk and the trailer as HTTP's own framing, however the bytes are cut."""
    from tessera.testing.http_framing import MessageFramer

    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    payload = [b"x" * 300, b"hello", b"y" * 17]
    coded = b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in payload) + b"0\r\n\r\n"
    wire = head + coded
    for cut in (1, 3, 7, 64, len(wire)):
        framer = MessageFramer("response")
        framer.methods.append("POST")
        segments = [seg for at in range(0, len(wire), cut)
                    for seg in framer.feed(wire[at:at + cut])]
        kinds: dict[str, bytes] = {}
        for seg in segments:
            kinds[seg.kind] = kinds.get(seg.kind, b"") + seg.data
        assert kinds["head"] == head
        assert kinds["body"] == b"".join(payload)
        assert len(kinds["framing"]) == len(coded) - sum(map(len, payload))
        assert segments[-1].ends
