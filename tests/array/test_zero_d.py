"""A 0-d array (no dimensions: one cell) is an array like any other: schema, writes,
fragments, time travel, consolidation, vacuum, numpy's conventions."""

from __future__ import annotations

import numpy as np
import pytest

import tessera
from tessera.errors import InvalidTypeError, SchemaError, SelectionError


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_a_zero_d_array(tmp_path, codec):
    url = (tmp_path / "s").as_uri()
    arr = tessera.create_array(url, tessera.ArraySchema([], [tessera.Attr("v", "f8",
                                                                          codec=codec)]))
    assert arr.shape == () and arr.ndim == 0 and np.isnan(arr[()])
    arr[()] = 3.5
    first = arr.fragments[0].timestamp
    arr[...] = 4.5
    assert arr[()] == 4.5 and type(arr[()]) is np.float64
    assert isinstance(arr[...], np.ndarray) and arr[...].shape == ()   # numpy: x[...] is 0-d
    assert np.asarray(arr).shape == () and float(np.asarray(arr)) == 4.5
    assert tessera.open_array(url, at=first)[()] == 3.5          # time travel
    info = arr.consolidate()
    assert info is not None and info.nonempty_domain == () and info.cell_count == 1
    assert arr.vacuum(orphan_grace_s=0, force=True) > 0
    assert tessera.open_array(url)[()] == 4.5
    with pytest.raises(SelectionError):
        arr[0]
    with pytest.raises(InvalidTypeError, match="len"):
        len(arr)
    with pytest.raises(InvalidTypeError, match="0-d"):
        list(arr)


def test_from_numpy_takes_a_zero_d_array(tmp_path):
    arr = tessera.from_numpy((tmp_path / "s").as_uri(), np.float32(2.5))
    assert arr.shape == () and arr[()] == np.float32(2.5) and arr.dtype == np.float32


def test_a_sparse_array_needs_a_dimension():
    with pytest.raises(SchemaError, match="sparse array needs at least one dimension"):
        tessera.ArraySchema([], [tessera.Attr("v", "f8")], sparse=True)
