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
