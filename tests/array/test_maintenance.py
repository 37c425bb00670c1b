"""Consolidation, vacuum, the visibility rule and orphan clean-up."""

from __future__ import annotations

import numpy as np
import pytest

import tessera
from tessera._sync import run_sync


def _history(store_url) -> tuple[tessera.Array, list[np.ndarray]]:
    url, options = store_url
    schema = tessera.ArraySchema([tessera.Dim("y", (0, 11), 4), tessera.Dim("x", (0, 11), 4)],
                                 [tessera.Attr("v", "int32", fill=-1, codec="zstd")])
    arr = tessera.create_array(f"{url.rstrip('/')}/m", schema, storage_options=options)
    states = []
    arr.write(np.arange(144, dtype=np.int32).reshape(12, 12))
    states.append(arr[:, :])
    arr[2:5, 2:9] = np.full((3, 7), 500, np.int32)
    states.append(arr[:, :])
    arr.write_cells((np.array([0, 11]), np.array([11, 0])), np.array([7, 8], np.int32))
    states.append(arr[:, :])
    arr.delete_cells((np.array([3]), np.array([3])))
    states.append(arr[:, :])
    return arr, states


def test_consolidate_all_then_vacuum(store_url) -> None:
    arr, states = _history(store_url)
    _, options = store_url
    old = [f.timestamp for f in arr.fragments]
    info = arr.consolidate()
    assert info.kind == "consolidated" and info.timestamp == old[-1]
    assert [f.name for f in arr.fragments] == [info.name]
    np.testing.assert_array_equal(arr[:, :], states[-1])
    for ts, state in zip(old, states, strict=True):  # history stays readable until vacuum
        np.testing.assert_array_equal(
            tessera.open_array(arr.uri, at=ts, storage_options=options)[:, :], state)
    # a timestamped handle lists its fragments once: one that read before the vacuum
    # still says why its fragments are gone
    before = tessera.open_array(arr.uri, at=old[1], storage_options=options)
    np.testing.assert_array_equal(before[:, :], states[1])
    removed = arr.vacuum(orphan_grace_s=0, force=True)
    with pytest.raises(tessera.HistoryVacuumedError, match="consolidated and vacuumed"):
        before[:, :]
    # four commit markers and bookkeeping objects, the two dense writes' data objects (the
    # small sparse fragments keep their tiles inline)
    assert removed >= 4 + 4 + 2
    assert len(arr.store.list("__commits")) == 1
    np.testing.assert_array_equal(arr[:, :], states[-1])
    with pytest.raises(tessera.HistoryVacuumedError, match="consolidated and vacuumed"):
        tessera.open_array(arr.uri, at=old[1], storage_options=options)[:, :]
    at_c = tessera.open_array(arr.uri, at=info.timestamp, storage_options=options)
    np.testing.assert_array_equal(at_c[:, :], states[-1])
    assert arr.vacuum(orphan_grace_s=0, force=True) == 0  # nothing left to do


def test_consolidate_a_subset_keeps_newer_fragments_on_top(store_url) -> None:
    arr, states = _history(store_url)
    names = [f.name for f in arr.fragments]
    arr.consolidate(names[:2])
    kinds = [f.kind for f in arr.fragments]
    assert kinds == ["consolidated", "sparse", "delete"]
    np.testing.assert_array_equal(arr[:, :], states[-1])
    arr[0:1, 0:12] = np.zeros((1, 12), np.int32)  # newer than everything
    arr.consolidate([arr.fragments[1].name, arr.fragments[2].name])
    expected = states[-1].copy()
    expected[0, :] = 0
    np.testing.assert_array_equal(arr[:, :], expected)


def test_consolidation_is_atomic_for_readers(store_url) -> None:
    arr, states = _history(store_url)
    _, options = store_url
    reader = tessera.open_array(arr.uri, storage_options=options)
    np.testing.assert_array_equal(reader[:, :], states[-1])
    arr.consolidate()
    np.testing.assert_array_equal(reader[:, :], states[-1])
    assert len(reader.fragments) == 1
    assert reader.last_read.fragments_used == 1


def test_reader_with_a_stale_list_rereads_after_vacuum(store_url) -> None:
    arr, states = _history(store_url)
    _, options = store_url
    reader = tessera.open_array(arr.uri, storage_options=options)
    stale = reader._visible_metas
    listed = run_sync(stale())  # what the reader saw before
    arr.consolidate()
    arr.vacuum(orphan_grace_s=0, force=True)
    calls = {"n": 0}

    async def first_stale_then_fresh(cached_ok: bool = True, lazy: bool = False):
        calls["n"] += 1
        return listed if calls["n"] == 1 else await stale(cached_ok, lazy)

    reader._visible_metas = first_stale_then_fresh
    np.testing.assert_array_equal(reader[:, :], states[-1])
    assert calls["n"] == 2


def test_a_reader_reusing_its_list_rereads_after_vacuum(store_url) -> None:
    """A handle that lists once (refresh_s=inf) finds the fragments it listed vacuumed,
    lists again and answers from the consolidated fragment."""
    arr, states = _history(store_url)
    _, options = store_url
    reader = tessera.open_array(arr.uri, storage_options=options, refresh_s=float("inf"))
    np.testing.assert_array_equal(reader[:, :], states[-1])
    arr.consolidate()
    arr.vacuum(orphan_grace_s=0, force=True)
    np.testing.assert_array_equal(reader[:, :], states[-1])
    assert [f.kind for f in reader.fragments] == ["consolidated"]


