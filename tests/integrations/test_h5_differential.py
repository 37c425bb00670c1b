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
