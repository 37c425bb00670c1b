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
    # 2 s: far beyond what a 1-byte GET takes even on a loaded machine, far below the stall
    store = _open(url, options, request_timeout_s=2.0)
    store.put("k", b"x")
    link.faults.stall_next(1, seconds=30.0)
    with store.collect() as stats:
        assert bytes(store.get("k")) == b"x"
    assert stats.failures == 1 and stats.requests == 2
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


def test_put_recovers_when_a_5xx_swallows_its_body(linked_s3) -> None:
    _, link, url, options = linked_s3
    store = _open(url, options)
    payload = bytes(range(256)) * 1000
    link.reset_counters()
    link.faults.fail_next(1, status=503)
    store.put("body", payload)
    c = link.counters()
    assert c.requests == 2 and c.injected_errors == 1
    assert c.request_body_bytes == 2 * len(payload)  # sent twice: once swallowed
    assert bytes(store.get("body")) == payload


def test_listing_recovers_from_a_5xx(linked_s3) -> None:
    _, link, url, options = linked_s3
    store = _open(url, options)
    for i in range(5):
        store.put(f"l/{i}", b"x")
    link.faults.fail_next(1, status=500)
    assert len(store.list("l")) == 5
    link.faults.fail_next(1, status=502)
    assert len(store.list_dir("l").objects) == 5


def test_listing_fault_between_pages_loses_and_repeats_nothing(linked_s3) -> None:
    import asyncio

    _, link, url, options = linked_s3
    store = _open(url, options)
    keys = [f"m/{i:04d}" for i in range(2300)]

    async def fill() -> None:
        sem = asyncio.Semaphore(32)

        async def one(k: str) -> None:
            async with sem:
                await store.aio.put(k, b"")

        await asyncio.gather(*(one(k) for k in keys))

    asyncio.run(fill())
    link.reset_counters()
    pages = store.iter_list("m")
    got = [o.key for o in next(pages)]
    link.faults.fail_next(1, status=503)  # the next page request fails
    for page in pages:
        got.extend(o.key for o in page)
    assert link.counters().injected_errors == 1
    assert sorted(got) == keys and len(got) == len(set(got))


def test_local_listing_restart_skips_returned_keys(tmp_path, monkeypatch) -> None:
    from obstore.exceptions import GenericError

    import tessera.storage.store as store_module

    store = _open(tmp_path.as_uri(), {}, list_page_size=4)
    for i in range(10):
        store.put(f"k{i}", b"")
    real_list = store_module.obstore.list
    opened = {"n": 0}

    def flaky_list(*args, **kwargs):
        opened["n"] += 1
        stream = real_list(*args, **kwargs).__aiter__()
        if opened["n"] > 1:
            return stream

        class FailsOnSecondPage:
            pages = 0

            def __aiter__(self):
                return self

            async def __anext__(self):
                self.pages += 1
                if self.pages == 2:
                    raise GenericError("Server returned non-2xx status code: 503")
                return await stream.__anext__()

        return FailsOnSecondPage()

    monkeypatch.setattr(store_module.obstore, "list", flaky_list)
    keys = [o.key for page in store.iter_list() for o in page]
    assert sorted(keys) == sorted(f"k{i}" for i in range(10)) and len(keys) == 10
    assert opened["n"] == 2
