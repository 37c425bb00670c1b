"""Load on the pushdown server: concurrent clients on loopback send batches of tile reads
(1-4 zstd tiles each, random rows and columns) to ``tessera serve`` in front of the S3 test
server; every accepted answer is checked against numpy. Reports throughput, p50/p99 latency,
how many requests the server refused with 503, and its peak memory.

    python benchmarks/pushdown_load.py [--clients 8] [--requests 200]
                                       [--max-concurrency 2] [--queue 2]

Prints a table; writes benchmarks/out/pushdown_load.csv.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

import tessera
from _common import write_csv
from tessera.testing import PushdownTestServer, S3TestServer
from tessera.testing.loadgen import run_load, tile_request_factory

console = Console(highlight=False, width=140)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = np.random.default_rng(0).integers(0, 1 << 30, (1024, 1024)).astype(np.int32)
    rows = []
    with S3TestServer() as s3:
        opts = s3.storage_options()
        uri = s3.url("load")
        arr = tessera.from_numpy(uri, data, tile=(128, 128), codec="zstd",
                                 storage_options=opts)
        for conc, queue, cache in ((2, 2, 4 << 20), (4, 8, 4 << 20), (8, 64, 64 << 20)):
            with PushdownTestServer(s3.url(""), storage_options=opts, extra_args=[
                    "--max-concurrency", str(conc), "--queue", str(queue),
                    "--cache-bytes", str(cache)]) as server:
                res = run_load(server.url, server.token or "",
                               tile_request_factory(arr, data, "load"),
                               clients=args.clients, requests=args.requests,
                               server_pid=server.pid)
            if res.wrong or res.other or res.retry_after_missing:
                raise SystemExit(f"wrong answers: {res.wrong}, other statuses: {res.other}, "
                                 f"503 without Retry-After: {res.retry_after_missing}")
            rows.append({"max_concurrency": conc, "queue": queue, "cache_bytes": cache,
                         "clients": args.clients, "requests": args.clients * args.requests,
                         "accepted": res.accepted, "refused_503": res.busy,
                         "throughput_rps": res.throughput, "p50_ms": res.percentile_s(50) * 1e3,
                         "p99_ms": res.percentile_s(99) * 1e3,
                         "peak_rss_mib": (res.peak_rss_bytes or 0) / 2**20,
                         "wall_s": res.wall_s})
    table = Table(title=f"pushdown server under load: {args.clients} clients x "
                        f"{args.requests} requests, 1-4 zstd 128x128 int32 tiles each")
    for col in ("max conc.", "queue", "cache MiB", "accepted", "503", "req/s", "p50 ms",
                "p99 ms", "peak RSS MiB"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r["max_concurrency"]), str(r["queue"]),
                      f"{r['cache_bytes'] / 2**20:g}", str(r["accepted"]),
                      str(r["refused_503"]), f"{r['throughput_rps']:.0f}",
                      f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}", f"{r['peak_rss_mib']:.0f}")
    console.print(table)
    path = args.out / "pushdown_load.csv"
    write_csv(path, rows)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
