"""The frequency format (tessera.images.frequency) against an independent numpy reference:
coefficients bit for bit, reconstruction error bounds, reduced resolution, the int8 bound,
diagonal arithmetic and the errors of bad input."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.errors import InvalidArgumentError, InvalidTypeError, SchemaError
from tessera.images.frequency import (
    YCBCR_TO_RGB,
    FrequencyFormat,
    dct_matrix,
    diagonals,
    psnr,
)
from tessera.images.transform import inverse_dct, inverse_dct_raster


def _natural(seed: int, n: int = 2, size: int = 64) -> np.ndarray:
    """Smooth gradients, a few disks and mild noise: an image with natural-ish statistics."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    out = np.empty((n, size, size, 3))
    for i in range(n):
        base = [rng.uniform(0, 255) * (a * yy + (1 - a) * xx) for a in rng.uniform(0, 1, 3)]
        img = np.stack(base, -1)
        for _ in range(4):
            cy, cx, r = [*rng.uniform(0, size, 2).tolist(), rng.uniform(4, size / 3)]
            img[(yy * size - cy) ** 2 + (xx * size - cx) ** 2 < r * r] = rng.uniform(0, 255, 3)
        out[i] = img + rng.normal(0, 3, img.shape)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _reference(img: np.ndarray, q: float, block: int = 32) -> list[np.ndarray]:
    """The spec's reference, written independently: JFIF YCbCr by its formulas, then
    D @ X @ D^T block by block, uniform rounding, diagonals i ascending."""
    r, g, b = (img[..., c].astype(np.float64) for c in range(3))
    ycc = np.stack([0.299 * r + 0.587 * g + 0.114 * b,
                    -0.168736 * r - 0.331264 * g + 0.5 * b + 128,
                    0.5 * r - 0.418688 * g - 0.081312 * b + 128], -1) - 128
    n, h, w, c = ycc.shape
    d = dct_matrix(block)
    cols = [np.zeros((n, c, h // block, w // block, min(k + 1, 2 * block - 1 - k)), np.int64)
            for k in range(2 * block - 1)]
    for i in range(n):
        for ch in range(c):
            for by in range(h // block):
                for bx in range(w // block):
                    x = ycc[i, by * block:(by + 1) * block, bx * block:(bx + 1) * block, ch]
                    coef = np.rint((d @ x @ d.T) / q)
                    for k in range(2 * block - 1):
                        rows = range(max(0, k - block + 1), min(k, block - 1) + 1)
                        cols[k][i, ch, by, bx] = [coef[a, k - a] for a in rows]
    return cols


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_coefficients_equal_the_reference_bit_for_bit(seed) -> None:
    img = _natural(seed)
    fmt = FrequencyFormat()
    got = fmt.encode(img)
    want = _reference(img, 50)
    assert len(got) == 63
    for d, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.dtype == np.int8
        assert np.array_equal(a.astype(np.int64), b), f"diagonal {d}"


def test_every_coefficient_of_an_8_bit_image_fits_int8_at_q50() -> None:
    extremes = np.zeros((4, 32, 32, 3), np.uint8)
    extremes[1] = 255
    extremes[2, ::2] = 255  # stripes: the largest high-frequency energy
    extremes[3, :, ::2] = 255
    cols = FrequencyFormat().encode(extremes)  # raises if anything overflowed
    assert max(int(np.abs(c).max()) for c in cols) <= 82  # 32 * 128 / 50
    assert FrequencyFormat(q=20).dtype == np.int16 and FrequencyFormat(q=33).dtype == np.int8


def test_q1_rgb_round_trip_is_within_one_lsb() -> None:
    img = _natural(7, n=3)
    fmt = FrequencyFormat(q=1, colour="rgb")
    back = fmt.decode(fmt.encode(img))
    assert np.abs(back.astype(int) - img.astype(int)).max() <= 1


def test_quality_rises_with_k() -> None:
    img = _natural(11, n=2, size=128)
    fmt = FrequencyFormat()
    cols = fmt.encode(img)
    scores = [psnr(img, fmt.decode(cols[:k])) for k in (1, 2, 4, 8, 16, 32, 63)]
    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(scores))
    assert scores[-1] > 27  # hard-edged disks: photo crops reach ~30 dB (spec 2.3)


def test_the_truncated_inverse_equals_the_full_one() -> None:
    import scipy.fft

    fmt = FrequencyFormat()
    cols = fmt.encode(_natural(3))
    for k in (1, 4, 8, 16, 32):
        corner = fmt.coefficients(cols[:k])
        r = corner.shape[-1]
        assert r == min(k, 32)
        full = np.zeros((*corner.shape[:-2], 32, 32), np.float64)
        full[..., :r, :r] = corner
        want = scipy.fft.idctn(full, type=2, norm="ortho", axes=(-2, -1))
        assert np.allclose(inverse_dct(corner, 32), want, atol=1e-3)  # float32 work
        n, ch, by, bx = corner.shape[:4]  # the same pixels laid out in rows
        rows = want.transpose(0, 1, 2, 4, 3, 5).reshape(n, ch, by, 32, bx * 32)
        assert np.allclose(inverse_dct_raster(corner, 32), rows, atol=1e-3)


def test_dc_only_at_scale_1_32_gives_the_block_means() -> None:
    img = _natural(5, n=2, size=96)
    fmt = FrequencyFormat()
    small = fmt.decode(fmt.encode(img)[:1], scale=1 / 32)
    means = img.reshape(2, 3, 32, 3, 32, 3).mean(axis=(2, 4))
    quantization = 50 / 2 / 32 * np.abs(YCBCR_TO_RGB).sum(axis=1).max()  # DC step, in RGB
    assert small.shape == (2, 3, 3, 3)
    assert np.abs(small - means).max() <= 0.5 + quantization + 1e-9
    exact = FrequencyFormat(q=1, colour="rgb")  # no colour, finest step: the rounded means
    assert np.abs(exact.decode(exact.encode(img)[:1], scale=1 / 32) - means).max() <= 0.5 + 1 / 64


def test_reduced_resolution_matches_an_area_downsample() -> None:
    img = _natural(9, n=1, size=128)
    fmt = FrequencyFormat(q=1, colour="rgb")
    cols = fmt.encode(img)
    quarter = fmt.decode(cols, scale=1 / 4)  # 8x8 per block from the 8x8 corner
    area = img.reshape(1, 32, 4, 32, 4, 3).mean(axis=(2, 4))
    assert quarter.shape == (1, 32, 32, 3) and psnr(area, quarter) > 30


def test_diagonal_arithmetic() -> None:
    fmt = FrequencyFormat()
    assert fmt.k_max == 63 and [fmt.diagonal_size(d) for d in (0, 1, 31, 32, 62)] == [
        1, 2, 32, 31, 1]
    assert [fmt.kept(k) for k in (1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 63)] == [
        1, 3, 6, 10, 36, 78, 136, 300, 528, 904, 1024]
    flat = np.concatenate(diagonals(32))
    assert sorted(flat.tolist()) == list(range(1024))  # every coefficient once
    for block in (8, 16, 32, 64):  # kept's closed form against the sum of the diagonals
        f = FrequencyFormat(block=block, q=300)
        assert [f.kept(k) for k in range(1, 2 * block)] == [
            sum(len(d) for d in diagonals(block)[:k]) for k in range(1, 2 * block)]
    assert fmt.decode(fmt.encode(_natural(1))[:63]).shape == (2, 64, 64, 3)


def test_gray_keeps_one_channel() -> None:
    img = _natural(2)
    fmt = FrequencyFormat(colour="gray")
    cols = fmt.encode(img)
    assert cols[0].shape == (2, 1, 2, 2, 1)
    gray = (img.astype(float) @ [0.299, 0.587, 0.114])[..., None]
    assert fmt.decode(cols).shape == (2, 64, 64, 1) and psnr(gray, fmt.decode(cols)) > 25


def test_bad_input_says_what_to_do() -> None:
    fmt = FrequencyFormat()
    with pytest.raises(InvalidArgumentError, match=r"astype\(np.uint8\)"):
        fmt.encode(np.zeros((1, 32, 32, 3), np.float32))
    with pytest.raises(InvalidArgumentError, match=r"convert\('RGB'\)"):
        fmt.encode(np.zeros((1, 32, 32, 4), np.uint8))
    with pytest.raises(InvalidArgumentError, match="multiples of 32"):
        fmt.encode(np.zeros((1, 40, 32, 3), np.uint8))
    with pytest.raises(InvalidTypeError, match="k must be an int"):
        fmt.kept(2.0)
    with pytest.raises(InvalidTypeError, match="k must be an int"):
        fmt.kept(True)
    with pytest.raises(InvalidArgumentError, match=r"k must be 1..63 \(63 diagonals"):
        fmt.kept(64)
    assert fmt.check_k("all") == 63
    with pytest.raises(InvalidArgumentError, match="scale must be one of 32/32, 16/32"):
        fmt.decode(fmt.encode(_natural(0))[:4], scale=1 / 3)
    for bad in ({"block": 12}, {"q": 0}, {"colour": "hsv"}, {"transform": "dct4"},
                {"level_shift": 0}):
        with pytest.raises(SchemaError):
            FrequencyFormat(**bad)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(1, 5), k=st.integers(1, 63),
       log_m=st.integers(0, 5), colour=st.sampled_from(["ycbcr", "rgb", "gray"]),
       floats=st.booleans(), blocks=st.tuples(st.integers(1, 3), st.integers(1, 3)))
def test_the_fast_decode_equals_the_reference(
        decoder: str, same_pixels: Callable[[np.ndarray, np.ndarray], None], seed: int,
        n: int, k: int, log_m: int, colour: str, floats: bool,
        blocks: tuple[int, int]) -> None:
    """Chunked, threaded, one gather, the block-means path: pixels equal the plain decode's
    bit for bit with numpy (uint8 and float output) at every k, scale and colour; the
    compiled decode's within one level."""
    fmt = FrequencyFormat(colour=colour)
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (n, 32 * blocks[0], 32 * blocks[1], 3), dtype=np.uint8)
    cols = fmt.encode(img)[:k]
    scale = (1 << log_m) / 32
    dtype = np.float32 if floats else np.uint8
    fast = fmt.decode(cols, scale=scale, output_dtype=dtype, decoder=decoder)
    assert fast.dtype == dtype
    same_pixels(fast, fmt.decode_reference(cols, scale=scale, output_dtype=dtype))


def test_the_fast_decode_spreads_chunks_over_threads_and_stays_exact(
        decoder: str, same_pixels: Callable[[np.ndarray, np.ndarray], None]) -> None:
    from tessera.images import decode as fast

    fmt = FrequencyFormat()
    cols = fmt.encode(_natural(11, n=9))
    want = fmt.decode_reference(cols)
    saved = fast.CHUNK_BYTES, fast.KERNEL_CHUNK_IMAGES
    fast.CHUNK_BYTES = fast.KERNEL_CHUNK_IMAGES = 1  # one image per chunk: 9 over the pool
    try:
        one_by_one = fmt.decode(cols, decoder=decoder)
    finally:
        fast.CHUNK_BYTES, fast.KERNEL_CHUNK_IMAGES = saved
    same_pixels(one_by_one, want)
    cat = np.concatenate(cols, axis=-1)
    together = fast.decode_concatenated(fmt, cat, 63, 32, decoder=decoder)
    assert np.array_equal(together, one_by_one)  # chunks and layouts change no pixel
    with pytest.raises(InvalidArgumentError, match="cannot hold"):
        fast.decode_concatenated(fmt, cat[..., :10], 8, 32)


def test_the_compute_pool_runs_work_inline_on_its_own_threads() -> None:
    """A pool thread that submits to the pool runs the work itself: no thread of the pool
    waits on the pool (which could deadlock a small pool)."""
    import threading

    from tessera._threads import compute_pool, run_chunks, submit

    def inner() -> str:
        return threading.current_thread().name

    def outer() -> tuple[str, str]:
        seen: list[str] = []
        run_chunks(lambda lo, hi: seen.append(threading.current_thread().name), 4, 1)
        assert set(seen) == {threading.current_thread().name}
        return threading.current_thread().name, submit(inner).result()

    mine, theirs = compute_pool().submit(outer).result()
    assert mine == theirs and mine.startswith("tessera-cpu")
    assert submit(inner).result().startswith("tessera-cpu")
    failed = submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failed.result()


def test_chunks_go_on_in_the_callers_thread_while_the_pool_is_busy() -> None:
    """run_chunks: the caller takes pieces too, so work spread while every pool thread waits
    (e.g. on a fetch) still finishes; the lowest failed piece's error is raised after every
    piece ran."""
    import threading

    from tessera._threads import compute_pool, run_chunks, workers

    release = threading.Event()
    blockers = [compute_pool().submit(release.wait) for _ in range(workers())]
    try:
        done: list[tuple[int, int]] = []
        run_chunks(lambda lo, hi: done.append((lo, hi)), 10, 3)
        assert sorted(done) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    finally:
        release.set()
        for b in blockers:
            b.result()
    ran: list[int] = []

    def piece(lo: int, hi: int) -> None:
        ran.append(lo)
        if lo in (2, 6):
            raise ValueError(f"piece {lo}")

    with pytest.raises(ValueError, match="piece 2"):
        run_chunks(piece, 8, 2)
    assert sorted(ran) == [0, 2, 4, 6]


def test_decode_writes_into_an_output_it_is_given_or_says_what_is_wrong() -> None:
    from tessera.images import decode as fast

    fmt = FrequencyFormat()
    cols = fmt.encode(_natural(2, n=3, size=64))
    want = fast.decode(fmt, cols[:8], 32)
    out = np.zeros((5, 64, 64, 3), np.uint8)
    assert fast.decode_concatenated(fmt, cols[:8], 8, 32, out=out[1:4]) is not None
    assert np.array_equal(out[1:4], want) and not out[0].any() and not out[4].any()
    with pytest.raises(InvalidArgumentError, match=r"C-contiguous uint8 array of shape "
                                                   r"\(3, 64, 64, 3\), got uint8 \(3, 64, 63, 3\)"):
        fast.decode_concatenated(fmt, cols[:8], 8, 32, out=out[1:4, :, :63])


def test_an_interrupt_of_the_callers_piece_is_raised_at_once() -> None:
    """A BaseException (an interrupt) in the caller's own piece leaves run_chunks at once, and
    no piece starts after it; a helper's piece already under way finishes."""
    import threading

    from tessera._threads import run_chunks

    class Interrupt(BaseException):
        pass

    caller = threading.current_thread()
    release = threading.Event()
    started: list[int] = []

    def piece(lo: int, hi: int) -> None:
        started.append(lo)
        if threading.current_thread() is caller:
            raise Interrupt
        release.wait()  # a helper's piece holds on until the caller has been interrupted

    with pytest.raises(Interrupt):
        run_chunks(piece, 100, 1)
    release.set()
    assert 1 <= len(started) <= 2  # the caller's piece and at most one helper piece
