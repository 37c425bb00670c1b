"""tessera.h5 against h5py itself: the same operation on an HDF5 file through h5py and on a
tessera.h5 file gives the same values, dtypes and shapes, or an exception of the same
built-in class. Only features that are not HDF5-specific are compared."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

import tessera.h5 as th5  # noqa: E402
from tessera.errors import TesseraError  # noqa: E402


@pytest.fixture
def files(tmp_path):
    real = h5py.File(tmp_path / "real.h5", "w")
    ours = th5.File(str(tmp_path / "ours"), "w")
    yield real, ours
    real.close()
    ours.close()


BUILTIN = (TypeError, ValueError, KeyError, IndexError, NotImplementedError, OSError)


def _outcome(fn: Callable[[Any], Any], f: Any) -> tuple[str, Any]:
    try:
        return "value", fn(f)
    except BUILTIN as err:
        kind = next(c for c in BUILTIN if isinstance(err, c))
        return "error", kind.__name__


def same(files, fn: Callable[[Any], Any]) -> None:
    """``fn`` gives the same answer (value, dtype, shape; or exception class) on both."""
    real, ours = files
    want, got = _outcome(fn, real), _outcome(fn, ours)
    assert got[0] == want[0], f"h5py gave {want}, tessera.h5 {got}"
    if want[0] == "error":
        # the one known difference: h5py raises OSError (HDF5's own error) for an index
        # list past the end of some multi-dimensional selections, IndexError for others;
        # tessera.h5 raises IndexError for all (docs/integrations.md)
        if (want[1], got[1]) != ("OSError", "IndexError"):
            assert got[1] == want[1], f"h5py raised {want[1]}, tessera.h5 {got[1]}"
        return
    a, b = want[1], got[1]
    assert type(b) is type(a), f"h5py gave a {type(a).__name__}, tessera.h5 a {type(b).__name__}"
    if isinstance(a, np.ndarray | np.generic):
        assert b.dtype == a.dtype and np.shape(b) == np.shape(a)
        np.testing.assert_array_equal(b, a)
    else:
        assert b == a


# -- attributes -----------------------------------------------------------------------------

ATTR_VALUES = [b"Hello", "héllo", np.array([b"h"], "S1"), np.bytes_(b"xy"),
               np.array([b"ab", b"c"]), 42, 2.5, np.float32(1.5), np.arange(6).reshape(2, 3),
               np.array([1, 2], np.uint64), np.int8(-3), True]


@pytest.mark.parametrize("value", ATTR_VALUES, ids=repr)
@pytest.mark.parametrize("on", ["file", "dataset"])
def test_attribute_values_read_back_as_h5py_reads_them(files, value, on):
    def roundtrip(f):
        obj = f if on == "file" else f.require_dataset("d", (3,), "i4")
        obj.attrs["a"] = value
        return obj.attrs["a"]
    same(files, roundtrip)


@pytest.mark.parametrize("on", ["file", "dataset"])
def test_attribute_names_in_bytes(files, on):
    def node(f):
        return f if on == "file" else f.require_dataset("d", (3,), "i4")

    def use(f):
        obj = node(f)
        obj.attrs[b"x"] = 42
        return (b"x" in obj.attrs, "x" in obj.attrs, sorted(obj.attrs.keys()),
                int(obj.attrs[b"x"]), int(obj.attrs.get(b"x")))
    same(files, use)

    def delete(f):
        obj = node(f)
        del obj.attrs[b"x"]
        return "x" in obj.attrs
    same(files, delete)


def test_embedded_nul_in_a_bytes_attribute_is_refused(files):
    same(files, lambda f: f.attrs.__setitem__("y", b"Hello\x00Hello"))


# -- values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("data, dtype", [
    ([2**63 - 1, 2**63], np.uint64), ([-(2**63), 2**63 - 1], np.int64),
    ([2**64 - 1, 0], "u8"), ([1.7, -2.2], "i4"), ([1, 2, 3], "f4"), ([0.1, 0.2], "f8"),
])
def test_lists_keep_their_values(files, data, dtype):
    same(files, lambda f: f.create_dataset("x", data=data, dtype=dtype)[:])

    def overwrite(f):
        d = f["x"]
        d[:] = data[::-1]
        return d[:]
    same(files, overwrite)


# -- selections -----------------------------------------------------------------------------

SELECTIONS_1D = {
    "past the end, stepped": np.s_[100:400:3], "past the end": np.s_[40:60],
    "backwards": np.s_[::-1], "step 0": np.s_[::0], "unsorted list": [1, 3, 2],
    "repeated list": [1, 1, 2], "negative decreasing": [-2, -3], "negative increasing": [-3, -2],
    "None": None, "dict": {}, "mask of the wrong size": np.ones(10, bool),
    "full mask": np.arange(50) > 45, "index past the end": 60, "index before the start": -60,
    "last": -1, "empty past the end": np.s_[50:], "start before the start": np.s_[-100:3],
    "empty list": [], "list past the end": [60], "array": np.array([3, 5]), "float": 1.5,
    "empty tuple": (), "ellipsis": Ellipsis, "empty range": np.s_[5:2],
    "numpy int": np.int64(3), "short bool list": [True, False], "two indices": (0, 0),
    "slice and int": (slice(None), 1), "float bounds": np.s_[1.5:3],
}

SELECTIONS_2D = {
    "two lists": ([0, 2], [0, 1]), "ellipsis and int": (Ellipsis, 1), "row": 1,
    "unsorted column list": (slice(None), [2, 0]), "column past the end": (slice(0, 2), 5),
    "newaxis": (np.newaxis, slice(None)), "two ellipses": (Ellipsis, Ellipsis),
    "list and slice": ([1, 4], slice(1, 3)), "mask row": (np.arange(10) % 3 == 0, 1),
    "full 2-D mask": np.arange(30).reshape(10, 3) % 4 == 0, "stepped both": np.s_[1::3, ::2],
}


@pytest.mark.parametrize("sel", SELECTIONS_1D.values(), ids=SELECTIONS_1D.keys())
def test_one_dimensional_selections_as_h5py(files, sel):
    same(files, lambda f: f.create_dataset("d", data=np.arange(50), chunks=(7,))[sel])


@pytest.mark.parametrize("sel", SELECTIONS_2D.values(), ids=SELECTIONS_2D.keys())
def test_two_dimensional_selections_as_h5py(files, sel):
    same(files, lambda f: f.create_dataset("d", data=np.arange(30).reshape(10, 3),
                                           chunks=(4, 2))[sel])


@pytest.mark.parametrize("sel", [np.s_[40:60], np.s_[::-1], [3, 1], [1, 1], np.s_[2:10:3],
                                 [2, 5, 9], np.arange(50) > 40, np.s_[::0], None],
                         ids=repr)
def test_writes_take_the_same_selections(files, sel):
    def write(f):
        d = f.create_dataset("d", data=np.arange(50), chunks=(7,))
        d[sel] = -1
        return d[:]
    same(files, write)


# -- creation, require, resize, astype, direct reads and writes -----------------------------

def _props(d: Any) -> tuple[Any, ...]:
    return (d.shape, d.dtype, d.maxshape, np.asarray(d[...]).tolist())


@pytest.mark.parametrize("make", [
    lambda f: f.create_dataset("x", 20, maxshape=40, dtype="f4"),
    lambda f: f.create_dataset("x", (20,), chunks=10, dtype="f4"),
    lambda f: f.create_dataset("x", shape=3, data=np.arange(3)),
    lambda f: f.create_dataset("x", (4, 3), maxshape=(None, 3), dtype="i2"),
    lambda f: f.create_dataset("x", (100,), chunks=(200,), dtype="i4"),
    lambda f: f.create_dataset("x", (100,), chunks=(200,), maxshape=(None,), dtype="i4"),
    lambda f: f.create_dataset("x", data=np.arange(6).reshape(2, 3), fillvalue=7),
    lambda f: f.require_dataset("x", 10, "f"),
    lambda f: f.create_dataset(b"x", (2,), "i4"),
], ids=["int shape and maxshape", "int chunks", "int shape with data", "maxshape None",
        "chunks past the shape", "chunks past the shape, growable", "fillvalue",
        "require int shape", "bytes name"])
def test_creation_arguments(files, make):
    same(files, lambda f: _props(make(f)))


@pytest.mark.parametrize("have, want, exact", [
    ("i4", "i2", False), ("i2", "i4", False), ("i4", "i2", True), ("i4", "i4", True),
    ("f8", "f4", False), ("f4", "f8", False),
])
def test_require_dataset_dtypes(files, have, want, exact):
    def req(f):
        f.create_dataset("x", (5,), have)
        return f.require_dataset("x", (5,), want, exact=exact).dtype
    same(files, req)


def test_require_dataset_finds_the_same_object(files):
    same(files, lambda f: f.require_dataset("x", (10, 3), "f") ==
         f.require_dataset("x", (10, 3), "f"))
    same(files, lambda f: f.require_dataset("x", (9, 3), "f"))  # another shape: TypeError
    same(files, lambda f: f.require_group("x"))                 # a dataset, not a group

    def grown(f):
        d = f.create_dataset("r", (0, 3), maxshape=(None, 3), dtype=int)
        d.resize((20, 3))
        return f.require_dataset("r", shape=(0, 3), maxshape=(None, 3), dtype=int).shape
    same(files, grown)


@pytest.mark.parametrize("call", [
    lambda d: d.resize(50, axis=2), lambda d: d.resize(50, axis=-1),
    lambda d: d.resize(12, axis=0), lambda d: d.resize((12, 3)),
], ids=["axis past the end", "negative axis", "axis 0", "shape"])
def test_resize(files, call):
    def run(f):
        d = f.create_dataset("r", (10, 3), maxshape=(None, 3), dtype="i4")
        call(d)
        return d.shape
    same(files, run)


def test_resize_without_maxshape(files):
    same(files, lambda f: f.create_dataset("x", (5,), "i4").resize((10,)))


def test_astype(files):
    def use(f):
        d = f.create_dataset("x", data=np.arange(5, dtype="i4"))
        a = d.astype("f4")
        return len(a), np.asarray(a, dtype="i2"), a[1:3], d.len()
    real, ours = files
    want, got = use(real), use(ours)
    assert want[0] == got[0] and want[3] == got[3]
    for x, y in zip(want[1:3], got[1:3], strict=True):
        assert x.dtype == y.dtype and x.tolist() == y.tolist()


@pytest.mark.parametrize("call", [
    lambda d: d.read_direct(np.zeros(3, "i4")),
    lambda d: d.write_direct(np.zeros(3, "i4")),
    lambda d: d.read_direct(np.zeros((5, 2), "i4", order="F")[:, :1].copy(order="F")),
    lambda d: d.read_direct(np.zeros((2, 5), "i4").T),
    lambda d: d.write_direct(np.zeros((2, 5), "i4").T),
    lambda d: d.__setitem__((slice(None), 1), np.zeros((5, 1))),
    lambda d: d.__setitem__((slice(None), 1), np.zeros(5)),
    lambda d: d.__setitem__(slice(None), 3),
    lambda d: d.read_direct(np.zeros((5, 2), "i4")),
    lambda d: d.write_direct(np.ones((5, 2), "i4")),
], ids=["read short", "write short", "read fortran column", "read transposed",
        "write transposed", "broadcast misfit", "column", "scalar", "read", "write"])
def test_direct_reads_writes_and_broadcasts(files, call):
    def run(f):
        d = f.create_dataset("x", data=np.arange(10, dtype="i4").reshape(5, 2))
        call(d)
        return d[...]
    same(files, run)


# -- groups and files -----------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda f: f.create_group("g") == f["g"],
    lambda f: hash(f.create_group("g")) == hash(f["g"]),
    lambda f: f.create_dataset("n", data=[1]) == f["n"],
    lambda f: f.create_group("g") != f.create_dataset("n", data=[1]),
    lambda f: f.create_group(b"h").name,
    lambda f: (f.__setitem__(b"m", np.arange(2)), f["m"][:])[1],
    lambda f: (f.create_group("g"), f.get(b"g").name)[1],
    lambda f: (f.create_group("g"), b"g" in f)[1],
    lambda f: "." in f, lambda f: "" in f, lambda f: "/" in f, lambda f: 3 in f,
    lambda f: f.get("zz"), lambda f: f["zz"],
    lambda f: (f.create_group("g"), f.create_group("g")),
    lambda f: (f.create_dataset("n", data=[1]), f.create_dataset("n", data=[1])),
    lambda f: (f.create_group("g"), f.require_dataset("g", (1,), "i4")),
    lambda f: f.__delitem__("zz"),
    lambda f: (f.create_group("b"), f.create_group("a"), f.create_dataset("c", data=[1]),
               list(f.keys()))[-1],
    lambda f: (f.create_group("a/b/c"), sorted(_visit(f)))[1],
    lambda f: (f.create_group("a"), f["a"].create_dataset("x", data=[1]),
               [v.name for v in f["a"].values()], [k for k, _ in f.items()])[2:],
    lambda f: (f.create_group("a"), f.mode)[1],
], ids=["group ==", "group hash", "dataset ==", "group != dataset", "bytes group",
        "bytes setitem", "bytes get", "bytes in", "dot in", "empty in", "slash in",
        "int in", "get missing", "getitem missing", "group exists", "dataset exists",
        "require_dataset on a group", "del missing", "keys order", "visit", "values items",
        "mode"])
def test_groups(files, call):
    same(files, call)


def _visit(f: Any) -> list[str]:
    names: list[str] = []
    f.visit(names.append)
    return names


def test_a_closed_file(files):
    def closed(f):
        f.create_group("g")
        f.close()
        return "g" in f, bool(f)
    same(files, closed)


@pytest.fixture
def read_only(tmp_path):
    real = h5py.File(tmp_path / "real.h5", "w")
    ours = th5.File(str(tmp_path / "ours"), "w")
    for f in (real, ours):
        f.create_group("g")
        f.create_dataset("n", data=np.arange(3))
        f.close()
    real, ours = h5py.File(tmp_path / "real.h5", "r"), th5.File(str(tmp_path / "ours"), "r")
    yield real, ours
    real.close()
    ours.close()


@pytest.mark.parametrize("call", [
    lambda f: f.create_group("q"), lambda f: f.__delitem__("g"),
    lambda f: f.create_dataset("q", data=[1]), lambda f: f["n"].__setitem__(0, 5),
    lambda f: f.attrs.__setitem__("a", 1), lambda f: f.mode, lambda f: f["n"][:],
], ids=["create_group", "del", "create_dataset", "write", "attrs", "mode", "read"])
def test_read_only_files(read_only, call):
    same(read_only, call)


@pytest.mark.parametrize("mode, exists", [("w-", True), ("x", True), ("r", False),
                                          ("r+", False), ("q", True), ("a", True),
                                          ("a", False), ("w", True)])
def test_file_modes(tmp_path, mode, exists):
    real_path, ours_path = tmp_path / "real.h5", tmp_path / "ours"
    if exists:
        h5py.File(real_path, "w").close()
        th5.File(str(ours_path), "w").close()

    def open_(path: Any, module: Any) -> Any:
        f = module.File(path, mode)
        try:
            return f.mode, list(f.keys())
        finally:
            f.close()
    want = _outcome(lambda _: open_(real_path, h5py), None)
    got = _outcome(lambda _: open_(ours_path, th5), None)
    assert got == want


def test_file_names_and_paths(tmp_path):
    import pathlib
    path = pathlib.Path(tmp_path / "ours")
    with th5.File(path, "w") as f:
        assert f.filename == str(path)
    with th5.File(str(path), "r") as f:
        assert f.filename == str(path)


@pytest.mark.parametrize("call", [
    lambda a: (a.create("a", [1, 2, 3, 4], shape=(2, 2), dtype="i2"), a["a"])[1],
    lambda a: a.create("b", [1, 2, 3], shape=(2, 2)),
    lambda a: (a.create("c", 5), a["c"])[1],
    lambda a: (a.create("a", [[1, 2], [3, 4]], dtype="i2"), a.modify("a", [[9, 8], [7, 6]]),
               a["a"])[2],
    lambda a: (a.create("c", 5), a.modify("c", 2.7), a["c"])[2],
    lambda a: (a.modify("n", 1.5), a["n"])[1],
    lambda a: (a.__setitem__("u", 2**63), a["u"])[1],
], ids=["create", "create with another size", "create scalar", "modify", "modify keeps dtype",
        "modify new", "a Python int past int64"])
@pytest.mark.parametrize("on", ["file", "dataset"])
def test_attrs_create_and_modify(files, call, on):
    same(files, lambda f: call((f if on == "file" else f.require_dataset("d", (3,), "i4")).attrs))


@pytest.mark.parametrize("value", [np.array(["a", "b"], dtype="U1"), ["a", "b"], ("é", "b")],
                         ids=["numpy U array", "list of str", "tuple of str"])
def test_text_attributes(files, value):
    same(files, lambda f: (f.attrs.create("x", data=value), f.attrs["x"])[1])


@pytest.mark.parametrize("sel", [np.s_[0:4], np.s_[:], np.s_[...], [], np.s_[2:1]],
                         ids=["past the end", "all", "ellipsis", "empty list", "empty range"])
def test_an_empty_growable_dataset(files, sel):
    same(files, lambda f: f.create_dataset("e", shape=(0,), maxshape=(None,), dtype="i4")[sel])


@pytest.mark.parametrize("sel", [np.s_[3:3], np.s_[5:2], [], np.s_[2:2, :]],
                         ids=["empty slice", "stop before start", "empty list", "empty rows"])
def test_zero_length_selections_and_writes(files, sel):
    def run(f):
        d = f.create_dataset("x", data=np.arange(12).reshape(6, 2))
        got = d[sel]
        d[sel] = np.zeros(got.shape, d.dtype)
        return got, d[...]
    real, ours = files
    want, have = _outcome(run, real), _outcome(run, ours)
    assert have[0] == want[0], (want, have)
    if want[0] == "value":
        for a, b in zip(want[1], have[1], strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype and a.tolist() == b.tolist()


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0)], ids=repr)
@pytest.mark.parametrize("sel", [np.s_[...], np.s_[:], np.s_[0:5], [], np.s_[1:0]],
                         ids=["ellipsis", "all", "past the end", "empty list", "empty range"])
def test_empty_datasets(files, shape, sel):
    def run(f):
        d = f.create_dataset("z", shape, "i4")
        got = d[sel]
        d[sel] = np.zeros(got.shape, "i4")
        return got, d.shape, d.size, d.nbytes, len(d) if d.shape else None
    real, ours = files
    want, have = _outcome(run, real), _outcome(run, ours)
    assert have[0] == want[0], (want, have)
    if want[0] == "value":
        assert have[1][1:] == want[1][1:]
        assert have[1][0].shape == want[1][0].shape and have[1][0].dtype == want[1][0].dtype


@pytest.mark.parametrize("sel", [([1, 4], slice(None, None, 2)), (slice(1, 9, 3), [0, 2]),
                                 (np.arange(10) % 2 == 0, 1), (slice(2, 5), 1)],
                         ids=["list and stepped slice", "stepped slice and list",
                              "mask and int", "rows of one column"])
def test_two_dimensional_writes(files, sel):
    def write(f):
        d = f.create_dataset("d", data=np.arange(30).reshape(10, 3), chunks=(4, 2))
        d[sel] = -1
        return d[...]
    same(files, write)


SCALAR_CALLS = {
    "d[()]": lambda d: d[()], "d[...]": lambda d: d[...], "d[0]": lambda d: d[0],
    "d[:]": lambda d: d[:], "d[[0]]": lambda d: d[[0]], "len": lambda d: len(d),
    "iter": lambda d: list(d), "asarray": lambda d: np.asarray(d),
    "properties": lambda d: (d.shape, d.size, d.ndim, d.nbytes, d.chunks, d.maxshape),
    "write ()": lambda d: (d.__setitem__((), 4.5), d[()])[1],
    "write ...": lambda d: (d.__setitem__(Ellipsis, 5.5), d[()])[1],
    "resize": lambda d: d.resize(()),
    "read_direct": lambda d: (lambda a: (d.read_direct(a), a)[1])(np.zeros((), "f8")),
}


@pytest.mark.parametrize("call", SCALAR_CALLS.values(), ids=SCALAR_CALLS.keys())
def test_scalar_datasets(files, call):
    same(files, lambda f: call(f.create_dataset("s", data=3.0)))


@pytest.mark.parametrize("make", [lambda f: f.create_dataset("i", data=7),
                                  lambda f: f.create_dataset("e", shape=(), dtype="i2"),
                                  lambda f: f.create_dataset("u", data=np.uint64(2**63 + 1))],
                         ids=["int data", "shape ()", "uint64"])
def test_scalar_creation(files, make):
    same(files, lambda f: make(f)[()])


@pytest.mark.parametrize("data", [np.zeros((0,), "f4"), np.zeros((0, 3), "i2")], ids=repr)
def test_empty_datasets_from_data(files, data):
    same(files, lambda f: f.create_dataset("x", data=data)[...])


# -- hypothesis over selections -------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _items(n: int) -> st.SearchStrategy[Any]:
    bound = st.one_of(st.none(), st.integers(-2 * n - 3, 2 * n + 3))
    return st.one_of(
        st.integers(-n - 2, n + 1),
        st.builds(slice, bound, bound, st.one_of(st.none(), st.integers(-3, 4))),
        st.lists(st.integers(-n - 1, n), max_size=5),
        st.lists(st.booleans(), min_size=n, max_size=n).map(lambda b: np.array(b, bool)),
        st.just(Ellipsis), st.just(None),
    )


@st.composite
def selections(draw: st.DrawFn, shape: tuple[int, ...]) -> Any:
    count = draw(st.integers(0, len(shape)))  # (too many indices: the parametrized tests)
    items = [draw(_items(shape[min(i, len(shape) - 1)])) for i in range(count)]
    lists = [i for i, it in enumerate(items) if isinstance(it, (list, np.ndarray))]
    for i in lists[1:]:  # one index list at most (several: the parametrized tests)
        items[i] = slice(None)
    return items[0] if count == 1 and draw(st.booleans()) else tuple(items)


SHAPE = (7, 5)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sel=selections(SHAPE), write=st.booleans())
def test_random_selections_as_h5py(tmp_path_factory, sel, write):
    """Reads and writes of random selections: the same values or the same exception class
    as h5py's. A write gives values of the selection's own shape (h5py refuses to broadcast
    a scalar into some index-list selections, depending on how many points they hold: an
    artefact tessera.h5 does not copy). Which of several problems in one selection h5py
    names first is not copied either: a selection has at most one index per dimension."""
    folder = tmp_path_factory.mktemp("sel")
    real = h5py.File(folder / "real.h5", "w")
    ours = th5.File(str(folder / "ours"), "w")
    try:
        def run(f):
            d = f.create_dataset("d", data=np.arange(35).reshape(SHAPE), chunks=(3, 2))
            if write:
                d[sel] = -np.ones(np.shape(d[sel]), d.dtype)
                return d[...]
            return d[sel]
        same((real, ours), run)
    finally:
        real.close()
        ours.close()


def test_a_name_in_bytes_that_is_not_utf8_is_refused_with_tesseras_error(tmp_path):
    with th5.File(str(tmp_path / "f"), "w") as f:
        with pytest.raises(ValueError, match="not UTF-8") as err:
            f.create_group(b"\xff")
        assert isinstance(err.value, TesseraError)
