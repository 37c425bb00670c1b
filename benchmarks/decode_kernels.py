"""Compiled decodes of image columns beside Tessera's numpy decode, in one run: which design
makes k = 63 pixels cheapest.

Tessera's compiled decode (``tessera.images.kernel``: C built with the package, each block
gathered, transformed with even/odd butterflies in vector registers, rounded and written
while in cache) beside two earlier numba designs, all exact to within one level of the
numpy decode:

- **hybrid**: three compiled passes (gather + dequantize + YCbCr -> RGB; the middle of the
  separable inverse DCT; rounding, clipping and the interleaved write of whole pixel rows)
  around four BLAS products, the inverse DCT split by the even/odd symmetry of the DCT basis
  (``D[j, m-1-x] = (-1)^j D[j, x]``), so the products are half the size of the numpy
  decode's;
- **blocks as vectors**: one compiled function per chunk of images, every array laid out
  with the blocks innermost, so each step (the colour matrix, each row of the even/odd
  inverse DCT) is a long vector loop.

Each is timed on one thread (an image per call) and over all images on the compute threads
(:func:`tessera._threads.run_chunks`, as the numpy decode runs), medians of ``--reps``.
Writes ``decode_kernels.csv``, ``decode_kernels.md`` and ``decode_kernels.png`` under
``--out``.

    python benchmarks/decode_kernels.py [--images 256] [--reps 7] [--out DIR]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_csv
from tessera._threads import run_chunks, workers
from tessera.images import FrequencyFormat, kernel
from tessera.images.decode import decode_concatenated, gather_index
from tessera.images.transform import _kept_rows, _ycbcr_to_rgb32

try:
    import numba
except ImportError:  # the bench extra installs it
    numba = None

_local = threading.local()


def _workspace(key: tuple[int, ...], shapes: list[tuple[int, int]]) -> list[np.ndarray]:
    """float32 work arrays reused by a thread from call to call (fresh ones fault pages)."""
    held = getattr(_local, "work", None)
    if held is None or held[0] != key:
        held = (key, [np.empty(shape, np.float32) for shape in shapes])
        _local.work = held
    return held[1]


@functools.lru_cache(maxsize=16)
def _split_index(block: int, r: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The corner's gather index split by the parity of the row ``i``: ``[j, i // 2]``."""
    index = gather_index(block, r, k).reshape(r, r)
    return np.ascontiguousarray(index[0::2].T), np.ascontiguousarray(index[1::2].T)


