"""Small reads of memory and folder stores run on the calling thread
(``tessera.array.read.direct``) and must be indistinguishable from the event loop's path:
the same values, the same ``last_read`` (plan, tile reads, fragments, requests and bytes) and
the same errors."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from test_dense_model import PROFILE, _model_select, _random_values, histories

import tessera
import tessera.array.array as array_module
from tessera.array.read import direct

METHODS = ("auto", "get", "merge", "fetch")


def _report(arr: tessera.Array) -> tuple[object, ...]:
    r = arr.last_read
    assert r is not None and r.stats is not None
    by = {k: (v.requests, v.bytes_received) for k, v in r.stats.by_method.items()}
    plan = r.plan
    return ([(t.key, t.offset, t.length, t.attr, tuple(map(int, t.tile_index)))
             for t in r.tile_reads], r.fragments_used, r.fragments_skipped, by,
            None if plan is None else (plan.methods, plan.requests, plan.totals,
                                       plan.estimate))


@contextlib.contextmanager
def _general(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with monkeypatch.context() as m:
        m.setattr(direct, "NOW_BYTES", -1)  # no plan is that small: every read takes the loop
        yield


def _build(url: str, history) -> tuple[tessera.Array, dict[str, np.ndarray]]:
    schema, writes, _, seed = history
    rng = np.random.default_rng(seed)
    arr = tessera.create_array(f"{url.rstrip('/')}/{uuid.uuid4().hex[:10]}", schema)
    model = {a.name: np.full(schema.shape + a.cell_shape, a.fill_value, a.np_dtype)
             for a in schema.attrs}
    for kind, spec in writes:
        if kind != "box":  # cells, deletes and maintenance: the model tests cover them
            continue
        lo, hi = spec
        shape = tuple(h - lw + 1 for lw, h in zip(lo, hi, strict=True))
        values = {a.name: _random_values(rng, shape, a) for a in schema.attrs}
        arr.write(values, origin=lo)
        idx = tuple(slice(lw - d.domain[0], h - d.domain[0] + 1)
                    for lw, h, d in zip(lo, hi, schema.dims, strict=True))
        for name, v in values.items():
            model[name][idx] = v
    return arr, model


def both_paths(arr: tessera.Array, sel: tuple, method: str, model: dict[str, np.ndarray],
               monkeypatch: pytest.MonkeyPatch, report: Callable[[tessera.Array], object],
               ) -> None:
    """Read ``sel`` of every attribute on this thread, then the general way: the same
    ``report`` of ``last_read`` and the model's values (of its shape and dtype) both times."""
    names = [a.name for a in arr.schema.attrs]
    fast = arr.read(sel, attrs=names, method=method)
    fast_report = report(arr)
    with _general(monkeypatch):
        slow = arr.read(sel, attrs=names, method=method)
    assert report(arr) == fast_report
    for name in names:
        want = _model_select(model[name], sel, arr.schema)
        for got in (fast[name], slow[name]):
            np.testing.assert_array_equal(got, want)
            assert got.shape == want.shape and got.dtype == want.dtype


def _check(url: str, history, monkeypatch: pytest.MonkeyPatch) -> None:
    schema, _, selections, _ = history
    arr, model = _build(url, history)
    names = [a.name for a in schema.attrs]
    arr.read(..., attrs=names)  # lists the fragments: the reads below may use the list
    for sel in selections:
        for method in METHODS:
            both_paths(arr, sel, method, model, monkeypatch, _report)
    # A union of the selections (a batch of samples): tiles they share fetched once.
    union = tessera.Hyperslabs(selections)
    fast_all = arr.read(union, attrs=names)
    fast_report = _report(arr)
    with _general(monkeypatch):
        slow_all = arr.read(union, attrs=names)
    assert _report(arr) == fast_report
    for sel, fast, slow in zip(selections, fast_all, slow_all, strict=True):
        for name in names:
            want = _model_select(model[name], sel, schema)
            np.testing.assert_array_equal(fast[name], want)
            np.testing.assert_array_equal(slow[name], want)


@PROFILE
@given(history=histories())
def test_direct_reads_match_the_loops_path_memory(monkeypatch, history) -> None:
    _check("memory://direct", history, monkeypatch)


