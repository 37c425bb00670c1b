"""Tensors in tables read selections through the arrays' floor (``tessera.format.selection``)
under ``TENSOR_RULES``: numpy's slice clipping, masks, no repeats. The rules differ from the
arrays' only where ``Rules`` says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.errors import SelectionError
from tessera.format.schema import ArraySchema, Attr, Dim
from tessera.format.selection import (
    ARRAY_RULES,
    TENSOR_RULES,
    normalize_selection,
    normalize_shape,
)
from tessera.tables import TensorTable

bounds = st.one_of(st.none(), st.integers(-12, 12))
steps = st.one_of(st.none(), st.integers(-4, 4).filter(lambda s: s != 0))


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 9), start=bounds, stop=bounds, step=steps)
def test_tensor_slices_clip_as_numpy_does(n, start, stop, step) -> None:
    (dim,) = normalize_shape(slice(start, stop, step), (n,)).dims
    assert dim.coords.tolist() == np.arange(n)[start:stop:step].tolist()


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 9), data=st.data())
def test_tensor_index_lists_and_masks_select_as_numpy_does(n, data) -> None:
    idx = data.draw(st.lists(st.integers(-n, n - 1), unique_by=lambda i: i % n, max_size=n))
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    ref = np.arange(n)
    assert normalize_shape(idx, (n,)).dims[0].coords.tolist() == ref[idx].tolist()
    assert normalize_shape(mask, (n,)).dims[0].coords.tolist() == ref[mask].tolist()


def test_the_rules_differ_only_where_rules_says() -> None:
    schema = ArraySchema([Dim("y", (0, 4), 5)], [Attr("v", "i4")])
    with pytest.raises(SelectionError, match="slice stop 9 is outside dimension 'y'"):
        normalize_selection(slice(0, 9), schema, ARRAY_RULES)
    assert normalize_selection(slice(0, 9), schema, TENSOR_RULES).shape == (5,)
    assert normalize_selection([1, 1], schema, ARRAY_RULES).dims[0].coords.tolist() == [1, 1]
    with pytest.raises(SelectionError, match="indices on dimension 'y' repeat"):
        normalize_selection([1, 1], schema, TENSOR_RULES)
    with pytest.raises(SelectionError, match="slice bounds for dimension 0 must be integers"):
        normalize_shape(slice(0.5, 3), (5,))
    with pytest.raises(SelectionError, match="boolean mask for dimension 0 must be 1-D"):
        normalize_shape(np.ones(4, bool), (5,))


def test_a_table_reads_clipped_slices_and_masks_like_numpy(tmp_path: Path) -> None:
    table = TensorTable.create((tmp_path / "t").as_uri())
    dense = np.arange(60, dtype=np.float32).reshape(6, 10)
    table.write("d", dense)
    rows = np.array([True, False, True, False, False, True])
    np.testing.assert_array_equal(table["d"][2:100, -3:], dense[2:100, -3:])
    np.testing.assert_array_equal(table["d"][rows, ::-3], dense[rows][:, ::-3])
    coo = np.where(dense % 7 == 0, dense, 0)
    table.write("s", coo, format="coo")
    np.testing.assert_array_equal(table["s"][rows, 1:50], coo[rows][:, 1:50])
    with pytest.raises(SelectionError, match="repeat"):
        table["s"][[1, 1]]
