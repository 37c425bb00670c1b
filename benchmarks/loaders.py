"""Training-style loading of tensor samples on a fast link: ``TensorTableDataset`` and
``ArrayDataset`` against the plain per-sample loader ML pipelines write over object storage
(one ``.npy`` object per sample, fetched with a GET and loaded with numpy), all through a
``DataLoader`` with ``--workers`` persistent workers, from the S3 test server on loopback (no
emulated link: the engine's own work is what a step could wait for).

The samples: ``--samples`` float32 images ``(3, 64, 64)`` (48 KiB each; seeded noise), stored
three ways: one FTSF tensor of a tensor table (rows of ``TESSERA_TABLES_CHUNK_BYTES``, 4 MiB:
85 samples), a Tessera array ``(N, 3, 64, 64)`` in tiles of 64 samples, and one ``.npy``
object per sample. Tessera's datasets draw batches with ``DistributedGroupSampler`` (one
rank: the groups of stored rows or tiles shuffled, samples mixed within a window of 4
groups), so a batch reads whole rows once; the ``.npy`` loader shuffles samples (each is its
own object). Every epoch is checked to deliver every sample once with the stored values.

Reported: samples/s and MB/s (median of ``--reps`` epochs after an untimed first one that
starts the workers), beside the ``.npy`` loader's.

    python benchmarks/loaders.py [--samples 2048] [--workers 2] [--reps 3] [--out DIR]

Writes ``loaders.csv`` and ``loaders_results.md`` under ``--out`` (default benchmarks/out;
committed results: --out benchmarks/results).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import tessera
from _common import write_csv
from tessera.testing import S3TestServer

SHAPE = (3, 64, 64)
BATCH = 64


class NpyObjects:
    """A plain per-sample dataset: item ``i`` is one ``.npy`` object fetched with a GET and
    loaded with numpy in the worker."""

    def __init__(self, url: str, count: int, options: dict[str, Any]) -> None:
        self.url, self.count, self.options = url, count, options
        self._store: Any = None

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> Any:
        import torch

        if self._store is None:
            self._store = tessera.open_store(self.url, **self.options)
        data = bytes(self._store.get(f"{i:06d}.npy"))
        return torch.from_numpy(np.load(io.BytesIO(data), allow_pickle=False))

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_store": None}  # reopened in the worker


def _epoch(loader: Any) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    batches = list(loader)
    return time.perf_counter() - start, batches


def _check(batches: list[Any], data: np.ndarray, name: str) -> None:
    """Every sample once, with its stored values (a sample is found by its first values)."""
    got = np.concatenate([np.asarray(b) for b in batches])
    if got.shape != data.shape:
        raise SystemExit(f"{name}: {got.shape[0]} samples of {data.shape[0]}")
    order = np.argsort(got[:, 0, 0, 0])
    want = np.argsort(data[:, 0, 0, 0])
    if not np.array_equal(got[order], data[want]):
        raise SystemExit(f"{name}: delivered values differ from the stored ones")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from torch.utils.data import DataLoader

    from tessera.tables import TensorTable
    from tessera.torch import ArrayDataset, DistributedGroupSampler, TensorTableDataset

    data = np.random.default_rng(0).random((args.samples, *SHAPE), dtype=np.float32)
    rows = []
    with S3TestServer() as s3:
        options = dict(s3.storage_options())
        table_url = s3.unique_url("ld-table")
        TensorTable.create(table_url, storage_options=options).write("x", data, format="ftsf")
        array_url = s3.unique_url("ld-array")
        tessera.from_numpy(array_url, data, tile=(BATCH, *SHAPE), storage_options=options)
        npy_url = s3.unique_url("ld-npy")
        npy = tessera.open_store(npy_url, **options)
        for i, sample in enumerate(data):
            buf = io.BytesIO()
            np.save(buf, sample)
            npy.put(f"{i:06d}.npy", buf.getvalue())
        context = "forkserver" if args.workers else None
        tables = TensorTableDataset(table_url, storage_options=options)
        arrays = ArrayDataset(array_url, storage_options=options)
        loaders: list[tuple[str, Any]] = [
            ("TensorTableDataset", DataLoader(
                tables, batch_size=BATCH, num_workers=args.workers,
                sampler=DistributedGroupSampler(tables, num_replicas=1, rank=0,
                                                            buffer_groups=4),
                multiprocessing_context=context, persistent_workers=args.workers > 0)),
            ("ArrayDataset", DataLoader(
                arrays, batch_size=BATCH, num_workers=args.workers,
                sampler=DistributedGroupSampler(arrays, num_replicas=1, rank=0,
                                                            buffer_groups=4),
                multiprocessing_context=context, persistent_workers=args.workers > 0)),
            (".npy object per sample + np.load", DataLoader(
                NpyObjects(npy_url, args.samples, options), batch_size=BATCH, shuffle=True,
                num_workers=args.workers, multiprocessing_context=context,
                persistent_workers=args.workers > 0)),
        ]
        for name, loader in loaders:
            _check(_epoch(loader)[1], data, name)  # untimed: workers start, connections open
            times = []
            for _ in range(args.reps):
                took, batches = _epoch(loader)
                _check(batches, data, name)
                times.append(took)
            wall = statistics.median(times)
            rows.append({"system": name, "samples": args.samples, "workers": args.workers,
                         "seconds": round(wall, 4),
                         "samples_per_s": round(args.samples / wall, 1),
                         "MB_per_s": round(data.nbytes / wall / 1e6, 1)})
            print(f"{name:<34} {wall:7.3f} s {args.samples / wall:9.1f} samples/s")
            del loader
    base = rows[-1]["samples_per_s"]
    for r in rows:
        r["x_npy"] = round(r["samples_per_s"] / base, 2)
    write_csv(args.out / "loaders.csv", rows)
    lines = ["# Tensor samples through a DataLoader on loopback (benchmarks/loaders.py)", "",
             f"{args.samples} float32 samples of {SHAPE} ({data.nbytes / 2**20:.0f} MiB), "
             f"batches of {BATCH}, {args.workers} persistent workers, the S3 test server on "
             f"loopback; medians of {args.reps} epochs after a first untimed one; every epoch "
             "checked to deliver every sample once with its stored values. Goal: Tessera's "
             "datasets keep up with the per-sample .npy loader (x npy >= 1.0).", "",
             "| loader | seconds per epoch | samples/s | MB/s | x npy | met |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['system']} | {r['seconds']} | {r['samples_per_s']:,} | "
                     f"{r['MB_per_s']} | {r['x_npy']} | "
                     f"{'yes' if r['x_npy'] >= 1.0 else 'no'} |")
    (args.out / "loaders_results.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}/loaders.csv, loaders_results.md")


if __name__ == "__main__":
    main()