def test_orphans_of_dead_writers_are_removed_after_the_grace_period(store_url) -> None:
    arr, _ = _history(store_url)
    arr.store.put("__fragments/deadbeef00000000/v.data", b"half a write")
    arr.store.put("__fragments/deadbeef00000000/__meta.json", b"{}")
    assert arr.vacuum() == 0  # too young: might be a writer still at work
    assert arr.vacuum(orphan_grace_s=0, force=True) == 2
    assert not arr.store.list("__fragments/deadbeef00000000")
    assert len(arr.fragments) == 4


def test_maintenance_needs_a_writable_handle_and_known_names(store_url) -> None:
    arr, _ = _history(store_url)
    _, options = store_url
    reader = tessera.open_array(arr.uri, storage_options=options)
    with pytest.raises(tessera.ReadOnlyError):
        reader.consolidate()
    with pytest.raises(tessera.ReadOnlyError):
        reader.vacuum()
    with pytest.raises(ValueError, match="not a visible fragment"):
        arr.consolidate(["f000-nope"])
    one = arr.consolidate()
    assert arr.consolidate() == one  # a single dense fragment: nothing to merge


def test_vacuum_after_nested_consolidations_removes_everything_hidden(store_url) -> None:
    arr, states = _history(store_url)
    names = [f.name for f in arr.fragments]
    arr.consolidate(names[2:])  # sparse + delete -> C1
    arr.consolidate()  # dense, dense, C1 -> C2
    assert [f.kind for f in arr.fragments] == ["consolidated"]
    arr.vacuum(orphan_grace_s=0, force=True)
    assert [f.kind for f in arr.fragments] == ["consolidated"]
    assert len(arr.store.list("__commits")) == 1
    np.testing.assert_array_equal(arr[:, :], states[-1])


@pytest.mark.parametrize("sparse", [False, True])
def test_maintenance_with_nothing_to_do_returns_quietly(store_url, sparse: bool) -> None:
    url, options = store_url
    schema = tessera.ArraySchema([tessera.Dim("y", (0, 7), 4), tessera.Dim("x", (0, 7), 4)],
                                 [tessera.Attr("v", "int32", codec="zstd")], sparse=sparse)
    arr = tessera.create_array(f"{url.rstrip('/')}/empty", schema, storage_options=options)
    store = tessera.open_store(url, **options)
    before = [o.key for o in store.list()]
    assert arr.consolidate() is None  # no fragments: nothing to merge, as TileDB
    assert arr.consolidate(fragments=[]) is None
    assert arr.vacuum() == 0
    assert [o.key for o in store.list()] == before  # nothing written, nothing removed
    assert arr.fragments == []
    # one fragment, nothing replaced yet: vacuum has nothing to remove either
    if sparse:
        arr.write_cells((np.array([1]), np.array([2])), np.array([5], np.int32))
    else:
        arr.write(np.ones((8, 8), np.int32))
    assert arr.vacuum() == 0


@pytest.mark.parametrize("sparse", [False, True])
def test_time_travel_after_consolidations_of_non_neighbouring_fragments(sparse) -> None:
    """Three writes of one cell; the first and third consolidated, then the second alone:
    travelling back to the second write shows its value (the first write, hidden by the
    first consolidation, reappears there below the second one, as their times say)."""
    url = f"memory://maint-hidden-{sparse}"
    schema = tessera.ArraySchema([tessera.Dim("x", (0, 3), 4)], [tessera.Attr("v", "i4")],
                                 sparse=sparse)
    arr = tessera.create_array(url, schema)
    stamps = []
    for value in (1, 2, 3):
        if sparse:
            info = arr.write_cells((np.array([1]),), np.array([value], np.int32))
        else:
            info = arr.write(np.full(4, value, np.int32))
        stamps.append(info)
    first, second, third = (i.name for i in stamps)
    arr.consolidate([first, third])
    arr.consolidate([second])
    for info, value in zip(stamps, (1, 2, 3), strict=True):
        old = tessera.open_array(url, at=info.timestamp)
        got = old[...].values["v"].tolist() if sparse else old[1:2].tolist()
        assert got == [value], (info.name, got)
    now = tessera.open_array(url)
    assert (now[...].values["v"].tolist() if sparse else now[1:2].tolist()) == [3]


def test_a_consolidation_over_nested_consolidations_keeps_the_newest_values() -> None:
    """What an earlier consolidation hid inside a later one stays hidden when a third one
    merges the later one: it is held already, not brought back above it."""
    arr = tessera.create_array("memory://maint-nested", tessera.ArraySchema(
        [tessera.Dim("x", (0, 3), 4)], [tessera.Attr("v", "i4")]))
    for values in ([1], [2], None, [4], [5], None):
        if values is None:
            arr.consolidate()
        else:
            arr.write(np.array(values, np.int32), origin=(0,))
    arr.write(np.array([7], np.int32), origin=(1,))
    before = arr[:].tolist()
    arr.consolidate()
    assert before == arr[:].tolist() == [5, 7, 0, 0]
