"""DLIO-style data loading: training samples per second through an emulated cloud link,
``tessera.torch.RegionDataset`` against downloading whole samples and cropping them.

A synthetic camera-trap set (seeded; MegaDetector-style boxes, most animals small) lives in
the S3 test server twice: as one Tessera array ``(N, 3, H, W)`` uint8 in ``1 x 3 x T x T``
tiles, and as one raw object per image (what pipelines download today). A training step asks
for a batch of animal crops, resized to 64 x 64 for the model; both loaders serve the same
seeded batches through the same DataLoader (batch size, workers; workers persist, and an
untimed warm-up epoch starts them and opens connections), and both fetch a batch's objects
concurrently through Tessera's storage layer:

* ``tessera``: ``RegionDataset`` reads each batch's crops as one planned read;
* ``whole``: every distinct image of the batch is downloaded whole (one GET each, all at
  once), then cropped in numpy.

Reported per loader: samples per second (median over repeats), bytes and requests counted
at the link, dollars at S3 prices (requests and egress), and the speed-up of Tessera over
whole downloads. Every crop is checked against numpy after the timed loop; a wrong crop
fails the run. Like DLIO, the model's compute is left out: the figure is the loader's.

    python benchmarks/dataloader.py [--images 128] [--height 768] [--width 1024]
        [--batches 8] [--batch-size 32] [--workers 0] [--tile 128] [--repeats 3]
        [--rtt-ms 20] [--bandwidth-mbps 100] [--first-byte-ms 0] [--quick]

Prints a table; writes benchmarks/out/dataloader.csv.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table
from torch.utils.data import DataLoader, Dataset

import tessera
from _common import write_csv
from tessera._sync import run_sync
from tessera.storage.pricing import get_pricing
from tessera.testing import EmulatedLink, S3TestServer
from tessera.testing.camera_trap import make_camera_trap_set
from tessera.torch import RegionDataset, regions_from_megadetector

console = Console(highlight=False, width=140)
CROP = (64, 64)


class WholeImageCrops(Dataset[Any]):
    """The baseline: download every distinct image of a batch whole (concurrently), crop in
    numpy. Picklable: the store opens lazily in each process."""

    def __init__(self, url: str, options: dict[str, Any], shape: tuple[int, int, int],
                 regions: list[tuple[int, Any]], transform: Any = None) -> None:
        self.url, self.options, self.shape = url, options, shape
        self.regions, self.transform = regions, transform
        self._store: tessera.Store | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_store": None}

    @property
    def store(self) -> tessera.Store:
        if self._store is None:
            self._store = tessera.open_store(self.url, **self.options)
        return self._store

    def __len__(self) -> int:
        return len(self.regions)

    def __getitem__(self, i: int) -> Any:
        return self.__getitems__([i])[0]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        wanted = sorted({self.regions[i][0] for i in indices})

        async def fetch_all() -> list[Any]:
            return list(await asyncio.gather(*(self.store.aio.get(image_key(k))
                                               for k in wanted)))

        bufs = dict(zip(wanted, run_sync(fetch_all()), strict=True))
        out = []
        for i in indices:
            k, box = self.regions[i]
            image = np.frombuffer(memoryview(bufs[k]), np.uint8).reshape(self.shape)
            crop = torch.from_numpy(image[box].copy())
            out.append(crop if self.transform is None else self.transform(crop))
        return out


def image_key(i: int) -> str:
    return f"whole/IMG_{i:05d}.raw"


def collate_keep(batch: list[Any]) -> list[Any]:
    """Keep a batch's items as a list (the crops have different sizes)."""
    return batch


def make_loader(dataset: Any, order: list[list[int]], workers: int) -> DataLoader[Any]:
    """A DataLoader serving the batches of ``order``; workers (if any) persist across
    epochs, so only the warm-up epoch pays for starting them."""
    return DataLoader(dataset, batch_sampler=order, num_workers=workers,
                      collate_fn=collate_keep, persistent_workers=workers > 0,
                      multiprocessing_context="forkserver" if workers else None)


