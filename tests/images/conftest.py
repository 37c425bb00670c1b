"""The two decodes of image pixels (tessera.images.kernel): tests that compare decoded pixels
with the reference run with each, the numpy decode bit-identical to it, the compiled one
within one level (how few pixels differ is measured in test_kernel.py)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tessera.images import kernel


@pytest.fixture(scope="module", params=["numpy", "compiled"])
def decoder(request: pytest.FixtureRequest) -> str:
    """Each decode in turn; the compiled one is skipped, with the reason, where it was not
    built."""
    if request.param == "compiled" and not kernel.available():
        pytest.skip(str(kernel.why_unavailable()))
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def same_pixels(decoder: str) -> Callable[[np.ndarray, np.ndarray], None]:
    """Asserts decoded pixels equal the reference's as ``decoder`` promises."""
    def check(got: np.ndarray, want: np.ndarray) -> None:
        assert got.shape == want.shape and got.dtype == want.dtype
        if decoder == "numpy" or got.dtype != np.uint8:
            assert np.array_equal(got, want)
            return
        diff = np.abs(got.astype(np.int16) - want.astype(np.int16))
        assert int(diff.max(initial=0)) <= 1

    return check
