"""How costs grow: reads, plans, consolidation, table commits and image-set opens against the
size of what a user has (fragments, tiles, tensors, images), as log-log slopes.

A cost that grows with the work (a whole read of twice the tiles) should grow with slope
about 1; one that should not depend on history (a small read among more fragments, a table
commit among more tensors) should stay flat (slope about 0). Each series grows one kind of
data on a local folder, measures each operation (medians of ``--reps``), fits the slope of
log(seconds) against log(size) by least squares and prints it beside the goal.

    python benchmarks/growth.py            # full sizes (10 -> 1000 fragments, ...)
    python benchmarks/growth.py --quick    # the spans shortened to 30x
    python benchmarks/growth.py --only images   # one series again, the others kept
    python benchmarks/growth.py --million       # plan a whole read of 10^6 tiles, by step
    python benchmarks/growth.py --images-s3     # an image set's first read on S3, requests

Writes ``benchmarks/results/growth.csv`` (every measurement), ``growth_slopes.csv`` and
``growth.png`` (time against size on log-log axes, one line per operation, the goal slope
drawn dashed from each line's first point).
"""

from __future__ import annotations

import argparse
import csv
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
from tessera.array.commits import META_CACHE

RESULTS = Path(__file__).parent / "results"

#: Goal slopes (at most), per (series, operation).
GOALS = {
    ("fragments", "20x20 read"): 0.1,
    ("fragments", "whole read"): 1.1,
    ("fragments", "explain"): 1.1,
    ("fragments", "consolidate"): 1.1,
    ("fragments", "cold open after consolidate"): 0.2,
    ("tiles", "whole read (first)"): 1.1,
    ("tiles", "whole read (again)"): 1.1,
    ("tiles", "explain (first)"): 1.1,
    ("tiles", "explain (again)"): 1.1,
    ("tensors", "commit of 10"): 0.15,
    ("tensors", "cold open + one-tensor read"): 0.2,
    ("tensors", "open at version 1 + read"): 0.3,
    ("images", "first read after open"): 0.15,
    ("images", "first read after consolidate"): 0.15,
}


def median_s(fn: Callable[[], Any], reps: int) -> float:
    """Median wall time of ``reps`` calls."""
    times = []
    for _ in range(reps):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fragments_series(sizes: list[int], reps: int, root: Path) -> list[dict[str, Any]]:
    """A 1000 x 1000 int32 array in 100 x 100 tiles and N box writes of 40 x 40 at random
    places below row 100; the 20 x 20 reads fall in rows 0..99, which no write touches."""
    rows = []
    for n in sizes:
        rows += _fragments(n, reps, (root / f"frag{n}").as_uri())
        print(f"fragments {n}: done", flush=True)
    return rows


def _fragments(n: int, reps: int, url: str) -> list[dict[str, Any]]:
    arr = tessera.from_numpy(url, np.zeros((1000, 1000), np.int32), tile=(100, 100))
    rng = np.random.default_rng(n)
    for i in range(n):
        y, x = int(rng.integers(100, 960)), int(rng.integers(0, 960))
        arr[y:y + 40, x:x + 40] = np.full((40, 40), i, np.int32)
    arr = tessera.open_array(url, "w")
    arr.reads = tessera.ReadConfig(refresh_s=float("inf"))
    arr[:]  # the fragment list and bookkeeping loaded
    pos = np.stack([rng.integers(0, 80, 400), rng.integers(0, 980, 400)], axis=1)

    def small() -> None:
        for y, x in pos:
            arr[y:y + 20, x:x + 20]

    def cold() -> None:
        META_CACHE().clear()
        _ = tessera.open_array(url).fragments

    small()
    rows = [_row("fragments", "20x20 read", n, median_s(small, reps) / len(pos)),
            _row("fragments", "whole read", n, median_s(lambda: arr[:], reps)),
            _row("fragments", "explain", n, median_s(arr.explain, reps))]
    t0 = time.perf_counter()
    arr.consolidate()
    rows.append(_row("fragments", "consolidate", n, time.perf_counter() - t0))
    rows.append(_row("fragments", "cold open after consolidate", n, median_s(cold, reps)))
    return rows


