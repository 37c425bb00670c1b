"""Retries recovering from injected 503s, resets and stalls (S3 through the emulated link)."""

from __future__ import annotations

import pytest

import tessera
from tessera.config import RetryPolicy, StoreConfig

FAST_RETRY = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05)


def _open(url: str, options: dict, **config) -> tessera.Store:
    cfg = StoreConfig(retry=config.pop("retry", FAST_RETRY), **config)
    return tessera.open_store(url, config=cfg, **options)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_get_recovers_from_injected_5xx(linked_s3, status: int) -> None:
    _, link, url, options = linked_s3
    store = _open(url, options)
    store.put("k", b"payload")
    link.reset_counters()
    link.faults.fail_next(2, status=status)
    with store.collect() as stats:
        assert bytes(store.get("k")) == b"payload"
    assert stats.requests == 3 and stats.failures == 2
    counters = link.counters()
    assert counters.requests == 3 and counters.status_counts == {status: 2, 200: 1}


def test_gives_up_after_max_attempts(linked_s3) -> None:
    _, link, url, options = linked_s3
    store = _open(url, options, retry=RetryPolicy(max_attempts=3, base_delay_s=0.0))
    store.put("k", b"x")
    link.faults.fail_next(10, status=503)
    with pytest.raises(tessera.TransientStorageError) as info:
        store.get("k")
    link.faults.clear()
    assert "3 tries" in str(info.value) and "k" in str(info.value)
    assert link.counters().injected_errors == 3


def test_permanent_errors_are_not_retried(linked_s3) -> None:
    _, link, url, options = linked_s3
    store = _open(url, options)
    link.reset_counters()
    with pytest.raises(tessera.ObjectNotFoundError):
        store.get("absent")
    assert link.counters().requests == 1


@pytest.mark.parametrize("after_bytes", [0, 200, 5000])
def test_range_recovers_from_connection_reset(linked_s3, after_bytes: int) -> None:
    _, link, url, options = linked_s3
    store = _open(url, options)
    data = bytes(range(256)) * 4096  # 1 MiB
    store.put("big", data)
    link.faults.reset_next(1, after_bytes=after_bytes)
    assert bytes(store.get_range("big", 1000, 100_000)) == data[1000:101_000]
    assert link.counters().injected_resets == 1
    assert store.stats.failures == 1


def test_create_put_whose_answer_was_lost_succeeds_once(linked_s3) -> None:
    # The PUT reaches the server, its answer is reset; the retry then meets 412 and reads
    # the object back: it is ours, so the create succeeded.
    _, link, url, options = linked_s3
    store = _open(url, options)
    link.faults.reset_next(1, after_bytes=0)
    store.put("marker", b"mine", mode="create")
    assert bytes(store.get("marker")) == b"mine"
    assert link.counters().injected_resets == 1
    # ...while a genuinely taken key still raises.
    with pytest.raises(tessera.ObjectExistsError):
        store.put("marker", b"someone else", mode="create")


def test_stall_times_out_and_retries(linked_s3) -> None:
    _, link, url, options = linked_s3
    store = _open(url, options, request_timeout_s=0.5)
    store.put("k", b"x")
    link.faults.stall_next(1, seconds=5.0)
    assert bytes(store.get("k")) == b"x"
    assert store.stats.failures == 1
    assert link.counters().injected_stalls == 1


def test_two_stores_with_different_options_coexist(linked_s3) -> None:
    server, link, url, options = linked_s3
    patient = _open(url, options)
    impatient = _open(url, options, retry=RetryPolicy(max_attempts=1))
    direct = tessera.open_store(url, **server.storage_options())  # no link in between
    patient.put("k", b"v")
    link.faults.fail_next(1, status=503)
    with pytest.raises(tessera.TransientStorageError):
        impatient.get("k")
    link.faults.fail_next(1, status=503)
    assert bytes(patient.get("k")) == b"v"
    link.reset_counters()
    assert bytes(direct.get("k")) == b"v"
    assert link.counters().requests == 0  # the direct store never touched the link
    assert patient.config.retry.max_attempts == 4
    assert impatient.config.retry.max_attempts == 1
    assert impatient.stats.requests == 1 and direct.stats.requests == 1
