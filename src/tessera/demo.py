"""``make demo``: train a classifier on camera-trap crops read region by region.

The main job, on a local folder store (``./demo-store``):

1. generate a synthetic camera-trap set (images with one animal each, its species, and
   MegaDetector-style detections; :mod:`tessera.testing.camera_trap`);
2. ingest the images as one Tessera array ``(N, 3, H, W)`` uint8 in ``1 x 3 x 64 x 64``
   tiles, and the detections as JSON beside it;
3. train a small CNN for a few steps on the animal crops, read through
   :class:`tessera.torch.RegionDataset` (each step's crops are one planned read), after
   checking a batch of crops against numpy;
4. print per-step I/O (requests, bytes, dollars at S3 prices) beside what downloading the
   whole images and cropping them would have cost.

    python -m tessera.demo [--store URL] [--images N] [--steps N] [--batch N]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import tessera
from tessera.query.cost import DEFAULT_PROFILES
from tessera.storage.stats import IOStats, RequestRecord
from tessera.testing.camera_trap import CameraTrapSet, make_camera_trap_set

console = Console(highlight=False)

#: Images per ingest write (one fragment each).
INGEST_BATCH = 64
#: Side of the square each crop is resized to for the classifier.
CROP_SIZE = 32


def _progress() -> Progress:
    return Progress(TextColumn("{task.description:<26}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console)


def ingest(url: str, data: CameraTrapSet, progress: Progress) -> tessera.Array:
    """Write the images as one array (a fragment per batch) and the detections as JSON."""
    store = tessera.open_store(url)
    for info in store.list("camera-trap"):  # a rerun replaces the earlier one
        store.delete(info.key)
    n, c, h, w = data.images.shape
    schema = tessera.ArraySchema(
        [tessera.Dim("image", (0, n - 1), 1), tessera.Dim("channel", (0, c - 1), c),
         tessera.Dim("y", (0, h - 1), min(64, h)), tessera.Dim("x", (0, w - 1), min(64, w))],
        [tessera.Attr("rgb", "uint8", 0, None)])
    arr = tessera.create_array(f"{url.rstrip('/')}/camera-trap/images", schema)
    task = progress.add_task("ingesting images", total=n)
    for start in range(0, n, INGEST_BATCH):
        stop = min(n, start + INGEST_BATCH)
        arr.write(data.images[start:stop], origin=(start, 0, 0, 0))
        progress.advance(task, stop - start)
    store.put("camera-trap/detections.json", json.dumps(data.megadetector()).encode())
    return arr


def whole_image_stats(indices: list[int], image_bytes: int) -> IOStats:
    """The I/O of downloading each distinct image of a batch whole (one GET each)."""
    stats = IOStats()
    for i in sorted(set(indices)):
        stats.record(RequestRecord("get", f"images/{i}", image_bytes))
    return stats


def _classifier(classes: int) -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * (CROP_SIZE // 4) ** 2, classes))


def run_demo(url: str, images: int = 300, steps: int = 24, batch: int = 32,
             size: tuple[int, int] = (192, 256)) -> list[dict[str, Any]]:
    """Generate, ingest, check, train; return one row per training step."""
    try:
        import torch

        from tessera.torch import RegionDataset, Resize, regions_from_megadetector
    except ImportError:  # pragma: no cover - make demo installs the torch extra
        raise SystemExit("the demo trains with PyTorch: pip install 'tessera[torch]' "
                         "(make demo does)") from None
    rows: list[dict[str, Any]] = []
    with _progress() as progress:
        task = progress.add_task("generating camera traps", total=1)
        data = make_camera_trap_set(images, height=size[0], width=size[1], seed=0)
        progress.advance(task)
        arr = ingest(url, data, progress)
        detections = json.loads(bytes(
            tessera.open_store(url).get("camera-trap/detections.json")))
        regions, _ = regions_from_megadetector(detections, data.images.shape[1:],
                                               min_conf=0.5)
        labels = [int(data.labels[i]) for i, _ in regions]  # species, not MD's "animal"
        raw = RegionDataset(arr.uri, regions, labels=labels)
        _check_crops(raw, data, progress)
        ds = RegionDataset(raw.ref, regions, Resize((CROP_SIZE, CROP_SIZE)), labels=labels)
        # Plan as for S3 (the cloud profile and S3 prices), since the report prices each
        # step's I/O at S3: on a local folder the planner would trade bytes for requests.
        ds.array.profile = DEFAULT_PROFILES["cloud"]
        ds.array.planner = dataclasses.replace(ds.array.planner, pricing="s3")
        model = _classifier(len(data.species_names))
        optim = torch.optim.Adam(model.parameters(), lr=3e-3)
        loss_fn = torch.nn.CrossEntropyLoss()
        gen = torch.Generator().manual_seed(0)
        image_bytes = int(np.prod(data.images.shape[1:]))
        task = progress.add_task("training on crops", total=steps)
        step = 0
        while step < steps:
            sampler = torch.utils.data.RandomSampler(ds, generator=gen)
            batches = torch.utils.data.BatchSampler(sampler, batch, drop_last=False)
            for idx in batches:
                started = time.perf_counter()
                items = ds.__getitems__(idx)
                read_s = time.perf_counter() - started
                x = torch.stack([t for t, _ in items])
                y = torch.tensor([label for _, label in items])
                optim.zero_grad()
                logits = model(x)
                loss = loss_fn(logits, y)
                loss.backward()
                optim.step()
                io = ds.array.last_read.stats if ds.array.last_read else IOStats()
                whole = whole_image_stats([ds.selections[i][0] for i in idx], image_bytes)
                rows.append({"step": step + 1, "loss": loss.item(),
                             "acc": float((logits.argmax(1) == y).float().mean()),
                             "read_s": read_s, "io": io, "whole": whole})
                step += 1
                progress.advance(task)
                if step == steps:
                    break
    return rows


def _check_crops(ds: Any, data: CameraTrapSet, progress: Progress) -> None:
    """Read the first 64 crops unresized and compare them with numpy's crops."""
    n = min(64, len(ds))
    task = progress.add_task("checking crops vs numpy", total=n)
    for k, (crop, _) in enumerate(ds.__getitems__(list(range(n)))):
        want = data.images[ds.selections[k]]
        if not np.array_equal(crop.numpy(), want):
            raise SystemExit(f"demo: crop {k} read back wrong; this is a bug, please report it")
        progress.advance(task)


