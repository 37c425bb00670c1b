"""Unit tests: keys, URLs, config, pricing, stats."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tessera
from tessera.config import RetryPolicy, StoreConfig
from tessera.errors import ConfigError, InvalidKeyError, InvalidURLError
from tessera.storage.errormap import map_error
from tessera.storage.keys import join_key, validate_key, validate_prefix
from tessera.storage.pricing import PRICING, get_pricing
from tessera.storage.stats import IOStats, RequestRecord
from tessera.storage.url import parse_store_url

# -- keys ----------------------------------------------------------------------------------

@given(st.text(max_size=60))
def test_any_accepted_key_stays_below_the_root(key: str) -> None:
    try:
        validate_key(key)
    except InvalidKeyError:
        return
    full = join_key("root/prefix", key)
    segments = full.split("/")
    assert segments[:2] == ["root", "prefix"]
    assert all(s not in ("", ".", "..") for s in segments)
    assert not key.startswith("/") and "\\" not in key


@pytest.mark.parametrize("prefix,expected", [("", ""), ("/", ""), ("a/", "a"), ("a/b", "a/b")])
def test_prefix_normalisation(prefix: str, expected: str) -> None:
    assert validate_prefix(prefix) == expected


def test_key_type_checked() -> None:
    with pytest.raises(InvalidKeyError, match="str"):
        validate_key(b"bytes")


# -- URLs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("url,scheme,bucket,prefix", [
    ("s3://b", "s3", "b", ""),
    ("s3://b/p/q/", "s3", "b", "p/q"),
    ("gs://bucket/x", "gs", "bucket", "x"),
    ("az://container/y/z", "az", "container", "y/z"),
    ("memory://", "memory", "", ""),
    ("memory://name/sub", "memory", "", "name/sub"),
])
def test_parse_urls(url: str, scheme: str, bucket: str, prefix: str) -> None:
    parsed = parse_store_url(url)
    assert (parsed.scheme, parsed.bucket, parsed.prefix) == (scheme, bucket, prefix)


def test_file_urls_and_plain_paths(tmp_path) -> None:
    assert parse_store_url(tmp_path.as_uri()).path == str(tmp_path)
    assert parse_store_url(str(tmp_path)).path == str(tmp_path)
    assert str(parse_store_url(tmp_path.as_uri())) == tmp_path.as_uri()


@pytest.mark.parametrize("url,match", [
    ("ftp://x/y", "unsupported"), ("s3://", "no bucket"), ("s3://b/../x", "invalid prefix"),
    ("file://host/dir", "host"), ("s3://user:pw@b/x", "storage options"),
    ("s3://b/x?versionId=1", "query"), ("", "non-empty"),
])
def test_bad_urls(url: str, match: str) -> None:
    with pytest.raises(InvalidURLError, match=match):
        parse_store_url(url)


def test_open_store_rejects_options_for_local_stores(tmp_path) -> None:
    with pytest.raises(ConfigError, match="endpoint"):
        tessera.open_store("memory://x", endpoint="http://127.0.0.1:1")


def test_open_store_on_a_file_is_an_error(tmp_path) -> None:
    f = tmp_path / "plain.txt"
    f.write_text("hi")
    with pytest.raises(InvalidURLError, match="not a folder"):
        tessera.open_store(f.as_uri())


# -- config --------------------------------------------------------------------------------

def test_config_from_env() -> None:
    cfg = StoreConfig.from_env({"TESSERA_RETRY_MAX_ATTEMPTS": "9",
                                "TESSERA_STORE_MAX_CONCURRENCY": "3",
                                "TESSERA_STORE_REQUEST_TIMEOUT_S": "1.5"})
    assert cfg.retry.max_attempts == 9 and cfg.max_concurrency == 3
    assert cfg.request_timeout_s == 1.5


@pytest.mark.parametrize("env,match", [
    ({"TESSERA_RETRY_MAX_ATTEMPTS": "many"}, "TESSERA_RETRY_MAX_ATTEMPTS"),
    ({"TESSERA_RETRY_MAX_ATTEMPTS": "0"}, "max_attempts"),
    ({"TESSERA_STORE_MAX_CONCURRENCY": "-2"}, "max_concurrency"),
])
def test_bad_env_config(env: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        StoreConfig.from_env(env)


def test_env_is_read_when_a_store_opens(monkeypatch) -> None:
    monkeypatch.setenv("TESSERA_RETRY_MAX_ATTEMPTS", "2")
    assert tessera.open_store("memory://env-check").config.retry.max_attempts == 2


def test_backoff_is_capped_and_grows() -> None:
    p = RetryPolicy(base_delay_s=0.1, max_delay_s=1.0, multiplier=2)
    assert [p.backoff_s(a, 1.0) for a in (1, 2, 3, 4, 5, 6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert p.backoff_s(3, 0.5) == pytest.approx(0.2)


# -- pricing and stats ---------------------------------------------------------------------

def test_pricing_tables() -> None:
    s3 = PRICING["s3"]
    assert s3.request_fee("get", 1000) == pytest.approx(0.0004)
    assert s3.request_fee("put", 1000) == pytest.approx(0.005)
    assert s3.egress_usd(2**30) == pytest.approx(0.09)
    assert all(PRICING["local"].request_fee(k) == 0 for k in tessera.storage.REQUEST_KINDS)
    for table in PRICING.values():
        for kind in tessera.storage.REQUEST_KINDS:
            table.request_fee(kind)
    with pytest.raises(ConfigError, match="unknown pricing"):
        get_pricing("ibm")


def test_iostats_cost_and_arithmetic() -> None:
    stats = IOStats()
    stats.record(RequestRecord("range", "k", bytes_received=2**30, latency_s=0.5, started=1.0))
    stats.record(RequestRecord("put", "k", bytes_sent=10, latency_s=0.5, started=2.0))
    stats.record(RequestRecord("get", "k", ok=False, latency_s=0.1, started=3.0))
    assert (stats.requests, stats.failures, stats.bytes_received) == (3, 1, 2**30)
    assert stats.elapsed_s == pytest.approx(2.1)
    expected = 0.09 + 2 * 0.0004 / 1000 + 0.005 / 1000
    assert stats.cost_usd("s3") == pytest.approx(expected)
    assert stats.cost_usd("local") == 0
    snap = stats.copy()
    stats.record(RequestRecord("get", "k", bytes_received=5, started=4.0))
    delta = stats - snap
    assert (delta.requests, delta.bytes_received) == (1, 5)
    assert (snap + delta).requests == stats.requests
    assert stats.to_dict()["by_method"]["get"]["requests"] == 2


def test_collectors_are_isolated_per_thread() -> None:
    store = tessera.open_store("memory://collect-threads")
    results: dict[int, int] = {}

    def work(n: int) -> None:
        with store.collect() as stats:
            for i in range(n):
                store.put(f"t{n}/{i}", b"x")
        results[n] = stats.requests

    threads = [threading.Thread(target=work, args=(n,)) for n in (3, 7, 11)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {3: 3, 7: 7, 11: 11}
    assert store.stats.requests == 21


def test_collect_stats_spans_stores() -> None:
    a = tessera.open_store("memory://span-a")
    b = tessera.open_store("memory://span-b")
    with tessera.collect_stats() as stats, a.collect() as only_a:
        a.put("k", b"12")
        b.put("k", b"345")
    assert stats.bytes_sent == 5 and only_a.bytes_sent == 2
    assert stats.elapsed_s > 0


# -- error mapping -------------------------------------------------------------------------

@pytest.mark.parametrize("message,kind", [
    ("Server returned non-2xx status code: 503 Service Unavailable", "TransientStorageError"),
    ("Server returned non-2xx status code: 500 Internal", "TransientStorageError"),
    ("Server returned non-2xx status code: 400 Bad Request", "PermanentStorageError"),
    ("Server returned non-2xx status code: 403 Forbidden", "AccessDeniedError"),
    ("Server returned non-2xx status code: 416 Range Not Satisfiable", "InvalidRangeError"),
    ("error sending request for url", "TransientStorageError"),
])
def test_error_mapping(message: str, kind: str) -> None:
    from obstore.exceptions import GenericError

    err = map_error(GenericError(message), url="s3://b", key="k", op="get", networked=True,
                    timeout_s=1)
    assert type(err).__name__ == kind
    assert "s3://b/k" in str(err)


def test_unclassified_local_errors_are_permanent() -> None:
    err = map_error(RuntimeError("disk on fire"), url="file:///x", key="k", op="put",
                    networked=False, timeout_s=1)
    assert isinstance(err, tessera.PermanentStorageError)
    err = map_error(TimeoutError(), url="s3://b", key="k", op="get", networked=True,
                    timeout_s=2.5)
    assert isinstance(err, tessera.TransientStorageError) and "2.5 s" in str(err)


def test_cloud_stores_build_without_network() -> None:
    assert str(tessera.open_store("gs://bkt/x", skip_signature=True).url) == "gs://bkt/x"
    assert str(tessera.open_store("az://c/y", account_name="acct", skip_signature=True).url) == (
        "az://c/y")
    assert tessera.open_store("s3://bkt/z", region="eu-west-1", skip_signature=True).url.is_cloud


@pytest.mark.parametrize("url,options,match", [
    ("s3://bkt", {"no_such_option": 1}, "no_such_option"),
    ("az://cont", {}, "Account must be specified"),
])
def test_bad_cloud_options_name_the_problem(url: str, options: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        tessera.open_store(url, **options)
    assert "Debug source" not in str(info.value)


def _child_reads(url: str, queue) -> None:
    try:
        tessera.open_store(url).get("k")
        queue.put("read")
    except tessera.ForkSafetyError as err:
        queue.put(f"refused: {err}")


def test_a_child_forked_after_io_refuses_io_instead_of_hanging(tmp_path) -> None:
    import multiprocessing

    url = (tmp_path / "s").as_uri()
    tessera.open_store(url).put("k", b"v")  # this process has done I/O
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_reads, args=(url, queue))
    child.start()
    answer = queue.get(timeout=60)
    child.join(30)
    assert answer.startswith("refused") and "forkserver" in answer
