"""Regression tests from the adversarial probe: clients that send valid headers and a few
body bytes, then stall, took every admission slot of the pushdown server (concurrency 8 +
queue 32), so that correct requests got 503 for as long as the stalled clients stayed; a body
shorter than its Content-Length waited for ever; a chunked body over the limit reset the
connection instead of answering 413.

The server here is ``tessera serve`` as its own process (uvicorn, real sockets); the
stalled clients are raw sockets. No assertion depends on timing: the correct read is shown
to be served (no fallback) while every stalled connection is still open, and the stalled
ones are shown to be answered 408 and closed."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera.testing.pushdown import PushdownTestServer

pytest.importorskip("uvicorn")

BODY_TIMEOUT_S = 3.0


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[PushdownTestServer, str, np.ndarray]]:
    data = np.arange(256 * 256, dtype=np.int32).reshape(256, 256)
    uri = f"file://{tmp_path}/store/arr"
    tessera.from_numpy(uri, data, tile=(64, 64), codec="zstd")
    with PushdownTestServer(f"file://{tmp_path}/store", extra_args=[
            "--body-timeout", str(BODY_TIMEOUT_S), "--max-concurrency", "8", "--queue", "32",
            "--max-connections-per-client", "64"]) as server:
        yield server, uri, data


def _stalled_client(server: PushdownTestServer, declared: int = 1000) -> socket.socket:
    """A connection that sends valid headers and 5 bytes of a ``declared``-byte body."""
    sock = socket.create_connection((server.host, server.port), timeout=30)
    sock.sendall((f"POST /v1/read HTTP/1.1\r\nHost: {server.host}\r\n"
                  f"Authorization: Bearer {server.token}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
                  '{"pro').encode())
    return sock


def _still_open(sock: socket.socket) -> bool:
    """True while the server has neither answered nor closed the connection."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)  # an answer, or b"" for a closed connection
        return False
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    parts = []
    while chunk := sock.recv(65536):
        parts.append(chunk)
    return b"".join(parts)


def test_stalled_clients_hold_no_slot_and_are_closed_after_the_body_timeout(
        served: tuple[PushdownTestServer, str, np.ndarray]) -> None:
    server, uri, data = served
    stalled = [_stalled_client(server) for _ in range(40)]
    try:
        time.sleep(0.3)  # let the server take all 40 requests in (it reads their headers)
        arr = tessera.open_array(uri, pushdown=server.client())
        t0 = time.perf_counter()
        got = arr.read((slice(None), slice(10, 92)), method="pushdown")
        seconds = time.perf_counter() - t0
        report = arr.last_read
        open_after = sum(_still_open(s) for s in stalled)
        assert np.array_equal(got, data[:, 10:92])
        assert report.pushdown_fallbacks == 0, report.pushdown_error
        assert report.stats.by_method["pushdown"].requests >= 1
        # served while all 40 stalled clients were still connected
        assert open_after == 40, (open_after, seconds)
        print(f"served in {seconds * 1000:.1f} ms beside 40 stalled clients")
        answers = [_answer(s) for s in stalled]  # each ends when the server closes it
    finally:
        for s in stalled:
            s.close()
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), answers[0][:200]
    assert b"did not arrive within" in answers[0] and b"5 of 1000 bytes" in answers[0]


def test_a_body_shorter_than_its_length_gets_408(
        served: tuple[PushdownTestServer, str, np.ndarray]) -> None:
    server, _, _ = served
    sock = _stalled_client(server, declared=50)
    with sock:
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"connection: close" in answer.lower()


def test_a_chunked_body_over_the_limit_gets_413(
        served: tuple[PushdownTestServer, str, np.ndarray]) -> None:
    server, _, _ = served
    chunk = b"x" * 65536
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall((f"POST /v1/read HTTP/1.1\r\nHost: {server.host}\r\n"
                      f"Authorization: Bearer {server.token}\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n").encode())
        sent = 0
        try:
            while sent < (5 << 20):  # past the 4 MiB default limit
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                sent += len(chunk)
            sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed while the rest was on its way
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"exceeds the limit" in answer


def test_connections_past_the_per_client_limit_are_refused(tmp_path: Path) -> None:
    with PushdownTestServer(f"file://{tmp_path}", extra_args=[
            "--max-connections-per-client", "3", "--body-timeout", "30"]) as server:
        held = [socket.create_connection((server.host, server.port), timeout=30)
                for _ in range(3)]
        try:
            with socket.create_connection((server.host, server.port), timeout=30) as extra:
                answer = _answer(extra)
            assert answer.startswith(b"HTTP/1.1 503 ") and b"from 127.0.0.1" in answer
        finally:
            for s in held:
                s.close()
        # once they are gone, the address is served again
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.create_connection((server.host, server.port), timeout=30) as again:
                again.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if _answer(again).startswith(b"HTTP/1.1 200 "):
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the client was still refused after closing its connections")


def test_a_connection_that_never_completes_its_headers_is_closed(tmp_path: Path) -> None:
    with PushdownTestServer(f"file://{tmp_path}", extra_args=["--body-timeout", "1"]
                            ) as server, \
            socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/read HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        assert _answer(sock) == b""  # closed by the server, with nothing to answer