@PROFILE
@given(history=histories())
def test_direct_reads_match_the_loops_path_file(monkeypatch, tmp_path_factory, history) -> None:
    _check(tmp_path_factory.mktemp("direct").as_uri(), history, monkeypatch)


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_a_small_read_makes_no_trip_to_the_event_loop(kind, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    url = "memory://direct-trip" if kind == "memory" else tmp_path.as_uri()
    data = np.arange(10_000, dtype=np.int32).reshape(100, 100)
    arr = tessera.from_numpy(url, data, tile=(32, 32), codec="zstd")
    arr[:]  # the first read lists the fragments on the loop
    trips = []
    real = array_module.run_sync
    monkeypatch.setattr(array_module, "run_sync", lambda c: trips.append(c) or real(c))
    np.testing.assert_array_equal(arr[40:60, 30:50], data[40:60, 30:50])
    assert trips == []
    assert arr.last_read.plan is not None and arr.last_read.stats.requests == 1
    with _general(monkeypatch):
        np.testing.assert_array_equal(arr[40:60, 30:50], data[40:60, 30:50])
    assert len(trips) == 1


def test_a_large_read_and_a_remote_store_take_the_loop(s3_server, monkeypatch) -> None:
    data = np.zeros((512, 512), np.float64)
    trips = []
    real = array_module.run_sync
    monkeypatch.setattr(array_module, "run_sync", lambda c: trips.append(c) or real(c))
    local = tessera.from_numpy("memory://direct-large", data, tile=(256, 256))
    local[:]
    trips.clear()
    local[:]  # 2 MiB: decoded and placed on worker threads by the loop's executor
    assert len(trips) == 1
    remote = tessera.from_numpy(s3_server.unique_url("direct"), data[:8, :8],
                                storage_options=s3_server.storage_options())
    remote[:]
    trips.clear()
    remote[0, 0]  # a network store: its requests wait on the loop
    assert len(trips) == 1


def test_damage_raises_the_same_error_on_both_paths(tmp_path: Path, monkeypatch) -> None:
    data = np.arange(4096, dtype=np.int32).reshape(64, 64)
    arr = tessera.from_numpy(tmp_path.as_uri(), data, tile=(32, 32))
    arr[:]
    [blob] = tmp_path.glob("__fragments/*/*.data")
    raw = bytearray(blob.read_bytes())
    raw[100] ^= 0xFF
    blob.write_bytes(bytes(raw))
    errors = []
    for general in (False, True):
        with (_general(monkeypatch) if general else monkeypatch.context(),
              pytest.raises(tessera.CorruptDataError) as info):
            arr.read((slice(0, 4), slice(0, 4)), method="get")
        e = info.value
        errors.append((str(e), e.array, e.fragment, e.attr, e.tile, e.key))
    assert errors[0] == errors[1]
    assert errors[0][4] == (0, 0)


def test_a_read_passed_on_to_the_loop_is_planned_once(monkeypatch) -> None:
    import tessera.array.calling_thread as calling

    data = np.zeros((1024, 1024), np.float64)  # 8 MiB: too large for the calling thread
    arr = tessera.from_numpy("memory://direct-once", data, tile=(256, 256))
    arr[:]
    calls = []
    for module in (calling, array_module):
        real = module.plan_tile_reads
        monkeypatch.setattr(module, "plan_tile_reads",
                            lambda *a, real=real: calls.append(1) or real(*a))
    np.testing.assert_array_equal(arr[:], data)
    assert len(calls) == 1


@pytest.mark.parametrize("sel", [
    (slice(0, 300), slice(100, 700)),
    tessera.Points(([0, 700, 1023], [0, 900, 5])),
    tessera.Hyperslabs([(slice(0, 10), slice(0, 10)), (slice(500, 600), slice(0, 1024))]),
    "mask"])
def test_explain_plans_the_way_a_read_goes(sel) -> None:
    """One routing decides what a selection means for read and explain alike: the plan
    explain prints is the one the read follows (same requests), for a box, points, a union
    of hyperslabs and a full boolean mask."""
    data = np.arange(1024 * 1024, dtype=np.int32).reshape(1024, 1024)
    arr = tessera.from_numpy(f"memory://route-{uuid.uuid4().hex[:8]}", data, tile=(256, 256))
    if isinstance(sel, str):
        sel = np.zeros((1024, 1024), bool)
        sel[3, 4] = sel[900, 1000] = True
    planned = arr.explain(sel)
    arr.read(sel)
    assert arr.last_read.plan is not None
    assert [(r.key, r.start, r.stop) for r in arr.last_read.plan.requests] == [
        (r.key, r.start, r.stop) for r in planned.requests]