def tiles_series(sizes: list[int], reps: int, root: Path) -> list[dict[str, Any]]:
    """One fragment of int8 in 16 x 16 tiles, 100 tiles a row: T tiles hold T x 256 bytes.
    "first": a fresh handle (planning included); "again": the same handle once more."""
    rows = []
    for t in sizes:
        url = (root / f"tiles{t}").as_uri()
        tessera.from_numpy(url, np.zeros((16 * (t // 100), 1600), np.int8), tile=(16, 16))
        for op, call in (("whole read", _whole), ("explain", _explain)):
            rows += _tiles(t, url, op, call, reps)
        print(f"tiles {t}: done", flush=True)
    return rows


def million_plan(root: Path, tiles: int = 1_000_000, tile_by_tile: bool = True,
                 ) -> dict[str, Any]:
    """Plan a whole read of ``tiles`` 16 x 16 int8 tiles (one fragment) on a fresh handle,
    step by step as a read does (the garbage collector paused, as a read over many tiles
    runs): the tile reads in columns, what they need, the planner's choice; then
    ``explain()`` of the whole array on a fresh handle, and the whole read itself (on a
    handle that has listed its fragments). With ``tile_by_tile``, the same plan made tile
    by tile too (the path a read of a box that cuts tiles takes), for the ratio. Returns
    the seconds of each step and of all, and the plan's requests and bytes."""
    from tessera._gc import collector_paused
    from tessera._sync import run_sync
    from tessera.array.read.local import LOCAL_BATCH_BYTES
    from tessera.array.read.tiles import plan_tile_reads
    from tessera.array.read.whole import whole_tiles
    from tessera.format.selection import normalize_selection
    from tessera.query.plan import plan_whole, tile_needs

    url = (root / f"plan{tiles}").as_uri()
    tessera.from_numpy(url, np.zeros((16 * (tiles // 1000), 16_000), np.int8), tile=(16, 16))
    arr = tessera.open_array(url)
    metas = run_sync(arr._visible_metas())
    sel = normalize_selection((slice(None), slice(None)), arr.schema)
    got: dict[str, Any] = {}
    gc.collect()
    with collector_paused():
        t0 = time.perf_counter()
        columns = whole_tiles(arr.schema, sel, metas, ["data"])
        assert columns is not None
        t1 = time.perf_counter()
        needs = columns.needs()
        t2 = time.perf_counter()
        # (as a read of a folder store plans it: small plans for the calling thread)
        plan = plan_whole(needs, url=arr.store.url, profile=arr.profile,
                          now_bytes=LOCAL_BATCH_BYTES)
        t3 = time.perf_counter()
    got.update(tiles=len(plan.choices), tile_reads_s=t1 - t0, needs_s=t2 - t1,
               planner_s=t3 - t2, total_s=t3 - t0, requests=len(plan.requests),
               plan_bytes=plan.totals.nbytes)
    # the same steps as the read runs them (settings, profile, the loop's model)
    t0 = time.perf_counter()
    made = arr._whole_read(sel, metas, ["data"], "auto", 0.0)
    got["as_read_s"] = time.perf_counter() - t0
    assert made is not None and made[1].requests == plan.requests
    del columns, needs, made
    fresh = tessera.open_array(url)
    gc.collect()
    t0 = time.perf_counter()
    fresh.explain()
    got["explain_s"] = time.perf_counter() - t0
    fresh.reads = tessera.ReadConfig(refresh_s=float("inf"))
    _ = fresh.fragments
    gc.collect()
    t0 = time.perf_counter()
    fresh[:]
    got["whole_read_s"] = time.perf_counter() - t0
    if tile_by_tile:
        gc.collect()
        with collector_paused():
            t0 = time.perf_counter()
            reads, _, _ = plan_tile_reads(arr.schema, sel, metas, ["data"])
            old = arr._plan_needs(reads, tile_needs(arr.schema, sel, reads), "auto", 0.0)
            got["tile_by_tile_s"] = time.perf_counter() - t0
        assert old is not None and old.requests == plan.requests
    return got


def _whole(arr: tessera.Array) -> None:
    arr[:]


def _explain(arr: tessera.Array) -> None:
    arr.explain()


def _tiles(t: int, url: str, op: str, call: Callable[[tessera.Array], None],
           reps: int) -> list[dict[str, Any]]:
    times = []
    arr = tessera.open_array(url)
    for _ in range(reps):
        arr = tessera.open_array(url)
        arr.reads = tessera.ReadConfig(refresh_s=float("inf"))
        _ = arr.fragments
        t0 = time.perf_counter()
        call(arr)
        times.append(time.perf_counter() - t0)
    return [_row("tiles", f"{op} (first)", t, statistics.median(times)),
            _row("tiles", f"{op} (again)", t, median_s(lambda: call(arr), reps))]


def tensors_series(sizes: list[int], reps: int, root: Path) -> list[dict[str, Any]]:
    """One table grown by commits of 10 small tensors (8 x 8 float32) in id order."""
    from tessera.tables import TensorTable

    url = (root / "table").as_uri()
    table = TensorTable.create(url)
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    rows: list[dict[str, Any]] = []
    made = 0

    def commit() -> None:
        nonlocal made
        table.write_many({f"t{made // 10:06d}/{i}": x for i in range(10)})
        made += 10

    commit()  # version 1
    for n in sizes:
        while made < n:
            commit()
        times = []
        for _ in range(max(5, reps)):
            t0 = time.perf_counter()
            commit()
            times.append(time.perf_counter() - t0)
        rows.append(_row("tensors", "commit of 10", n, statistics.median(times)))
        some = f"t{made // 20:06d}/3"
        rows.append(_row("tensors", "cold open + one-tensor read", n,
                         median_s(lambda s=some: _cold_table(url, None, s), reps)))
        rows.append(_row("tensors", "open at version 1 + read", n,
                         median_s(lambda: _cold_table(url, 1, "t000000/3"), reps)))
        print(f"tensors {n}: done", flush=True)
    return rows


def _cold_table(url: str, version: int | None, tensor: str) -> None:
    """Open a table (caches of footers and header rows emptied) and read one tensor."""
    from tessera.tables import TensorTable
    from tessera.tables.catalog import HEADER_ROWS
    from tessera.tables.reader import FOOTERS

    HEADER_ROWS().clear()
    FOOTERS().clear()
    TensorTable.open(url, at=version)[tensor][:]


def images_series(sizes: list[int], reps: int, root: Path) -> list[dict[str, Any]]:
    """An image set of 32 x 32 RGB images per size, appended 250 at a time; the first read of
    one image on a fresh handle (the process's bookkeeping cache emptied), before and after
    ``consolidate()``."""
    from tessera.images import ImageColumns

    rows = []
    for n in sizes:
        url = (root / f"images{n}").as_uri()
        cols = ImageColumns.create(url, size=(32, 32), channels=3, cache=None)
        rng = np.random.default_rng(n)
        for _ in range(0, n, 250):
            cols.append(rng.integers(0, 256, (250, 32, 32, 3), dtype=np.uint8))
        ids = cols.ids()  # appends are padded to whole groups: the middle stored image
        image = int(ids[len(ids) // 2])
        rows.append(_row("images", "first read after open", n,
                         median_s(lambda i=image, u=url: _first_image(u, i), reps)))
        cols.consolidate()
        rows.append(_row("images", "first read after consolidate", n,
                         median_s(lambda i=image, u=url: _first_image(u, i), reps)))
        print(f"images {n}: done", flush=True)
    return rows


def images_s3(appends: list[int], reps: int) -> list[dict[str, Any]]:
    """On the S3 test server: the first read of one image (k = 8) of a set of ``appends``
    appends of 250 32 x 32 RGB images, on a fresh handle with the bookkeeping cache emptied:
    seconds (median) and the requests it made, by kind."""
    from tessera.images import ImageColumns
    from tessera.testing import S3TestServer

    rows = []
    with S3TestServer() as s3:
        options = s3.storage_options()
        for count in appends:
            url = s3.unique_url(f"growth-images-{count}")
            cols = ImageColumns.create(url, size=(32, 32), channels=3, cache=None,
                                       storage_options=options)
            rng = np.random.default_rng(count)
            for _ in range(count):
                cols.append(rng.integers(0, 256, (250, 32, 32, 3), dtype=np.uint8))
            ids = cols.ids()
            image = int(ids[len(ids) // 2])
            times, made = [], []
            for _ in range(reps):
                META_CACHE().clear()
                with tessera.collect_stats() as stats:
                    start = time.perf_counter()
                    ImageColumns.open(url, cache=None, storage_options=options).read(
                        [image], k=8)
                    times.append(time.perf_counter() - start)
                made.append(stats)
            stats = made[-1]
            rows.append({"appends": count, "images": count * 250,
                         "seconds": float(np.median(times)), "requests": stats.requests,
                         **{f"{kind}_requests": m.requests
                            for kind, m in sorted(stats.by_method.items())}})
            print(f"images on S3, {count} appends: {rows[-1]}", flush=True)
    return rows


def _first_image(url: str, image: int) -> None:
    """Open an image set (bookkeeping cache emptied) and read one image at k = 8."""
    from tessera.images import ImageColumns

    META_CACHE().clear()
    ImageColumns.open(url, cache=None).read([image], k=8)


def _row(series: str, op: str, size: int, seconds: float) -> dict[str, Any]:
    return {"series": series, "operation": op, "size": size, "seconds": seconds}


def slopes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Least-squares slope of log(seconds) against log(size) per operation."""
    out = []
    for series, op in dict.fromkeys((r["series"], r["operation"]) for r in rows):
        pts = [(r["size"], r["seconds"]) for r in rows
               if (r["series"], r["operation"]) == (series, op)]
        xs = np.log([p[0] for p in pts])
        ys = np.log([p[1] for p in pts])
        slope = float(np.polyfit(xs, ys, 1)[0]) if len(pts) > 1 else float("nan")
        goal = GOALS.get((series, op))
        out.append({"series": series, "operation": op, "sizes": f"{pts[0][0]}-{pts[-1][0]}",
                    "span": round(pts[-1][0] / pts[0][0], 1), "first_s": pts[0][1],
                    "last_s": pts[-1][1], "slope": round(slope, 3), "goal": goal,
                    "meets": None if goal is None else slope <= goal})
    return out


def plot(rows: list[dict[str, Any]], fits: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = list(dict.fromkeys(r["series"] for r in rows))
    fig, axes = plt.subplots(1, len(series), figsize=(5 * len(series), 4.5), squeeze=False)
    for ax, s in zip(axes[0], series, strict=True):
        for fit in (f for f in fits if f["series"] == s):
            pts = [(r["size"], r["seconds"]) for r in rows
                   if (r["series"], r["operation"]) == (s, fit["operation"])]
            xs, ys = zip(*pts, strict=True)
            line, = ax.loglog(xs, ys, "o-", label=f"{fit['operation']} ({fit['slope']:.2f})")
            if fit["goal"] is not None:
                goal = [ys[0] * (x / xs[0]) ** fit["goal"] for x in xs]
                ax.loglog(xs, goal, "--", color=line.get_color(), alpha=0.5)
        ax.set_title(f"against {s} (dashed: goal slope)")
        ax.set_xlabel(s)
        ax.set_ylabel("seconds")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="spans of 30x, fewer repetitions")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per measurement")
    parser.add_argument("--only", nargs="*", default=None,
                        choices=["fragments", "tiles", "tensors", "images"])
    parser.add_argument("--tiny", action="store_true",
                        help="two small sizes per series (a check that it runs)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results go")
    parser.add_argument("--million", action="store_true",
                        help="only plan a whole read of 10^6 tiles and report its steps")
    parser.add_argument("--no-tile-by-tile", action="store_true",
                        help="with --million: leave out the plan made tile by tile")
    parser.add_argument("--images-s3", action="store_true",
                        help="only an image set's first read on the S3 test server, with "
                             "its requests, after 6 and 80 appends")
    args = parser.parse_args()
    if args.images_s3:
        got_rows = images_s3([6, 80], args.reps or 5)
        args.out.mkdir(parents=True, exist_ok=True)
        write_csv(args.out / "growth_images_s3.csv", got_rows)
        return
    if args.million:
        with tempfile.TemporaryDirectory() as tmp:
            got = million_plan(Path(tmp), tile_by_tile=not args.no_tile_by_tile)
        args.out.mkdir(parents=True, exist_ok=True)
        write_csv(args.out / "growth_million.csv", [got])
        print(f"planning a whole read of {got['tiles']:,} tiles: {got['total_s']:.2f} s "
              f"(tile reads {got['tile_reads_s']:.2f} s, needs {got['needs_s']:.2f} s, "
              f"planner {got['planner_s']:.2f} s; {got['as_read_s']:.2f} s as a read makes "
              f"it; tile by tile {got.get('tile_by_tile_s', float('nan')):.2f} s); the plan "
              f"moves {got['plan_bytes']:,} bytes in {got['requests']:,} requests; explain() "
              f"on a fresh handle {got['explain_s']:.2f} s; the whole read "
              f"{got['whole_read_s']:.2f} s")
        return
    reps = args.reps or (3 if args.quick else 5)
    sizes = {"fragments": [10, 30], "tiles": [100, 300], "tensors": [20, 40],
             "images": [250, 500]} if args.tiny else {
        "fragments": [10, 30, 100, 300] if args.quick else [10, 30, 100, 300, 1000],
        "tiles": [1000, 3000, 10000, 30000] if args.quick else [1000, 3000, 10000, 30000,
                                                                  100000],
        "tensors": [100, 300, 1000, 3000],
        "images": [1500, 5000] if args.quick else [1500, 5000, 20000],
    }
    runs = {"fragments": fragments_series, "tiles": tiles_series,
            "tensors": tensors_series, "images": images_series}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or list(runs):
            rows += runs[name](sizes[name], reps, Path(tmp))
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if args.quick else "_tiny" if args.tiny else ""
    earlier = out / f"growth{suffix}.csv"
    if args.only and earlier.exists():  # keep the other series of the last run
        with open(earlier, newline="") as f:
            kept = [{**r, "size": int(r["size"]), "seconds": float(r["seconds"])}
                    for r in csv.DictReader(f) if r["series"] not in args.only]
        rows = kept + rows
    fits = slopes(rows)
    write_csv(out / f"growth{suffix}.csv", rows)
    write_csv(out / f"growth_slopes{suffix}.csv", fits)
    plot(rows, fits, out / f"growth{suffix}.png")
    table = ["| series | operation | sizes | first (s) | last (s) | slope | goal | |",
             "|---|---|---|---|---|---|---|---|"]
    for f in fits:
        verdict = "" if f["meets"] is None else ("met" if f["meets"] else "missed")
        table.append(f"| {f['series']} | {f['operation']} | {f['sizes']} | "
                     f"{f['first_s']:.4g} | {f['last_s']:.4g} | {f['slope']:.2f} | "
                     f"{f['goal'] if f['goal'] is not None else ''} | {verdict} |")
    (out / f"growth_table{suffix}.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
