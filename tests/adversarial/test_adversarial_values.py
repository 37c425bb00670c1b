"""Regression tests from the adversarial probe: values that do not fit an attribute are
refused on every write path (they were stored wrapped: ``2**40 + 7`` read back as ``7``),
fractional and NaN origins are refused (a fractional one was truncated), NaN coordinates of
sparse cells and NaN read bounds are refused (a fragment with NaN bounds hid its valid
cells). Nothing is written when a write is refused."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tessera
import tessera.h5
from tessera.config import WriteConfig
from tessera.errors import InvalidTypeError, SelectionError

INT_DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]


def _url(name: str) -> str:
    return f"memory://adv-{name}-{uuid.uuid4().hex[:8]}"


def _dense(dtype: str, growable: bool = False) -> tessera.Array:
    schema = tessera.ArraySchema(
        [tessera.Dim("x", (0, 7), 4), tessera.Dim("y", (0, 7), 4)],
        [tessera.Attr("v", dtype)], maxshape=(None, 8) if growable else None)
    return tessera.create_array(_url("dense"), schema)


def test_the_probe_case_is_refused_on_setitem_write_and_write_cells() -> None:
    arr = _dense("i4")
    big = np.full((2, 2), 2**40 + 7, np.int64)
    with pytest.raises(InvalidTypeError, match=r"'v' do not fit int32: 1099511627783"):
        arr[0:2, 0:2] = big
    with pytest.raises(InvalidTypeError, match=r"\[-2147483648, 2147483647\]"):
        arr.write(big)
    with pytest.raises(InvalidTypeError, match="1099511627783"):
        arr.write_cells((np.array([0, 1]), np.array([0, 1])), big[0])
    assert arr.fragments == []
    assert arr[:, :].sum() == 0


def test_values_that_fit_are_written_whatever_their_integer_dtype() -> None:
    arr = _dense("u1")
    arr[0:2, 0:2] = np.array([[0, 255], [7, 8]], np.int64)  # int64 into uint8: they fit
    assert arr[0:2, 0:2].tolist() == [[0, 255], [7, 8]]
    with pytest.raises(InvalidTypeError, match=r"-1 \(at index \(1, 0\)\) is outside \[0, 255\]"):
        arr[0:2, 0:2] = np.array([[0, 255], [-1, 8]], np.int64)


def test_the_unsafe_cast_is_explicit() -> None:
    arr = _dense("i4")
    arr.write(np.full((2, 2), 2**40 + 7, np.int64), cast="unsafe")
    assert arr[0:2, 0:2].tolist() == [[7, 7], [7, 7]]  # numpy's wrap-around, asked for
    arr.writes = WriteConfig(cast="unsafe")
    arr[2, 2] = np.int64(2**32 + 5)
    assert arr[2, 2] == 5
    with pytest.raises(ValueError, match="cast must be one of"):
        arr.write(np.ones((1, 1), np.int32), cast="wrap")  # type: ignore[arg-type]


def test_floats_are_refused_into_integers_and_overflowing_floats_into_float32() -> None:
    arr = _dense("i4")
    with pytest.raises(InvalidTypeError, match="does not cast safely"):
        arr[0, 0] = 1.5
    f32 = _dense("f4")
    with pytest.raises(InvalidTypeError, match=r"do not fit float32: 1e\+300"):
        f32[0, 0] = 1e300
    f32[0, 0:3] = np.array([np.nan, np.inf, 1e-30])  # NaN and inf stay; small values round
    assert np.isnan(f32[0, 0]) and np.isinf(f32[0, 1]) and f32[0, 2] == np.float32(1e-30)
    with pytest.raises(InvalidTypeError, match="do not survive float32: 1e-50"):
        f32[0, 2] = 1e-50                           # a non-zero value would become 0
    f32.write(np.array([[1e-50]]), origin=(0, 2), cast="value")  # HDF5's rounding: asked for
    assert f32[0, 2] == 0


def _paths(arr: tessera.Array) -> dict[str, Callable[[np.ndarray], Any]]:
    """Every way a value reaches a dense array's attribute."""
    return {
        "setitem box": lambda v: arr.__setitem__((slice(0, 2), slice(0, 2)), v.reshape(2, 2)),
        "setitem steps": lambda v: arr.__setitem__((slice(0, 4, 2), slice(0, 4, 2)),
                                                   v.reshape(2, 2)),
        "write": lambda v: arr.write(v.reshape(2, 2), origin=(2, 2)),
        "write_cells": lambda v: arr.write_cells((np.arange(4), np.arange(4)), v),
        "oindex": lambda v: arr.oindex.__setitem__(([0, 3], [1, 2]), v.reshape(2, 2)),
        "vindex": lambda v: arr.vindex.__setitem__((np.arange(4), np.arange(4)), v),
        "full mask": lambda v: arr.__setitem__(np.eye(8, dtype=bool)[:, ::-1] & (
            np.arange(8)[:, None] < 4), v),
        "append": lambda v: arr.append(np.resize(v, (1, 8))),
    }


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(INT_DTYPES), path=st.sampled_from(sorted(_paths(
    _dense("i1", growable=True)))), above=st.booleans(), offset=st.integers(1, 1000),
    at=st.integers(0, 3))
