"""The S3 test server's create-only puts are atomic, as S3's are: of many racing puts of one
key, exactly one succeeds (a Delta log entry per commit relies on it)."""

from __future__ import annotations

import concurrent.futures

import pytest

import tessera
from tessera.errors import ObjectExistsError

pytestmark = pytest.mark.s3


def test_racing_create_only_puts_of_one_key_let_exactly_one_win(s3_server) -> None:
    store = tessera.open_store(s3_server.unique_url("race"), **s3_server.storage_options())

    def put(key: str, who: int) -> bool:
        try:
            store.put(key, f"{who}".encode(), mode="create")
        except ObjectExistsError:
            return False
        return True

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for round_ in range(10):
            key = f"k{round_}"
            won = [w for w, ok in zip(range(16), pool.map(lambda w, k=key: put(k, w),
                                                          range(16)), strict=True) if ok]
            assert len(won) == 1, won
            assert bytes(store.get(key)) == f"{won[0]}".encode()
