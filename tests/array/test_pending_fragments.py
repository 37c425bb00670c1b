"""Dense fragments whose names record their boxes are listed pending: a read loads the
bookkeeping of only the fragments it meets, reads answer as when every fragment is loaded,
fragments named without a box are loaded when listed, a name that disagrees with its
bookkeeping is refused naming the fragment, and a marker a vacuum made void is left out."""

from __future__ import annotations

import numpy as np
import pytest

import tessera
from tessera._sync import run_sync
from tessera.array import fragment as fragment_module
from tessera.array.commits import META_CACHE
from tessera.array.names import name_box, name_id, new_fragment_id
from tessera.errors import CorruptDataError
from tessera.testing.fixtures import StoreLocation


def _appended(store_url: StoreLocation, name: str = "appends") -> tuple[str, np.ndarray]:
    """An array of 8 appends of 4 rows each (one fragment per append) and its values."""
    url, options = store_url
    schema = tessera.ArraySchema([tessera.Dim("y", (0, 31), 4), tessera.Dim("x", (0, 5), 6)],
                                 [tessera.Attr("v", "int32", fill=-1, codec="zstd")])
    arr = tessera.create_array(f"{url.rstrip('/')}/{name}", schema, storage_options=options)
    values = np.arange(32 * 6, dtype=np.int32).reshape(32, 6)
    for start in range(0, 32, 4):
        arr.write(values[start:start + 4], origin=(start, 0))
    return arr.uri, values


def _loaded() -> set[str]:
    """Names of the fragments whose bookkeeping this process has loaded."""
    held = META_CACHE().keys()  # a list, taken under the cache's lock
    return {name for _, name in held}


def test_a_first_read_loads_the_fragments_it_meets(store_url: StoreLocation) -> None:
    uri, values = _appended(store_url)
    META_CACHE().clear()
    fresh = tessera.open_array(uri, storage_options=store_url[1])
    np.testing.assert_array_equal(fresh[9:11, 1:3], values[9:11, 1:3])
    listed = fresh.current_fragments() or run_sync(fresh._visible_metas(lazy=True))
    assert [name_box(m.name) for m in listed] == [((y, 0), (y + 3, 5)) for y in range(0, 32, 4)]
    assert _loaded() == {listed[2].name}
    assert [m.pending for m in listed] == [i != 2 for i in range(8)]
    np.testing.assert_array_equal(fresh[2:6, :], values[2:6])  # meets two more
    assert _loaded() == {listed[i].name for i in (0, 1, 2)}
    np.testing.assert_array_equal(fresh[:, :], values)
    assert not any(m.pending for m in listed)


def test_every_kind_of_read_matches_a_fully_loaded_handle(store_url: StoreLocation) -> None:
    uri, values = _appended(store_url)
    loaded = tessera.open_array(uri, storage_options=store_url[1])
    loaded.fragments  # noqa: B018 (loads every fragment's bookkeeping)
    for sel in [(slice(5, 30, 3), slice(0, 6, 2)), ([3, 17, 30], slice(None)),
                (7, 5), (slice(0, 0), slice(None))]:
        META_CACHE().clear()
        fresh = tessera.open_array(uri, storage_options=store_url[1])
        np.testing.assert_array_equal(fresh[sel], values[sel])
        assert fresh.explain(sel).requests == loaded.explain(sel).requests
    pts = (np.array([1, 13, 29]), np.array([0, 4, 5]))
    META_CACHE().clear()
    fresh = tessera.open_array(uri, storage_options=store_url[1])
    np.testing.assert_array_equal(fresh[tessera.Points(pts)], values[pts])
    META_CACHE().clear()
    fresh = tessera.open_array(uri, storage_options=store_url[1])
    boxes = fresh[tessera.Hyperslabs([(slice(0, 2), slice(None)),
                                      (slice(20, 23), slice(1, 4))])]
    np.testing.assert_array_equal(boxes[0], values[0:2])
    np.testing.assert_array_equal(boxes[1], values[20:23, 1:4])
    META_CACHE().clear()
    fresh = tessera.open_array(uri, storage_options=store_url[1])
    assert [f.nbytes for f in fresh.fragments] == [f.nbytes for f in loaded.fragments]


def test_fragments_named_without_a_box_are_loaded_when_listed(
        store_url: StoreLocation, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fragment_module, "new_fragment_id",
                        lambda replacing=False, box=None: new_fragment_id(replacing))
    uri, values = _appended(store_url, "unboxed")
    META_CACHE().clear()
    fresh = tessera.open_array(uri, storage_options=store_url[1])
    np.testing.assert_array_equal(fresh[9:11, :], values[9:11])
    listed = fresh.current_fragments() or run_sync(fresh._visible_metas(lazy=True))
    assert all(name_box(m.name) is None and not m.pending for m in listed)
    assert _loaded() == {m.name for m in listed}


def test_a_name_that_disagrees_with_its_bookkeeping_is_refused(
        store_url: StoreLocation, monkeypatch: pytest.MonkeyPatch) -> None:
    uri, _ = _appended(store_url, "liar")
    arr = tessera.open_array(uri, mode="w", storage_options=store_url[1])
    monkeypatch.setattr(fragment_module, "new_fragment_id",  # rows 0-3 written, 4-7 named
                        lambda replacing=False, box=None: new_fragment_id(
                            replacing, box and ((box[0][0] + 4, 0), (box[1][0] + 4, 5))))
    arr.write(np.zeros((4, 6), np.int32), origin=(0, 0))
    META_CACHE().clear()
    fresh = tessera.open_array(uri, storage_options=store_url[1])
    with pytest.raises(CorruptDataError, match="its name records a dense fragment") as err:
        fresh[5, 0]
    assert "fragment f" in str(err.value)


def test_a_marker_a_vacuum_made_void_is_left_out(store_url: StoreLocation) -> None:
    uri, values = _appended(store_url, "void")
    arr = tessera.open_array(uri, storage_options=store_url[1])
    newest = arr.fragments[-1].name
    # what a writer a vacuum took for dead leaves until it takes its marker back
    arr.store.delete(f"__fragments/{name_id(newest)}/__meta.json")
    arr.store.put(f"__doomed/{name_id(newest)}", b"{}")
    expected = values.copy()
    expected[28:32] = -1
    META_CACHE().clear()
    fresh = tessera.open_array(uri, storage_options=store_url[1])
    np.testing.assert_array_equal(fresh[26:32, :], expected[26:32])
    assert len(fresh.fragments) == 7
    pts = (np.array([27, 30]), np.array([0, 5]))
    for way in ("points", "again", "union"):
        META_CACHE().clear()
        fresh = tessera.open_array(uri, storage_options=store_url[1])
        if way == "again":  # a handle that read before reads with its last list first
            fresh.reads = tessera.ReadConfig(refresh_s=0)
            np.testing.assert_array_equal(fresh[0:2, :], expected[0:2])
        got = (fresh[tessera.Hyperslabs([(slice(26, 32), slice(None))])][0] if way == "union"
               else fresh[tessera.Points(pts)])
        np.testing.assert_array_equal(got, expected[26:32] if way == "union" else
                                      expected[pts])
    META_CACHE().clear()
    listing = tessera.open_array(uri, storage_options=store_url[1])
    assert newest not in [f.name for f in listing.fragments]