def test_no_write_path_accepts_an_out_of_range_integer(dtype: str, path: str, above: bool,
                                                        offset: int, at: int) -> None:
    arr = _dense(dtype, growable=True)
    info = np.iinfo(np.dtype(dtype))
    bad = int(info.max) + offset if above else int(info.min) - offset
    # no numpy integer lies below int64's range or above uint64's
    assume(int(np.iinfo(np.int64).min) <= bad <= int(np.iinfo(np.uint64).max))
    source = np.uint64 if bad > np.iinfo(np.int64).max else np.int64
    values = np.zeros(4, source)
    values[at] = bad
    shape_before = arr.shape
    with pytest.raises(InvalidTypeError, match=f"do not fit {np.dtype(dtype)}: {bad}"):
        _paths(arr)[path](values)
    assert arr.fragments == [] and arr.shape == shape_before  # nothing written, no claim


@pytest.mark.parametrize("path", ["setitem", "create_dataset"])
def test_the_h5_facade_refuses_values_that_do_not_fit(path: str) -> None:
    f = tessera.h5.File(_url("h5"), "w")
    if path == "setitem":
        d = f.create_dataset("x", data=np.arange(4, dtype=np.int16))
        with pytest.raises(InvalidTypeError, match=r"dataset '/x' do not fit int16: 1048576"):
            d[0:2] = np.array([2**20, 1])
        assert d[:].tolist() == [0, 1, 2, 3]
        d[0:2] = np.array([2.7, -1.5])  # h5py's conversion of floats that fit: truncation
        assert d[:].tolist() == [2, -1, 2, 3]
    else:
        with pytest.raises(InvalidTypeError, match="do not fit int32: 1099511627776"):
            f.create_dataset("y", data=[1, 2**40], dtype="i4")
        assert "y" not in f


def test_origins_must_be_integers() -> None:
    arr = _dense("i4")
    with pytest.raises(SelectionError, match=r"origin\[0\] must be an integer, got 0.5"):
        arr.write(np.ones((2, 2), np.int32), origin=(0.5, 4))  # type: ignore[arg-type]
    with pytest.raises(SelectionError, match="got nan"):
        arr.write(np.ones((2, 2), np.int32), origin=(float("nan"), 0))  # type: ignore[arg-type]
    with pytest.raises(SelectionError, match="got True"):
        arr.write(np.ones((2, 2), np.int32), origin=(True, 0))  # type: ignore[arg-type]
    assert arr.fragments == []
    arr.write(np.ones((2, 2), np.int32), origin=(np.int64(6), 6))
    assert arr[6:8, 6:8].tolist() == [[1, 1], [1, 1]]


def _sparse() -> tessera.Array:
    schema = tessera.ArraySchema([tessera.Dim("x", (0.0, 10.0), 5.0),
                                  tessera.Dim("y", (0.0, 10.0), 5.0)],
                                 [tessera.Attr("v", "i4")], sparse=True)
    return tessera.create_array(_url("sparse"), schema)


def test_nan_coordinates_are_refused_before_anything_is_written() -> None:
    sp = _sparse()
    sp.write_cells((np.array([1.0]), np.array([1.0])), np.array([9], np.int32))
    with pytest.raises(SelectionError, match="coordinate 0 for dimension 'x' is NaN"):
        sp.write_cells((np.array([np.nan, 2.0]), np.array([1.0, 3.0])),
                       {"v": np.array([1, 2], np.int32)})
    with pytest.raises(SelectionError, match="'y' is NaN"):
        sp.delete_cells((np.array([1.0]), np.array([np.nan])))
    assert len(sp.fragments) == 1
    got = sp[:, :]
    assert got.coords[0].tolist() == [1.0] and got.values["v"].tolist() == [9]


def test_nan_read_bounds_are_refused_on_sparse_arrays() -> None:
    sp = _sparse()
    sp.write_cells((np.array([2.0]), np.array([3.0])), np.array([5], np.int32))
    for sel in [(slice(np.nan, 5.0), slice(None)), (slice(None), slice(0.0, np.nan)),
                (np.nan, 3.0), ([2.0, np.nan], slice(None))]:
        with pytest.raises(SelectionError, match="NaN"):
            sp[sel]
    assert sp[0.0:5.0, 0.0:5.0].values["v"].tolist() == [5]


def test_unsigned_indices_past_the_domain_do_not_wrap() -> None:
    arr = _dense("i4")
    with pytest.raises(SelectionError, match="18446744073709551615 is outside"):
        arr[np.array([2**64 - 1], np.uint64), 0]


@given(start=st.integers(-12, 12), stop=st.integers(-12, 12),
       step=st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
@settings(max_examples=300, deadline=None)
def test_slices_with_a_bound_one_past_an_end_read_what_numpy_reads(
        start: int, stop: int, step: int | None) -> None:
    # A start one before the first cell (a[-11:5] of 10 cells) or one after the last with a
    # negative step (a[10:5:-1]) selected a coordinate outside the domain: an extra cell.
    data = np.arange(10, dtype=np.int32)
    arr = _array1d(data)
    sel = slice(start, stop, step)
    assume(all(v is None or -11 <= v <= 10 for v in (start, stop)))
    assert arr[sel].tolist() == data[sel].tolist()


_ARR1D: dict[str, Any] = {}


def _array1d(data: np.ndarray) -> Any:
    if "a" not in _ARR1D:
        _ARR1D["a"] = tessera.from_numpy(f"memory://adv-1d-{uuid.uuid4().hex}", data,
                                         tile=(4,))
    return _ARR1D["a"]