def run_epoch(loader: DataLoader[Any]) -> tuple[float, list[Any]]:
    """Seconds to load every batch once, and the batches."""
    t0 = time.perf_counter()
    batches = list(loader)
    return time.perf_counter() - t0, batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=128)
    parser.add_argument("--height", type=int, default=768)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--tile", type=int, default=128)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    parser.add_argument("--bandwidth-mbps", type=float, default=100.0, help="MB/s")
    parser.add_argument("--first-byte-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    parser.add_argument("--quick", action="store_true",
                        help="64 images of 384 x 512 in 64 x 64 tiles, 4 batches, 2 repeats")
    args = parser.parse_args()
    if args.quick:
        args.images, args.height, args.width, args.tile = 64, 384, 512, 64
        args.batches, args.repeats = 4, 2
    args.out.mkdir(parents=True, exist_ok=True)
    data = make_camera_trap_set(args.images, height=args.height, width=args.width,
                                seed=args.seed)
    n, c, h, w = data.images.shape
    regions, _ = regions_from_megadetector(data.megadetector(), (c, h, w), min_conf=0.5)
    rng = np.random.default_rng(args.seed)
    order = [list(map(int, rng.choice(len(regions), args.batch_size, replace=False)))
             for _ in range(args.batches)]
    prices = get_pricing("s3")
    rows: list[dict[str, Any]] = []
    with S3TestServer() as s3:
        direct = s3.storage_options()
        console.print(f"writing {n} images of {c}x{h}x{w} uint8 twice (array, objects)")
        tessera.from_numpy(s3.url("images"), data.images, tile=(1, c, args.tile, args.tile),
                           storage_options=direct)
        store = tessera.open_store(s3.url(""), **direct)
        for i in range(n):
            store.put(image_key(i), data.images[i])
        link_args = {"one_way_delay_s": args.rtt_ms / 2e3, "bandwidth": args.bandwidth_mbps * 1e6,
                     "first_byte_latency_s": args.first_byte_ms / 1e3}
        with EmulatedLink(s3.port, **link_args) as link:
            opts = s3.storage_options(link.endpoint)
            # Saved (to a private folder) so that worker processes plan with it too.
            os.environ["TESSERA_PROFILE_DIR"] = tempfile.mkdtemp(prefix="tessera-profiles-")
            tessera.profile_store(s3.url("profile"), quick=True, **opts)
            tess = RegionDataset(s3.url("images"), regions, storage_options=opts)
            whole = WholeImageCrops(s3.url(""), opts, (c, h, w), regions)
            # Untimed, beside the link: bring every object the batches touch in once.
            warm = RegionDataset(s3.url("images"), regions, storage_options=direct)
            warm.__getitems__([i for b in order for i in b])
            WholeImageCrops(s3.url(""), direct, (c, h, w), regions).__getitems__(
                [i for b in order for i in b])
            for name, ds in (("tessera", tess), ("whole", whole)):
                loader = make_loader(ds, order, args.workers)
                run_epoch(loader)  # warm-up: workers start, connections open
                times, nbytes, nreq = [], [], []
                for _ in range(args.repeats):
                    link.reset_counters()
                    seconds, batches = run_epoch(loader)
                    counters = link.counters()
                    times.append(seconds)
                    nbytes.append(counters.bytes_down)
                    nreq.append(counters.requests)
                    check(batches, order, regions, data.images, name)
                samples = args.batches * args.batch_size
                med_b, med_r = statistics.median(nbytes), statistics.median(nreq)
                rows.append({
                    "loader": name, "samples": samples, "median_s": statistics.median(times),
                    "samples_per_s": samples / statistics.median(times),
                    "bytes": int(med_b), "requests": int(med_r),
                    "dollars": med_r * prices.request_fee("get") + prices.egress_usd(med_b)})
    base = next(r for r in rows if r["loader"] == "whole")
    for r in rows:
        r["x_whole_speed"] = r["samples_per_s"] / base["samples_per_s"]
        r["x_whole_bytes"] = r["bytes"] / base["bytes"]
    report(rows, args, len(regions))


def check(batches: list[Any], order: list[list[int]], regions: list[tuple[int, Any]],
          images: np.ndarray, name: str) -> None:
    """Every crop equals numpy's crop of the same region."""
    for batch, idx in zip(batches, order, strict=True):
        for crop, i in zip(batch, idx, strict=True):
            k, box = regions[i]
            if not np.array_equal(crop.numpy(), images[k][box]):
                raise SystemExit(f"{name}: region {i} (image {k}, box {box}) read back wrong")


def report(rows: list[dict[str, Any]], args: argparse.Namespace, nregions: int) -> None:
    table = Table(title=f"DLIO-style crops: {args.images} images {args.height}x{args.width}, "
                        f"{nregions} boxes, {args.batches} batches of {args.batch_size}, "
                        f"{args.workers} workers, tiles {args.tile}x{args.tile}, link RTT "
                        f"{args.rtt_ms:g} ms, {args.bandwidth_mbps:g} MB/s, first byte "
                        f"{args.first_byte_ms:g} ms")
    cols = ["loader", "samples/s", "x whole (speed)", "median s", "bytes", "x whole (bytes)",
            "requests", "$ (S3)"]
    for col in cols:
        table.add_column(col, justify="left" if col == "loader" else "right")
    for r in rows:
        table.add_row(r["loader"], f"{r['samples_per_s']:.1f}", f"{r['x_whole_speed']:.2f}",
                      f"{r['median_s']:.3f}", f"{r['bytes']:,}", f"{r['x_whole_bytes']:.3f}",
                      str(r["requests"]), f"{r['dollars']:.6f}")
    console.print(table)
    path = args.out / "dataloader.csv"
    write_csv(path, rows)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
