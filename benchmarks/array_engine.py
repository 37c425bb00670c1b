"""Measures the array engine on a local folder store beside the raw file system, in one run.

1. dense write of SIZE uncompressed (int32, square, 4 MiB tiles) vs a raw sequential file
   write of the same bytes to a new file (goal: >= 70% of raw speed), into the page cache
   and durably (timed up to the end of a ``sync``); every run starts after ``sync``;
2. full read of that array vs a raw file read (goal: >= 70% of raw speed), from the page
   cache and, where this process may empty it (root on Linux), cold;
3. 100,000 random cell updates to a dense array as one sparse fragment (goal: < 1 s);
4. a random 1K x 1K box read from an 8K x 8K int32 array with 1 dense fragment, then with
   100 and 1000 sparse update fragments of 1,000 random cells each on top, then after
   consolidation (the TileDB paper's Figure 12; goals: 100 updates within 1.2x of one
   fragment, back within 1.05x after consolidation). Each stage is timed taking turns with
   the same boxes read from a reference copy that keeps its one fragment, and its ratio is
   the median over the boxes of stage / reference on the same box (the "1 fragment" row
   shows the noise). Every read is checked against numpy.

Raw and Tessera runs take turns and the best of ``--repeats`` is kept for each. Prints a
table; writes benchmarks/out/array_engine.csv.

    python benchmarks/array_engine.py [--size-gib 1] [--repeats 6] [--dir DIR] [--quick]
                                      [--no-cold]

``--quick`` shrinks every size (a smoke run for tests, not figures to report).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import track
from rich.table import Table

import tessera
from tessera import ArraySchema, Attr, Dim

console = Console(highlight=False, width=150)
MiB = 2**20


def best_of(fn: Callable[[], Any], repeats: int) -> float:
    """The fastest of ``repeats`` runs of ``fn``, in seconds."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def can_drop_caches() -> bool:
    """True if this process may empty the OS page cache (Linux, as root)."""
    return os.access("/proc/sys/vm/drop_caches", os.W_OK)


def settle(cold: bool = False) -> None:
    """Flush dirty pages (so one run's write-back does not slow the next) and, for a cold
    run, empty the page cache."""
    os.sync()
    if cold:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")


def interleaved(fns: dict[str, Callable[[], Any]], repeats: int, cold: bool = False,
                before: Callable[[], Any] | None = None) -> dict[str, float]:
    """Best time of each function over ``repeats`` rounds, the functions taking turns (so
    drifts of a shared machine hit all of them alike) in an order that reverses every round
    (so going first or last favours none of them); ``before`` runs and the disk settles
    before every run, outside the timing."""
    best = dict.fromkeys(fns, float("inf"))
    for round_ in range(repeats):
        for name, fn in (reversed(fns.items()) if round_ % 2 else fns.items()):
            if before is not None:
                before()
            settle(cold)
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def raw_write(path: Path, data: np.ndarray) -> None:
    with open(path, "wb") as f:
        f.write(memoryview(data).cast("B"))


def raw_read(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype=np.uint8)


def dense_schema(n: int, tile: int) -> ArraySchema:
    return ArraySchema([Dim("y", (0, n - 1), tile), Dim("x", (0, n - 1), tile)],
                       [Attr("v", "<i4")])


