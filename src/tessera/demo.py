"""``make demo``: store a synthetic image dataset in a local folder and read it back.

Writes N synthetic RGB images (HWC uint8) as objects, then reads them back two ways, checking
every byte against numpy:

* **whole download**: GET each image, then crop the band of rows a training step needs, the
  way most pipelines do today;
* **exact ranges**: one ranged GET per image for just that band of rows.

It prints the requests, bytes and seconds of each way, and what they would cost at S3, GCS and
Azure list prices. Later parts of Tessera (tiles, the planner) replace the hand-made ranges.

    python -m tessera.demo [--store URL] [--images N] [--size PIXELS]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import tessera
from tessera.storage.stats import IOStats

console = Console(highlight=False)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console)


def make_image(index: int, size: int) -> np.ndarray:
    """A deterministic synthetic RGB image: gradients plus seeded noise."""
    rng = np.random.default_rng(index)
    y, x = np.mgrid[0:size, 0:size]
    base = np.stack([(x + index) % 256, (y * 2) % 256, (x + y) % 256], axis=-1)
    return ((base + rng.integers(0, 32, base.shape)) % 256).astype(np.uint8)


def crop_rows(index: int, size: int) -> tuple[int, int]:
    """The band of rows [start, stop) a training step wants from image ``index``."""
    rng = np.random.default_rng(10_000 + index)
    height = int(rng.integers(size // 16, size // 6))
    start = int(rng.integers(0, size - height))
    return start, start + height


def run_demo(url: str, images: int, size: int) -> dict[str, IOStats]:
    """Write the dataset, read it back both ways, verify, and return the stats per phase."""
    store = tessera.open_store(url)
    stale = store.list("images")
    if stale:
        for info in stale:
            store.delete(info.key)
    row_bytes = size * 3
    phases: dict[str, IOStats] = {}

    with _progress() as progress:
        task = progress.add_task("writing images", total=images)
        with store.collect() as phases["write"]:
            for i in range(images):
                store.put(f"images/{i:05d}.rgb", make_image(i, size), mode="create")
                progress.advance(task)

        task = progress.add_task("whole download + crop", total=images)
        with store.collect() as phases["whole"]:
            for i in range(images):
                start, stop = crop_rows(i, size)
                full = np.frombuffer(memoryview(store.get(f"images/{i:05d}.rgb")), np.uint8)
                crop = full.reshape(size, size, 3)[start:stop]
                _check(crop, make_image(i, size)[start:stop], i)
                progress.advance(task)

        task = progress.add_task("exact ranges", total=images)
        with store.collect() as phases["ranges"]:
            for i in range(images):
                start, stop = crop_rows(i, size)
                buf = store.get_range(f"images/{i:05d}.rgb", start * row_bytes,
                                      (stop - start) * row_bytes)
                crop = np.frombuffer(memoryview(buf), np.uint8).reshape(stop - start, size, 3)
                _check(crop, make_image(i, size)[start:stop], i)
                progress.advance(task)
    return phases


def _check(got: np.ndarray, want: np.ndarray, index: int) -> None:
    if not np.array_equal(got, want):
        raise SystemExit(f"demo: image {index} read back wrong; this is a bug, please report it")


def _report(url: str, phases: dict[str, IOStats], images: int, size: int) -> None:
    table = Table(title=f"{images} images of {size}x{size}x3 uint8 in {url}")
    for col in ("phase", "req", "MiB out", "MiB in", "sec", "$ S3", "$ GCS", "$ Azure"):
        table.add_column(col, justify="left" if col == "phase" else "right", no_wrap=True)
    labels = {"write": "write", "whole": "whole + crop", "ranges": "exact ranges"}
    for name, stats in phases.items():
        table.add_row(labels[name], str(stats.requests), f"{stats.bytes_sent / 2**20:.1f}",
                      f"{stats.bytes_received / 2**20:.1f}", f"{stats.elapsed_s:.2f}",
                      *(f"{stats.cost_usd(p):.5f}" for p in ("s3", "gcs", "azure")))
    console.print(table)
    whole, ranges = phases["whole"], phases["ranges"]
    ratio = whole.bytes_received / max(1, ranges.bytes_received)
    console.print(
        f"Exact ranges moved [bold]{ratio:.1f}x fewer bytes[/] than whole downloads for the "
        f"same crops; at S3 prices a million such crops cost "
        f"${ranges.cost_usd('s3') / images * 1e6:,.2f} instead of "
        f"${whole.cost_usd('s3') / images * 1e6:,.2f}. Every crop was checked against numpy.")
    console.print("[dim]Prices: tessera.storage.pricing (list prices, recorded 2026-11-22).[/]")


def main(argv: list[str] | None = None) -> None:
    """Run the demo from the command line."""
    parser = argparse.ArgumentParser(prog="python -m tessera.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=Path("demo-store").resolve().as_uri(),
                        help="store URL (default: ./demo-store)")
    parser.add_argument("--images", type=int, default=64, help="number of images")
    parser.add_argument("--size", type=int, default=512, help="image height and width")
    args = parser.parse_args(argv)
    if args.images < 1 or args.size < 16:
        parser.error("--images must be >= 1 and --size >= 16")
    try:
        phases = run_demo(args.store, args.images, args.size)
    except tessera.TesseraError as err:
        console.print(f"[bold red]error:[/] {err}")
        raise SystemExit(1) from None
    _report(args.store, phases, args.images, args.size)


if __name__ == "__main__":
    main()
