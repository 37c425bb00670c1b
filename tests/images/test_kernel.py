"""The compiled decode (tessera.images.kernel): built by the install, chosen by configuration,
equal to the numpy decode within one level through every path that decodes pixels, and
refusing arrays it cannot read inside."""

from __future__ import annotations

import shutil
import sysconfig
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.errors import ConfigError, InvalidArgumentError
from tessera.images import FrequencyFormat, ImageColumns, kernel
from tessera.images import decode as fast

built = pytest.mark.skipif(not kernel.available(), reason=str(kernel.why_unavailable()))


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch):
    """Sets ``TESSERA_IMAGES_DECODER`` for one test (and forgets it after)."""
    def use(value: str | None) -> None:
        if value is None:
            monkeypatch.delenv("TESSERA_IMAGES_DECODER", raising=False)
        else:
            monkeypatch.setenv("TESSERA_IMAGES_DECODER", value)
        kernel.reset()

    yield use
    monkeypatch.delenv("TESSERA_IMAGES_DECODER", raising=False)
    kernel.reset()


def test_the_install_builds_it_where_a_c_compiler_is_found() -> None:
    """``make test`` on a clean clone installs the package, which compiles the kernel (where
    a C compiler and Python's headers are found)."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) here: images decode with numpy")
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.exists():
        pytest.skip(f"no Python headers ({headers}) here: images decode with numpy")
    assert kernel.available(), kernel.why_unavailable()
    assert kernel.why_unavailable() is None


@built
def test_auto_takes_it_and_numpy_by_configuration_never_calls_it(
        configured, monkeypatch: pytest.MonkeyPatch,
        natural: Callable[..., np.ndarray]) -> None:
    fmt = FrequencyFormat()
    cols = fmt.encode(natural(3, (64, 96), noise=8))
    calls: list[tuple[int, int]] = []
    real = kernel.decode_into

    def spy(*args, **kwargs):
        calls.append(args[-2:])
        return real(*args, **kwargs)

    monkeypatch.setattr(kernel, "decode_into", spy)
    configured(None)
    assert kernel.configured() == "compiled"
    compiled = fmt.decode(cols)
    assert calls and sum(hi - lo for lo, hi in calls) == 3
    calls.clear()
    configured("numpy")
    assert kernel.configured() == "numpy"
    assert np.array_equal(fmt.decode(cols), fmt.decode_reference(cols))
    assert not calls
    assert np.abs(compiled.astype(int) - fmt.decode_reference(cols)).max() <= 1
    floats = fmt.decode(cols, output_dtype=np.float32, decoder="compiled")
    assert not calls  # float pixels are not rounded: always the numpy decode
    changed = [c.astype(np.float32) for c in cols]  # coefficients a caller computed
    assert np.array_equal(fmt.decode(changed, decoder="compiled"), fmt.decode_reference(cols))
    assert not calls
    assert np.array_equal(floats, fmt.decode_reference(cols, output_dtype=np.float32))


def test_a_compiled_decode_asked_for_but_missing_is_an_error_naming_why(
        configured, monkeypatch: pytest.MonkeyPatch,
        natural: Callable[..., np.ndarray]) -> None:
    why = "the compiled decode was not built (test)"
    monkeypatch.setattr(kernel, "_module", lambda: why)
    configured("compiled")
    with pytest.raises(ConfigError, match=r"TESSERA_IMAGES_DECODER=compiled, but the compiled"):
        kernel.configured()
    fmt = FrequencyFormat()
    cols = fmt.encode(natural(1, (64, 96), noise=8))
    with pytest.raises(ConfigError, match="not built"):
        fmt.decode(cols, decoder="compiled")
    configured(None)  # auto: numpy, quietly
    assert kernel.configured() == "numpy"
    assert np.array_equal(fmt.decode(cols), fmt.decode_reference(cols))
    configured("fastest")
    with pytest.raises(ConfigError, match="decoder must be 'auto', 'compiled' or 'numpy'"):
        kernel.configured()
    with pytest.raises(InvalidArgumentError, match="decoder must be"):
        fmt.decode(cols, decoder="gpu")


@built
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), k=st.integers(1, 127), log_m=st.integers(0, 6),
       block=st.sampled_from([8, 16, 32, 64]), chroma=st.sampled_from(["4:4:4", "4:2:0"]),
       colour=st.sampled_from(["ycbcr", "rgb", "gray"]), q=st.sampled_from([50.0, 12.0]),
       blocks=st.tuples(st.integers(1, 2), st.integers(1, 3)), noise=st.booleans())
def test_it_equals_the_numpy_decode_within_one_level(
        natural: Callable[..., np.ndarray], seed: int, k: int, log_m: int, block: int,
        chroma: str, colour: str, q: float, blocks: tuple[int, int], noise: bool) -> None:
    """Every block edge, k, scale, colour, chroma mode, int8 and int16 coefficients, smooth
    and noise images; the columns concatenated or one per diagonal give the same pixels."""
    if chroma == "4:2:0" and colour != "ycbcr":
        colour = "ycbcr"  # 4:2:0 is YCbCr only
    fmt = FrequencyFormat(block=block, chroma=chroma, colour=colour, q=q)
    k = min(k, fmt.k_max)
    m = min(1 << log_m, block)
    size = (block * blocks[0], block * blocks[1])
    img = (np.random.default_rng(seed).integers(0, 256, (2, *size, 3), dtype=np.uint8)
           if noise else natural(2, size, seed, noise=8))
    cols = fmt.encode(img)[:k]
    numpy_pixels = fmt.decode(cols, scale=m / block, decoder="numpy")
    compiled = fmt.decode(cols, scale=m / block, decoder="compiled")
    assert int(np.abs(compiled.astype(np.int16) - numpy_pixels).max()) <= 1
    kk = min(k, 2 * m - 1)
    cat = fast.concatenate(cols[:kk])
    assert np.array_equal(fast.decode_concatenated(fmt, cat, kk, m, decoder="compiled"),
                          compiled)


@built
@pytest.mark.parametrize("chroma", ["4:4:4", "4:2:0"])
def test_few_pixels_differ_from_the_numpy_decode(
        chroma: str, natural: Callable[..., np.ndarray]) -> None:
    """Over 48 photo-like images at full quality: a pixel one level away where the two
    orders of float arithmetic round a value within a hair of a half apart (measured about
    1e-5 of the pixels)."""
    fmt = FrequencyFormat(chroma=chroma)
    cols = fmt.encode(natural(48, (128, 128), seed=5, noise=8))
    numpy_pixels = fmt.decode(cols, decoder="numpy")
    diff = np.abs(fmt.decode(cols, decoder="compiled").astype(np.int16) - numpy_pixels)
    assert int(diff.max()) <= 1
    assert float((diff > 0).mean()) < 1e-4


@built
def test_image_reads_through_every_path_agree_with_the_numpy_decode(
        configured, tmp_path, natural: Callable[..., np.ndarray]) -> None:
    """Batches beside the decode, the column cache, crops and reduced resolution."""
    img = natural(40, (64, 96), seed=3, noise=8)
    url = (tmp_path / "set").as_uri()
    for chroma in ("4:4:4", "4:2:0"):
        cols = ImageColumns.create(f"{url}-{chroma[-1]}", size=(64, 96),
                                   fmt=FrequencyFormat(chroma=chroma), group=8, cache=None)
        cols.append(img)
        reads = {}
        for decoder in ("numpy", "compiled"):
            configured(decoder)
            reads[decoder] = [cols.read(np.arange(40), k=63),
                              cols.read([3, 1], k=20, crop=(32, 64, 0, 64)),
                              cols.read(np.arange(0, 40, 3), k=8, scale=0.25)]
        for a, b in zip(reads["numpy"], reads["compiled"], strict=True):
            assert a.shape == b.shape
            assert int(np.abs(a.astype(np.int16) - b).max()) <= 1


@built
def test_arrays_it_cannot_read_inside_are_refused(
        natural: Callable[..., np.ndarray]) -> None:
    fmt = FrequencyFormat()
    cols = fmt.encode(natural(2, (64, 96), noise=8))
    cat = fast.concatenate(cols)
    out = np.empty((2, 64, 96, 3), np.uint8)
    with pytest.raises(InvalidArgumentError, match=r"cannot hold diagonals 0\.\.62"):
        kernel.decode_into(fmt, cat[..., :100], 63, 32, out, 0, 2)
    with pytest.raises(InvalidArgumentError, match="cannot hold"):
        kernel.decode_into(fmt, cols[:10], 63, 32, out, 0, 2)
    with pytest.raises(InvalidArgumentError, match="cannot hold"):
        kernel.decode_into(fmt, cat.astype(np.int32), 63, 32, out, 0, 2)
    for bad in (np.empty((2, 64, 96, 3), np.float32), np.empty((2, 64, 64, 3), np.uint8),
                np.empty((2, 96, 64, 3), np.uint8).transpose(0, 2, 1, 3)):
        with pytest.raises(InvalidArgumentError, match="out must be a C-contiguous uint8"):
            kernel.decode_into(fmt, cat, 63, 32, bad, 0, 2)
    with pytest.raises(InvalidArgumentError, match="out must be"):
        kernel.decode_into(fmt, cat, 63, 32, out, 1, 3)
    kernel.decode_into(fmt, cat, 63, 32, out, 0, 2)
    assert int(np.abs(out.astype(np.int16) - fmt.decode_reference(cols)).max()) <= 1
