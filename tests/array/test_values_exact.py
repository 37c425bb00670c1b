"""The promise of ``tessera.format.values``: under ``checked`` no value changes on the way
into an attribute; under ``value`` values that fit the range are converted as HDF5 does;
a value that does not fit raises Tessera's ``InvalidTypeError``, never numpy's errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera
from tessera.errors import InvalidTypeError
from tessera.format.values import fit_values

INTS = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]


@pytest.mark.parametrize("value, dtype", [(2.0**63, "i8"), (2.0**64, "u8"),
                                          (-(2.0**63) - 4096, "i8"), (2.0**31, "i4"),
                                          (-1.0, "u8"), (256.0, "u1")])
def test_value_rule_refuses_floats_past_the_integer_range(value, dtype):
    """cast='value' once crashed with numpy's IndexError on 2.0**63 into int64 (the range
    test was exact, the mask built with a rounded bound came out empty)."""
    with pytest.raises(InvalidTypeError, match="do not fit"):
        fit_values(np.array([value]), np.dtype(dtype), "v", cast="value")


def test_value_rule_keeps_the_largest_floats_inside_the_range():
    assert fit_values(np.array([-(2.0**63)]), np.dtype("i8"), "v", cast="value")[0] == -2**63
    top = np.nextafter(2.0**63, 0)
    assert fit_values(np.array([top]), np.dtype("i8"), "v", cast="value")[0] == int(top)
    assert fit_values(np.array([np.nextafter(2.0**64, 0)]), np.dtype("u8"), "v",
                      cast="value")[0] == int(np.nextafter(2.0**64, 0))


def test_array_write_value_rule_past_int64(tmp_path):
    arr = tessera.from_numpy((tmp_path / "a").as_uri(), np.zeros(4, np.int64))
    with pytest.raises(InvalidTypeError):
        arr.write(np.array([2.0**63]), cast="value")
    assert arr[:].tolist() == [0, 0, 0, 0]


def test_h5_value_rule_past_uint64(tmp_path):
    import tessera.h5 as h5
    with h5.File(str(tmp_path / "f"), "w") as f, pytest.raises(InvalidTypeError):
        f.create_dataset("x", data=np.array([2.0**64]), dtype="u8")


@pytest.mark.parametrize("values, dtype, becomes", [
    (np.array([2**24 + 1]), "f4", 2.0**24),
    (np.array([2**53 + 1], np.int64), "f8", 2.0**53),
    (np.array([2**63 - 1], np.int64), "f8", 2.0**63),
    (np.array([2**64 - 1], np.uint64), "f8", 2.0**64),
    (np.array([16777217.0]), "f4", 2.0**24),
    (np.array([1e-300]), "f4", 0.0),
    (np.array([-1e-50]), "f4", 0.0),
])
def test_checked_refuses_values_that_do_not_survive(values, dtype, becomes):
    """numpy's same_kind rule rounds these silently; the checked rule keeps its promise."""
    with pytest.raises(InvalidTypeError, match="do not survive"):
        fit_values(values, np.dtype(dtype), "v")
    out = fit_values(values, np.dtype(dtype), "v", cast="value")  # HDF5's rounding
    assert out[0] == np.array(becomes, dtype)


def test_checked_rounds_fractions_to_the_nearest_float():
    out = fit_values(np.array([0.1, 1e-30, -3.3e38, np.nan, np.inf]), np.dtype("f4"), "v")
    np.testing.assert_array_equal(out, np.array([0.1, 1e-30, -3.3e38, np.nan, np.inf],
                                                np.float32))
    assert fit_values(np.array([2**53], np.int64), np.dtype("f8"), "v")[0] == 2.0**53


def _neighbours(dtype: str) -> list[int]:
    info = np.iinfo(dtype)
    marks = [int(info.min), int(info.max), 0, 2**53, 2**63, -(2**53), -(2**63)]
    return [m + d for m in marks for d in (-1, 0, 1)]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(INTS), st.sampled_from(INTS), st.data())
def test_integers_are_kept_exactly_or_refused(src, dst, data):
    """Every integer dtype at its min, max and the neighbours of 2**53 and 2**63: into any
    integer dtype the value is stored exactly if it is in range, else refused."""
    sinfo = np.iinfo(src)
    candidates = [v for v in _neighbours(src) if sinfo.min <= v <= sinfo.max]
    value = data.draw(st.sampled_from(candidates))
    arr = np.array([value], dtype=src)
    dinfo = np.iinfo(dst)
    if dinfo.min <= value <= dinfo.max:
        assert int(fit_values(arr, np.dtype(dst), "v")[0]) == value
    else:
        with pytest.raises(InvalidTypeError):
            fit_values(arr, np.dtype(dst), "v")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(INTS), st.sampled_from(["f4", "f8"]), st.data())
def test_integers_into_floats_survive_or_are_refused(src, dst, data):
    sinfo = np.iinfo(src)
    candidates = [v for v in _neighbours(src) if sinfo.min <= v <= sinfo.max]
    value = data.draw(st.sampled_from(candidates))
    arr = np.array([value], dtype=src)
    try:
        out = fit_values(arr, np.dtype(dst), "v")
    except InvalidTypeError:
        assert int(np.array([value], dtype=src).astype(dst)[0]) != value \
            if np.isfinite(np.array([value]).astype(dst)[0]) else True
    else:
        assert int(out[0]) == value


BIG = [2**63 - 1, 2**63, 2**64 - 1, 2**63 + 1]


def test_python_integers_past_int64_are_kept_exactly(tmp_path):
    """numpy turns [2**63 - 1, 2**63] into float64 (both become 2**63); a write into a
    uint64 attribute or dataset keeps every value exactly, on every path."""
    arr = tessera.from_numpy((tmp_path / "a").as_uri(), np.zeros(4, np.uint64))
    arr[:] = BIG
    assert arr[:].tolist() == BIG
    arr.write(BIG[::-1])
    assert arr[:].tolist() == BIG[::-1]
    arr.vindex[[0, 1]] = [2**63 + 7, 2**63 - 7]
    assert arr[0:2].tolist() == [2**63 + 7, 2**63 - 7]
    with pytest.raises(InvalidTypeError, match="does not fit uint64"):
        arr[:] = [2**64, 0, 0, 0]
    with pytest.raises(InvalidTypeError, match="does not fit uint64"):
        arr[0:2] = [-1, 2**63]


def test_h5_datasets_keep_python_integers_past_int64(tmp_path):
    import tessera.h5 as h5
    with h5.File(str(tmp_path / "f"), "w") as f:
        x = f.create_dataset("x", data=[2**63 - 1, 2**63], dtype=np.uint64)
        assert x[:].tolist() == [2**63 - 1, 2**63]
        x[:] = [2**64 - 1, 2**63 + 1]
        assert x[:].tolist() == [2**64 - 1, 2**63 + 1]
        y = f.create_dataset("y", data=[-(2**63), 2**63 - 1], dtype="i8")
        assert y[:].tolist() == [-(2**63), 2**63 - 1]
        z = f.create_dataset("z", data=[1.7, 2.2], dtype="i8")   # h5py truncates floats
        assert z[:].tolist() == [1, 2]
