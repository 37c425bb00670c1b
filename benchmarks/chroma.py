"""Chroma subsampling of image columns: what 4:2:0 buys against 4:4:4 and against JPEG q90.

For 256 x 256 photo crops (matplotlib's sample photo), all measured in one run:

- quality and size: PSNR against the originals and stored bytes per image (what the set's
  bookkeeping says it holds at k = 63), for 4:4:4 and 4:2:0 at the format's default
  ``q = 50`` and at ``q = 12`` (about JPEG q90's PSNR), beside JPEG q90 (Pillow);
- the decode alone: k = 63 pixels of 256 images in one process, compiled (where it was
  built) and with numpy, wall and process CPU seconds;
- every image of the set read cold at k = 63 from the S3 test server on loopback (no column
  cache, one handle), beside one JPEG q90 object per image fetched with obstore (32 in
  flight) and decoded with Pillow on two threads: images/s, this process's CPU ms per image
  and the test server's; the systems take turns, medians of ``--reps``;
- the same through a DataLoader with 2 persistent workers (``FrequencyDataset`` at k = 63,
  no column cache, against a Dataset fetching and decoding one JPEG object per item):
  images/s per epoch after an untimed first one, medians of ``--reps``.

Writes ``chroma.csv``, ``chroma.md`` and ``chroma.png`` under ``--out``.

    python benchmarks/chroma.py [--images 512] [--reps 5] [--out DIR]
    (the committed results: --out benchmarks/results)
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import tessera
from _common import write_csv
from images import jpeg_blobs, photo_crops
from tessera.images import FrequencyFormat, ImageColumns, psnr
from tessera.images.decode import concatenate, decode_concatenated
from tessera.testing import S3TestServer
from throughput import JpegObjects, _cpu_of, _decode_jpegs, _fetch_all, _obstore

MODES = ("4:4:4", "4:2:0")


def _quality(images: np.ndarray, jpegs: list[bytes], s3: S3TestServer,
             ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """PSNR and bytes per image of each format and of JPEG q90 (``jpegs``: the images as
    JPEG files); the URLs of the q = 50 sets (written to the S3 test server)."""
    from PIL import Image

    rows, urls = [], {}
    n = len(images)
    for q in (50, 12):
        for mode in MODES:
            fmt = FrequencyFormat(q=q, chroma=mode)
            url = s3.unique_url(f"chroma-{q}-{mode.replace(':', '')}")
            cols = ImageColumns.create(url, size=images.shape[1:3], fmt=fmt, group=32,
                                       storage_options=s3.storage_options(), cache=None)
            cols.append(images)
            decoded = cols.read(np.arange(n), k=63)
            rows.append({"system": f"Tessera {mode} q={q}", "q": q,
                         "psnr_db": round(statistics.fmean(
                             psnr(a, b) for a, b in zip(images, decoded, strict=True)), 2),
                         "bytes_per_image": round(float(cols.bytes_per_k()[-1]) / n),
                         "raw_coefficient_bytes_per_image":
                             fmt.channels(3) * fmt.stored(63) * (images.shape[1] // 32)
                             * (images.shape[2] // 32) * fmt.dtype.itemsize})
            if q == 50:
                urls[mode] = url
    sizes = [len(blob) for blob in jpegs]
    scores = [psnr(img, np.asarray(Image.open(io.BytesIO(blob))))
              for img, blob in zip(images, jpegs, strict=True)]
    rows.append({"system": "JPEG q90 (Pillow, 4:2:0)", "q": 90,
                 "psnr_db": round(statistics.fmean(scores), 2),
                 "bytes_per_image": round(statistics.fmean(sizes))})
    return rows, urls


def _timed(fns: dict[str, Callable[[], Any]], reps: int,
           server_pid: int | None = None) -> dict[str, dict[str, float]]:
    """Median wall and process CPU seconds of each function (and the server's CPU), the
    functions taking turns ``reps`` times."""
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in fns}
    for fn in fns.values():  # once each before timing: imports, pools, connections
        fn()
    for _ in range(reps):
        for name, fn in fns.items():
            server = _cpu_of(server_pid) if server_pid is not None else None
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            after = _cpu_of(server_pid) if server_pid is not None else None
            samples[name].append((wall, cpu, (after - server) if server is not None
                                  and after is not None else float("nan")))
    return {name: {"seconds": statistics.median(s[0] for s in got),
                   "cpu_s": statistics.median(s[1] for s in got),
                   "server_cpu_s": statistics.fmean(s[2] for s in got)}  # ticks of 10 ms
            for name, got in samples.items()}


def _decode_rows(images: np.ndarray, reps: int) -> list[dict[str, Any]]:
    from tessera.images import kernel

    batch = images[:256]
    fns = {}
    for mode in MODES:
        fmt = FrequencyFormat(chroma=mode)
        source = concatenate(fmt.encode(batch))
        for decoder in ("compiled", "numpy") if kernel.available() else ("numpy",):
            fns[f"decode k=63, {mode}, {decoder}"] = (
                lambda fmt=fmt, source=source, decoder=decoder:
                decode_concatenated(fmt, source, 63, 32, decoder=decoder))
    out = []
    for name, got in _timed(fns, reps).items():
        out.append({"shape": f"decode alone, {len(batch)} images", "system": name,
                    "seconds": round(got["seconds"], 4),
                    "cpu_ms_per_image": round(got["cpu_s"] / len(batch) * 1e3, 3)})
    return out


def _read_rows(images: np.ndarray, s3: S3TestServer, urls: dict[str, str], jpeg_prefix: str,
               jpeg_keys: list[str], reps: int) -> list[dict[str, Any]]:
    n = len(images)
    ids = np.arange(n)
    fns: dict[str, Callable[[], Any]] = {}
    for mode, url in urls.items():
        handle = ImageColumns.open(url, storage_options=s3.storage_options(), cache=None)
        fns[f"Tessera k=63 pixels, {mode}"] = (lambda h=handle: h.read(ids, k=63))
    jpeg_store = _obstore(s3, s3.endpoint, jpeg_prefix)
    fns["JPEG q90 objects + Pillow"] = (lambda: _decode_jpegs(
        asyncio.run(_fetch_all(jpeg_store, jpeg_keys)), "PIL"))
    out = []
    for name, got in _timed(fns, reps, s3.pid).items():
        out.append({"shape": f"loopback S3, {n} images", "system": name,
                    "seconds": round(got["seconds"], 4),
                    "images_per_s": round(n / got["seconds"], 1),
                    "cpu_ms_per_image": round(got["cpu_s"] / n * 1e3, 3),
                    "server_cpu_ms_per_image": round(got["server_cpu_s"] / n * 1e3, 3)})
    return out


def _loader_rows(s3: S3TestServer, urls: dict[str, str], jpeg_prefix: str,
                 jpeg_keys: list[str], n: int, reps: int, batch: int = 64,
                 ) -> list[dict[str, Any]]:
    from torch.utils.data import DataLoader

    from tessera.torch import FrequencyDataset

    direct = dict(s3.storage_options())
    makers: list[tuple[str, Callable[[], Any]]] = []
    for mode, url in urls.items():
        ds = FrequencyDataset(url, k=63, labels=False, storage_options=direct, cache_bytes=0)
        makers.append((f"FrequencyDataset k=63, {mode}",
                       lambda ds=ds: ds.loader(batch, num_workers=2, buffer_groups=1,
                                               persistent_workers=True)))
    jpegs = JpegObjects(s3.url(jpeg_prefix), jpeg_keys, direct)
    makers.append(("JPEG q90 objects + Pillow", lambda: DataLoader(
        jpegs, batch_size=batch, shuffle=True, num_workers=2,
        multiprocessing_context="spawn", persistent_workers=True)))
    loaders = [(name, make()) for name, make in makers]
    for _, loader in loaders:  # the first epoch: workers started, connections opened
        for _ in loader:
            pass
    times: dict[str, list[float]] = {name: [] for name, _ in loaders}
    for _ in range(reps):  # the loaders take turns
        for name, loader in loaders:
            start = time.perf_counter()
            count = sum(len(b) for b in loader)
            times[name].append(time.perf_counter() - start)
            if count != n:
                raise SystemExit(f"{name} delivered {count} of {n} images")
    return [{"shape": "DataLoader, 2 workers (loopback)", "system": name,
             "seconds": round(statistics.median(got), 4),
             "images_per_s": round(n / statistics.median(got), 1)}
            for name, got in times.items()]


def _markdown(quality: list[dict[str, Any]], speed: list[dict[str, Any]], n: int,
              reps: int) -> str:
    lines = [f"# Chroma subsampling: {n} photo crops of 256 x 256, medians of {reps}", "",
             "## Quality and size (k = 63)", "",
             "| system | PSNR dB | stored bytes / image | coefficient bytes / image, raw |",
             "|---|---|---|---|"]
    for r in quality:
        raw = r.get("raw_coefficient_bytes_per_image")
        lines.append(f"| {r['system']} | {r['psnr_db']} | {r['bytes_per_image']:,} | "
                     f"{'' if raw is None else f'{raw:,}'} |")
    lines += ["", "## Time and CPU", "",
              "| shape | system | seconds | images/s | client CPU ms / image | "
              "server CPU ms / image |", "|---|---|---|---|---|---|"]
    for r in speed:
        lines.append(f"| {r['shape']} | {r['system']} | {r['seconds']} | "
                     f"{r.get('images_per_s', '')} | {r.get('cpu_ms_per_image', '')} | "
                     f"{r.get('server_cpu_ms_per_image', '')} |")
    jpeg = next(r for r in speed if r["system"].startswith("JPEG"))
    lines += ["", "Ratios to JPEG q90 objects + Pillow (same run):", ""]
    for r in speed:
        if r["system"].startswith("FrequencyDataset"):
            ours = next(j for j in speed if j["shape"] == r["shape"]
                        and j["system"].startswith("JPEG"))
            lines.append(f"- {r['system']} (DataLoader): images/s "
                         f"x{r['images_per_s'] / ours['images_per_s']:.2f}")
        if r["system"].startswith("Tessera"):
            rate = r["images_per_s"] / jpeg["images_per_s"]
            cpu = r["cpu_ms_per_image"] / jpeg["cpu_ms_per_image"]
            lines.append(f"- {r['system']}: images/s x{rate:.2f}, client CPU per image "
                         f"x{cpu:.2f}")
    return "\n".join(lines) + "\n"


def _plot(speed: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in speed if "server_cpu_ms_per_image" in r]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    names = [r["system"] for r in rows]
    axes[0].barh(names, [r["images_per_s"] for r in rows], color="#4878a8")
    axes[0].set_xlabel("images/s (loopback S3, k = 63)")
    axes[1].barh(names, [r["cpu_ms_per_image"] for r in rows], color="#c07030",
                 label="client")
    axes[1].barh(names, [r["server_cpu_ms_per_image"] for r in rows],
                 left=[r["cpu_ms_per_image"] for r in rows], color="#999999", label="server")
    axes[1].set_xlabel("CPU ms per image")
    axes[1].set_yticks([])
    axes[1].legend(loc="lower right")
    fig.suptitle("Image columns at full quality, 4:4:4 and 4:2:0, against JPEG q90 + Pillow")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    parser.add_argument("--no-loader", action="store_true", help="skip the DataLoader rows")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    images = photo_crops(args.images, seed=0)
    jpegs = jpeg_blobs(images)  # encoded once: sized, scored and stored
    with S3TestServer() as s3:
        quality, urls = _quality(images, jpegs, s3)
        prefix = s3.unique_url("chroma-jpeg").split("/", 3)[3]
        store = tessera.open_store(s3.url(prefix), **s3.storage_options())
        keys = [f"{i:06d}.jpg" for i in range(len(images))]
        for key, blob in zip(keys, jpegs, strict=True):
            store.put(key, blob)
        speed = _decode_rows(images, args.reps) + _read_rows(images, s3, urls, prefix, keys,
                                                             args.reps)
        if not args.no_loader:
            speed += _loader_rows(s3, urls, prefix, keys, len(images), args.reps)
    for r in quality + speed:
        print(r)
    write_csv(args.out / "chroma.csv", [*quality, *speed])
    (args.out / "chroma.md").write_text(_markdown(quality, speed, args.images, args.reps))
    _plot(speed, args.out / "chroma.png")
    print(f"wrote {args.out / 'chroma.md'}")


if __name__ == "__main__":
    main()
