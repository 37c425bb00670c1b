"""A random box of a 96 x 80 test array read with a random method, checked against numpy:
shared by the property tests of blocked tiles and of tiles stored raw."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

METHODS = ["auto", "get", "merge", "fetch", "pushdown"]

#: ``method, y0, ny, ys, x0, nx, xs`` of :func:`read_box_checked`.
BOXES = (st.sampled_from(METHODS), st.integers(0, 95), st.integers(1, 96), st.integers(1, 3),
         st.integers(0, 79), st.integers(1, 80), st.integers(1, 4))


def read_box_checked(arr: Any, data: np.ndarray, method: str, y0: int, ny: int, ys: int,
                     x0: int, nx: int, xs: int) -> None:
    """Read rows ``y0::ys`` (``ny`` of them at most) by columns ``x0::xs`` with ``method``;
    assert the cells match ``data`` and that a pushdown did not fall back."""
    sel = (slice(y0, min(96, y0 + ny), ys), slice(x0, min(80, x0 + nx), xs))
    np.testing.assert_array_equal(arr.read(sel, method=method), data[sel])
    if method == "pushdown":
        assert arr.last_read.pushdown_fallbacks == 0, arr.last_read.pushdown_error