def _even_odd(dm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of even and odd frequency of the kept DCT rows, first half of the outputs."""
    h = dm.shape[1] // 2
    return np.ascontiguousarray(dm[0::2, :h]), np.ascontiguousarray(dm[1::2, :h])


def _hybrid_pre(src: Any, idx_e: Any, idx_o: Any, total: int, q: Any, rgb: bool,
                matrix: Any, n0: int, n1: int, ve: Any, vo: Any) -> None:
    """``ve[(blk, j), ie] = C[2ie, j]``, ``vo[(blk, j), io] = C[2io + 1, j]``."""
    channels, rows, cols = src.shape[1], src.shape[2], src.shape[3]
    r = idx_e.shape[0]
    plane = rows * cols
    zero = np.float32(0.0)
    for n in range(n0, n1):
        for by in range(rows):
            for bx in range(cols):
                here = by * cols + bx
                for part in range(2):
                    idx = idx_e if part == 0 else idx_o
                    dst = ve if part == 0 else vo
                    for j in range(r):
                        for i in range(idx.shape[1]):
                            at = idx[j, i]
                            if rgb:
                                base = ((n - n0) * 3 * plane + here) * r + j
                                if at < total:
                                    y = np.float32(src[n, 0, by, bx, at]) * q
                                    cb = np.float32(src[n, 1, by, bx, at]) * q
                                    cr = np.float32(src[n, 2, by, bx, at]) * q
                                    for o in range(3):
                                        dst[base + o * plane * r, i] = (
                                            matrix[o, 0] * y + matrix[o, 1] * cb
                                            + matrix[o, 2] * cr)
                                else:
                                    for o in range(3):
                                        dst[base + o * plane * r, i] = zero
                            else:
                                for c in range(channels):
                                    base = (((n - n0) * channels + c) * plane + here) * r + j
                                    dst[base, i] = (np.float32(src[n, c, by, bx, at]) * q
                                                    if at < total else zero)


def _hybrid_middle(ee: Any, eo: Any, r: int, m: int, ge: Any, go: Any) -> None:
    """``G[j, y]`` (``ee + eo``, mirrored ``ee - eo``) into ``ge[(blk, y), j // 2]`` / go."""
    half = m // 2
    for blk in range(ee.shape[0] // r):
        for j in range(r):
            dst = ge if j % 2 == 0 else go
            for y in range(half):
                a = ee[blk * r + j, y]
                b = eo[blk * r + j, y]
                dst[blk * m + y, j // 2] = a + b
                dst[blk * m + m - 1 - y, j // 2] = a - b


def _hybrid_post(pe: Any, po: Any, m: int, channels: int, rows: int, cols: int, factor: Any,
                 level: Any, out: Any, n0: int, n1: int) -> None:
    """Pixel rows in order: ``P[y, x] = pe + po``, ``P[y, m-1-x] = pe - po``."""
    half = m // 2
    low = np.float32(0.0)
    high = np.float32(255.0)
    plane = rows * cols
    for n in range(n0, n1):
        for by in range(rows):
            for y in range(m):
                line = out[n, by * m + y]
                for bx in range(cols):
                    for c in range(channels):
                        row = (((n - n0) * channels + c) * plane + by * cols + bx) * m + y
                        for x in range(half):
                            a = pe[row, x]
                            b = po[row, x]
                            left = np.rint((a + b) * factor + level)
                            right = np.rint((a - b) * factor + level)
                            line[bx * m + x, c] = np.uint8(min(max(left, low), high))
                            line[bx * m + m - 1 - x, c] = np.uint8(min(max(right, low), high))


def _vectors(src: Any, index: Any, total: int, q: Any, rgb: bool, matrix: Any, de: Any,
             do: Any, factor: Any, level: Any, out: Any, n0: int, n1: int) -> None:
    """Images ``n0..n1-1`` with the blocks as the innermost axis of every array."""
    channels, rows, cols = src.shape[1], src.shape[2], src.shape[3]
    re, h = de.shape
    ro = do.shape[0]
    r = re + ro
    m = 2 * h
    per = rows * cols
    nb = (n1 - n0) * per
    coef = np.empty((channels, r, r, nb), np.float32)
    for n in range(n0, n1):
        for by in range(rows):
            for bx in range(cols):
                blk = (n - n0) * per + by * cols + bx
                for c in range(channels):
                    for p in range(r * r):
                        at = index[p]
                        coef[c, p // r, p % r, blk] = (np.float32(src[n, c, by, bx, at]) * q
                                                       if at < total else np.float32(0.0))
    if rgb:
        for i in range(r):
            for j in range(r):
                a0 = coef[0, i, j]
                a1 = coef[1, i, j]
                a2 = coef[2, i, j]
                for b in range(nb):
                    y, cb, cr = a0[b], a1[b], a2[b]
                    a0[b] = matrix[0, 0] * y + matrix[0, 1] * cb + matrix[0, 2] * cr
                    a1[b] = matrix[1, 0] * y + matrix[1, 1] * cb + matrix[1, 2] * cr
                    a2[b] = matrix[2, 0] * y + matrix[2, 1] * cb + matrix[2, 2] * cr
    g = np.empty((r, m, nb), np.float32)
    even = np.empty(nb, np.float32)
    odd = np.empty(nb, np.float32)
    pix = np.empty((channels, m, m, nb), np.float32)
    low = np.float32(0.0)
    high = np.float32(255.0)
    for c in range(channels):
        for j in range(r):  # vertical: g[j, y, blk]
            for y in range(h):
                even[:] = 0.0
                odd[:] = 0.0
                for i in range(re):
                    w = de[i, y]
                    column = coef[c, 2 * i, j]
                    for b in range(nb):
                        even[b] += w * column[b]
                for i in range(ro):
                    w = do[i, y]
                    column = coef[c, 2 * i + 1, j]
                    for b in range(nb):
                        odd[b] += w * column[b]
                for b in range(nb):
                    g[j, y, b] = even[b] + odd[b]
                    g[j, m - 1 - y, b] = even[b] - odd[b]
        for y in range(m):  # horizontal: pix[c, y, x, blk]
            for x in range(h):
                even[:] = 0.0
                odd[:] = 0.0
                for j in range(re):
                    w = de[j, x]
                    row = g[2 * j, y]
                    for b in range(nb):
                        even[b] += w * row[b]
                for j in range(ro):
                    w = do[j, x]
                    row = g[2 * j + 1, y]
                    for b in range(nb):
                        odd[b] += w * row[b]
                for b in range(nb):
                    pix[c, y, x, b] = min(max(np.rint((even[b] + odd[b]) * factor + level),
                                              low), high)
                    pix[c, y, m - 1 - x, b] = min(max(np.rint((even[b] - odd[b]) * factor
                                                              + level), low), high)
    for n in range(n0, n1):
        for by in range(rows):
            for y in range(m):
                line = out[n, by * m + y]
                for bx in range(cols):
                    blk = (n - n0) * per + by * cols + bx
                    for x in range(m):
                        for c in range(channels):
                            line[bx * m + x, c] = np.uint8(pix[c, y, x, blk])


@functools.lru_cache(maxsize=1)
def _compiled() -> dict[str, Callable[..., None]]:
    jit = numba.njit(nogil=True, cache=True, error_model="numpy")
    return {name: jit(fn) for name, fn in (("pre", _hybrid_pre), ("middle", _hybrid_middle),
                                           ("post", _hybrid_post), ("vectors", _vectors))}


def hybrid(fmt: FrequencyFormat, src: np.ndarray, out: np.ndarray, n0: int, n1: int) -> None:
    """k = 63, full size: the hybrid decode of images ``n0..n1-1`` into ``out``."""
    fn = _compiled()
    channels, rows, cols = src.shape[1:4]
    dm = _kept_rows(fmt.block, fmt.block)
    r, m = dm.shape
    de, do = _even_odd(dm)
    nb = (n1 - n0) * channels * rows * cols
    re, ro, h = (r + 1) // 2, r // 2, m // 2
    ve, vo, ee, eo, ge, go, pe, po = _workspace(
        (nb, r, m), [(nb * r, re), (nb * r, ro), (nb * r, h), (nb * r, h), (nb * m, re),
                     (nb * m, ro), (nb * m, h), (nb * m, h)])
    idx_e, idx_o = _split_index(fmt.block, r, 63)
    fn["pre"](src, idx_e, idx_o, fmt.kept(63), np.float32(fmt.q), True, _ycbcr_to_rgb32(),
              n0, n1, ve, vo)
    np.matmul(ve, de, out=ee)
    np.matmul(vo, do, out=eo)
    fn["middle"](ee, eo, r, m, ge, go)
    np.matmul(ge, de, out=pe)
    np.matmul(go, do, out=po)
    fn["post"](pe, po, m, channels, rows, cols, np.float32(1.0),
               np.float32(fmt.level_shift), out, n0, n1)


def vectors(fmt: FrequencyFormat, src: np.ndarray, out: np.ndarray, n0: int,
            n1: int) -> None:
    """k = 63, full size: the blocks-as-vectors decode, 4 images per compiled call."""
    dm = _kept_rows(fmt.block, fmt.block)
    de, do = _even_odd(dm)
    index = gather_index(fmt.block, fmt.block, 63)
    for lo in range(n0, n1, 4):
        _compiled()["vectors"](src, index, fmt.kept(63), np.float32(fmt.q), True,
                               _ycbcr_to_rgb32(), de, do, np.float32(1.0),
                               np.float32(fmt.level_shift), out, lo, min(n1, lo + 4))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    if numba is None:
        raise SystemExit("numba is not installed: pip install -e '.[bench]'")
    if not kernel.available():
        raise SystemExit(str(kernel.why_unavailable()))
    args.out.mkdir(parents=True, exist_ok=True)
    fmt = FrequencyFormat()
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:256, 0:256]
    ramps = (yy[None, :, :, None] * rng.uniform(0, 2, (args.images, 1, 1, 3))
             + xx[None, :, :, None] * rng.uniform(0, 2, (args.images, 1, 1, 3)))
    images = np.clip(np.rint(ramps % 256 + rng.normal(0, 12, ramps.shape)), 0,
                     255).astype(np.uint8)
    src = np.concatenate(fmt.encode(images), axis=-1)
    reference = decode_concatenated(fmt, src, 63, 32, decoder="numpy")
    n = args.images

    def numpy_one(lo: int, hi: int, out: np.ndarray) -> None:
        out[lo:hi] = decode_concatenated(fmt, src[lo:hi], 63, 32, decoder="numpy")

    systems: dict[str, Callable[[int, int, np.ndarray], None]] = {
        "numpy decode (Tessera's)": numpy_one,
        "compiled: C, butterflies per block (Tessera's)":
            lambda lo, hi, out: kernel.decode_into(fmt, src, 63, 32, out, lo, hi),
        "compiled: hybrid (numba + BLAS)": lambda lo, hi, out: hybrid(fmt, src, out, lo, hi),
        "compiled: blocks as vectors (numba)":
            lambda lo, hi, out: vectors(fmt, src, out, lo, hi),
    }
    start = time.perf_counter()
    _compiled()
    warm = np.empty_like(reference)
    for fn in systems.values():
        fn(0, 1, warm)
    print(f"compiled and warmed in {time.perf_counter() - start:.1f} s")
    rows: list[dict[str, Any]] = []
    times: dict[tuple[str, str], list[float]] = {}
    differences: dict[str, np.ndarray] = {}  # per system: |pixels - the numpy decode's|
    for _ in range(args.reps):  # the systems take turns, so the machine's noise is shared
        for name, fn in systems.items():
            out = np.empty_like(reference)
            began = time.perf_counter()
            for i in range(n):
                fn(i, i + 1, out)
            times.setdefault((name, "one thread"), []).append(time.perf_counter() - began)
            pool = np.empty_like(reference)
            began = time.perf_counter()
            if name.startswith("numpy"):
                decode_concatenated(fmt, src, 63, 32, out=pool, decoder="numpy")
            elif "Tessera's" in name:
                decode_concatenated(fmt, src, 63, 32, out=pool, decoder="compiled")
            else:
                run_chunks(lambda lo, hi, fn=fn, pool=pool: fn(lo, hi, pool), n,
                           max(1, -(-n // workers()) if "vectors" in name else 1))
            times.setdefault((name, "compute threads"), []).append(time.perf_counter() - began)
            if not np.array_equal(out, pool):
                raise AssertionError(f"{name}: one thread and the compute threads differ")
            differences[name] = np.abs(out.astype(np.int16) - reference)
    for (name, how), runs in times.items():
        seconds = statistics.median(runs)
        rows.append({"system": name, "threads": how, "images": n,
                     "seconds": round(seconds, 4), "ms_per_image": round(seconds / n * 1e3, 3),
                     "runs": args.reps})
    for row in rows:
        diff = differences[row["system"]]
        row["max_level_difference"] = int(diff.max())
        row["changed_pixel_share"] = float((diff > 0).mean())
    write_csv(args.out / "decode_kernels.csv", rows)
    lines = [f"# Compiled decodes beside the numpy decode (k = 63, {n} images of 256 x 256 x 3,"
             f" medians of {args.reps}, {workers()} compute threads, "
             f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')})", "",
             "| system | threads | seconds | ms per image | max level difference | "
             "changed pixels |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['system']} | {r['threads']} | {r['seconds']:.3f} | "
              f"{r['ms_per_image']:.3f} | {r['max_level_difference']} | "
              f"{r['changed_pixel_share']:.2e} |" for r in rows]
    (args.out / "decode_kernels.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(rows, args.out / "decode_kernels.png")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["system"] for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4))
    for offset, how in ((-0.2, "one thread"), (0.2, "compute threads")):
        ax.bar([i + offset for i in range(len(names))],
               [next(r["seconds"] for r in rows if r["system"] == s and r["threads"] == how)
                for s in names], width=0.4, label=how)
    ax.axhline(0.15, color="k", linestyle="--", label="goal on the compute threads (0.15 s)")
    ax.set_xticks(range(len(names)), [s.replace(": ", ":\n") for s in names], fontsize=8)
    ax.set_ylabel(f"seconds for {rows[0]['images']} images")
    ax.set_title("k = 63 decode: compiled designs beside the numpy decode")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
