"""Whole reads of arrays of many tiles: made in columns (the path Tessera takes for a box on
tile boundaries that one fragment holds) against the same read made tile by tile, with
obstore's own concurrent GETs of the same planned requests as the ceiling, on a local
folder and on the S3 test server (loopback), systems taking turns, medians of ``--reps``.

    python benchmarks/whole_reads.py [--reps 5] [--quick] [--out DIR]

Writes ``whole_reads.csv``, ``whole_reads.md`` and ``whole_reads.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import tessera
from _common import write_csv
from tessera.array.read import whole
from tessera.testing import S3TestServer
from throughput import _get_ranges, _obstore

RESULTS = Path(__file__).parent / "results"

#: (shape, dtype, tile, codec) of each array read whole.
CASES = [((1024, 1024), "float32", (64, 64), None),  # 256 tiles: the fewest made so
         ((4096, 4096), "float32", (64, 64), None),
         ((4096, 4096), "float32", (64, 64), "zstd"),
         ((2048, 2048), "int16", (16, 16), None),
         ((4096, 4096), "int8", (16, 16), None)]
QUICK = [((1024, 1024), "float32", (32, 32), None), ((1024, 1024), "int16", (16, 16), "zstd")]


def _local_gets(root: Path, pieces: list[tuple[str, int, int]]) -> int:
    """obstore's concurrent GETs of the pieces from a local folder."""
    from obstore.store import LocalStore

    return _get_ranges(LocalStore(str(root)), pieces)


def run_case(url: str, options: dict[str, Any], case: tuple[Any, ...], reps: int,
             ceiling: Callable[[list[tuple[str, int, int]]], int]) -> dict[str, Any]:
    shape, dtype, tile, codec = case
    data = np.random.default_rng(0).integers(0, 100, shape).astype(dtype)
    tessera.from_numpy(url, data, tile=tile, storage_options=options,
                       **({"codec": codec} if codec else {}))
    arr = tessera.open_array(url, storage_options=options)
    arr.reads = tessera.ReadConfig(refresh_s=float("inf"))  # fragments listed once
    np.testing.assert_array_equal(arr[:], data)
    plan = arr.last_read.plan
    assert isinstance(arr.last_read.tile_reads, whole.WholeTiles)
    pieces = [(r.key, r.start, r.stop - r.start) for r in plan.requests]
    times: dict[str, list[float]] = {"columns": [], "tile by tile": [], "obstore": []}
    least = whole.BULK_WHOLE_READS
    try:
        for _ in range(reps):
            for name in times:
                gc.collect()
                whole.BULK_WHOLE_READS = least if name == "columns" else 1 << 60
                t0 = time.perf_counter()
                if name == "obstore":
                    ceiling(pieces)
                else:
                    arr[:]
                times[name].append(time.perf_counter() - t0)
    finally:
        whole.BULK_WHOLE_READS = least
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"shape": "x".join(map(str, shape)), "dtype": dtype,
            "tile": "x".join(map(str, tile)), "codec": codec or "raw",
            "tiles": len(plan.choices), "requests": len(plan.requests),
            "MiB": round(data.nbytes / 2**20, 1), "columns_s": round(med["columns"], 4),
            "tile_by_tile_s": round(med["tile by tile"], 4),
            "obstore_gets_s": round(med["obstore"], 4),
            "speedup": round(med["tile by tile"] / med["columns"], 2),
            "columns_over_gets": round(med["columns"] / med["obstore"], 2)}


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['store']}\n{r['shape']} {r['dtype']}\n{r['tile']} {r['codec']}" for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows)), 4.5))
    for i, (key, name) in enumerate([("tile_by_tile_s", "tile by tile"),
                                     ("columns_s", "in columns"),
                                     ("obstore_gets_s", "obstore's GETs (ceiling)")]):
        ax.bar(x + (i - 1) * 0.27, [r[key] for r in rows], 0.27, label=name)
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("seconds (median)")
    ax.set_title("whole reads of many tiles")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="two small arrays")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    cases = QUICK if args.quick else CASES
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(cases):
            root = Path(tmp) / f"folder{i}"
            root.mkdir()
            row = run_case(root.as_uri(), {}, case, args.reps,
                           lambda p, r=root: _local_gets(r, p))
            rows.append({"store": "folder", **row})
            print(rows[-1], flush=True)
    with S3TestServer() as s3:
        options = dict(s3.storage_options())
        for case in cases:
            url = s3.unique_url("whole")
            store = _obstore(s3, s3.endpoint, url.split("/", 3)[3])
            row = run_case(url, options, case, args.reps, lambda p, st=store: _get_ranges(st, p))
            rows.append({"store": "S3 loopback", **row})
            print(rows[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if args.quick else ""
    write_csv(args.out / f"whole_reads{suffix}.csv", rows)
    plot(rows, args.out / f"whole_reads{suffix}.png")
    lines = ["# Whole reads of many tiles: in columns, tile by tile, obstore's GETs", "",
             f"Medians of {args.reps} runs taking turns (`python benchmarks/whole_reads.py"
             f"{' --quick' if args.quick else ''}`); obstore's GETs fetch the same planned "
             "requests concurrently and do nothing with the bytes.", "",
             "| store | array | tile | codec | tiles | requests | tile by tile s | "
             "in columns s | obstore GETs s | speed-up | columns / GETs |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['store']} | {r['shape']} {r['dtype']} ({r['MiB']} MiB) | {r['tile']} | "
              f"{r['codec']} | {r['tiles']:,} | {r['requests']} | {r['tile_by_tile_s']} | "
              f"{r['columns_s']} | {r['obstore_gets_s']} | {r['speedup']}x | "
              f"{r['columns_over_gets']}x |" for r in rows]
    (args.out / f"whole_reads{suffix}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
