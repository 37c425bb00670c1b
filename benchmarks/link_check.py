"""Measures the foundation's test bed: the emulated link and the S3 test server.

1. delay: 1 KiB GET through a link with 10 ms each way (bound: >= 20 ms);
2. bandwidth: 64 MiB GET through a 50 MB/s cap (bound: >= 64 MiB / 50 MB/s = 1.342 s);
3. counting: the link's byte counters against the response heads and bodies;
4. ranged GET cost: 1 KiB from objects of 1, 64 and 256 MiB, on the patched test server
   (what the benchmarks use) and on stock moto (goal: 256 MiB costs <= 2x 1 MiB); beside it,
   eight concurrent 336 KiB ranges (one per 4 MiB tile, the horizontal box of the planner's
   benchmark) and the TCP connections opened for ten sequential requests (keep-alive: 1).

Prints tables; writes benchmarks/out/link_check.csv and benchmarks/out/link_check.png.

    python benchmarks/link_check.py [--repeats N] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tessera
from tessera.testing import EmulatedLink, S3TestServer

MiB = 2**20
console = Console(highlight=False)


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, object]] = []

    with S3TestServer() as s3:
        opts = s3.storage_options()
        direct = tessera.open_store(s3.url("bench"), **opts)
        direct.put("1k", b"k" * 1024)
        direct.put("64m", b"m" * (64 * MiB))

        # 1. delay
        with EmulatedLink(s3.port, one_way_delay_s=0.010) as link:
            store = tessera.open_store(s3.url("bench"), **s3.storage_options(link.endpoint))
            store.get("1k")  # open the connection
            t = timed(lambda: store.get("1k"), args.repeats)
        rows.append({"check": "1 KiB GET, 10 ms each way", "bound_s": 0.020,
                     "min_s": min(t), "median_s": statistics.median(t),
                     "holds": min(t) >= 0.020})

        # 2. bandwidth
        with EmulatedLink(s3.port, bandwidth=50e6) as link:
            store = tessera.open_store(s3.url("bench"), **s3.storage_options(link.endpoint))
            store.get("1k")
            t = timed(lambda: store.get("64m"), 3)
            bound = 64 * MiB / 50e6
        rows.append({"check": "64 MiB GET, 50 MB/s cap", "bound_s": bound, "min_s": min(t),
                     "median_s": statistics.median(t), "holds": min(t) >= bound})

        # 3. counting
        count_rows = []
        with EmulatedLink(s3.port) as link:
            store = tessera.open_store(s3.url("bench"), **s3.storage_options(link.endpoint))
            for key, size in (("1k", 1024), ("64m", 64 * MiB)):
                link.reset_counters()
                store.get(key)
                c = link.counters()
                count_rows.append((key, size, c.bytes_down, c.response_head_bytes,
                                   c.response_body_bytes))
                rows.append({"check": f"byte count, GET {key}", "bound_s": "",
                             "min_s": "", "median_s": "",
                             "holds": c.bytes_down == c.response_head_bytes + size
                             and c.response_body_bytes == size})

    # 4. ranged GET cost vs object size, patched vs stock
    range_rows = []
    for label, stock in (("patched (benchmarks)", False), ("stock moto", True)):
        with S3TestServer(stock=stock) as s3:
            store = tessera.open_store(s3.url("ranges"), **s3.storage_options())
            medians = {}
            for size_mib in (1, 64, 256):
                key = f"obj{size_mib}"
                store.put(key, b"\x5a" * (size_mib * MiB))
                store.get_range(key, 0, 1024)
                t = timed(lambda st=store, k=key, s=size_mib: st.get_range(k, s * MiB // 2, 1024),
                          args.repeats)
                medians[size_mib] = statistics.median(t)
                store.delete(key)
            ratio = medians[256] / medians[1]
            store.put("tiles", b"\x5a" * (32 * MiB))
            spans = [(i * 4 * MiB, 336 * 1024) for i in range(8)]
            store.get_ranges("tiles", spans)
            eight = statistics.median(timed(
                lambda st=store, sp=spans: st.get_ranges("tiles", sp), args.repeats))
            with EmulatedLink(s3.port) as link:
                counted = tessera.open_store(s3.url("ranges"),
                                             **s3.storage_options(link.endpoint))
                for _ in range(10):
                    counted.get_range("tiles", 0, 1024)
                conns = link.counters().connections
            range_rows.append((label, medians, ratio, eight, conns))
            rows.append({"check": f"1 KiB range 256 MiB / 1 MiB, {label}", "bound_s": "",
                         "min_s": medians[1], "median_s": medians[256],
                         "holds": ratio <= 2.0, "ratio": ratio})

    table = Table(title="Emulated link and S3 test server")
    for col in ("check", "bound (ms)", "min (ms)", "median (ms)", "holds"):
        table.add_column(col, justify="left" if col == "check" else "right")
    for r in rows[:2]:
        table.add_row(str(r["check"]), f"{float(r['bound_s']) * 1e3:.1f}",  # type: ignore[arg-type]
                      f"{float(r['min_s']) * 1e3:.1f}",  # type: ignore[arg-type]
                      f"{float(r['median_s']) * 1e3:.1f}", str(r["holds"]))  # type: ignore[arg-type]
    console.print(table)

    table = Table(title="Link byte counters vs response head + body")
    for col in ("object", "body bytes", "bytes_down", "head bytes", "body counted", "match"):
        table.add_column(col, justify="right")
    for key, size, down, head, body in count_rows:
        table.add_row(key, str(size), str(down), str(head), str(body),
                      str(down == head + size and body == size))
    console.print(table)

    table = Table(title="1 KiB ranged GET, median ms, by object size")
    for col in ("server", "1 MiB", "64 MiB", "256 MiB", "256/1 ratio", "8 x 336 KiB",
                "connections / 10 requests"):
        table.add_column(col, justify="left" if col == "server" else "right")
    for label, med, ratio, eight, conns in range_rows:
        table.add_row(label, *(f"{med[s] * 1e3:.2f}" for s in (1, 64, 256)), f"{ratio:.2f}",
                      f"{eight * 1e3:.2f}", str(conns))
    console.print(table)

    csv_path = args.out / "link_check.csv"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["check", "bound_s", "min_s", "median_s",
                                               "holds", "ratio"])
        writer.writeheader()
        for r in rows:
            writer.writerow(r)
    console.print(f"wrote {csv_path}")
    _plot(range_rows, args.out / "link_check.png")


def _plot(range_rows: list[tuple[str, dict[int, float], float]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        console.print("[dim]matplotlib missing: no PNG[/]")
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    sizes = [1, 64, 256]
    for label, med, *_ in range_rows:
        ax.plot(sizes, [med[s] * 1e3 for s in sizes], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("object size (MiB)")
    ax.set_ylabel("1 KiB ranged GET, median (ms)")
    ax.set_title("Ranged GET cost vs object size")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
