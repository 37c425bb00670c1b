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


def _natural(n: int, size: tuple[int, int] = (64, 64), seed: int = 0,
             noise: float = 6.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size[0], 0:size[1]] / max(size)
    out = np.stack([np.stack([rng.uniform(0, 255) * (a * yy + (1 - a) * xx)
                              for a in rng.uniform(0, 1, 3)], -1) for _ in range(n)])
    return np.clip(out + rng.normal(0, noise, out.shape), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def natural() -> Callable[..., np.ndarray]:
    """Makes ``n`` photo-like uint8 RGB images ``(n, *size, 3)``: smooth colour gradients
    with normal noise of ``noise`` levels (chroma with energy at every frequency);
    arguments ``(n, size=(64, 64), seed=0, noise=6.0)``."""
    return _natural
