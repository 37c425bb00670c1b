"""Tile arithmetic of :mod:`tessera.format.layout` against numpy's index functions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera import ArraySchema, Attr, Dim
from tessera.format.layout import tile_position, tiles_in_order


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=4),
       st.sampled_from(["row-major", "col-major"]), st.data())
def test_tile_position_is_the_place_in_the_global_order(boxes, order, data) -> None:
    """A tile's position in a fragment's tile box is its row in ``tiles_in_order``, as
    numpy's ``ravel_multi_index`` gives it, in both tile orders."""
    schema = ArraySchema([Dim(f"d{i}", (0, 99), 10) for i in range(len(boxes))],
                         [Attr("v", "<i4")], tile_order=order)
    tlo = np.array([min(a, b) for a, b in boxes])
    thi = np.array([max(a, b) for a, b in boxes])
    index = tuple(data.draw(st.integers(int(a), int(b))) for a, b in zip(tlo, thi, strict=True))
    pos = tile_position(schema, tlo, thi, index)
    expected = np.ravel_multi_index(tuple(int(i - a) for i, a in zip(index, tlo, strict=True)),
                                    tuple(int(c) for c in thi - tlo + 1),
                                    order="C" if order == "row-major" else "F")
    assert pos == expected
    assert tuple(tiles_in_order(schema, tlo, thi)[pos]) == index


def test_tile_position_refuses_a_tile_outside_the_box() -> None:
    schema = ArraySchema([Dim("y", (0, 99), 10)], [Attr("v", "<i4")])
    with pytest.raises(ValueError, match="outside the tile box"):
        tile_position(schema, np.array([2]), np.array([4]), (5,))