def report(url: str, rows: list[dict[str, Any]]) -> None:
    """Print the per-step table and the totals."""
    table = Table(title=f"training on crops from {url}", caption="µ$: millionths of a "
                  "dollar at S3 list prices; 'whole': downloading each image and cropping")
    cols = ("step", "loss", "acc", "read\nms", "req", "KiB", "µ$", "whole\nreq",
            "whole\nKiB", "whole\nµ$")
    for col in cols:
        table.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        io, whole = r["io"], r["whole"]
        table.add_row(str(r["step"]), f"{r['loss']:.2f}", f"{r['acc']:.2f}",
                      f"{r['read_s'] * 1e3:.0f}", str(io.requests),
                      f"{io.bytes_received / 1024:.0f}", f"{io.cost_usd('s3') * 1e6:.0f}",
                      str(whole.requests), f"{whole.bytes_received / 1024:.0f}",
                      f"{whole.cost_usd('s3') * 1e6:.0f}")
    console.print(table)
    io = sum((r["io"] for r in rows), IOStats())
    whole = sum((r["whole"] for r in rows), IOStats())
    console.print(
        f"{len(rows)} steps read {io.bytes_received / 2**20:.1f} MiB in {io.requests} requests "
        f"(${io.cost_usd('s3'):.6f} at S3 prices); whole-image downloads would have moved "
        f"{whole.bytes_received / 2**20:.1f} MiB in {whole.requests} requests "
        f"(${whole.cost_usd('s3'):.6f}): [bold]"
        f"{whole.bytes_received / max(1, io.bytes_received):.1f}x the bytes, "
        f"{whole.cost_usd('s3') / max(1e-12, io.cost_usd('s3')):.1f}x the dollars[/].")
    console.print("[dim]Reads planned with the built-in cloud profile and S3 prices. Prices: "
                  "tessera.storage.pricing (list prices, recorded 2026-11-22).[/]")


def main(argv: list[str] | None = None) -> None:
    """Run the demo from the command line."""
    parser = argparse.ArgumentParser(prog="python -m tessera.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=Path("demo-store").resolve().as_uri(),
                        help="store URL (default: ./demo-store)")
    parser.add_argument("--images", type=int, default=300, help="number of images")
    parser.add_argument("--steps", type=int, default=24, help="training steps")
    parser.add_argument("--batch", type=int, default=32, help="crops per step")
    args = parser.parse_args(argv)
    if args.images < 1 or args.steps < 1 or args.batch < 1:
        parser.error("--images, --steps and --batch must be >= 1")
    try:
        rows = run_demo(args.store, args.images, args.steps, args.batch)
    except tessera.TesseraError as err:
        console.print(f"[bold red]error:[/] {err}")
        raise SystemExit(1) from None
    report(args.store, rows)
    console.print(f"Look at what was stored: [bold]tessera view {args.store}[/]", soft_wrap=True)


if __name__ == "__main__":
    main()