def bench_bulk(root: Path, size_bytes: int, repeats: int, cold: bool,
               ) -> list[dict[str, Any]]:
    n = int((size_bytes // 4) ** 0.5)
    tile = min(1024, n)
    data = np.random.default_rng(1).integers(0, 2**31 - 1, (n, n), dtype=np.int32)
    nbytes = data.nbytes
    runs = iter(range(10**6))

    def raw_new_file(durable: bool) -> None:
        raw_write(root / f"raw{next(runs)}.bin", data)
        if durable:
            os.sync()

    def tessera_write(durable: bool) -> None:
        arr = tessera.create_array(f"file://{root}/bulk{next(runs)}", dense_schema(n, tile))
        arr.write(data)
        if durable:
            os.sync()

    def cleanup() -> None:
        for old in [*root.glob("bulk*"), *root.glob("raw*.bin")]:
            shutil.rmtree(old) if old.is_dir() else old.unlink()

    t_w = interleaved({"raw": lambda: raw_new_file(False),
                       "tessera": lambda: tessera_write(False)}, repeats, before=cleanup)
    t_wd = interleaved({"raw": lambda: raw_new_file(True),
                        "tessera": lambda: tessera_write(True)}, repeats, before=cleanup)
    cleanup()
    raw_path = root / "raw.bin"
    raw_write(raw_path, data)
    tessera_write(False)
    arr = tessera.open_array(f"file://{root}/{next(root.glob('bulk*')).name}")
    if not np.array_equal(arr[:, :], data):
        raise SystemExit("full read returned wrong cells")
    reads = {"raw": lambda: raw_read(raw_path), "tessera": lambda: arr[:, :]}
    mb = nbytes / 1e6
    case = f"{nbytes / MiB:.0f} MiB, {tile}x{tile} tiles"

    def row(what: str, t: dict[str, float]) -> dict[str, Any]:
        return {"experiment": what, "case": case, "tessera_s": t["tessera"],
                "raw_s": t["raw"], "tessera_MBps": mb / t["tessera"], "raw_MBps": mb / t["raw"],
                "ratio": t["raw"] / t["tessera"], "goal": ">= 0.70 of raw"}

    rows = [row("dense write", t_w), row("dense write + sync (durable)", t_wd),
            row("full read (page cache)", interleaved(reads, repeats))]
    if cold and can_drop_caches():
        rows.append(row("full read (cold)", interleaved(reads, repeats, cold=True)))
    elif cold:
        console.print("[yellow]cannot empty the page cache (needs root on Linux): "
                      "no cold-read row[/]")
    return rows


def bench_updates(root: Path, n: int, cells: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(2)
    arr = tessera.create_array(f"file://{root}/updates", dense_schema(n, min(1024, n)))
    arr.write(np.zeros((n, n), np.int32))
    flat = rng.choice(n * n, cells, replace=False)
    coords = (flat // n, flat % n)
    values = rng.integers(1, 1000, cells, dtype=np.int32)
    t = best_of(lambda: arr.write_cells(coords, values), repeats)
    expect = np.zeros((n, n), np.int32)
    expect[coords] = values
    if not np.array_equal(arr[:, :], expect):
        raise SystemExit("sparse updates read back wrong")
    return {"experiment": "sparse updates", "case": f"{cells:,} random cells, {n}x{n} int32",
            "tessera_s": t, "raw_s": None, "tessera_MBps": None, "raw_MBps": None,
            "ratio": None, "goal": "< 1 s"}


def bench_fragments(root: Path, n: int, box: int, counts: list[int], cells: int,
                    repeats: int, queries: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(3)
    uri = f"file://{root}/frag"
    truth = rng.integers(0, 2**31 - 1, (n, n), dtype=np.int32)
    arr = tessera.create_array(uri, dense_schema(n, min(1024, n)))
    arr.write(truth)
    tessera.create_array(f"{uri}-reference", dense_schema(n, min(1024, n))).write(truth)
    reference_truth = truth.copy()
    starts = rng.integers(0, n - box + 1, (queries, 2))
    reader = tessera.open_array(uri)
    reference = tessera.open_array(f"{uri}-reference")

    def read_boxes() -> tuple[float, float, float]:
        """Median over the queries of the best-of-``repeats`` time per box, of this array
        and of the reference copy, the two taking turns; and the median of the per-box
        ratios (this array / the reference on the same box)."""
        settle()
        times: list[float] = []
        ref_times: list[float] = []
        for y, x in starts:
            sel = (slice(int(y), int(y) + box), slice(int(x), int(x) + box))
            for handle, want in ((reader, truth), (reference, reference_truth)):
                if not np.array_equal(handle[sel], want[sel]):  # also warms its metadata
                    raise SystemExit(f"box read at {(y, x)} with {len(handle.fragments)} "
                                     "fragments returned wrong cells")
            t = interleaved({"stage": lambda sel=sel: reader[sel],
                             "reference": lambda sel=sel: reference[sel]}, repeats)
            times.append(t["stage"])
            ref_times.append(t["reference"])
        ratios = [t / r for t, r in zip(times, ref_times, strict=True)]
        return statistics.median(times), statistics.median(ref_times), statistics.median(ratios)

    rows: list[dict[str, Any]] = []
    base, ref, ratio = read_boxes()
    rows.append({"case": "1 fragment", "tessera_s": base, "reference_s": ref, "ratio": ratio})
    written = 0
    for target in counts:
        for _ in track(range(target - written), description=f"updates to {target}",
                       console=console, transient=True):
            flat = rng.choice(n * n, cells, replace=False)
            coords = (flat // n, flat % n)
            values = rng.integers(0, 2**31 - 1, cells, dtype=np.int32)
            arr.write_cells(coords, values)
            truth[coords] = values
        written = target
        t, ref, ratio = read_boxes()
        rows.append({"case": f"1 + {target} update fragments", "tessera_s": t,
                     "reference_s": ref, "ratio": ratio})
    t0 = time.perf_counter()
    arr.consolidate()
    t_cons = time.perf_counter() - t0
    arr.vacuum(orphan_grace_s=0, force=True)
    t, ref, ratio = read_boxes()
    rows.append({"case": f"after consolidation ({t_cons:.1f} s to consolidate)",
                 "tessera_s": t, "reference_s": ref, "ratio": ratio})
    for r in rows:
        ref = r.pop("reference_s")
        r.update(experiment=f"{box}x{box} box read", raw_s=None, tessera_MBps=None,
                 raw_MBps=None,
                 case=f"{r['case']}; reference {ref * 1000:.2f} ms",
                 goal=("<= 1.2x of 1 fragment" if "100 " in r["case"] else
                       "<= 1.05x of 1 fragment" if "consolidation" in r["case"] else ""))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gib", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--queries", type=int, default=24)
    parser.add_argument("--dir", type=Path, default=None,
                        help="folder for the stores (default: a temporary folder)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--no-cold", action="store_true",
                        help="skip the cold-read row (it empties the OS page cache)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    size = int(args.size_gib * 2**30)
    n_upd, n_frag, box, counts, cells = 4096, 8192, 1024, [100, 1000], 1000
    if args.quick:
        size, n_upd, n_frag, box, counts, cells = 4 * MiB, 256, 512, 64, [3, 6], 50
        args.repeats, args.queries = 1, 2
    root = Path(tempfile.mkdtemp(prefix="tessera-bench-", dir=args.dir))
    try:
        console.print(f"stores under {root}")
        rows = bench_bulk(root, size, args.repeats, cold=not args.no_cold)
        rows.append(bench_updates(root, n_upd, 100_000 if not args.quick else 1000,
                                  args.repeats))
        rows += bench_fragments(root, n_frag, box, counts, cells, args.repeats, args.queries)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    table = Table(title=f"array engine on a local folder store ({os.cpu_count()} cores)")
    for col in ("experiment", "case", "tessera s", "raw s", "tessera MB/s", "raw MB/s",
                "ratio", "goal"):
        table.add_column(col, justify="left" if col in ("experiment", "case", "goal")
                         else "right")

    def fmt(v: Any, spec: str) -> str:
        return "" if v is None else format(v, spec)

    for r in rows:
        table.add_row(r["experiment"], r["case"], fmt(r["tessera_s"], ".4f"),
                      fmt(r["raw_s"], ".4f"), fmt(r["tessera_MBps"], ".0f"),
                      fmt(r["raw_MBps"], ".0f"), fmt(r["ratio"], ".2f"), r["goal"])
    console.print(table)
    console.print("ratio: raw time / tessera time for bulk rows (1.0 = raw speed); "
                  "for box rows, the median over the boxes of read time / the one-fragment "
                  "reference copy's on the same box, the two timed taking turns")
    path = args.out / "array_engine.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["experiment", "case", "tessera_s", "raw_s",
                                          "tessera_MBps", "raw_MBps", "ratio", "goal"])
        w.writeheader()
        w.writerows(rows)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
