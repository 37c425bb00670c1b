"""Small box reads by recipe (``tessera.array.read.recipe``): a box of a footprint read
before is planned by arithmetic and read on the calling thread. It must be
indistinguishable from the general path: the same values, the same ``last_read`` (tile
reads, plan with its requests, choices and estimate, fragments, requests and bytes) and the
same errors, on every layout (cell and tile orders, attributes sharing an object, cells of
several sizes) and with several fragments."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dense_model import PROFILE, schemas
from test_direct_reads import _build, _general, both_paths

import tessera
import tessera.format.selection
from tessera.array import calling_thread
from tessera.array.read.recipe import footprint
from tessera.errors import CorruptDataError

METHODS = ("auto", "get", "merge", "fetch")
#: The fragments listed once per test: a slow example must not list again between the two
#: reads it compares.
NO_RELIST = tessera.ReadConfig(refresh_s=float("inf"))


def _full_report(arr: tessera.Array) -> tuple[object, ...]:
    r = arr.last_read
    assert r is not None and r.stats is not None
    by = {k: (v.requests, v.bytes_received) for k, v in r.stats.by_method.items()}
    plan = r.plan
    if plan is None:  # a box no fragment touches: fill values
        return r.tile_reads, r.fragments_used, r.fragments_skipped, r.cell_reads, by
    choices = [(c.method, c.requests.tolist(), c.need.tile, c.need.key, c.need.offset,
                c.need.length, c.need.raw, c.need.ranges.tolist(), c.need.selected_bytes,
                c.need.pushdown_read_bytes, c.mix) for c in plan.choices]
    return (r.tile_reads, r.fragments_used, r.fragments_skipped, r.cell_reads, by,
            plan.method, plan.phi, plan.profile, plan.pricing, choices, plan.requests,
            plan.totals, plan.estimate)


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the reads made by recipe (a test that means to exercise them checks it)."""
    made: list[int] = []
    real = calling_thread.run

    def counted(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        made.append(out is not None)
        return out

    monkeypatch.setattr(calling_thread, "run", counted)
    return made


def _box_sel(lo: tuple[int, ...], size: tuple[int, ...], ints: tuple[bool, ...]) -> tuple:
    return tuple(a if i else slice(a, a + n) for a, n, i in zip(lo, size, ints, strict=True))


@st.composite
def box_reads(draw: st.DrawFn) -> tuple[Any, ...]:
    """A history of box writes, then one box size read at several places."""
    schema = draw(schemas())
    writes = []
    for _ in range(draw(st.integers(1, 3))):
        lo, hi = [], []
        for d in schema.dims:
            a = draw(st.integers(d.domain[0], d.domain[1]))
            lo.append(a)
            hi.append(draw(st.integers(a, d.domain[1])))
        writes.append(("box", (tuple(lo), tuple(hi))))
    if draw(st.booleans()):  # one write of the whole domain first: boxes it holds
        writes.insert(0, ("box", (schema.lower, tuple(d.domain[1] for d in schema.dims))))
    size = tuple(draw(st.integers(1, d.size)) for d in schema.dims)
    ints = tuple(n == 1 and draw(st.booleans()) for n in size)
    places = [tuple(draw(st.integers(d.domain[0], d.domain[1] - n + 1))
                    for d, n in zip(schema.dims, size, strict=True)) for _ in range(4)]
    return (schema, writes, [], draw(st.integers(0, 2**32 - 1))), size, ints, places


def _check(url: str, case: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    history, size, ints, places = case
    schema = history[0]
    arr, model = _build(url, history)
    arr.reads = NO_RELIST
    names = [a.name for a in schema.attrs]
    arr.read(..., attrs=names)  # lists the fragments
    for method in METHODS:
        for lo in places + places:  # the second round reads by recipe wherever it can
            both_paths(arr, _box_sel(lo, size, ints), method, model, monkeypatch,
                       _full_report)


@PROFILE
@given(case=box_reads())
def test_recipe_reads_match_the_general_path_memory(monkeypatch, case) -> None:
    _check("memory://recipe", case, monkeypatch)


@settings(PROFILE, max_examples=15)
@given(case=box_reads())
def test_recipe_reads_match_the_general_path_file(monkeypatch, tmp_path_factory,
                                                  case) -> None:
    _check(tmp_path_factory.mktemp("recipe").as_uri(), case, monkeypatch)


@pytest.mark.parametrize("cell_order", ["row-major", "col-major"])
@pytest.mark.parametrize("tile_order", ["row-major", "col-major"])
@pytest.mark.parametrize("attr_layout", ["attr-major", "tile-major"])
def test_crops_at_new_places_are_read_by_recipe_on_every_layout(
        cell_order: str, tile_order: str, attr_layout: str, runs: list[int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Attributes sharing one object (tile-major) move alike only with cells of one size;
    # apart, each in its own object, any sizes.
    b_type, c_type = ("(3,)u1", "float64") if attr_layout == "attr-major" else ("(4,)u1",
                                                                               "float32")
    schema = tessera.ArraySchema(
        [tessera.Dim("y", (0, 99), 16), tessera.Dim("x", (0, 79), 16)],
        [tessera.Attr("a", "int32"), tessera.Attr("b", b_type), tessera.Attr("c", c_type)],
        cell_order=cell_order, tile_order=tile_order, attr_layout=attr_layout)
    arr = tessera.create_array(f"memory://recipe-layout/{uuid.uuid4().hex}", schema)
    rng = np.random.default_rng(1)
    data = {"a": rng.integers(-9, 9, (100, 80)).astype(np.int32),
            "b": rng.integers(0, 255, (100, 80, int(b_type[1]))).astype(np.uint8),
            "c": rng.normal(size=(100, 80)).astype(c_type)}
    arr.write(data)
    arr.reads = NO_RELIST
    arr.read(...)  # lists the fragments
    seen: set[object] = set()
    repeats = 0
    for r, c in [(3, 5), (40, 2), (70, 60), (33, 47), (17, 17), (0, 0), (80, 60), (65, 49)]:
        for sel in [(slice(r, r + 9), slice(c, c + 7)), (slice(r, r + 20), slice(c, c + 20)),
                    (r, slice(c, c + 12)), (slice(r, r + 5), c)]:
            box = tessera.format.selection.box_of(sel, schema)
            sig = footprint(schema, box[0], box[1])[0], box[2]
            # A plan whose object holds both whole tiles and ranges is kept by exact
            # position (tessera.query.plan_cache), so is no recipe's.
            whole: dict[str, set[bool]] = {}
            for choice in arr.explain(sel).choices:
                whole.setdefault(choice.need.key, set()).add(choice.method == "get")
            repeats += sig in seen and all(len(w) == 1 for w in whole.values())
            seen.add(sig)
            got = arr[sel]
            report = _full_report(arr)
            for name, want in data.items():
                np.testing.assert_array_equal(got[name], want[sel])
            with _general(monkeypatch):
                arr[sel]
            assert _full_report(arr) == report
    assert repeats > 8 and sum(runs) == repeats  # every footprint read before: by recipe


def test_a_recipe_follows_the_newest_fragment_holding_the_box(runs: list[int]) -> None:
    data = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
    arr = tessera.from_numpy(f"memory://recipe-frags/{uuid.uuid4().hex}", data, tile=(8, 8))
    arr.reads = NO_RELIST
    patch = -np.arange(16 * 16, dtype=np.int32).reshape(16, 16)
    arr.write(patch, origin=(16, 16))
    data[16:32, 16:32] = patch
    arr[:]  # lists the fragments
    for r, c in [(2, 2), (18, 18), (10, 10), (20, 3), (40, 40), (17, 20)]:
        np.testing.assert_array_equal(arr[r:r + 4, c:c + 4], data[r:r + 4, c:c + 4])
        report = arr.last_read
        assert report.fragments_used == 1 and report.fragments_skipped == 1
        assert {t.fragment for t in report.tile_reads} == {
            arr.fragments[1 if r >= 16 and r + 3 < 32 and c >= 16 and c + 3 < 32 else 0].name}
    assert sum(runs) >= 2


def test_a_damaged_tile_read_by_recipe_raises_as_the_general_path_does(
        runs: list[int]) -> None:
    data = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
    url = f"memory://recipe-damage/{uuid.uuid4().hex}"
    arr = tessera.from_numpy(url, data, tile=(32, 32))
    arr.reads = NO_RELIST
    arr[:]  # lists the fragments
    np.testing.assert_array_equal(arr[0:32, 0:32], data[0:32, 0:32])  # whole tile: checked
    np.testing.assert_array_equal(arr[32:64, 32:64], data[32:64, 32:64])
    assert runs == [True]
    store = tessera.open_store(url)
    key = arr.last_read.tile_reads[0].key
    blob = bytearray(store.get(key))
    blob[-4:] = b"\xff\xff\xff\xff"  # the last tile's last cell
    store.put(key, bytes(blob))
    with pytest.raises(CorruptDataError, match="checksum") as err:
        arr[32:64, 32:64]
    assert err.value.tile == (1, 1)
    assert runs == [True, False]  # the recipe saw the damage and left the read to the loop


def test_recipes_are_dropped_when_the_fragments_change(runs: list[int]) -> None:
    data = np.zeros((32, 32), np.int32)
    arr = tessera.from_numpy(f"memory://recipe-change/{uuid.uuid4().hex}", data, tile=(8, 8))
    arr.reads = NO_RELIST
    arr[:]
    arr[0:4, 0:4]
    arr[4:8, 4:8]
    assert runs == [True] and len(arr._recipes) == 1
    recipe = next(iter(arr._recipes.values()))
    arr.write(np.ones((32, 32), np.int32))
    np.testing.assert_array_equal(arr[4:8, 4:8], np.ones((4, 4)))  # lists the new fragment
    np.testing.assert_array_equal(arr[9:13, 1:5], np.ones((4, 4)))
    assert runs == [True]  # planned again, on the new list
    assert len(arr._recipes) == 1 and next(iter(arr._recipes.values())) is not recipe
    np.testing.assert_array_equal(arr[20:24, 2:6], np.ones((4, 4)))
    assert runs == [True, True]


def test_a_read_by_recipe_on_a_folder_matches(tmp_path: Path, runs: list[int],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    data = np.arange(200 * 200, dtype=np.float32).reshape(200, 200)
    arr = tessera.from_numpy(tmp_path.as_uri(), data, tile=(64, 64))
    arr.reads = NO_RELIST
    arr[:]
    for r, c in [(3, 5), (100, 20), (150, 150), (60, 60)]:
        np.testing.assert_array_equal(arr[r:r + 20, c:c + 20], data[r:r + 20, c:c + 20])
        report = _full_report(arr)
        with _general(monkeypatch):
            arr[r:r + 20, c:c + 20]
        assert _full_report(arr) == report
    assert sum(runs) >= 1


def test_a_read_by_recipe_makes_its_report_when_asked(runs: list[int]) -> None:
    data = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
    arr = tessera.from_numpy(f"memory://recipe-lazy/{uuid.uuid4().hex}", data, tile=(16, 16))
    arr.reads = NO_RELIST
    arr[:]
    arr[1:5, 2:6]
    np.testing.assert_array_equal(arr[20:24, 40:44], data[20:24, 40:44])
    assert runs == [True]
    stats = arr.last_read_stats  # the I/O, without making the tile list and plan
    assert stats is not None and stats.requests == 1 and callable(arr._last_read)
    report = arr.last_read
    assert report.stats is stats and not callable(arr._last_read)
    assert [t.tile_index for t in report.tile_reads] == [(1, 2)]
    arr[:]  # a read the general way: its stats are its report's
    assert arr.last_read_stats is arr.last_read.stats
